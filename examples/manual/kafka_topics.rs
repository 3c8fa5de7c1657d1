//! The service of `examples/kafka_topics.rs` without macros: the descriptor is built in `app`
//! and mounted with `subscriber(..)`, the handler is a type implementing `Handle`, and `main`
//! runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_topics -- run
//! $ cargo test --example manual_kafka_topics
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

/// Prices a meter reading.
struct Price;

impl Handle<MeterReading, Charge> for Price {
    fn handle(
        &self,
        reading: &MeterReading,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Charge, HandlerOutcome>> {
        ready(Ok(Charge {
            meter: reading.meter.clone(),
            cents: reading.kwh * 31,
        }))
    }
}

fn app() -> impl App {
    // The billing group reads the topic on its own, and its consumer answers a fetch after at
    // most 100 ms even when little has arrived.
    let readings = KafkaTopic::new("meter-readings.manual_kafka_topics")
        .group("billing.manual_kafka_topics")
        .config("fetch.wait.max.ms", "100");
    RustStream::new(AppInfo::new("invoicing", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(readings, Price).reply().build());
        },
    )
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
struct MeterReading {
    meter: String,
    kwh: u64,
}

impl OutgoingDestination for MeterReading {
    type Form = FixedName;
    const DESTINATION: &'static str = "meter-readings.manual_kafka_topics";
}

impl MessageHeaders for MeterReading {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Charge {
    meter: String,
    cents: u64,
}

impl OutgoingDestination for Charge {
    type Form = FixedName;
    const DESTINATION: &'static str = "charges.manual_kafka_topics";
}

impl MessageHeaders for Charge {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Charge, MeterReading, app};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reading_is_priced_in_process() -> Result<(), Box<dyn Error>> {
        a_reading_is_priced_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reading_is_priced() -> Result<(), Box<dyn Error>> {
        super::runs::topic("meter-readings.manual_kafka_topics", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_reading_is_priced_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn a_reading_is_priced_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let reading = MeterReading {
            meter: "M-77".to_owned(),
            kwh: 12,
        };
        tb.broker::<KafkaBroker>()
            .message(&reading)
            .publish()
            .await?;

        tb.broker::<KafkaBroker>()
            .subscriber("meter-readings.manual_kafka_topics")
            .assert_called_once()
            .with(&reading)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<Charge>("charges.manual_kafka_topics")
            .assert_called_once()
            .with(&Charge {
                meter: "M-77".to_owned(),
                cents: 372,
            });
        tb.shutdown().await?;
        Ok(())
    }
}
