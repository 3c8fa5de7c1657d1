//! The service of `examples/kafka_broker_config.rs` without macros: the handler is a type
//! implementing `Handle`, the reply is mounted with `.reply()`, and `main` runs the command line
//! by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_broker_config -- run
//! $ cargo test --example manual_kafka_broker_config
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Files a scanned book on its floor and answers with the catalogue card.
struct Catalogue;

impl Handle<BookScan, CatalogueCard> for Catalogue {
    fn handle(
        &self,
        scan: &BookScan,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<CatalogueCard, HandlerOutcome>> {
        ready(Ok(CatalogueCard {
            isbn: scan.isbn.clone(),
            shelf_mark: format!("F{}/{}", scan.floor, scan.isbn),
        }))
    }
}

fn broker() -> KafkaBroker {
    KafkaBroker::new([live::bootstrap()])
        .default_group("catalogue.manual_kafka_broker_config")
        // Every client of the broker: the consumers and the producer.
        .config("client.id", "library-catalogue")
        .config("socket.keepalive.enable", "true")
        // The producer alone: replies are compressed and batched for 5 ms.
        .producer_config("compression.type", "zstd")
        .producer_config("linger.ms", "5")
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("library", "0.1.0")).with_broker(broker(), |b| {
        b.include(
            subscriber("scans.manual_kafka_broker_config", Catalogue)
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
struct BookScan {
    isbn: String,
    floor: u8,
}

impl OutgoingDestination for BookScan {
    type Form = FixedName;
    const DESTINATION: &'static str = "scans.manual_kafka_broker_config";
}

impl MessageHeaders for BookScan {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct CatalogueCard {
    isbn: String,
    shelf_mark: String,
}

impl OutgoingDestination for CatalogueCard {
    type Form = FixedName;
    const DESTINATION: &'static str = "cards.manual_kafka_broker_config";
}

impl MessageHeaders for CatalogueCard {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{BookScan, Catalogue, CatalogueCard, app, broker};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_configured_broker_answers_with_the_card_in_process() -> Result<(), Box<dyn Error>> {
        a_configured_broker_answers_with_the_card_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_configured_broker_answers_with_the_card() -> Result<(), Box<dyn Error>> {
        super::runs::topic("scans.manual_kafka_broker_config", 1).await?;
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
            .subscriber("scans.manual_kafka_broker_config")
            .assert_called_once()
            .with(&scan)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<CatalogueCard>("cards.manual_kafka_broker_config")
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
            b.include(
                subscriber("scans.manual_kafka_broker_config", Catalogue)
                    .reply()
                    .build(),
            );
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
