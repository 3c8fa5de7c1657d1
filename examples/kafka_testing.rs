//! Testing a service with no broker to start: a box office that takes ticket sales and pays
//! refunds line by line in one transaction, run by `TestApp::start` on an embedded Kafka cluster
//! in this process (feature `testing`). The production app is tested unchanged: the same
//! `KafkaBroker`, client and adapter code, the same transactions and consumer groups.
//!
//! ```text
//! $ cargo test --features testing --example kafka_testing
//! $ scripts/kafka up && cargo run --example kafka_testing -- run
//! ```
//!
//! Run as a service, the broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env`
//! prints), else `localhost:9092`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Seats sold at the counter.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "ticket-sales")]
struct Sale {
    order: u64,
    seats: u32,
    cents: i64,
}

/// A refund: one line per seat given back.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "refund-requests")]
struct Refund {
    order: u64,
    lines: Vec<i64>,
}

/// One payment back to the customer.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "refund-payments")]
struct Payout {
    order: u64,
    cents: i64,
}

#[derive(OutSlot)]
#[publishes(Payout)]
struct Payouts;

/// Books a sale; one with no seats or no money is dropped.
#[subscriber(KafkaTopic::new("ticket-sales").group("box-office"))]
async fn sell(sale: &Sale) -> HandlerOutcome {
    if sale.seats == 0 || sale.cents <= 0 {
        tracing::warn!(sale.order, "a sale without seats or money");
        return HandlerOutcome::drop();
    }
    HandlerOutcome::ack()
}

/// Pays every line of a refund in one transaction: all of them, or none when a line is not
/// a positive amount.
#[subscriber(KafkaTopic::new("refund-requests").group("box-office"))]
async fn refund(
    request: &Refund,
    Out(payouts): Out<impl TransactionalPublisher, Payouts>,
) -> HandlerOutcome {
    if payouts.begin_transaction().await.is_err() {
        return HandlerOutcome::retry();
    }
    for &cents in &request.lines {
        if cents <= 0 {
            // What this refund already sent is part of the transaction: the abort takes it back.
            tracing::warn!(request.order, cents, "refund line refused");
            return match payouts.abort().await {
                Ok(()) => HandlerOutcome::drop(),
                Err(_) => HandlerOutcome::retry(),
            };
        }
        let payout = Payout {
            order: request.order,
            cents,
        };
        if payouts.message(&payout).publish().await.is_err() {
            payouts.abort().await.ok();
            return HandlerOutcome::retry();
        }
    }
    match payouts.commit().await {
        Ok(()) => HandlerOutcome::ack(),
        Err(_) => HandlerOutcome::retry(),
    }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    let payouts = Publish::default()
        .transactional_id("box-office-refunds")
        .transaction_timeout(Duration::from_secs(10));
    RustStream::new(AppInfo::new("box-office", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(sell);
            b.include(refund).out(Payouts, payouts).build();
        },
    )
}
// --8<-- [end:app]

#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::{Payout, Payouts, Refund, Sale, app};

    const SALES: &str = "ticket-sales";
    const REFUNDS: &str = "refund-requests";
    const PAYOUTS: &str = "refund-payments";

    #[tokio::test]
    async fn a_sale_is_booked_and_an_empty_one_dropped() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let sale = Sale {
            order: 1,
            seats: 2,
            cents: 9_000,
        };
        kafka.message(&sale).publish().await?;
        let empty = Sale {
            order: 2,
            seats: 0,
            cents: 0,
        };
        kafka.message(&empty).publish().await?;
        let sales = kafka.subscriber(SALES).assert_called(2);
        assert_eq!(sales.outcomes(), [Outcome::Ack, Outcome::Drop]);
        assert_eq!(sales.received::<Sale>(), [sale, empty]);
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test]
    async fn a_refund_with_a_bad_line_pays_nothing() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let refund = Refund {
            order: 7,
            lines: vec![4_500, -1, 4_500],
        };
        kafka.message(&refund).publish().await?;
        kafka
            .subscriber(REFUNDS)
            .assert_called_once()
            .settled(HandlerOutcome::drop());
        // The first line went out inside the transaction; the abort means no reader ever
        // sees it.
        tb.out::<Payouts>().assert_called_once();
        kafka.published::<Payout>(PAYOUTS).assert_not_called();
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test]
    async fn a_good_refund_pays_every_line() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let refund = Refund {
            order: 8,
            lines: vec![4_500, 3_000],
        };
        kafka.message(&refund).publish().await?;
        kafka
            .subscriber(REFUNDS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let paid = kafka.published::<Payout>(PAYOUTS).assert_called(2);
        let amounts: Vec<i64> = paid.decoded().iter().map(|p| p.cents).collect();
        assert_eq!(amounts, [4_500, 3_000]);
        tb.shutdown().await?;
        Ok(())
    }

    /// The embedded cluster's faults reach a service under test: here the box office's group
    /// members lose their sessions, rejoin, and book the next sale.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_office_books_sales_after_its_session_expired() -> Result<(), Box<dyn Error>> {
        let mut cluster = None;
        let tb = TestApp::with_state(app(), |brokers| {
            cluster = brokers.broker::<KafkaBroker>().embedded_cluster();
        })
        .await?;
        let faults = cluster.ok_or("connected in process")?.faults();
        let kafka = tb.broker::<KafkaBroker>();
        let first = Sale {
            order: 10,
            seats: 1,
            cents: 4_500,
        };
        kafka.message(&first).publish().await?;

        let members = faults.group_members("box-office");
        assert_eq!(members.len(), 2, "one member per subscription: {members:?}");
        for member in &members {
            assert!(faults.expire_session("box-office", member));
        }
        // Each member hears of it at its next heartbeat and joins again.
        let rejoined = tokio::time::timeout(Duration::from_secs(30), async {
            while faults.group_members("box-office").len() < 2 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        rejoined.await?;
        let second = Sale {
            order: 11,
            seats: 3,
            cents: 13_500,
        };
        kafka.message(&second).publish().await?;
        // A sale booked but not committed yet when the session ended is read again by the
        // new membership (at least once, as on any Kafka cluster): it resumes where the member
        // was first given the partition, since nothing was committed. The office sees the first
        // sale once or twice (the second time possibly after the second sale, which the old
        // membership may still have handed out), the second once, and books them all.
        let sales = kafka.subscriber(SALES);
        let received = sales.received::<Sale>();
        assert!(sales.outcomes().iter().all(|o| *o == Outcome::Ack));
        assert_eq!(received.first(), Some(&first));
        assert_eq!(
            received.iter().filter(|sale| **sale == second).count(),
            1,
            "{received:?}"
        );
        assert!(received.len() <= 3, "{received:?}");
        assert!(
            received
                .iter()
                .all(|sale| *sale == first || *sale == second)
        );
        tb.shutdown().await?;
        Ok(())
    }
}
