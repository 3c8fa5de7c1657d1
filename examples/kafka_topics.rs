//! `KafkaTopic`: one topic read by one consumer group, with the group named on the descriptor
//! and a raw consumer property passed through to this subscription alone.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_topics -- run
//! $ cargo test --example kafka_topics
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Prices a meter reading. The billing group reads the topic on its own, and its consumer
/// answers a fetch after at most 100 ms even when little has arrived.
#[subscriber(
    KafkaTopic::new("meter-readings.kafka_topics")
        .group("billing.kafka_topics")
        .config("fetch.wait.max.ms", "100"),
    reply
)]
async fn price(reading: &MeterReading) -> Charge {
    Charge {
        meter: reading.meter.clone(),
        cents: reading.kwh * 31,
    }
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("invoicing", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(price);
        },
    )
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "meter-readings.kafka_topics")]
struct MeterReading {
    meter: String,
    kwh: u64,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "charges.kafka_topics")]
struct Charge {
    meter: String,
    cents: u64,
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
        super::runs::topic("meter-readings.kafka_topics", 1).await?;
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
            .subscriber("meter-readings.kafka_topics")
            .assert_called_once()
            .with(&reading)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<Charge>("charges.kafka_topics")
            .assert_called_once()
            .with(&Charge {
                meter: "M-77".to_owned(),
                cents: 372,
            });
        tb.shutdown().await?;
        Ok(())
    }
}
