//! The box office of `examples/guide/exactly_once.rs` without macros: the seat holder is a type
//! implementing `Handle` over its transactional `Out` entry, the door is a reply handler on the
//! transactional subscription, and the slot and destinations are written by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_guide_exactly_once -- run
//! $ cargo test --example manual_guide_exactly_once
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;
use std::time::Duration;

use ruststream::runtime::cli::run_main;
use ruststream::runtime::{ListOffer, OutSlot, PublishedThrough};
use serde::{Deserialize, Serialize};

#[path = "../../support/live.rs"]
mod live;

#[cfg(all(test, feature = "testing"))]
#[path = "../../support/in_process.rs"]
mod in_process;

#[cfg(test)]
#[path = "../../support/readback.rs"]
mod readback;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// The slot seat holds leave through.
struct Holds;

impl OutSlot for Holds {
    const NAME: &'static str = "Holds";
    type Destination = <(SeatHold, ()) as ListOffer>::Offer;
}

impl PublishedThrough<Holds> for SeatHold {}

// --8<-- [start:transaction]
/// Every seat of a booking, or none: a seat without a label aborts the whole booking.
struct Hold;

impl<Entry> Handle<Booking, (), Outs<(Entry,)>> for Hold
where
    Entry: OutEntry<Holds, Wire: TransactionalPublisher>,
{
    async fn handle(
        &self,
        booking: &Booking,
        outs: &Outs<(Entry,)>,
        _ctx: &mut Context<'_>,
    ) -> Result<(), HandlerOutcome> {
        let holds = outs.get(Holds);
        holds
            .begin_transaction()
            .await
            .map_err(|_| HandlerOutcome::retry())?;
        for seat in &booking.seats {
            if seat.is_empty() {
                tracing::warn!(booking.id, "a seat has no label; the booking holds nothing");
                holds.abort().await.map_err(|_| HandlerOutcome::retry())?;
                return Err(HandlerOutcome::drop());
            }
            let seat_hold = SeatHold {
                booking: booking.id,
                seat: seat.clone(),
            };
            if holds.message(&seat_hold).publish().await.is_err() {
                holds.abort().await.ok();
                return Err(HandlerOutcome::retry());
            }
        }
        holds.commit().await.map_err(|_| HandlerOutcome::retry())
    }
}
// --8<-- [end:transaction]

// --8<-- [start:eos]
/// The admission and the scan's offset commit in one transaction of the `doors` pipeline.
struct Admit;

impl Handle<Scan, Admission> for Admit {
    fn handle(
        &self,
        scan: &Scan,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Admission, HandlerOutcome>> {
        ready(Ok(Admission {
            ticket: scan.ticket.clone(),
        }))
    }
}
// --8<-- [end:eos]

fn app() -> impl App<State = ()> {
    let bookings = KafkaTopic::new("bookings.manual_guide_exactly_once")
        .group("box-office.manual_guide_exactly_once");
    let scans = KafkaTopic::new("scans.manual_guide_exactly_once")
        .group("doors.manual_guide_exactly_once")
        .commit(Commit::Transactional(
            "doors.manual_guide_exactly_once".into(),
        ));
    let holds = Publish::default()
        .transactional_id("box-office.manual_guide_exactly_once")
        .transaction_timeout(Duration::from_secs(10));
    let doors = EosPublish::new("doors.manual_guide_exactly_once")
        .commit_interval(Duration::from_millis(50));
    RustStream::new(AppInfo::new("box-office", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(bookings, Hold).build())
                .out(Holds, holds)
                .build();
            b.include(subscriber(scans, Admit).reply().build())
                .out_reply(doors)
                .transform(EosReplies);
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// Seats asked for together.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Booking {
    id: u32,
    seats: Vec<String>,
}

impl OutgoingDestination for Booking {
    type Form = FixedName;
    const DESTINATION: &'static str = "bookings.manual_guide_exactly_once";
}

impl MessageHeaders for Booking {
    type Contract = NoHeaders;
}

/// One seat held for one booking.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct SeatHold {
    booking: u32,
    seat: String,
}

impl OutgoingDestination for SeatHold {
    type Form = FixedName;
    const DESTINATION: &'static str = "seat-holds.manual_guide_exactly_once";
}

impl MessageHeaders for SeatHold {
    type Contract = NoHeaders;
}

/// A ticket scanned at the door.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Scan {
    ticket: String,
}

impl OutgoingDestination for Scan {
    type Form = FixedName;
    const DESTINATION: &'static str = "scans.manual_guide_exactly_once";
}

impl MessageHeaders for Scan {
    type Contract = NoHeaders;
}

/// The door's answer.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Admission {
    ticket: String,
}

impl OutgoingDestination for Admission {
    type Form = FixedName;
    const DESTINATION: &'static str = "admissions.manual_guide_exactly_once";
}

impl MessageHeaders for Admission {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Admission, Booking, Scan, SeatHold, app, live, readback};

    const BOOKINGS: &str = "bookings.manual_guide_exactly_once";
    const HOLDS: &str = "seat-holds.manual_guide_exactly_once";
    const SCANS: &str = "scans.manual_guide_exactly_once";
    const ADMISSIONS: &str = "admissions.manual_guide_exactly_once";
    const DOORS: &str = "doors.manual_guide_exactly_once";

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
