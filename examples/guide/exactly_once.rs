//! The service of the Exactly-once guide: a concert box office. A booking holds all its seats in
//! one producer transaction or none of them; a ticket scan at the door is answered with an
//! admission that commits together with the scan's offset in the exactly-once pipeline.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example guide_exactly_once -- run
//! $ cargo test --example guide_exactly_once
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Seats asked for together.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "bookings.guide_exactly_once")]
struct Booking {
    id: u32,
    seats: Vec<String>,
}

/// One seat held for one booking.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "seat-holds.guide_exactly_once")]
struct SeatHold {
    booking: u32,
    seat: String,
}

/// A ticket scanned at the door.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "scans.guide_exactly_once")]
struct Scan {
    ticket: String,
}

/// The door's answer.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "admissions.guide_exactly_once")]
struct Admission {
    ticket: String,
}

#[derive(OutSlot)]
#[publishes(SeatHold)]
struct Holds;

// --8<-- [start:transaction]
/// Every seat of a booking, or none: a seat without a label aborts the whole booking.
#[subscriber(KafkaTopic::new("bookings.guide_exactly_once").group("box-office.guide_exactly_once"))]
async fn hold(
    booking: &Booking,
    Out(holds): Out<impl TransactionalPublisher, Holds>,
) -> HandlerOutcome {
    if holds.begin_transaction().await.is_err() {
        return HandlerOutcome::retry();
    }
    for seat in &booking.seats {
        if seat.is_empty() {
            tracing::warn!(booking.id, "a seat has no label; the booking holds nothing");
            return match holds.abort().await {
                Ok(()) => HandlerOutcome::drop(),
                Err(_) => HandlerOutcome::retry(),
            };
        }
        let seat_hold = SeatHold {
            booking: booking.id,
            seat: seat.clone(),
        };
        if holds.message(&seat_hold).publish().await.is_err() {
            holds.abort().await.ok();
            return HandlerOutcome::retry();
        }
    }
    match holds.commit().await {
        Ok(()) => HandlerOutcome::ack(),
        Err(_) => HandlerOutcome::retry(),
    }
}
// --8<-- [end:transaction]

// --8<-- [start:eos]
/// The admission and the scan's offset commit in one transaction of the `doors` pipeline.
#[subscriber(
    KafkaTopic::new("scans.guide_exactly_once")
        .group("doors.guide_exactly_once")
        .commit(Commit::Transactional("doors.guide_exactly_once".into())),
    reply
)]
async fn admit(scan: &Scan) -> Admission {
    Admission {
        ticket: scan.ticket.clone(),
    }
}
// --8<-- [end:eos]

#[ruststream::app]
fn app() -> impl App<State = ()> {
    let holds = Publish::default()
        .transactional_id("box-office.guide_exactly_once")
        .transaction_timeout(Duration::from_secs(10));
    let doors =
        EosPublish::new("doors.guide_exactly_once").commit_interval(Duration::from_millis(50));
    RustStream::new(AppInfo::new("box-office", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(hold).out(Holds, holds).build();
            b.include(admit).out_reply(doors).transform(EosReplies);
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Admission, Booking, Scan, SeatHold, app, live, readback};

    const BOOKINGS: &str = "bookings.guide_exactly_once";
    const HOLDS: &str = "seat-holds.guide_exactly_once";
    const SCANS: &str = "scans.guide_exactly_once";
    const ADMISSIONS: &str = "admissions.guide_exactly_once";
    const DOORS: &str = "doors.guide_exactly_once";

    fn seat_hold(booking: u32, seat: &str) -> Result<String, serde_json::Error> {
        serde_json::to_string(&SeatHold {
            booking,
            seat: seat.to_owned(),
        })
    }

    /// In process: what `published` reads is the cluster's committed log, so a booking's holds
    /// appear together or not at all, and the admission once its window committed.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn all_or_nothing_and_exactly_once_in_process() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let good = Booking {
            id: 1,
            seats: vec!["A12".to_owned(), "A13".to_owned()],
        };
        kafka.message(&good).publish().await?;
        kafka
            .subscriber(BOOKINGS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let held: Vec<String> = kafka
            .published::<SeatHold>(HOLDS)
            .assert_called(2)
            .decoded()
            .into_iter()
            .map(|hold| hold.seat)
            .collect();
        assert_eq!(held, ["A12", "A13"]);

        let bad = Booking {
            id: 2,
            seats: vec!["B1".to_owned(), String::new()],
        };
        kafka.message(&bad).publish().await?;
        kafka
            .subscriber(BOOKINGS)
            .assert_called(2)
            .settled(HandlerOutcome::drop());
        kafka.published::<SeatHold>(HOLDS).assert_called(2);

        let scan = Scan {
            ticket: "T-0042".to_owned(),
        };
        kafka.message(&scan).publish().await?;
        kafka
            .subscriber(SCANS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let deadline = Instant::now() + Duration::from_secs(10);
        while kafka
            .published::<Admission>(ADMISSIONS)
            .messages()
            .is_empty()
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        kafka
            .published::<Admission>(ADMISSIONS)
            .assert_called_once()
            .with(&Admission {
                ticket: "T-0042".to_owned(),
            });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn all_or_nothing_and_exactly_once() -> Result<(), Box<dyn Error>> {
        for name in [BOOKINGS, HOLDS, SCANS, ADMISSIONS] {
            live::ensure_topic(name, 1).await?;
        }
        let holds_before = readback::log_ends(HOLDS, 1).await?;
        let admissions_before = readback::log_ends(ADMISSIONS, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let kafka = tb.broker::<KafkaBroker>();

        // A good booking: both seats commit together.
        let good = Booking {
            id: 1,
            seats: vec!["A12".to_owned(), "A13".to_owned()],
        };
        kafka.message(&good).publish().await?;
        kafka
            .subscriber(BOOKINGS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let committed = readback::committed_values_since(HOLDS, &holds_before).await?;
        assert_eq!(
            committed,
            [vec![seat_hold(1, "A12")?, seat_hold(1, "A13")?]]
        );

        // A bad booking: its first seat was written, then the transaction aborted.
        let middle = readback::log_ends(HOLDS, 1).await?;
        let bad = Booking {
            id: 2,
            seats: vec!["B1".to_owned(), String::new()],
        };
        kafka.message(&bad).publish().await?;
        kafka
            .subscriber(BOOKINGS)
            .assert_called(2)
            .settled(HandlerOutcome::drop());
        let committed = readback::committed_values_since(HOLDS, &middle).await?;
        assert_eq!(committed, [Vec::<String>::new()]);

        // A scan: the admission and the scan's offset commit in the pipeline's window.
        let scan = Scan {
            ticket: "T-0042".to_owned(),
        };
        kafka.message(&scan).publish().await?;
        kafka
            .subscriber(SCANS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let deadline = Instant::now() + Duration::from_secs(10);
        let landed = loop {
            let landed = readback::committed_values_since(ADMISSIONS, &admissions_before).await?;
            if landed[0].is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            break landed;
        };
        tb.shutdown().await?;
        let admission = Admission {
            ticket: "T-0042".to_owned(),
        };
        assert_eq!(landed, [vec![serde_json::to_string(&admission)?]]);
        let end = readback::log_ends(SCANS, 1).await?;
        assert_eq!(readback::committed_offset(DOORS, SCANS, 0).await?, end[0]);
        Ok(())
    }
}
