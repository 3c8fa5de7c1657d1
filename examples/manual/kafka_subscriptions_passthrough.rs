//! The service of `examples/kafka_subscriptions_passthrough.rs` without macros: the descriptor
//! with its passthroughs is built in `app`, the handler is a type implementing `Handle`, and
//! `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_subscriptions_passthrough -- run
//! $ cargo test --example manual_kafka_subscriptions_passthrough
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

/// Analyses a lab sample.
struct Analyse;

impl Handle<LabSample> for Analyse {
    fn handle(
        &self,
        sample: &LabSample,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(sample.tube, sample.panel, "analysed");
        ready(Ok(()))
    }
}

fn samples() -> KafkaTopic {
    // An analysis may take minutes, so the consumer may go ten minutes between polls before the
    // group counts it gone, and fetches at most 1 MiB at a time.
    KafkaTopic::new("lab-samples.manual_kafka_subscriptions_passthrough")
        .group("analysis.manual_kafka_subscriptions_passthrough")
        .commit(Commit::Tracked)
        .config("max.poll.interval.ms", "600000")
        .config("fetch.max.bytes", "1048576")
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("lab", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(samples(), Analyse).build());
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
struct LabSample {
    tube: String,
    panel: String,
}

impl OutgoingDestination for LabSample {
    type Form = FixedName;
    const DESTINATION: &'static str = "lab-samples.manual_kafka_subscriptions_passthrough";
}

impl MessageHeaders for LabSample {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Analyse, LabSample, app, samples};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_tuned_consumer_reads_and_settles_in_process() -> Result<(), Box<dyn Error>> {
        the_tuned_consumer_reads_and_settles_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_tuned_consumer_reads_and_settles() -> Result<(), Box<dyn Error>> {
        super::runs::topic("lab-samples.manual_kafka_subscriptions_passthrough", 1).await?;
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
            .subscriber("lab-samples.manual_kafka_subscriptions_passthrough")
            .assert_called_once()
            .with(&sample)
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_property_the_commit_mode_owns_is_refused() {
        // Tracked commits store offsets as deliveries settle; a passthrough that would commit
        // on its own timer contradicts that.
        let on_a_timer = samples()
            .group("analysis-autocommit.manual_kafka_subscriptions_passthrough")
            .config("enable.auto.commit", "true");
        let app = RustStream::new(AppInfo::new("lab", "0.1.0")).with_broker(
            KafkaBroker::new([super::live::bootstrap()]),
            |b| {
                b.include(subscriber(on_a_timer, Analyse).build());
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
