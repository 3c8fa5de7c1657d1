//! The service of `examples/kafka_broker_security.rs` without macros: the handler is a type
//! implementing `Handle`, the reply is mounted with `.reply()`, and `main` runs the command line
//! by hand. `SASL_SSL` with SCRAM-SHA-512 and the broker's CA in `ssl.ca.location`.
//!
//! ```text
//! $ scripts/kafka up && eval "$(scripts/kafka env | sed 's/^/export /')"
//! $ cargo run --features ssl --example manual_kafka_broker_security -- run
//! $ cargo test --features testing,ssl --example manual_kafka_broker_security
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
struct Ledger;

impl Handle<Payment, Receipt> for Ledger {
    fn handle(
        &self,
        payment: &Payment,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Receipt, HandlerOutcome>> {
        ready(Ok(Receipt {
            reference: payment.reference.clone(),
            booked_cents: payment.cents,
        }))
    }
}

fn broker() -> KafkaBroker {
    KafkaBroker::new([sasl_ssl_listener()])
        .default_group("ledger.manual_kafka_broker_security")
        // TLS to the broker, then a SCRAM login inside it.
        .config("security.protocol", "SASL_SSL")
        .config("ssl.ca.location", ca_location())
        .config("sasl.mechanism", "SCRAM-SHA-512")
        .config("sasl.username", "alice")
        .config("sasl.password", "alice-secret")
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker(), |b| {
        b.include(
            subscriber("payments.manual_kafka_broker_security", Ledger)
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
struct Payment {
    reference: String,
    cents: u64,
}

impl OutgoingDestination for Payment {
    type Form = FixedName;
    const DESTINATION: &'static str = "payments.manual_kafka_broker_security";
}

impl MessageHeaders for Payment {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Receipt {
    reference: String,
    booked_cents: u64,
}

impl OutgoingDestination for Receipt {
    type Form = FixedName;
    const DESTINATION: &'static str = "receipts.manual_kafka_broker_security";
}

impl MessageHeaders for Receipt {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Ledger, Payment, Receipt, app, broker};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_payment_over_sasl_ssl_gets_its_receipt() -> Result<(), Box<dyn Error>> {
        super::runs::topic("payments.manual_kafka_broker_security", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let payment = Payment {
            reference: "INV-7710".to_owned(),
            cents: 99_00,
        };
        tb.broker::<KafkaBroker>()
            .message(&payment)
            .publish()
            .await?;

        tb.broker::<KafkaBroker>()
            .subscriber("payments.manual_kafka_broker_security")
            .assert_called_once()
            .with(&payment)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<Receipt>("receipts.manual_kafka_broker_security")
            .assert_called_once()
            .with(&Receipt {
                reference: "INV-7710".to_owned(),
                booked_cents: 99_00,
            });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_security_protocol_stops_startup() {
        let broker = broker().config("security.protocol", "SASL_TLS");
        let app = RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker, |b| {
            b.include(
                subscriber("payments.manual_kafka_broker_security", Ledger)
                    .reply()
                    .build(),
            );
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
        let broker = broker().config("sasl.password", "guessed-wrong");
        let app = RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker, |b| {
            b.include(
                subscriber("payments.manual_kafka_broker_security", Ledger)
                    .reply()
                    .build(),
            );
        });

        let refused = TestApp::start_live_within(app, Duration::from_secs(30))
            .await
            .err()
            .map(|err| err.to_string());
        // The broker's refusal reaches the caller; the password itself never does.
        assert!(
            matches!(&refused, Some(text) if text.contains("authentication failed")
                && !text.contains("guessed-wrong")),
            "{refused:?}"
        );
    }
}
