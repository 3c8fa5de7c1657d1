//! The service of `examples/kafka_settlement_source_topic.rs` without macros: the handler is a
//! type implementing `Handle` over `KafkaContext` (which is what lets `ToSourceTopic` read the
//! delivery's topic) and the app state, and `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_settlement_source_topic -- run
//! $ cargo test --example manual_kafka_settlement_source_topic
//! ```

use std::collections::HashSet;
use std::convert::Infallible;
use std::future::{Future, ready};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::prelude::*;

/// Books a ferry crossing from either harbour.
struct Book;

impl Handle<Crossing, (), (), KafkaContext, AppState> for Book {
    fn handle(
        &self,
        crossing: &Crossing,
        _outs: &(),
        ctx: &mut Context<'_, KafkaContext, AppState>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        let harbour = ctx.context(Topic);
        if !ctx.state().manifest.reserve(crossing) {
            tracing::warn!(crossing.vehicle, %harbour, "manifest busy, retrying");
            return ready(Err(HandlerOutcome::retry()));
        }
        tracing::info!(crossing.vehicle, %harbour, "crossing booked");
        ready(Ok(()))
    }
}

/// What the handlers share, built once at startup.
#[derive(Clone, Default)]
struct AppState {
    manifest: Arc<Manifest>,
}

fn app() -> impl App<State = AppState> {
    let harbours = KafkaTopics::new([
        "crossings-north.manual_kafka_settlement_source_topic",
        "crossings-south.manual_kafka_settlement_source_topic",
    ])
    .group("ferry.manual_kafka_settlement_source_topic")
    .commit(Commit::Tracked);
    RustStream::new(AppInfo::new("ferry", "0.1.0"))
        .on_startup(|()| async { Ok::<AppState, Infallible>(AppState::default()) })
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            // Three deliveries at most; each retry is a copy sent back to its own harbour's
            // topic.
            b.include(subscriber(harbours, Book).build())
                .max_attempts(nonzero!(3u32))
                .dead_letter("crossings-dlq.manual_kafka_settlement_source_topic")
                .out_retry(Publish::default())
                .transform(ToSourceTopic);
        })
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A manifest that is busy the first time it sees a vehicle.
#[derive(Debug, Default)]
struct Manifest {
    seen: Mutex<HashSet<String>>,
}

impl Manifest {
    fn reserve(&self, crossing: &Crossing) -> bool {
        self.seen
            .lock()
            .is_ok_and(|mut seen| !seen.insert(crossing.vehicle.clone()))
    }
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Crossing {
    vehicle: String,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::runtime::RETRY_COUNT_HEADER;
    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, topic};
    use super::{Crossing, app};

    const NORTH: &str = "crossings-north.manual_kafka_settlement_source_topic";
    const SOUTH: &str = "crossings-south.manual_kafka_settlement_source_topic";

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_retry_goes_back_to_its_own_harbour_in_process() -> Result<(), Box<dyn Error>> {
        a_retry_goes_back_to_its_own_harbour_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_retry_goes_back_to_its_own_harbour() -> Result<(), Box<dyn Error>> {
        topic(NORTH, 1).await?;
        topic(SOUTH, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_retry_goes_back_to_its_own_harbour_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn a_retry_goes_back_to_its_own_harbour_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();
        let crossing = Crossing {
            vehicle: "HB-2231".to_owned(),
        };
        kafka.publish(SOUTH, &crossing).await?;

        let ferry = kafka.subscriber(&format!("{NORTH},{SOUTH}"));
        eventually("the retried booking", || ferry.outcomes().len() >= 2).await?;
        assert_eq!(ferry.outcomes(), [Outcome::Nack, Outcome::Ack]);
        assert_eq!(ferry.received::<Crossing>().len(), 2);

        // The test's own publish and the retry copy, both on the south harbour's topic.
        // The copy enters the harness's record once the broker acknowledged it, which can be
        // after it was delivered.
        eventually("the recorded copy", || {
            kafka.published::<Crossing>(SOUTH).messages().len() >= 2
        })
        .await?;
        let south = kafka.published::<Crossing>(SOUTH);
        let copies = south.messages();
        assert_eq!(copies.len(), 2);
        // The harness records each publish once the broker acknowledged it: under load the
        // copy's acknowledgement can come first.
        let retry_counts: Vec<Option<&str>> = copies
            .iter()
            .map(|m| m.headers().get_str(RETRY_COUNT_HEADER))
            .collect();
        assert!(
            retry_counts.contains(&Some("1")) && retry_counts.contains(&None),
            "one original and one copy retried once: {retry_counts:?}"
        );
        kafka.published::<Crossing>(NORTH).assert_not_called();
        tb.shutdown().await?;
        Ok(())
    }
}
