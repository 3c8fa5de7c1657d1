//! Startup: `connect` asks the cluster for its metadata within `connect_timeout`, and each group
//! subscription waits at most `assignment_timeout` for its partitions. Once the service has
//! started, everything published after that is delivered.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_broker_startup -- run
//! $ cargo test --example kafka_broker_startup
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Checks a boarding pass in at the gate.
#[subscriber("boarding-passes.kafka_broker_startup")]
async fn board(pass: &BoardingPass) -> HandlerOutcome {
    tracing::info!(pass.seat, "boarded");
    HandlerOutcome::ack()
}

fn service(broker: KafkaBroker) -> impl App {
    RustStream::new(AppInfo::new("gate", "0.1.0")).with_broker(broker, |b| {
        b.include(board);
    })
}

fn broker(servers: &str, group: &str) -> KafkaBroker {
    KafkaBroker::new([servers])
        .default_group(group)
        // A cluster that does not answer within five seconds fails the start.
        .connect_timeout(Duration::from_secs(5))
        // So does a group that has not handed this service its partitions within twenty.
        .assignment_timeout(Duration::from_secs(20))
}

#[ruststream::app]
fn app() -> impl App {
    service(broker(&live::bootstrap(), "gate.kafka_broker_startup"))
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "boarding-passes.kafka_broker_startup")]
struct BoardingPass {
    seat: String,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::fresh;
    use super::{BoardingPass, broker, service};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_cluster_fails_within_the_connect_timeout() {
        let started = Instant::now();
        let broker = broker("127.0.0.1:1", "gate").connect_timeout(Duration::from_secs(2));

        let failed = TestApp::start_live_within(service(broker), Duration::from_secs(30)).await;
        assert!(failed.is_err());
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_that_cannot_assign_in_time_fails_startup() -> Result<(), Box<dyn Error>> {
        super::runs::topic("boarding-passes.kafka_broker_startup", 1).await?;
        let broker = broker(&super::live::bootstrap(), &fresh("gate-impatient"))
            .assignment_timeout(Duration::from_millis(1));

        let refused = TestApp::start_live_within(service(broker), Duration::from_secs(30))
            .await
            .err()
            .map(|err| err.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|text| text.contains("was not assigned its partitions")),
            "{refused:?}"
        );
        Ok(())
    }

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_started_service_reads_what_follows_in_process() -> Result<(), Box<dyn Error>> {
        a_started_service_reads_what_follows_body(TestApp::start(super::app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_started_service_reads_what_follows() -> Result<(), Box<dyn Error>> {
        super::runs::topic("boarding-passes.kafka_broker_startup", 1).await?;
        // A group of this run's own: a pass an earlier run left unsettled under the app's
        // fixed group would be read first, and the handler called twice.
        let gate = service(broker(&super::live::bootstrap(), &fresh("gate")));
        let started = TestApp::start_live_within(gate, Duration::from_secs(30)).await?;
        a_started_service_reads_what_follows_body(started).await
    }

    /// The test body, whichever way the service was started.
    async fn a_started_service_reads_what_follows_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let pass = BoardingPass {
            seat: "14C".to_owned(),
        };
        tb.broker::<KafkaBroker>().message(&pass).publish().await?;

        tb.broker::<KafkaBroker>()
            .subscriber("boarding-passes.kafka_broker_startup")
            .assert_called_once()
            .with(&pass)
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;
        Ok(())
    }
}
