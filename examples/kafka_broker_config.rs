//! Broker configuration: properties every client of the broker shares (`config`) and properties
//! only its producer takes (`producer_config`). A property the client would refuse stops the
//! service at startup, before any record moves.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_broker_config -- run
//! $ cargo test --example kafka_broker_config
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Files a scanned book on its floor and answers with the catalogue card.
#[subscriber("scans.kafka_broker_config", reply)]
async fn catalogue(scan: &BookScan) -> CatalogueCard {
    CatalogueCard {
        isbn: scan.isbn.clone(),
        shelf_mark: format!("F{}/{}", scan.floor, scan.isbn),
    }
}

fn broker() -> KafkaBroker {
    KafkaBroker::new([live::bootstrap()])
        .default_group("catalogue.kafka_broker_config")
        // Every client of the broker: the consumers and the producer.
        .config("client.id", "library-catalogue")
        .config("socket.keepalive.enable", "true")
        // The producer alone: replies are compressed and batched for 5 ms.
        .producer_config("compression.type", "zstd")
        .producer_config("linger.ms", "5")
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("library", "0.1.0")).with_broker(broker(), |b| {
        b.include(catalogue);
    })
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "scans.kafka_broker_config")]
struct BookScan {
    isbn: String,
    floor: u8,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "cards.kafka_broker_config")]
struct CatalogueCard {
    isbn: String,
    shelf_mark: String,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{BookScan, CatalogueCard, app, broker, catalogue};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_configured_broker_answers_with_the_card_in_process() -> Result<(), Box<dyn Error>> {
        a_configured_broker_answers_with_the_card_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_configured_broker_answers_with_the_card() -> Result<(), Box<dyn Error>> {
        super::runs::topic("scans.kafka_broker_config", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_configured_broker_answers_with_the_card_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn a_configured_broker_answers_with_the_card_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let scan = BookScan {
            isbn: "978-0-14-044913-6".to_owned(),
            floor: 2,
        };
        tb.broker::<KafkaBroker>().message(&scan).publish().await?;

        tb.broker::<KafkaBroker>()
            .subscriber("scans.kafka_broker_config")
            .assert_called_once()
            .with(&scan)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<CatalogueCard>("cards.kafka_broker_config")
            .assert_called_once()
            .with(&CatalogueCard {
                isbn: "978-0-14-044913-6".to_owned(),
                shelf_mark: "F2/978-0-14-044913-6".to_owned(),
            });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_property_the_client_refuses_stops_startup() {
        let broker = broker().producer_config("acks", "sometimes");
        let app = RustStream::new(AppInfo::new("library", "0.1.0")).with_broker(broker, |b| {
            b.include(catalogue);
        });

        let refused = TestApp::start_live_within(app, Duration::from_secs(30))
            .await
            .err()
            .map(|err| err.to_string());
        assert!(
            matches!(&refused, Some(text) if text.contains("acks")),
            "{refused:?}"
        );
    }
}
