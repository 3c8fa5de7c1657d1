//! Repositioning: `start_at(position)` opens a subscription at a position on every start,
//! whatever its group committed, and a handler moves its own subscription with the seek handle
//! from `Ctx<SeekHandle>`.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_seek -- run
//! $ cargo test --example kafka_seek
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

/// Loads the whole price list into the till on every start: the subscription opens at the
/// oldest record the topic retains.
#[subscriber(
    KafkaTopic::new("price-list.kafka_seek").group("till.kafka_seek"),
    start_at(KafkaPosition::earliest())
)]
async fn load_price(price: &Price) -> HandlerOutcome {
    tracing::info!(price.sku, price.cents, "price loaded");
    HandlerOutcome::ack()
}

/// Prints a queued job; a new printer group starts with the oldest job queued. A job may purge
/// the queue up to an offset of its partition: the jobs before it are skipped.
#[subscriber(
    KafkaTopic::new("print-queue.kafka_seek")
        .group("printer.kafka_seek")
        .commit(Commit::Tracked)
        .start(StartOffset::Earliest)
)]
async fn print(
    job: &PrintJob,
    Ctx(partition): Ctx<Partition>,
    Ctx(seeker): Ctx<SeekHandle>,
) -> HandlerOutcome {
    tracing::info!(job.document, "printed");
    let Some(through) = job.purge_through else {
        return HandlerOutcome::ack();
    };
    match seeker.seek(KafkaPosition::offset(partition, through)).await {
        Ok(()) => HandlerOutcome::ack(),
        // Not purged: the job comes back and tries again.
        Err(_) => HandlerOutcome::retry(),
    }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("shop", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(load_price);
            b.include(print);
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
struct Price {
    sku: String,
    cents: u32,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct PrintJob {
    document: String,
    purge_through: Option<i64>,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, recreate_topic, seed};
    use super::{Price, PrintJob, app};

    const PRICES: &str = "price-list.kafka_seek";
    const QUEUE: &str = "print-queue.kafka_seek";

    /// The same on the embedded cluster in this process.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_start_replays_prices_and_a_purge_skips_jobs_in_process()
    -> Result<(), Box<dyn Error>> {
        let price = |sku: &str, cents| Price {
            sku: sku.to_owned(),
            cents,
        };
        let prices = [price("tea", 240), price("scone", 310)];
        let job = |document: &str, purge_through| PrintJob {
            document: document.to_owned(),
            purge_through,
        };
        let (tb, cluster) = super::in_process::start_prepared(app(), (), |cluster| {
            let _ = cluster.create_topic(PRICES, 1);
            let _ = cluster.create_topic(QUEUE, 1);
            super::in_process::seed(cluster, PRICES, None, &prices)?;
            super::in_process::seed(
                cluster,
                QUEUE,
                None,
                &[
                    job("menu", Some(3)),
                    job("stale-1", None),
                    job("stale-2", None),
                    job("receipt", None),
                ],
            )?;
            Ok(())
        })
        .await?;
        drop(cluster);
        let kafka = tb.broker::<KafkaBroker>();
        let loaded = kafka.subscriber(PRICES);
        eventually("the price list", || loaded.received::<Price>().len() >= 2).await?;
        assert_eq!(loaded.received::<Price>(), prices);

        let printed = kafka.subscriber(QUEUE);
        eventually("the receipt", || {
            printed
                .received::<PrintJob>()
                .iter()
                .any(|job| job.document == "receipt")
        })
        .await?;
        assert_eq!(
            printed.received::<PrintJob>(),
            [job("menu", Some(3)), job("receipt", None)]
        );
        // The second start of the live test has no in-process counterpart: every
        // `TestApp::start` brings a fresh cluster, with no group offsets to start past.
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_start_replays_prices_and_a_purge_skips_jobs() -> Result<(), Box<dyn Error>> {
        recreate_topic(PRICES, 1).await?;
        recreate_topic(QUEUE, 1).await?;
        let price = |sku: &str, cents| Price {
            sku: sku.to_owned(),
            cents,
        };
        let prices = [price("tea", 240), price("scone", 310)];
        seed(PRICES, None, &prices).await?;

        // The first job purges the queue through offset 3: jobs 1 and 2 are never printed.
        let job = |document: &str, purge_through| PrintJob {
            document: document.to_owned(),
            purge_through,
        };
        seed(
            QUEUE,
            None,
            &[
                job("menu", Some(3)),
                job("stale-1", None),
                job("stale-2", None),
                job("receipt", None),
            ],
        )
        .await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let loaded = kafka.subscriber(PRICES);
        eventually("the price list", || loaded.received::<Price>().len() >= 2).await?;
        assert_eq!(loaded.received::<Price>(), prices);

        let printed = kafka.subscriber(QUEUE);
        eventually("the receipt", || {
            printed
                .received::<PrintJob>()
                .iter()
                .any(|job| job.document == "receipt")
        })
        .await?;
        assert_eq!(
            printed.received::<PrintJob>(),
            [job("menu", Some(3)), job("receipt", None)]
        );
        tb.shutdown().await?;

        // The group committed past the prices, and the next start loads them again anyway.
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let loaded = kafka.subscriber(PRICES);
        eventually("the price list again", || {
            loaded.received::<Price>().len() >= 2
        })
        .await?;
        assert_eq!(loaded.received::<Price>(), prices);
        tb.shutdown().await?;
        Ok(())
    }
}
