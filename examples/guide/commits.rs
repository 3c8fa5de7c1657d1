//! The service of the Commits and delivery guarantees guide: a flat-share money app. Rent
//! transfers commit precisely (`Commit::Tracked`), so a transfer the bank turns away comes back;
//! app-open pings keep the timer commit, so a ping the stats store turns away is gone; and the
//! lines of a shared bill settle one by one in batches.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example guide_commits -- run
//! $ cargo test --example guide_commits
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

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

/// Rent one flatmate owes another, in cents.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Outgoing)]
#[outgoing(name = "rent.guide_commits")]
struct Rent {
    from: String,
    cents: u32,
}

/// Someone opened the app.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "app-opens.guide_commits")]
struct AppOpen {
    user: String,
}

/// One line of a shared bill.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "bill-lines.guide_commits")]
struct BillLine {
    item: String,
    cents: u32,
}

// --8<-- [start:tracked]
/// A transfer the bank turns away is retried, and the group commits nothing past it until it
/// has gone through.
#[subscriber(
    KafkaTopic::new("rent.guide_commits")
        .group("transfers.guide_commits")
        .commit(Commit::Tracked)
)]
async fn transfer(rent: &Rent, State(bank): State<Arc<Bank>>) -> HandlerOutcome {
    if bank.0.call().is_err() {
        tracing::warn!(rent.from, "bank unavailable, the transfer comes back");
        return HandlerOutcome::retry();
    }
    tracing::info!(rent.from, rent.cents, "rent transferred");
    HandlerOutcome::ack()
}
// --8<-- [end:tracked]

// --8<-- [start:auto]
/// Under the timer commit (the default) a retried ping is not delivered again: the stats
/// can afford to miss one.
#[subscriber(KafkaTopic::new("app-opens.guide_commits").group("stats.guide_commits"))]
async fn count_open(open: &AppOpen, State(stats): State<Arc<Stats>>) -> HandlerOutcome {
    if stats.0.call().is_err() {
        return HandlerOutcome::retry();
    }
    tracing::debug!(open.user, "app open counted");
    HandlerOutcome::ack()
}
// --8<-- [end:auto]

// --8<-- [start:batch]
/// Each line of a batch settles on its own: a line without an amount is dropped, the others are
/// booked, and the group's offset passes them all.
#[subscriber(
    KafkaTopic::new("bill-lines.guide_commits")
        .group("bills.guide_commits")
        .commit(Commit::Tracked)
)]
async fn book_lines(lines: &[BillLine]) -> Vec<HandlerOutcome> {
    lines
        .iter()
        .map(|line| {
            if line.cents == 0 {
                HandlerOutcome::drop()
            } else {
                HandlerOutcome::ack()
            }
        })
        .collect()
}
// --8<-- [end:batch]

#[ruststream::app]
fn app() -> impl App<State = Services> {
    RustStream::new(AppInfo::new("flat-share", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(Services::connect()))
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            b.include(transfer);
            b.include(count_open);
            b.include(book_lines.batch(nonzero!(20)));
        })
}
// --8<-- [end:app]

/// The remote services the handlers share, opened once at startup.
#[derive(Debug, Clone, FromRef)]
struct Services {
    bank: Arc<Bank>,
    stats: Arc<Stats>,
}

/// The bank's transfer API.
#[derive(Debug)]
struct Bank(Remote);

/// The store that counts app opens.
#[derive(Debug)]
struct Stats(Remote);

impl Services {
    /// Stand-ins that are each down for their first call.
    fn connect() -> Self {
        Self {
            bank: Arc::new(Bank(Remote::down_for(1))),
            stats: Arc::new(Stats(Remote::down_for(1))),
        }
    }
}

/// A fake of the downstream service, so the example runs without one.
#[derive(Debug)]
struct Remote {
    outages: AtomicU32,
}

impl Remote {
    fn down_for(calls: u32) -> Self {
        Self {
            outages: AtomicU32::new(calls),
        }
    }

    /// Fails while outages are left, using one up.
    fn call(&self) -> Result<(), ()> {
        let down = self
            .outages
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if down { Err(()) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::{Place, START, eventually, topic};
    use super::{AppOpen, BillLine, Rent, app, readback};

    const RENT: &str = "rent.guide_commits";
    const OPENS: &str = "app-opens.guide_commits";
    const LINES: &str = "bill-lines.guide_commits";

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_comes_back_depends_on_the_commit_mode_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(app(), super::Services::connect(), &[]).await?;
        let place = Place::Embedded(cluster);
        what_comes_back_depends_on_the_commit_mode_body(tb, &place).await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_comes_back_depends_on_the_commit_mode() -> Result<(), Box<dyn Error>> {
        for name in [RENT, OPENS, LINES] {
            topic(name, 1).await?;
        }
        let tb = TestApp::start_live_within(app(), START).await?;
        what_comes_back_depends_on_the_commit_mode_body(tb, &Place::Live).await?;

        for (name, group) in [
            (RENT, "transfers.guide_commits"),
            (LINES, "bills.guide_commits"),
        ] {
            let end = readback::log_ends(name, 1).await?;
            assert_eq!(readback::committed_offset(group, name, 0).await?, end[0]);
        }
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn what_comes_back_depends_on_the_commit_mode_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
        place: &Place,
    ) -> Result<(), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();

        // Tracked: the refused transfer comes back and goes through.
        let rent = Rent {
            from: "kim".to_owned(),
            cents: 42_000,
        };
        kafka.message(&rent).publish().await?;
        let transfers = kafka.subscriber(RENT);
        eventually("the second try", || transfers.outcomes().len() >= 2).await?;
        assert_eq!(transfers.received::<Rent>(), [rent.clone(), rent.clone()]);
        assert_eq!(transfers.outcomes(), [Outcome::Nack, Outcome::Ack]);

        // Auto: the refused ping is not delivered again; the next one is counted.
        let first = AppOpen {
            user: "lee".to_owned(),
        };
        let second = AppOpen {
            user: "max".to_owned(),
        };
        kafka.message(&first).publish().await?;
        kafka.message(&second).publish().await?;
        let stats = kafka.subscriber(OPENS);
        assert_eq!(stats.received::<AppOpen>(), [first, second]);
        assert_eq!(stats.outcomes(), [Outcome::Nack, Outcome::Ack]);

        // Batches: every line is settled, the dropped one too.
        let lines = [
            BillLine {
                item: "power".to_owned(),
                cents: 6_100,
            },
            BillLine {
                item: "typo".to_owned(),
                cents: 0,
            },
            BillLine {
                item: "water".to_owned(),
                cents: 2_350,
            },
        ];
        place.seed(LINES, None, &lines).await?;
        let bills = kafka.subscriber(LINES);
        eventually("every bill line", || {
            bills
                .batches::<BillLine>()
                .iter()
                .map(Vec::len)
                .sum::<usize>()
                >= lines.len()
        })
        .await?;
        let booked: Vec<BillLine> = bills.batches().into_iter().flatten().collect();
        assert_eq!(booked, lines);
        tb.shutdown().await?;
        Ok(())
    }
}
