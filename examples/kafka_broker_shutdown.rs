//! Shutdown: the broker stops handing out its connection, then flushes what its producer still
//! holds for at most `flush_timeout`, and reports how many records were left unsent.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_broker_shutdown -- run
//! $ cargo test --example kafka_broker_shutdown
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Turns a loaded truck into a delivery note for the depot.
#[subscriber("loaded-trucks.kafka_broker_shutdown", reply)]
async fn dispatch(truck: &LoadedTruck) -> DeliveryNote {
    DeliveryNote {
        plate: truck.plate.clone(),
        pallets: truck.pallets,
    }
}

fn broker() -> KafkaBroker {
    KafkaBroker::new([live::bootstrap()])
        .default_group("depot.kafka_broker_shutdown")
        // Notes still in the producer at shutdown get ten seconds to reach the cluster.
        .flush_timeout(Duration::from_secs(10))
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("depot", "0.1.0")).with_broker(broker(), |b| {
        b.include(dispatch);
    })
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "loaded-trucks.kafka_broker_shutdown")]
struct LoadedTruck {
    plate: String,
    pallets: u16,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "delivery-notes.kafka_broker_shutdown")]
struct DeliveryNote {
    plate: String,
    pallets: u16,
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
        super::runs::topic("loaded-trucks.kafka_broker_shutdown", 1).await?;
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
            .published::<DeliveryNote>("delivery-notes.kafka_broker_shutdown")
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
                OutgoingMessage::new("delivery-notes.kafka_broker_shutdown", &b"{}"[..]),
                None,
            )
            .await?;

        let closed = connected.shutdown().await?;
        assert_eq!(closed.unflushed_records(), 0);
        Ok(())
    }
}
