//! The service of `examples/kafka_broker_shutdown.rs` without macros: the handler is a type
//! implementing `Handle`, the reply is mounted with `.reply()`, and `main` runs the command line
//! by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_broker_shutdown -- run
//! $ cargo test --example manual_kafka_broker_shutdown
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;
use std::time::Duration;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Turns a loaded truck into a delivery note for the depot.
struct Dispatch;

impl Handle<LoadedTruck, DeliveryNote> for Dispatch {
    fn handle(
        &self,
        truck: &LoadedTruck,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<DeliveryNote, HandlerOutcome>> {
        ready(Ok(DeliveryNote {
            plate: truck.plate.clone(),
            pallets: truck.pallets,
        }))
    }
}

fn broker() -> KafkaBroker {
    KafkaBroker::new([live::bootstrap()])
        .default_group("depot.manual_kafka_broker_shutdown")
        // Notes still in the producer at shutdown get ten seconds to reach the cluster.
        .flush_timeout(Duration::from_secs(10))
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("depot", "0.1.0")).with_broker(broker(), |b| {
        b.include(
            subscriber("loaded-trucks.manual_kafka_broker_shutdown", Dispatch)
                .reply()
                .build(),
        );
    })
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct LoadedTruck {
    plate: String,
    pallets: u16,
}

impl OutgoingDestination for LoadedTruck {
    type Form = FixedName;
    const DESTINATION: &'static str = "loaded-trucks.manual_kafka_broker_shutdown";
}

impl MessageHeaders for LoadedTruck {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct DeliveryNote {
    plate: String,
    pallets: u16,
}

impl OutgoingDestination for DeliveryNote {
    type Form = FixedName;
    const DESTINATION: &'static str = "delivery-notes.manual_kafka_broker_shutdown";
}

impl MessageHeaders for DeliveryNote {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream::{Broker, ConnectedBroker, OutgoingMessage, Publisher};
    use ruststream_kafka::prelude::*;

    use super::{DeliveryNote, LoadedTruck, app, broker};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_ships_its_note_then_shuts_down_in_process() -> Result<(), Box<dyn Error>> {
        the_service_ships_its_note_then_shuts_down_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_ships_its_note_then_shuts_down() -> Result<(), Box<dyn Error>> {
        super::runs::topic("loaded-trucks.manual_kafka_broker_shutdown", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        the_service_ships_its_note_then_shuts_down_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn the_service_ships_its_note_then_shuts_down_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        tb.broker::<KafkaBroker>()
            .message(&LoadedTruck {
                plate: "KA-5120".to_owned(),
                pallets: 14,
            })
            .publish()
            .await?;

        tb.broker::<KafkaBroker>()
            .published::<DeliveryNote>("delivery-notes.manual_kafka_broker_shutdown")
            .assert_called_once()
            .with(&DeliveryNote {
                plate: "KA-5120".to_owned(),
                pallets: 14,
            });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_clean_shutdown_leaves_nothing_unsent() -> Result<(), Box<dyn Error>> {
        let connected = broker().connect().await?;
        let publisher = connected.publisher(Publish::default());
        publisher
            .publish(
                OutgoingMessage::new("delivery-notes.manual_kafka_broker_shutdown", &b"{}"[..]),
                None,
            )
            .await?;

        let closed = connected.shutdown().await?;
        assert_eq!(closed.unflushed_records(), 0);
        Ok(())
    }
}
