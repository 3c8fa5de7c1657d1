//! Spreading replies evenly: a lab intake turns each sample into an assay for one of six
//! analysers, each reading one partition of the assay topic. An assay carries no key, and a
//! keyless record may stick to one partition for a whole batch, leaving five analysers idle;
//! `RoundRobin` pins every reply to the next partition of the cycle instead.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_distribution -- run
//! $ cargo test --example kafka_distribution
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

/// A sample that reached the lab.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "samples.distribution")]
struct Sample {
    id: u64,
}

/// Work for whichever analyser reads the partition it lands on.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "assays.distribution")]
struct Assay {
    sample: u64,
}

#[subscriber(KafkaTopic::new("samples.distribution").group("lab-intake.distribution"), reply)]
async fn intake(sample: &Sample) -> Assay {
    Assay { sample: sample.id }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("lab-intake", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // Partitions 0, 1, ..., 5, then 0 again: the count is that of `assays.distribution`.
            // A reply that already names a partition or carries a key keeps its placement.
            b.include(intake)
                .out_reply(Publish::default())
                .transform(RoundRobin::partitions(6));
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

    use super::{Assay, Sample, app, live, readback};

    const SAMPLES: &str = "samples.distribution";
    const ASSAYS: &str = "assays.distribution";

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn six_assays_land_one_on_each_partition_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(app(), (), &[(SAMPLES, 1), (ASSAYS, 6)]).await?;
        six_assays_land_one_on_each_partition_body(tb).await?;
        // On the cluster: the n-th sample's assay on partition n - 1.
        let placed: Vec<(i32, Assay)> = cluster
            .records(ASSAYS)
            .iter()
            .map(|(partition, record)| {
                serde_json::from_slice(record.value.as_deref().unwrap_or_default())
                    .map(|assay| (*partition, assay))
            })
            .collect::<Result<_, _>>()?;
        let expected: Vec<(i32, Assay)> = (0..6)
            .zip(1..=6)
            .map(|(partition, sample)| (partition, Assay { sample }))
            .collect();
        assert_eq!(placed, expected);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn six_assays_land_one_on_each_partition() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(SAMPLES, 1).await?;
        live::ensure_topic(ASSAYS, 6).await?;
        let before = readback::log_ends(ASSAYS, 6).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        six_assays_land_one_on_each_partition_body(tb).await?;

        // The cycle in order: the n-th sample's assay on partition n - 1.
        let landed = readback::committed_values_since(ASSAYS, &before).await?;
        let expected: Vec<Vec<String>> = (1..=6)
            .map(|sample| serde_json::to_string(&Assay { sample }).map(|a| vec![a]))
            .collect::<Result<_, _>>()?;
        assert_eq!(landed, expected);
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn six_assays_land_one_on_each_partition_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        for id in 1..=6 {
            tb.broker::<KafkaBroker>()
                .message(&Sample { id })
                .publish()
                .await?;
        }
        tb.broker::<KafkaBroker>()
            .published::<Assay>(ASSAYS)
            .assert_called(6)
            .with(&Assay { sample: 6 })
            .with_options(&KafkaOptions::default().partition(5));
        tb.shutdown().await?;
        Ok(())
    }
}
