//! The warehouse of `examples/kafka_transactions.rs` without macros: the handler is a type
//! implementing `Handle` over its transactional `Out` entry, and the slot marker and
//! destinations are written by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_transactions -- run
//! $ cargo test --example manual_kafka_transactions
//! ```

use std::process::ExitCode;
use std::time::Duration;

use ruststream::runtime::cli::run_main;
use ruststream::runtime::{ListOffer, OutSlot, PublishedThrough};
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

/// The slot pick tasks leave through.
struct PickTasks;

impl OutSlot for PickTasks {
    const NAME: &'static str = "PickTasks";
    type Destination = <(PickTask, ()) as ListOffer>::Offer;
}

impl PublishedThrough<PickTasks> for PickTask {}

/// All pick tasks of a request, in one transaction.
struct Split;

impl<Entry> Handle<Restock, (), Outs<(Entry,)>> for Split
where
    Entry: OutEntry<PickTasks, Wire: TransactionalPublisher>,
{
    async fn handle(
        &self,
        restock: &Restock,
        outs: &Outs<(Entry,)>,
        _ctx: &mut Context<'_>,
    ) -> Result<(), HandlerOutcome> {
        let tasks = outs.get(PickTasks);
        tasks
            .begin_transaction()
            .await
            .map_err(|_| HandlerOutcome::retry())?;
        for shelf in &restock.shelves {
            if shelf.is_empty() {
                // The tasks already sent belong to the open transaction: the abort discards them.
                tracing::warn!(restock.id, "a shelf has no label; nothing is picked");
                tasks.abort().await.map_err(|_| HandlerOutcome::retry())?;
                return Err(HandlerOutcome::drop());
            }
            let task = PickTask {
                restock: restock.id,
                shelf: shelf.clone(),
            };
            if tasks.message(&task).publish().await.is_err() {
                tasks.abort().await.ok();
                return Err(HandlerOutcome::retry());
            }
        }
        tasks.commit().await.map_err(|_| HandlerOutcome::retry())
    }
}

fn restocks() -> KafkaTopic {
    KafkaTopic::new("restocks.transactions").group("warehouse.transactions")
}

fn app() -> impl App<State = ()> {
    let tasks = Publish::default()
        .transactional_id("warehouse.transactions")
        .transaction_timeout(Duration::from_secs(10));
    RustStream::new(AppInfo::new("warehouse", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(restocks(), Split).build())
                .out(PickTasks, tasks)
                .build();
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// Shelves to refill for one request.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Restock {
    id: u64,
    shelves: Vec<String>,
}

impl OutgoingDestination for Restock {
    type Form = FixedName;
    const DESTINATION: &'static str = "restocks.transactions";
}

impl MessageHeaders for Restock {
    type Contract = NoHeaders;
}

/// One shelf for one picker.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct PickTask {
    restock: u64,
    shelf: String,
}

impl OutgoingDestination for PickTask {
    type Form = FixedName;
    const DESTINATION: &'static str = "pick-tasks.transactions";
}

impl MessageHeaders for PickTask {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::client::IsolationLevel;
    use ruststream_kafka::prelude::*;

    use super::{PickTask, PickTasks, Restock, app, live, readback};

    const RESTOCKS: &str = "restocks.transactions";
    const TASKS: &str = "pick-tasks.transactions";

    fn task(restock: u64, shelf: &str) -> Result<String, serde_json::Error> {
        serde_json::to_string(&PickTask {
            restock,
            shelf: shelf.to_owned(),
        })
    }

    /// In process: what `published` reads is the cluster's committed log, so a committed
    /// request's tasks are there together and an aborted one's task never is.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_appear_together_at_commit_and_never_after_abort_in_process()
    -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let good = Restock {
            id: 1,
            shelves: vec!["A1".to_owned(), "B4".to_owned()],
        };
        kafka.message(&good).publish().await?;
        kafka
            .subscriber(RESTOCKS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let picked = kafka.published::<PickTask>(TASKS).assert_called(2);
        let shelves: Vec<String> = picked.decoded().into_iter().map(|t| t.shelf).collect();
        assert_eq!(shelves, ["A1", "B4"]);

        let bad = Restock {
            id: 2,
            shelves: vec!["C2".to_owned(), String::new()],
        };
        kafka.message(&bad).publish().await?;
        kafka
            .subscriber(RESTOCKS)
            .assert_called(2)
            .settled(HandlerOutcome::drop());
        // The service sent C2's task inside the transaction; the abort kept it from readers.
        tb.out::<PickTasks>().assert_called(3);
        kafka.published::<PickTask>(TASKS).assert_called(2);
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_appear_together_at_commit_and_never_after_abort() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(RESTOCKS, 1).await?;
        live::ensure_topic(TASKS, 1).await?;
        let before = readback::log_ends(TASKS, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;

        // A good request: both tasks commit together.
        let good = Restock {
            id: 1,
            shelves: vec!["A1".to_owned(), "B4".to_owned()],
        };
        tb.broker::<KafkaBroker>().message(&good).publish().await?;
        tb.broker::<KafkaBroker>()
            .subscriber(RESTOCKS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let committed = readback::committed_values_since(TASKS, &before).await?;
        assert_eq!(committed, [vec![task(1, "A1")?, task(1, "B4")?]]);

        // A bad request: its first task was written, then the transaction aborted.
        let middle = readback::log_ends(TASKS, 1).await?;
        let bad = Restock {
            id: 2,
            shelves: vec!["C2".to_owned(), String::new()],
        };
        tb.broker::<KafkaBroker>().message(&bad).publish().await?;
        tb.broker::<KafkaBroker>()
            .subscriber(RESTOCKS)
            .assert_called(2)
            .settled(HandlerOutcome::drop());
        tb.out::<PickTasks>().assert_called(3);
        tb.shutdown().await?;

        let seen_committed = readback::committed_values_since(TASKS, &middle).await?;
        assert_eq!(seen_committed, [Vec::<String>::new()]);
        let written =
            readback::records_since(TASKS, 0, middle[0], IsolationLevel::ReadUncommitted).await?;
        assert_eq!(
            written.iter().map(readback::text).collect::<Vec<_>>(),
            [task(2, "C2")?]
        );
        Ok(())
    }
}
