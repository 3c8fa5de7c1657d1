//! The tip jar of `examples/kafka_testing_live.rs` without macros: the handler is a type
//! implementing `Handle`, mounted with `.reply()`, and `main` runs the command line by hand. The
//! live test body is the same.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_testing_live -- run
//! $ cargo test --example manual_kafka_testing_live
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Thanks a tip; an empty one is dropped without a word.
struct Thank;

impl Handle<Tip, Thanks> for Thank {
    fn handle(
        &self,
        tip: &Tip,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Thanks, HandlerOutcome>> {
        if tip.cents == 0 {
            return ready(Err(HandlerOutcome::drop()));
        }
        ready(Ok(Thanks {
            to: tip.from.clone(),
            cents: tip.cents,
        }))
    }
}

/// The service on the cluster at `servers`, reading in the consumer group `group`: a test names
/// its own group so that nothing an earlier run committed is skipped or read again.
fn tip_jar(servers: &str, group: &str) -> impl App<State = ()> + use<> {
    RustStream::new(AppInfo::new("tip-jar", "0.1.0")).with_broker(
        KafkaBroker::new([servers]).default_group(group),
        |b| {
            b.include(
                subscriber("tips.manual_kafka_testing_live", Thank)
                    .reply()
                    .build(),
            );
        },
    )
}

fn app() -> impl App<State = ()> {
    tip_jar(&live::bootstrap(), "tip-jar.manual_kafka_testing_live")
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A tip, in cents.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Tip {
    from: String,
    cents: u64,
}

impl OutgoingDestination for Tip {
    type Form = FixedName;
    const DESTINATION: &'static str = "tips.manual_kafka_testing_live";
}

impl MessageHeaders for Tip {
    type Contract = NoHeaders;
}

/// The thank-you for a tip.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Thanks {
    to: String,
    cents: u64,
}

impl OutgoingDestination for Thanks {
    type Form = FixedName;
    const DESTINATION: &'static str = "thanks.manual_kafka_testing_live";
}

impl MessageHeaders for Thanks {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{START, fresh, topic};
    use super::{Thanks, Tip, live, readback, tip_jar};

    const TIPS: &str = "tips.manual_kafka_testing_live";
    const THANKS: &str = "thanks.manual_kafka_testing_live";

    // --8<-- [start:start-live]
    /// The test body: it drives the harness and knows nothing of where the broker runs.
    async fn thanks_a_tip_and_ignores_an_empty_one(tb: &TestApp<()>) -> Result<(), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();
        let tip = Tip {
            from: "ada".to_owned(),
            cents: 250,
        };
        kafka.message(&tip).publish().await?;
        kafka
            .subscriber(TIPS)
            .assert_called_once()
            .with(&tip)
            .settled(HandlerOutcome::ack());
        let thanks = Thanks {
            to: "ada".to_owned(),
            cents: 250,
        };
        kafka
            .published::<Thanks>(THANKS)
            .assert_called_once()
            .with(&thanks);

        let empty = Tip {
            from: "bob".to_owned(),
            cents: 0,
        };
        kafka.message(&empty).publish().await?;
        kafka
            .subscriber(TIPS)
            .assert_called(2)
            .with(&empty)
            .settled(HandlerOutcome::drop());
        kafka.published::<Thanks>(THANKS).assert_called_once();
        Ok(())
    }

    /// The same body on the embedded cluster in this process: no broker to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_on_the_embedded_cluster() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(tip_jar("kafka.internal:9092", "tip-jar")).await?;
        thanks_a_tip_and_ignores_an_empty_one(&tb).await?;
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn against_the_broker() -> Result<(), Box<dyn Error>> {
        // A group finds its topics at startup only if they exist by then.
        topic(TIPS, 1).await?;
        topic(THANKS, 1).await?;
        let before = readback::log_ends(THANKS, 1).await?;
        // A group forms on a cluster in seconds: give the start more than the default bound.
        let app = tip_jar(
            &live::bootstrap(),
            &fresh("tip-jar.manual_kafka_testing_live"),
        );
        let tb = TestApp::start_live_within(app, START).await?;
        thanks_a_tip_and_ignores_an_empty_one(&tb).await?;
        tb.shutdown().await?;

        // What the harness saw published is what the cluster holds.
        let landed = readback::committed_values_since(THANKS, &before).await?;
        let thanks = Thanks {
            to: "ada".to_owned(),
            cents: 250,
        };
        assert_eq!(landed, [vec![serde_json::to_string(&thanks)?]]);
        Ok(())
    }
    // --8<-- [end:start-live]
}
