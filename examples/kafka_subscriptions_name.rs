//! A subscription by bare name: `"topic"` is `KafkaTopic::new("topic")` read in the broker's
//! `default_group`. Without a default group there is no group to read in, and the service does
//! not start.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_subscriptions_name -- run
//! $ cargo test --example kafka_subscriptions_name
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Sends a truck to a bin that reported itself full.
#[subscriber("full-bins.kafka_subscriptions_name")]
async fn schedule_pickup(bin: &FullBin) -> HandlerOutcome {
    tracing::info!(bin.street, bin.number, "pickup scheduled");
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App {
    // Every bare-name subscription of this broker reads in this one group.
    let broker =
        KafkaBroker::new([live::bootstrap()]).default_group("collection.kafka_subscriptions_name");
    RustStream::new(AppInfo::new("waste-collection", "0.1.0")).with_broker(broker, |b| {
        b.include(schedule_pickup);
    })
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "full-bins.kafka_subscriptions_name")]
struct FullBin {
    street: String,
    number: u32,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{FullBin, app, schedule_pickup};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_name_reads_in_the_default_group_in_process() -> Result<(), Box<dyn Error>> {
        a_bare_name_reads_in_the_default_group_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_name_reads_in_the_default_group() -> Result<(), Box<dyn Error>> {
        super::runs::topic("full-bins.kafka_subscriptions_name", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_bare_name_reads_in_the_default_group_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn a_bare_name_reads_in_the_default_group_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let bin = FullBin {
            street: "Linden Row".to_owned(),
            number: 9,
        };
        tb.broker::<KafkaBroker>().message(&bin).publish().await?;

        tb.broker::<KafkaBroker>()
            .subscriber("full-bins.kafka_subscriptions_name")
            .assert_called_once()
            .with(&bin)
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_a_group_the_service_does_not_start() {
        let app = RustStream::new(AppInfo::new("waste-collection", "0.1.0")).with_broker(
            KafkaBroker::new([super::live::bootstrap()]),
            |b| {
                b.include(schedule_pickup);
            },
        );

        let refused = TestApp::start_live_within(app, Duration::from_secs(30))
            .await
            .err()
            .map(|err| err.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|err| err.contains("no consumer group")),
            "{refused:?}"
        );
    }
}
