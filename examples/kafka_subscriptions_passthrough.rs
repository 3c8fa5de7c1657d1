//! Passthrough consumer properties: `config(key, value)` on a descriptor reaches that
//! subscription's consumer and wins over the broker's own `config`. A property the commit mode
//! decides for itself is refused when the subscription opens.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_subscriptions_passthrough -- run
//! $ cargo test --example kafka_subscriptions_passthrough
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Analyses a lab sample. An analysis may take minutes, so the consumer may go ten minutes
/// between polls before the group counts it gone, and fetches at most 1 MiB at a time.
#[subscriber(
    KafkaTopic::new("lab-samples.kafka_subscriptions_passthrough")
        .group("analysis.kafka_subscriptions_passthrough")
        .commit(Commit::Tracked)
        .config("max.poll.interval.ms", "600000")
        .config("fetch.max.bytes", "1048576")
)]
async fn analyse(sample: &LabSample) -> HandlerOutcome {
    tracing::info!(sample.tube, sample.panel, "analysed");
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("lab", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(analyse);
        },
    )
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "lab-samples.kafka_subscriptions_passthrough")]
struct LabSample {
    tube: String,
    panel: String,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{LabSample, app};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_tuned_consumer_reads_and_settles_in_process() -> Result<(), Box<dyn Error>> {
        the_tuned_consumer_reads_and_settles_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_tuned_consumer_reads_and_settles() -> Result<(), Box<dyn Error>> {
        super::runs::topic("lab-samples.kafka_subscriptions_passthrough", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        the_tuned_consumer_reads_and_settles_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn the_tuned_consumer_reads_and_settles_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let sample = LabSample {
            tube: "T-0091".to_owned(),
            panel: "lipids".to_owned(),
        };
        tb.broker::<KafkaBroker>()
            .message(&sample)
            .publish()
            .await?;

        tb.broker::<KafkaBroker>()
            .subscriber("lab-samples.kafka_subscriptions_passthrough")
            .assert_called_once()
            .with(&sample)
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;
        Ok(())
    }

    /// Tracked commits store offsets as deliveries settle; a passthrough that would commit on
    /// its own timer contradicts that.
    #[subscriber(
        KafkaTopic::new("lab-samples.kafka_subscriptions_passthrough")
            .group("analysis-autocommit.kafka_subscriptions_passthrough")
            .commit(Commit::Tracked)
            .config("enable.auto.commit", "true")
    )]
    async fn analyse_on_a_timer(sample: &LabSample) -> HandlerOutcome {
        tracing::info!(sample.tube, "analysed");
        HandlerOutcome::ack()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_property_the_commit_mode_owns_is_refused() {
        let app = RustStream::new(AppInfo::new("lab", "0.1.0")).with_broker(
            KafkaBroker::new([super::live::bootstrap()]),
            |b| {
                b.include(analyse_on_a_timer);
            },
        );

        let refused = TestApp::start_live_within(app, Duration::from_secs(30))
            .await
            .err()
            .map(|err| err.to_string());
        assert!(
            refused.as_deref().is_some_and(
                |err| err.contains("enable.auto.commit") && err.contains("Commit::Tracked")
            ),
            "{refused:?}"
        );
    }
}
