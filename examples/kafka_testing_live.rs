//! What a live test of a service looks like: a tip jar that thanks every tip with a receipt,
//! tested by one body that drives the harness (`publish`, then assertions on the subscriber and
//! the publishes) after `TestApp::start_live_within` has started the service against a running
//! broker. The test then reads the receipt back from the cluster, as any other consumer would.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_testing_live -- run
//! $ cargo test --example kafka_testing_live
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// A tip, in cents.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "tips.kafka_testing_live")]
struct Tip {
    from: String,
    cents: u64,
}

/// The thank-you for a tip.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "thanks.kafka_testing_live")]
struct Thanks {
    to: String,
    cents: u64,
}

/// Thanks a tip; an empty one is dropped without a word.
#[subscriber("tips.kafka_testing_live", reply)]
async fn thank(tip: &Tip) -> Result<Thanks, HandlerOutcome> {
    if tip.cents == 0 {
        return Err(HandlerOutcome::drop());
    }
    Ok(Thanks {
        to: tip.from.clone(),
        cents: tip.cents,
    })
}

/// The service on the cluster at `servers`, reading in the consumer group `group`: a test names
/// its own group so that nothing an earlier run committed is skipped or read again.
fn tip_jar(servers: &str, group: &str) -> impl App<State = ()> + use<> {
    RustStream::new(AppInfo::new("tip-jar", "0.1.0")).with_broker(
        KafkaBroker::new([servers]).default_group(group),
        |b| {
            b.include(thank);
        },
    )
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    tip_jar(&live::bootstrap(), "tip-jar.kafka_testing_live")
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{START, fresh, topic};
    use super::{Thanks, Tip, live, readback, tip_jar};

    const TIPS: &str = "tips.kafka_testing_live";
    const THANKS: &str = "thanks.kafka_testing_live";

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

    /// The same body on the embedded cluster: no broker to start, the same client and adapter
    /// code underneath.
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
        let app = tip_jar(&live::bootstrap(), &fresh("tip-jar.kafka_testing_live"));
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
