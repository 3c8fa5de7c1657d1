//! The service of `examples/kafka_seek.rs` without macros: the start position is the
//! `.start_at(..)` step of the mount chain, the handlers are types implementing `Handle` (the
//! printer reads its partition and seek handle off `KafkaContext`), and `main` runs the command
//! line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_seek -- run
//! $ cargo test --example manual_kafka_seek
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::prelude::*;

/// Loads a price into the till.
struct LoadPrice;

impl Handle<Price> for LoadPrice {
    fn handle(
        &self,
        price: &Price,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(price.sku, price.cents, "price loaded");
        ready(Ok(()))
    }
}

/// Prints a queued job. A job may purge the queue up to an offset of its partition: the jobs
/// before it are skipped.
struct Print;

impl Handle<PrintJob, (), (), KafkaContext> for Print {
    async fn handle(
        &self,
        job: &PrintJob,
        _outs: &(),
        ctx: &mut Context<'_, KafkaContext>,
    ) -> Result<(), HandlerOutcome> {
        tracing::info!(job.document, "printed");
        let Some(through) = job.purge_through else {
            return Ok(());
        };
        let partition = ctx.context(Partition);
        ctx.context(SeekHandle)
            .seek(KafkaPosition::offset(partition, through))
            .await
            // Not purged: the job comes back and tries again.
            .map_err(|_| HandlerOutcome::retry())
    }
}

fn app() -> impl App<State = ()> {
    let prices = KafkaTopic::new("price-list.manual_kafka_seek").group("till.manual_kafka_seek");
    // A new printer group starts with the oldest job queued.
    let queue = KafkaTopic::new("print-queue.manual_kafka_seek")
        .group("printer.manual_kafka_seek")
        .commit(Commit::Tracked)
        .start(StartOffset::Earliest);
    RustStream::new(AppInfo::new("shop", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // The whole price list is loaded into the till on every start: the subscription
            // opens at the oldest record the topic retains.
            b.include(
                subscriber(prices, LoadPrice)
                    .start_at(KafkaPosition::earliest())
                    .build(),
            );
            b.include(subscriber(queue, Print).build());
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
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

    const PRICES: &str = "price-list.manual_kafka_seek";
    const QUEUE: &str = "print-queue.manual_kafka_seek";

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
