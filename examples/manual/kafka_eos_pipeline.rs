//! The bookkeeping service of `examples/kafka_eos_pipeline.rs` without macros: the handler is a
//! type implementing `Handle` over `KafkaContext`, reads the invoice's coordinates with
//! `ctx.context(Source)` and takes the pipeline from its `Out` entry.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_eos_pipeline -- run
//! $ cargo test --example manual_kafka_eos_pipeline
//! ```

use std::process::ExitCode;
use std::time::Duration;

use ruststream::runtime::cli::run_main;
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
use ruststream::OutgoingMessage;
use ruststream_kafka::EosPipeline;
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::prelude::*;

/// Where the postings go; the records are built by hand, so no type names the topic.
const POSTINGS: &str = "postings.manual_kafka_eos_pipeline";

/// Every posting of an invoice joins the window that commits the invoice's offset.
struct Post;

impl<Entry> Handle<Invoice, (), Outs<(Entry,)>, KafkaContext> for Post
where
    Entry: OutEntry<DefaultSlot, Wire = EosPipeline>,
{
    async fn handle(
        &self,
        invoice: &Invoice,
        outs: &Outs<(Entry,)>,
        ctx: &mut Context<'_, KafkaContext>,
    ) -> Result<(), HandlerOutcome> {
        let eos: &EosPipeline = outs.get(DefaultSlot);
        // The invoice's topic, partition and offset: the window commits the offset after it
        // together with the postings.
        let source = ctx.context(Source);
        for (line, &cents) in invoice.lines.iter().enumerate() {
            let posting = Posting {
                invoice: invoice.number,
                line,
                cents,
            };
            let bytes = serde_json::to_vec(&posting).map_err(|_| HandlerOutcome::drop())?;
            let record = OutgoingMessage::new(POSTINGS, &bytes[..]);
            // On failure the window aborts and hands the invoice back; nothing of it committed.
            eos.publish(&source, record, None)
                .await
                .map_err(|_| HandlerOutcome::retry())?;
        }
        Ok(())
    }
}

fn invoices() -> KafkaTopic {
    KafkaTopic::new("invoices.manual_kafka_eos_pipeline")
        .group("ledger.manual_kafka_eos_pipeline")
        .commit(Commit::Transactional(
            "ledger.manual_kafka_eos_pipeline".into(),
        ))
}

fn app() -> impl App<State = ()> {
    // One id names the pipeline, the subscription's commit mode and the transactional producer.
    let pipeline = EosPublish::new("ledger.manual_kafka_eos_pipeline")
        .commit_interval(Duration::from_millis(50));
    RustStream::new(AppInfo::new("ledger-keeper", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(invoices(), Post).build())
                .out(DefaultSlot, pipeline)
                .build();
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// An invoice and the amounts of its lines, in cents.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Invoice {
    number: u32,
    lines: Vec<i64>,
}

impl OutgoingDestination for Invoice {
    type Form = FixedName;
    const DESTINATION: &'static str = "invoices.manual_kafka_eos_pipeline";
}

impl MessageHeaders for Invoice {
    type Contract = NoHeaders;
}

/// One ledger entry per invoice line.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Posting {
    invoice: u32,
    line: usize,
    cents: i64,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Invoice, POSTINGS, Posting, app, live, readback};

    const INVOICES: &str = "invoices.manual_kafka_eos_pipeline";
    const GROUP: &str = "ledger.manual_kafka_eos_pipeline";

    /// In process: the postings are visible once the transaction that also holds the
    /// invoice's offset committed (what `published` reads is the cluster's committed log).
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_posting_commits_with_the_invoice_in_process() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let invoice = Invoice {
            number: 7,
            lines: vec![1250, 499, 80],
        };
        kafka.message(&invoice).publish().await?;
        kafka
            .subscriber(INVOICES)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let deadline = Instant::now() + Duration::from_secs(10);
        while kafka.published::<Posting>(POSTINGS).messages().len() < 3 && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let postings = kafka.published::<Posting>(POSTINGS).assert_called(3);
        let expected = [(0, 1250), (1, 499), (2, 80)].map(|(line, cents)| Posting {
            invoice: 7,
            line,
            cents,
        });
        assert_eq!(postings.decoded(), expected);
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_posting_commits_with_the_invoice_offset() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(INVOICES, 1).await?;
        live::ensure_topic(POSTINGS, 1).await?;
        let before = readback::log_ends(POSTINGS, 1).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let invoice = Invoice {
            number: 7,
            lines: vec![1250, 499, 80],
        };
        tb.broker::<KafkaBroker>()
            .message(&invoice)
            .publish()
            .await?;
        tb.broker::<KafkaBroker>()
            .subscriber(INVOICES)
            .assert_called_once()
            .settled(HandlerOutcome::ack());

        // The postings become visible to `read_committed` readers only when the window
        // commits, all three at once.
        let deadline = Instant::now() + Duration::from_secs(10);
        let landed = loop {
            let landed = readback::committed_values_since(POSTINGS, &before).await?;
            if landed[0].len() < 3 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            break landed;
        };
        tb.shutdown().await?;
        let expected = [(0, 1250), (1, 499), (2, 80)]
            .into_iter()
            .map(|(line, cents)| {
                serde_json::to_string(&Posting {
                    invoice: 7,
                    line,
                    cents,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        assert_eq!(landed, [expected]);
        let end = readback::log_ends(INVOICES, 1).await?;
        assert_eq!(
            readback::committed_offset(GROUP, INVOICES, 0).await?,
            end[0]
        );
        Ok(())
    }
}
