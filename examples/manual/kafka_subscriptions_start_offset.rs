//! The service of `examples/kafka_subscriptions_start_offset.rs` without macros: the two
//! descriptors are built in `app`, the handlers are types implementing `Handle`, and `main` runs
//! the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_subscriptions_start_offset -- run
//! $ cargo test --example manual_kafka_subscriptions_start_offset
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
use ruststream_kafka::prelude::*;

/// Indexes a listing.
struct Index;

impl Handle<Listing, Indexed> for Index {
    fn handle(
        &self,
        listing: &Listing,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Indexed, HandlerOutcome>> {
        ready(Ok(Indexed { flat: listing.flat }))
    }
}

/// Tells subscribers about a listing.
struct Alert;

impl Handle<Listing, Alerted> for Alert {
    fn handle(
        &self,
        listing: &Listing,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Alerted, HandlerOutcome>> {
        ready(Ok(Alerted { flat: listing.flat }))
    }
}

fn app() -> impl App<State = ()> {
    // A new index group starts at the oldest record the topic retains ...
    let everything = KafkaTopic::new("listings.manual_kafka_subscriptions_start_offset")
        .group("index.manual_kafka_subscriptions_start_offset")
        .start(StartOffset::Earliest);
    // ... and a new alert group at the end of the log.
    let from_now_on = KafkaTopic::new("listings.manual_kafka_subscriptions_start_offset")
        .group("alerts.manual_kafka_subscriptions_start_offset")
        .start(StartOffset::Latest);
    RustStream::new(AppInfo::new("listings", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(everything, Index).reply().build());
            b.include(subscriber(from_now_on, Alert).reply().build());
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
struct Listing {
    flat: u32,
}

impl OutgoingDestination for Listing {
    type Form = FixedName;
    const DESTINATION: &'static str = "listings.manual_kafka_subscriptions_start_offset";
}

impl MessageHeaders for Listing {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Indexed {
    flat: u32,
}

impl OutgoingDestination for Indexed {
    type Form = FixedName;
    const DESTINATION: &'static str = "indexed.manual_kafka_subscriptions_start_offset";
}

impl MessageHeaders for Indexed {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Alerted {
    flat: u32,
}

impl OutgoingDestination for Alerted {
    type Form = FixedName;
    const DESTINATION: &'static str = "alerted.manual_kafka_subscriptions_start_offset";
}

impl MessageHeaders for Alerted {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, recreate_topic, seed};
    use super::{Alerted, Indexed, Listing, app};

    const LISTINGS: &str = "listings.manual_kafka_subscriptions_start_offset";

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

        let indexed =
            || kafka.published::<Indexed>("indexed.manual_kafka_subscriptions_start_offset");
        eventually("both listings indexed", || indexed().messages().len() >= 2).await?;
        assert_eq!(
            indexed().decoded(),
            [Indexed { flat: 101 }, Indexed { flat: 202 }]
        );
        kafka
            .published::<Alerted>("alerted.manual_kafka_subscriptions_start_offset")
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
        let indexed =
            || kafka.published::<Indexed>("indexed.manual_kafka_subscriptions_start_offset");
        eventually("both listings indexed", || indexed().messages().len() >= 2).await?;
        assert_eq!(
            indexed().decoded(),
            [Indexed { flat: 101 }, Indexed { flat: 202 }]
        );
        kafka
            .published::<Alerted>("alerted.manual_kafka_subscriptions_start_offset")
            .assert_called_once()
            .with(&Alerted { flat: 202 });
        tb.shutdown().await?;
        Ok(())
    }
}
