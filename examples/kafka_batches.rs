//! Batches: a handler that takes `&[T]` gets what the consumer has already fetched, up to the
//! size the mount site names, in partition order. It settles the batch with one outcome, or each
//! element with its own.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_batches -- run
//! $ cargo test --example kafka_batches
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

/// Books the canteen's meal tickets in bulk: a ticket without an amount is set aside, every
/// other one is booked.
#[subscriber(
    KafkaTopic::new("meal-tickets.kafka_batches")
        .group("canteen.kafka_batches")
        .commit(Commit::Tracked)
        .start(StartOffset::Earliest)
)]
async fn book(tickets: &[MealTicket]) -> Vec<HandlerOutcome> {
    tracing::info!(count = tickets.len(), "booking meal tickets");
    tickets
        .iter()
        .map(|ticket| {
            if ticket.cents == 0 {
                HandlerOutcome::drop()
            } else {
                HandlerOutcome::ack()
            }
        })
        .collect()
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("canteen", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // At most 50 tickets per call.
            b.include(book.batch(nonzero!(50)));
        },
    )
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct MealTicket {
    employee: u32,
    cents: u32,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, recreate_topic, seed};
    use super::{MealTicket, app};

    const TICKETS: &str = "meal-tickets.kafka_batches";

    /// The same on the embedded cluster in this process.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_tickets_arrive_in_one_call_and_settle_one_by_one_in_process()
    -> Result<(), Box<dyn Error>> {
        let tickets = [
            MealTicket {
                employee: 4,
                cents: 650,
            },
            MealTicket {
                employee: 5,
                cents: 0,
            },
            MealTicket {
                employee: 6,
                cents: 720,
            },
        ];
        let (tb, cluster) = super::in_process::start_prepared(app(), (), |cluster| {
            let _ = cluster.create_topic(TICKETS, 1);
            super::in_process::seed(cluster, TICKETS, None, &tickets)?;
            Ok(())
        })
        .await?;
        drop(cluster);

        let kafka = tb.broker::<KafkaBroker>();
        let booked = kafka.subscriber(TICKETS);
        eventually("the three tickets", || {
            booked.received::<MealTicket>().len() >= 3
        })
        .await?;
        assert_eq!(booked.batches::<MealTicket>(), [tickets]);
        // The restart in the same group (the live test's second half) has no in-process
        // counterpart: every `TestApp::start` brings a fresh cluster, with no group offsets.
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_tickets_arrive_in_one_call_and_settle_one_by_one() -> Result<(), Box<dyn Error>>
    {
        recreate_topic(TICKETS, 1).await?;
        let tickets = [
            MealTicket {
                employee: 4,
                cents: 650,
            },
            MealTicket {
                employee: 5,
                cents: 0,
            },
            MealTicket {
                employee: 6,
                cents: 720,
            },
        ];
        // The three tickets wait in the log before the canteen starts.
        seed(TICKETS, None, &tickets).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;

        let kafka = tb.broker::<KafkaBroker>();
        let booked = kafka.subscriber(TICKETS);
        eventually("the three tickets", || {
            booked.received::<MealTicket>().len() >= 3
        })
        .await?;
        assert_eq!(booked.batches::<MealTicket>(), [tickets]);
        tb.shutdown().await?;

        // Every ticket of the batch was settled, the one set aside too: the canteen restarted in
        // its group reads only what follows.
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let late = MealTicket {
            employee: 7,
            cents: 590,
        };
        seed(TICKETS, None, &[&late]).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let booked = kafka.subscriber(TICKETS);
        eventually("the late ticket", || {
            !booked.received::<MealTicket>().is_empty()
        })
        .await?;
        assert_eq!(booked.batches::<MealTicket>(), [[late]]);
        assert_eq!(booked.outcomes(), [Outcome::Ack]);
        tb.shutdown().await?;
        Ok(())
    }
}
