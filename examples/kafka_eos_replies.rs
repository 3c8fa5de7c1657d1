//! Exactly-once replies from a worker pool: a car park bills each closed parking session, with
//! sessions of the same garage kept in order on one lane and several garages billed side by
//! side. `EosReplies` hands every charge the coordinates of the session it answers, so the
//! charges and the sessions' offsets commit together; a session that lasted no time is dropped
//! and its offset still commits with the window.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_eos_replies -- run
//! $ cargo test --example kafka_eos_replies
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// A closed parking session; the record key is the garage.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "sessions.kafka_eos_replies")]
struct Session {
    plate: String,
    minutes: u32,
}

/// What the session costs.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "charges.kafka_eos_replies")]
struct Charge {
    plate: String,
    cents: u32,
}

/// Two lanes share the pipeline's one transactional id; a garage always lands on one lane.
#[subscriber(
    KafkaTopic::new("sessions.kafka_eos_replies")
        .group("billing.kafka_eos_replies")
        .lane_key(LaneKey::RecordKey)
        .commit(Commit::Transactional("billing.kafka_eos_replies".into())),
    reply,
    workers(2, by_key)
)]
async fn bill(session: &Session) -> Result<Charge, HandlerOutcome> {
    if session.minutes == 0 {
        // Nothing to bill: no reply, and the offset commits with the next window.
        return Err(HandlerOutcome::drop());
    }
    Ok(Charge {
        plate: session.plate.clone(),
        cents: session.minutes * 5,
    })
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    let pipeline =
        EosPublish::new("billing.kafka_eos_replies").commit_interval(Duration::from_millis(50));
    RustStream::new(AppInfo::new("invoicing", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // Without `EosReplies` the pipeline would not know which session a charge answers
            // and would refuse it.
            b.include(bill).out_reply(pipeline).transform(EosReplies);
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, seed_keyed, topic};
    use super::{Charge, Session, app, readback};

    const SESSIONS: &str = "sessions.kafka_eos_replies";
    const CHARGES: &str = "charges.kafka_eos_replies";
    const GROUP: &str = "billing.kafka_eos_replies";

    fn session(plate: &str, minutes: u32) -> Session {
        Session {
            plate: plate.to_owned(),
            minutes,
        }
    }

    /// In process: each session's charge is visible once its window committed; the empty
    /// session is dropped and charges nothing.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn charges_and_offsets_commit_together_in_process() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        for plate_minutes in [
            ("KA-101", 30),
            ("KB-202", 0),
            ("KA-303", 12),
            ("KB-404", 45),
        ] {
            let (plate, minutes) = plate_minutes;
            kafka.message(&session(plate, minutes)).publish().await?;
        }
        let billed = kafka.subscriber(SESSIONS);
        assert_eq!(
            billed.outcomes(),
            [Outcome::Ack, Outcome::Drop, Outcome::Ack, Outcome::Ack]
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while kafka.published::<Charge>(CHARGES).messages().len() < 3 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let charges = kafka.published::<Charge>(CHARGES).assert_called(3);
        let cents: Vec<(String, u64)> = charges
            .decoded()
            .into_iter()
            .map(|charge| (charge.plate, u64::from(charge.cents)))
            .collect();
        assert_eq!(
            cents,
            [
                ("KA-101".to_owned(), 150),
                ("KA-303".to_owned(), 60),
                ("KB-404".to_owned(), 225)
            ]
        );
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn charges_and_offsets_commit_together() -> Result<(), Box<dyn Error>> {
        topic(SESSIONS, 1).await?;
        topic(CHARGES, 1).await?;
        let before = readback::log_ends(CHARGES, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;

        let sessions = [
            ("north", session("KA-101", 30)),
            ("south", session("KB-202", 0)),
            ("north", session("KA-303", 12)),
            ("south", session("KB-404", 45)),
        ];
        seed_keyed(SESSIONS, &sessions).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let billed = kafka.subscriber(SESSIONS);
        eventually("every session", || {
            billed.outcomes().len() >= sessions.len()
        })
        .await?;
        let mut outcomes = billed.outcomes();
        outcomes.sort_by_key(|outcome| matches!(outcome, Outcome::Drop));
        assert_eq!(
            outcomes,
            [Outcome::Ack, Outcome::Ack, Outcome::Ack, Outcome::Drop]
        );

        // Three charges become visible to `read_committed` readers, and the group's offset
        // passes every session, the dropped one included.
        let end = readback::log_ends(SESSIONS, 1).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let (mut landed, committed) = loop {
            let mut landed = readback::committed_values_since(CHARGES, &before).await?;
            let committed = readback::committed_offset(GROUP, SESSIONS, 0).await?;
            if (landed[0].len() < 3 || committed < end[0]) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            break (landed.remove(0), committed);
        };
        tb.shutdown().await?;
        landed.sort();
        let mut expected = [("KA-101", 150), ("KA-303", 60), ("KB-404", 225)]
            .into_iter()
            .map(|(plate, cents)| {
                serde_json::to_string(&Charge {
                    plate: plate.to_owned(),
                    cents,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        expected.sort();
        assert_eq!(landed, expected);
        assert_eq!(committed, end[0]);
        Ok(())
    }
}
