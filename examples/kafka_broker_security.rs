//! A secured broker: `SASL_SSL` with SCRAM-SHA-512, the broker's certificate checked against a CA
//! file (`ssl.ca.location`; `probe` reads the system's CA bundle instead). A security protocol
//! the client does not know stops the service at startup, naming `security.protocol`.
//!
//! Needs the `ssl` feature (or `ssl-vendored`): without it TLS is refused as librdkafka
//! built without OpenSSL refuses it.
//!
//! ```text
//! $ scripts/kafka up && eval "$(scripts/kafka env | sed 's/^/export /')"
//! $ cargo run --features ssl --example kafka_broker_security -- run
//! $ cargo test --features testing,ssl --example kafka_broker_security
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

/// The broker's `SASL_SSL` listener (`scripts/kafka env` prints it).
fn sasl_ssl_listener() -> String {
    std::env::var("KAFKA_SASL_SSL_URL").unwrap_or_else(|_| "localhost:9095".to_owned())
}

/// The CA that signed the broker's certificate; `probe` trusts the system's CAs.
fn ca_location() -> String {
    std::env::var("KAFKA_CA_PEM").unwrap_or_else(|_| "probe".to_owned())
}

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Books a payment and answers with its receipt.
#[subscriber("payments.kafka_broker_security", reply)]
async fn book(payment: &Payment) -> Receipt {
    Receipt {
        reference: payment.reference.clone(),
        booked_cents: payment.cents,
    }
}

fn broker() -> KafkaBroker {
    KafkaBroker::new([sasl_ssl_listener()])
        .default_group("ledger.kafka_broker_security")
        // TLS to the broker, then a SCRAM login inside it.
        .config("security.protocol", "SASL_SSL")
        .config("ssl.ca.location", ca_location())
        .config("sasl.mechanism", "SCRAM-SHA-512")
        .config("sasl.username", "alice")
        .config("sasl.password", "alice-secret")
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker(), |b| {
        b.include(book);
    })
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "payments.kafka_broker_security")]
struct Payment {
    reference: String,
    cents: u64,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "receipts.kafka_broker_security")]
struct Receipt {
    reference: String,
    booked_cents: u64,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Payment, Receipt, app, book, broker};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_payment_over_sasl_ssl_gets_its_receipt() -> Result<(), Box<dyn Error>> {
        super::runs::topic("payments.kafka_broker_security", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let payment = Payment {
            reference: "INV-2291".to_owned(),
            cents: 12_50,
        };
        tb.broker::<KafkaBroker>()
            .message(&payment)
            .publish()
            .await?;

        tb.broker::<KafkaBroker>()
            .subscriber("payments.kafka_broker_security")
            .assert_called_once()
            .with(&payment)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<Receipt>("receipts.kafka_broker_security")
            .assert_called_once()
            .with(&Receipt {
                reference: "INV-2291".to_owned(),
                booked_cents: 12_50,
            });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_security_protocol_stops_startup() {
        let broker = broker().config("security.protocol", "SASL_TLS");
        let app = RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker, |b| {
            b.include(book);
        });

        let refused = TestApp::start_live_within(app, Duration::from_secs(30))
            .await
            .err()
            .map(|err| err.to_string());
        assert!(
            matches!(&refused, Some(text) if text.contains("security.protocol")),
            "{refused:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wrong_password_stops_startup() {
        let broker = broker().config("sasl.password", "not-the-secret");
        let app = RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker, |b| {
            b.include(book);
        });

        let refused = TestApp::start_live_within(app, Duration::from_secs(30))
            .await
            .err()
            .map(|err| err.to_string());
        assert!(
            matches!(&refused, Some(text) if text.contains("authentication failed")
                && !text.contains("not-the-secret")),
            "{refused:?}"
        );
    }
}
