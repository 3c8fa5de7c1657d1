//! Transactions per source partition: a fare service prices each trip into fare lines, and the
//! lines of a trip commit in the transaction of the partition the trip was read from. With
//! `workers(2, by_key)` the two partitions are handled side by side, each lane running its own
//! transactions on its own transactional publisher (`per_partition`).
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_transactions_partitions -- run
//! $ cargo test --example kafka_transactions_partitions
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

/// A finished trip and what it is charged for.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "trips.transactions-partitions")]
struct Trip {
    id: u64,
    charges: Vec<u32>,
}

/// One charge of a trip.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "fare-lines.transactions-partitions")]
struct FareLine {
    trip: u64,
    cents: u32,
}

/// Writes a trip's lines in the transaction of the trip's own partition.
#[subscriber(
    KafkaTopic::new("trips.transactions-partitions")
        .group("fares.transactions-partitions")
        .commit(Commit::Tracked),
    workers(2, by_key)
)]
async fn price(
    trip: &Trip,
    Ctx(partition): Ctx<Partition>,
    Out(lanes): Out<impl PartitionLanes>,
) -> HandlerOutcome {
    // A lane that cannot open its producer hands the trip back for another try.
    let Ok(lane) = lanes.for_partition(partition).await else {
        return HandlerOutcome::retry();
    };
    if lane.begin_transaction().await.is_err() {
        return HandlerOutcome::retry();
    }
    for &cents in &trip.charges {
        let fare = FareLine {
            trip: trip.id,
            cents,
        };
        if lane.message(&fare).publish().await.is_err() {
            lane.abort().await.ok();
            return HandlerOutcome::retry();
        }
    }
    match lane.commit().await {
        Ok(()) => HandlerOutcome::ack(),
        Err(_) => HandlerOutcome::retry(),
    }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("fares", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // Transactional ids "fares.transactions-partitions-p0", "...-p1", one per partition.
            let lanes = Publish::default()
                .transactional_id("fares.transactions-partitions")
                .per_partition();
            b.include(price).out(DefaultSlot, lanes).build();
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::PARTITION_KEY_HEADER;
    use ruststream_kafka::prelude::*;

    use super::{FareLine, Trip, app, live, readback};

    const TRIPS: &str = "trips.transactions-partitions";
    const LINES: &str = "fare-lines.transactions-partitions";
    const GROUP: &str = "fares.transactions-partitions";

    fn line(trip: u64, cents: u32) -> Result<String, serde_json::Error> {
        serde_json::to_string(&FareLine { trip, cents })
    }

    /// In process: the trips topic has its two partitions before the service starts; each
    /// cab's trip lands on one of them, and each partition's transaction commits its lines.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_partition_commits_its_own_trips_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(app(), (), &[(TRIPS, 2), (LINES, 1)]).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let trips = [
            (
                "cab-4",
                Trip {
                    id: 10,
                    charges: vec![250, 40],
                },
            ),
            (
                "cab-1",
                Trip {
                    id: 11,
                    charges: vec![900],
                },
            ),
        ];
        for (cab, trip) in &trips {
            let key = BTreeMap::from([(PARTITION_KEY_HEADER, *cab)]);
            kafka.publish_with_headers(TRIPS, trip, &key).await?;
        }
        kafka
            .subscriber(TRIPS)
            .assert_called(2)
            .settled(HandlerOutcome::ack());
        let mut lines: Vec<(u64, u32)> = kafka
            .published::<FareLine>(LINES)
            .assert_called(3)
            .decoded()
            .into_iter()
            .map(|line| (line.trip, line.cents))
            .collect();
        lines.sort_unstable();
        assert_eq!(lines, [(10, 40), (10, 250), (11, 900)]);
        // One trip on each partition.
        let mut partitions: Vec<i32> = cluster.records(TRIPS).iter().map(|(p, _)| *p).collect();
        partitions.sort_unstable();
        assert_eq!(partitions, [0, 1]);
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_partition_commits_its_own_trips() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(TRIPS, 2).await?;
        live::ensure_topic(LINES, 1).await?;
        let before = readback::log_ends(LINES, 1).await?;
        let trips_before = readback::log_ends(TRIPS, 2).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        // Keyed by cab: "cab-4" hashes to partition 0 of two, "cab-1" to partition 1.
        for (cab, trip) in [
            (
                "cab-4",
                Trip {
                    id: 10,
                    charges: vec![250, 40],
                },
            ),
            (
                "cab-1",
                Trip {
                    id: 11,
                    charges: vec![900],
                },
            ),
        ] {
            let key = BTreeMap::from([(PARTITION_KEY_HEADER, cab)]);
            tb.broker::<KafkaBroker>()
                .publish_with_headers(TRIPS, &trip, &key)
                .await?;
        }
        let trips_end = readback::log_ends(TRIPS, 2).await?;
        tb.broker::<KafkaBroker>()
            .subscriber(TRIPS)
            .assert_called(2)
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;

        // Every line of both trips committed.
        let mut committed = readback::committed_values_since(LINES, &before)
            .await?
            .remove(0);
        committed.sort();
        let mut expected = vec![line(10, 250)?, line(10, 40)?, line(11, 900)?];
        expected.sort();
        assert_eq!(committed, expected);
        // One trip went to each partition, and each partition's offset was committed past it.
        for (partition, (end, start)) in (0..).zip(trips_end.into_iter().zip(trips_before)) {
            assert_eq!(end, start + 1);
            assert_eq!(
                readback::committed_offset(GROUP, TRIPS, partition).await?,
                end
            );
        }
        Ok(())
    }
}
