//! The car park billing of `examples/kafka_eos_replies.rs` without macros: the handler is a
//! type implementing `Handle`, mounted with `.reply()` and `.workers_by_key(..)`, and the reply
//! position takes the same pipeline and `EosReplies` transform.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_eos_replies -- run
//! $ cargo test --example manual_kafka_eos_replies
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;
use std::time::Duration;

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

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Bills a session; one that lasted no time is dropped, and its offset still commits with the
/// next window.
struct Bill;

impl Handle<Session, Charge> for Bill {
    fn handle(
        &self,
        session: &Session,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Charge, HandlerOutcome>> {
        if session.minutes == 0 {
            return ready(Err(HandlerOutcome::drop()));
        }
        ready(Ok(Charge {
            plate: session.plate.clone(),
            cents: session.minutes * 5,
        }))
    }
}

fn sessions() -> KafkaTopic {
    KafkaTopic::new("sessions.manual_kafka_eos_replies")
        .group("billing.manual_kafka_eos_replies")
        .lane_key(LaneKey::RecordKey)
        .commit(Commit::Transactional(
            "billing.manual_kafka_eos_replies".into(),
        ))
}

fn app() -> impl App<State = ()> {
    let pipeline = EosPublish::new("billing.manual_kafka_eos_replies")
        .commit_interval(Duration::from_millis(50));
    RustStream::new(AppInfo::new("invoicing", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // Two lanes share the pipeline's one transactional id; a garage always lands on one
            // lane. Without `EosReplies` the pipeline would not know which session a charge
            // answers and would refuse it.
            let bill = subscriber(sessions(), Bill)
                .reply()
                .workers_by_key(nonzero!(2));
            b.include(bill.build())
                .out_reply(pipeline)
                .transform(EosReplies);
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A closed parking session; the record key is the garage.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Session {
    plate: String,
    minutes: u32,
}

impl OutgoingDestination for Session {
    type Form = FixedName;
    const DESTINATION: &'static str = "sessions.manual_kafka_eos_replies";
}

impl MessageHeaders for Session {
    type Contract = NoHeaders;
}

/// What the session costs.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Charge {
    plate: String,
    cents: u32,
}

impl OutgoingDestination for Charge {
    type Form = FixedName;
    const DESTINATION: &'static str = "charges.manual_kafka_eos_replies";
}

impl MessageHeaders for Charge {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, seed_keyed, topic};
    use super::{Charge, Session, app, readback};

    const SESSIONS: &str = "sessions.manual_kafka_eos_replies";
    const CHARGES: &str = "charges.manual_kafka_eos_replies";
    const GROUP: &str = "billing.manual_kafka_eos_replies";

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
