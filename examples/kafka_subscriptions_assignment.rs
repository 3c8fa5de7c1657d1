//! The group's assignment strategy: `Assignment::CooperativeSticky` moves only the partitions
//! that change hands when members come and go, where `Range` and `RoundRobin` stop the whole
//! group to reassign. A lone member holds every partition.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_subscriptions_assignment -- run
//! $ cargo test --example kafka_subscriptions_assignment
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Counts a vote towards its ballot box: the box is the partition the vote was read from.
#[subscriber(
    KafkaTopic::new("votes.kafka_subscriptions_assignment")
        .assignment(Assignment::CooperativeSticky),
    reply
)]
async fn tally(vote: &Vote, Ctx(partition): Ctx<Partition>) -> Counted {
    Counted {
        candidate: vote.candidate.clone(),
        ballot_box: partition,
    }
}

fn service(group: &str) -> impl App<State = ()> {
    RustStream::new(AppInfo::new("tally", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]).default_group(group),
        |b| {
            b.include(tally);
        },
    )
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    service("tally")
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Vote {
    candidate: String,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "counted.kafka_subscriptions_assignment")]
struct Counted {
    candidate: String,
    ballot_box: i32,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{Place, eventually, fresh, recreate_topic};
    use super::{Counted, Vote, service};

    const VOTES: &str = "votes.kafka_subscriptions_assignment";

    /// On the embedded cluster in this process: the same body, its records placed on the
    /// cluster directly.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_member_reads_both_partitions_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(service(&fresh("tally")), (), &[(VOTES, 2)])
                .await?;
        a_lone_member_reads_both_partitions_body(tb, &Place::Embedded(cluster)).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_member_reads_both_partitions() -> Result<(), Box<dyn Error>> {
        recreate_topic(VOTES, 2).await?;
        let tb =
            TestApp::start_live_within(service(&fresh("tally")), Duration::from_secs(30)).await?;
        a_lone_member_reads_both_partitions_body(tb, &Place::Live).await
    }

    /// The test body, whichever way the service was started.
    async fn a_lone_member_reads_both_partitions_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
        place: &Place,
    ) -> Result<(), Box<dyn Error>> {
        place
            .seed(
                VOTES,
                Some(0),
                &[Vote {
                    candidate: "Okafor".to_owned(),
                }],
            )
            .await?;
        place
            .seed(
                VOTES,
                Some(1),
                &[Vote {
                    candidate: "Lindqvist".to_owned(),
                }],
            )
            .await?;

        let kafka = tb.broker::<KafkaBroker>();
        let counted = || kafka.published::<Counted>("counted.kafka_subscriptions_assignment");
        eventually("both votes counted", || counted().messages().len() >= 2).await?;
        let mut boxes = counted().decoded();
        boxes.sort_by_key(|counted| counted.ballot_box);
        assert_eq!(
            boxes,
            [
                Counted {
                    candidate: "Okafor".to_owned(),
                    ballot_box: 0,
                },
                Counted {
                    candidate: "Lindqvist".to_owned(),
                    ballot_box: 1,
                },
            ]
        );
        tb.shutdown().await?;
        Ok(())
    }
}
