//! The box office of `examples/kafka_testing.rs` without macros, tested the same way: in
//! process by `TestApp::start`, on an embedded Kafka cluster (feature `testing`).
//!
//! ```text
//! $ cargo test --features testing --example manual_kafka_testing
//! $ scripts/kafka up && cargo run --example manual_kafka_testing -- run
//! ```

use std::future::ready;
use std::process::ExitCode;
use std::time::Duration;

use ruststream::runtime::cli::run_main;
use ruststream::runtime::{ListOffer, OutSlot, PublishedThrough};
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// The slot refund payouts leave through.
struct Payouts;

impl OutSlot for Payouts {
    const NAME: &'static str = "Payouts";
    type Destination = <(Payout, ()) as ListOffer>::Offer;
}

impl PublishedThrough<Payouts> for Payout {}

/// Books a sale; one with no seats or no money is dropped.
struct Sell;

impl Handle<Sale> for Sell {
    fn handle(
        &self,
        sale: &Sale,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        let booked = if sale.seats == 0 || sale.cents <= 0 {
            Err(HandlerOutcome::drop())
        } else {
            Ok(())
        };
        ready(booked)
    }
}

/// Pays every line of a refund in one transaction, or none of them.
struct PayBack;

impl<Entry> Handle<Refund, (), Outs<(Entry,)>> for PayBack
where
    Entry: OutEntry<Payouts, Wire: TransactionalPublisher>,
{
    async fn handle(
        &self,
        request: &Refund,
        outs: &Outs<(Entry,)>,
        _ctx: &mut Context<'_>,
    ) -> Result<(), HandlerOutcome> {
        let payouts = outs.get(Payouts);
        payouts
            .begin_transaction()
            .await
            .map_err(|_| HandlerOutcome::retry())?;
        for &cents in &request.lines {
            if cents <= 0 {
                // The abort takes back what this refund already sent.
                payouts.abort().await.map_err(|_| HandlerOutcome::retry())?;
                return Err(HandlerOutcome::drop());
            }
            let payout = Payout {
                order: request.order,
                cents,
            };
            if payouts.message(&payout).publish().await.is_err() {
                payouts.abort().await.ok();
                return Err(HandlerOutcome::retry());
            }
        }
        payouts.commit().await.map_err(|_| HandlerOutcome::retry())
    }
}

fn app() -> impl App {
    let payouts = Publish::default()
        .transactional_id("box-office-refunds.manual")
        .transaction_timeout(Duration::from_secs(10));
    RustStream::new(AppInfo::new("box-office", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            let sales = KafkaTopic::new("ticket-sales.manual").group("box-office.manual");
            b.include(subscriber(sales, Sell).build());
            let refunds = KafkaTopic::new("refund-requests.manual").group("box-office.manual");
            b.include(subscriber(refunds, PayBack).build())
                .out(Payouts, payouts)
                .build();
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// Seats sold at the counter.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Sale {
    order: u64,
    seats: u32,
    cents: i64,
}

impl OutgoingDestination for Sale {
    type Form = FixedName;
    const DESTINATION: &'static str = "ticket-sales.manual";
}

impl MessageHeaders for Sale {
    type Contract = NoHeaders;
}

/// A refund: one line per seat given back.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Refund {
    order: u64,
    lines: Vec<i64>,
}

impl OutgoingDestination for Refund {
    type Form = FixedName;
    const DESTINATION: &'static str = "refund-requests.manual";
}

impl MessageHeaders for Refund {
    type Contract = NoHeaders;
}

/// One payment back to the customer.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Payout {
    order: u64,
    cents: i64,
}

impl OutgoingDestination for Payout {
    type Form = FixedName;
    const DESTINATION: &'static str = "refund-payments.manual";
}

impl MessageHeaders for Payout {
    type Contract = NoHeaders;
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::error::Error;

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::{Payout, Payouts, Refund, Sale, app};

    #[tokio::test]
    async fn sales_are_booked_or_dropped() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        for (order, seats) in [(1, 4), (2, 0)] {
            let sale = Sale {
                order,
                seats,
                cents: i64::from(seats) * 2_000,
            };
            kafka.message(&sale).publish().await?;
        }
        let sales = kafka.subscriber("ticket-sales.manual").assert_called(2);
        assert_eq!(sales.outcomes(), [Outcome::Ack, Outcome::Drop]);
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test]
    async fn refunds_pay_all_lines_or_none() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let refused = Refund {
            order: 3,
            lines: vec![2_000, 0],
        };
        kafka.message(&refused).publish().await?;
        tb.out::<Payouts>().assert_called_once();
        kafka
            .published::<Payout>("refund-payments.manual")
            .assert_not_called();

        let paid = Refund {
            order: 4,
            lines: vec![2_000, 2_000, 1_500],
        };
        kafka.message(&paid).publish().await?;
        let refunds = kafka.subscriber("refund-requests.manual").assert_called(2);
        assert_eq!(refunds.outcomes(), [Outcome::Drop, Outcome::Ack]);
        let payouts = kafka
            .published::<Payout>("refund-payments.manual")
            .assert_called(3)
            .decoded();
        assert!(payouts.iter().all(|p| p.order == 4), "{payouts:?}");
        tb.shutdown().await?;
        Ok(())
    }
}
