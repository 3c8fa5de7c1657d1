//! Where a group starts: `StartOffset` decides only for a partition the group has committed
//! nothing on. A new group with `Earliest` reads what the topic held before it existed; one with
//! `Latest` reads from the end. Once a group has committed, it resumes there either way.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_subscriptions_start_offset -- run
//! $ cargo test --example kafka_subscriptions_start_offset
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

/// Indexes every listing the topic retains: a new index group starts at the oldest record.
#[subscriber(
    KafkaTopic::new("listings.kafka_subscriptions_start_offset")
        .group("index.kafka_subscriptions_start_offset")
        .start(StartOffset::Earliest),
    reply
)]
async fn index(listing: &Listing) -> Indexed {
    Indexed { flat: listing.flat }
}

/// Tells subscribers about listings that appear from now on: a new alert group starts at the
/// end of the log.
#[subscriber(
    KafkaTopic::new("listings.kafka_subscriptions_start_offset")
        .group("alerts.kafka_subscriptions_start_offset")
        .start(StartOffset::Latest),
    reply
)]
async fn alert(listing: &Listing) -> Alerted {
    Alerted { flat: listing.flat }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("listings", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(index);
            b.include(alert);
        },
    )
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "listings.kafka_subscriptions_start_offset")]
struct Listing {
    flat: u32,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "indexed.kafka_subscriptions_start_offset")]
struct Indexed {
    flat: u32,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "alerted.kafka_subscriptions_start_offset")]
struct Alerted {
    flat: u32,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, recreate_topic, seed};
    use super::{Alerted, Indexed, Listing, app};

    const LISTINGS: &str = "listings.kafka_subscriptions_start_offset";

    /// In process: the first listing is on the cluster before the service starts, the second
    /// comes after; the index reads both, the alerts only the second.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn earliest_reads_the_past_and_latest_only_what_follows_in_process()
    -> Result<(), Box<dyn Error>> {
        let (tb, _cluster) = super::in_process::start_prepared(app(), (), |cluster| {
            super::in_process::place(cluster, LISTINGS, 0, &[Listing { flat: 101 }])
        })
        .await?;
        let kafka = tb.broker::<KafkaBroker>();
        kafka.message(&Listing { flat: 202 }).publish().await?;

        let indexed = || kafka.published::<Indexed>("indexed.kafka_subscriptions_start_offset");
        eventually("both listings indexed", || indexed().messages().len() >= 2).await?;
        assert_eq!(
            indexed().decoded(),
            [Indexed { flat: 101 }, Indexed { flat: 202 }]
        );
        kafka
            .published::<Alerted>("alerted.kafka_subscriptions_start_offset")
            .assert_called_once()
            .with(&Alerted { flat: 202 });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn earliest_reads_the_past_and_latest_only_what_follows() -> Result<(), Box<dyn Error>> {
        // A topic of this run's own: deleting it also drops what the groups committed on it.
        recreate_topic(LISTINGS, 1).await?;
        seed(LISTINGS, None, &[Listing { flat: 101 }]).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        tb.broker::<KafkaBroker>()
            .message(&Listing { flat: 202 })
            .publish()
            .await?;

        let kafka = tb.broker::<KafkaBroker>();
        let indexed = || kafka.published::<Indexed>("indexed.kafka_subscriptions_start_offset");
        eventually("both listings indexed", || indexed().messages().len() >= 2).await?;
        assert_eq!(
            indexed().decoded(),
            [Indexed { flat: 101 }, Indexed { flat: 202 }]
        );
        kafka
            .published::<Alerted>("alerted.kafka_subscriptions_start_offset")
            .assert_called_once()
            .with(&Alerted { flat: 202 });
        tb.shutdown().await?;
        Ok(())
    }
}
