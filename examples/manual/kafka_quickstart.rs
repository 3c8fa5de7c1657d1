//! The quickstart service without macros: the handler is a type implementing `Handle`, the
//! subscription is mounted with `subscriber(..)`, and `main` runs the command line by hand.
//!
//! ```text
//! $ cargo run --features testing --example manual_kafka_quickstart -- embedded  # no broker
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_quickstart -- run
//! $ cargo test --example manual_kafka_quickstart
//! ```
//!
//! `embedded` starts a Kafka in this process, runs the same service on it, publishes orders 1
//! to 3, waits until they are placed and stops.

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[path = "../support/embedded_run.rs"]
mod embedded_run;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Places an order.
struct Place;

impl Handle<Order> for Place {
    fn handle(
        &self,
        order: &Order,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(order.id, "order placed");
        println!("order {} placed", order.id);
        embedded_run::placed(order.id); // what `-- embedded` waits for
        ready(Ok(()))
    }
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("order-intake", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]).default_group("order-intake"),
        |b| {
            b.include(subscriber("orders", Place).build());
        },
    )
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("embedded") {
        return embedded_run::main(app, order_body);
    }
    run_main(app)
}
// --8<-- [end:app]

/// The payload of order `id`, as the service's JSON codec reads it.
fn order_body(id: u64) -> Vec<u8> {
    serde_json::to_vec(&Order { id }).unwrap_or_default()
}

// The generated AsyncAPI document describes the payload by its JSON schema.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Order {
    id: u64,
}

impl OutgoingDestination for Order {
    type Form = FixedName;
    const DESTINATION: &'static str = "orders";
}

impl MessageHeaders for Order {
    type Contract = NoHeaders;
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

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_published_order_reaches_the_handler_in_process() -> Result<(), Box<dyn Error>> {
        a_published_order_reaches_the_handler_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_published_order_reaches_the_handler() -> Result<(), Box<dyn Error>> {
        super::live::ensure_topic("orders", 1).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_mins(1)).await?;
        a_published_order_reaches_the_handler_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn a_published_order_reaches_the_handler_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        tb.broker::<KafkaBroker>()
            .message(&Order { id: 8 })
            .publish()
            .await?;
        tb.broker::<KafkaBroker>()
            .subscriber("orders")
            .assert_called_once()
            .with(&Order { id: 8 })
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;
        Ok(())
    }
}
