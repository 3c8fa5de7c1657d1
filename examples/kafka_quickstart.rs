//! A minimal Kafka service: one handler on the topic `orders`, read through the broker's
//! default consumer group.
//!
//! ```text
//! $ cargo run --features testing --example kafka_quickstart -- embedded  # no broker, no Java
//! $ cargo test --features testing --example kafka_quickstart   # on the embedded cluster
//! $ scripts/kafka up
//! $ cargo run --example kafka_quickstart -- run
//! $ cargo test --example kafka_quickstart
//! ```
//!
//! `run` serves until Ctrl-C at the broker address from `KAFKA_TEST_URL` (what `scripts/kafka
//! env` prints), else `localhost:9092`. `embedded` starts a Kafka in this process, runs the
//! same service on it, publishes orders 1 to 3, waits until they are placed and stops.

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[path = "support/embedded_run.rs"]
mod embedded_run;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

#[subscriber("orders")]
async fn place(order: &Order) -> HandlerOutcome {
    tracing::info!(order.id, "order placed");
    println!("order {} placed", order.id);
    embedded_run::placed(order.id); // what `-- embedded` waits for
    HandlerOutcome::ack()
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("order-intake", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]).default_group("order-intake"),
        |b| {
            b.include(place);
        },
    )
}
// --8<-- [end:app]

/// What `#[ruststream::app]` generates (the commands `run` and `asyncapi gen`), plus
/// `embedded`: the attribute's `main` knows no command of ours, so this one is spelled out.
fn main() -> std::process::ExitCode {
    if std::env::args().nth(1).as_deref() == Some("embedded") {
        return embedded_run::main(app, order_body);
    }
    ruststream::runtime::cli::run_main(app)
}

/// The payload of order `id`, as the service's JSON codec reads it.
fn order_body(id: u64) -> Vec<u8> {
    serde_json::to_vec(&Order { id }).unwrap_or_default()
}

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

    /// The `embedded` command: the service started as `run` starts it, orders published by
    /// the adapter over TCP, each one placed, a clean shutdown.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_embedded_command_places_every_order() -> Result<(), Box<dyn Error + Send + Sync>> {
        use super::embedded_run;
        embedded_run::run(
            app,
            "orders",
            &embedded_run::ORDERS,
            super::order_body,
            embedded_run::WITHIN,
        )
        .await
    }

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
