//! The service of `examples/kafka_subscriptions_name.rs` without macros: the handler is a type
//! implementing `Handle` mounted on a bare name, and `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_subscriptions_name -- run
//! $ cargo test --example manual_kafka_subscriptions_name
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

/// Sends a truck to a bin that reported itself full.
struct SchedulePickup;

impl Handle<FullBin> for SchedulePickup {
    fn handle(
        &self,
        bin: &FullBin,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(bin.street, bin.number, "pickup scheduled");
        ready(Ok(()))
    }
}

fn app() -> impl App {
    // Every bare-name subscription of this broker reads in this one group.
    let broker = KafkaBroker::new([live::bootstrap()])
        .default_group("collection.manual_kafka_subscriptions_name");
    RustStream::new(AppInfo::new("waste-collection", "0.1.0")).with_broker(broker, |b| {
        b.include(subscriber("full-bins.manual_kafka_subscriptions_name", SchedulePickup).build());
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
struct FullBin {
    street: String,
    number: u32,
}

impl OutgoingDestination for FullBin {
    type Form = FixedName;
    const DESTINATION: &'static str = "full-bins.manual_kafka_subscriptions_name";
}

impl MessageHeaders for FullBin {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{FullBin, SchedulePickup, app};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_name_reads_in_the_default_group_in_process() -> Result<(), Box<dyn Error>> {
        a_bare_name_reads_in_the_default_group_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_name_reads_in_the_default_group() -> Result<(), Box<dyn Error>> {
        super::runs::topic("full-bins.manual_kafka_subscriptions_name", 1).await?;
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
            .subscriber("full-bins.manual_kafka_subscriptions_name")
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
                b.include(
                    subscriber("full-bins.manual_kafka_subscriptions_name", SchedulePickup).build(),
                );
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
