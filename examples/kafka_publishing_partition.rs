//! Pinning a record to a partition: a print service spools each job onto the partition of the
//! printer it names, because every printer reads only its own partition. The `partition` step
//! of a publish wins over the record key and the partitioner; a partition the topic does not
//! have is refused by the cluster.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_publishing_partition -- run
//! $ cargo test --example kafka_publishing_partition
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(all(test, feature = "testing"))]
#[path = "support/in_process.rs"]
mod in_process;

#[cfg(test)]
#[path = "support/readback.rs"]
mod readback;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// A document to print on one printer.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "print-jobs.publishing-partition")]
struct PrintJob {
    id: u64,
    printer: i32,
}

/// A job waiting in a printer's spool: partition n of the topic is printer n.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "spools.publishing-partition")]
struct Spooled {
    job: u64,
}

#[derive(OutSlot)]
#[publishes(Spooled)]
struct Spools;

#[subscriber(KafkaTopic::new("print-jobs.publishing-partition").group("print-service.publishing-partition"))]
async fn spool(
    job: &PrintJob,
    Out(spools): Out<impl Publisher<Options = KafkaOptions>, Spools>,
) -> HandlerOutcome {
    let spooled = Spooled { job: job.id };
    match spools
        .message(&spooled)
        .partition(job.printer)
        .publish()
        .await
    {
        Ok(()) => HandlerOutcome::ack(),
        Err(err) => {
            // No such printer: retrying cannot help, so the job is turned away.
            tracing::warn!(job.id, job.printer, %err, "job not spooled");
            HandlerOutcome::drop()
        }
    }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("print-service", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(spool).out(Spools, Publish::default()).build();
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{PrintJob, Spooled, Spools, app, live, readback};

    const JOBS: &str = "print-jobs.publishing-partition";
    const SPOOLS: &str = "spools.publishing-partition";

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_lands_on_its_printers_partition_and_no_other_in_process()
    -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(app(), (), &[(JOBS, 1), (SPOOLS, 3)]).await?;
        a_job_lands_on_its_printers_partition_and_no_other_body(tb).await?;
        // On the cluster: the one spooled job sits on partition 2.
        let spooled: Vec<(i32, Spooled)> = cluster
            .records(SPOOLS)
            .iter()
            .map(|(partition, record)| {
                serde_json::from_slice(record.value.as_deref().unwrap_or_default())
                    .map(|spooled| (*partition, spooled))
            })
            .collect::<Result<_, _>>()?;
        assert_eq!(spooled, [(2, Spooled { job: 4 })]);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_lands_on_its_printers_partition_and_no_other() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(JOBS, 1).await?;
        live::ensure_topic(SPOOLS, 3).await?;
        let before = readback::log_ends(SPOOLS, 3).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_job_lands_on_its_printers_partition_and_no_other_body(tb).await?;

        let spooled = serde_json::to_string(&Spooled { job: 4 })?;
        let landed = readback::committed_values_since(SPOOLS, &before).await?;
        assert_eq!(landed, [vec![], vec![], vec![spooled]]);
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn a_job_lands_on_its_printers_partition_and_no_other_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        tb.broker::<KafkaBroker>()
            .message(&PrintJob { id: 4, printer: 2 })
            .publish()
            .await?;
        tb.out::<Spools>()
            .assert_called_once()
            .with_options(&KafkaOptions::default().partition(2));
        tb.broker::<KafkaBroker>()
            .subscriber(JOBS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());

        // The topic has three partitions, so printer 7 does not exist and the cluster refuses.
        tb.broker::<KafkaBroker>()
            .message(&PrintJob { id: 5, printer: 7 })
            .publish()
            .await?;
        tb.broker::<KafkaBroker>()
            .subscriber(JOBS)
            .assert_called(2)
            .settled(HandlerOutcome::drop());
        tb.shutdown().await?;
        Ok(())
    }
}
