//! A minimal Kafka service: one handler on the topic `orders`, read through the broker's
//! default consumer group.
//!
//! ```text
//! $ cargo test --features testing --example kafka_quickstart   # on the embedded cluster
//! $ scripts/kafka up
//! $ cargo run --example kafka_quickstart -- run
//! $ cargo test --example kafka_quickstart
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

#[subscriber("orders")]
async fn place(order: &Order) -> HandlerOutcome {
    tracing::info!(order.id, "order placed");
    println!("order {} placed", order.id);
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("order-intake", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]).default_group("order-intake"),
        |b| {
            b.include(place);
        },
    )
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "orders")]
struct Order {
    id: u64,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Order, app};

    /// The test body, whichever way the service was started.
    async fn an_order_is_placed<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        tb.broker::<KafkaBroker>()
            .message(&Order { id: 7 })
            .publish()
            .await?;
        tb.broker::<KafkaBroker>()
            .subscriber("orders")
            .assert_called_once()
            .with(&Order { id: 7 })
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;
        Ok(())
    }

    /// On the embedded cluster: nothing to start, the production client underneath.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_order_reaches_the_handler_in_process() -> Result<(), Box<dyn Error>> {
        an_order_is_placed(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_published_order_reaches_the_handler() -> Result<(), Box<dyn Error>> {
        super::live::ensure_topic("orders", 1).await?;
        an_order_is_placed(TestApp::start_live_within(app(), Duration::from_mins(1)).await?).await
    }
}
