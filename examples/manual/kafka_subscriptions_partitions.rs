//! The service of `examples/kafka_subscriptions_partitions.rs` without macros: the handler is a
//! type implementing `Handle` that reads the offset off its context, and `main` runs the command
//! line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_subscriptions_partitions -- run
//! $ cargo test --example manual_kafka_subscriptions_partitions
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
use ruststream_kafka::context::keys::Offset;
use ruststream_kafka::prelude::*;

/// Watches the lifts of bank A, whose events land on partition 0.
struct WatchBankA;

impl Handle<LiftEvent, (), (), KafkaContext> for WatchBankA {
    fn handle(
        &self,
        event: &LiftEvent,
        _outs: &(),
        ctx: &mut Context<'_, KafkaContext>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        let offset = ctx.context(Offset);
        tracing::info!(event.lift, event.floor, offset, "bank A");
        ready(Ok(()))
    }
}

fn app() -> impl App<State = ()> {
    // No group: the reader needs none. It starts at the end of partition 0.
    let bank_a = KafkaPartitions::new("lift-events.manual_kafka_subscriptions_partitions", [0])
        .start(StartOffset::Latest);
    let broker = KafkaBroker::new([live::bootstrap()]);
    RustStream::new(AppInfo::new("lift-monitor", "0.1.0")).with_broker(broker, |b| {
        // Nothing published reaches exactly these partitions again, so a retried event is
        // copied to a topic of its own.
        b.include(subscriber(bank_a, WatchBankA).build())
            .out_retry(Publish::default())
            .to("lift-events-retry.manual_kafka_subscriptions_partitions");
    })
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
struct LiftEvent {
    lift: u8,
    floor: i8,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, recreate_topic, seed};
    use super::{LiftEvent, app};

    const TOPIC: &str = "lift-events.manual_kafka_subscriptions_partitions";

    /// In process: the topic is created with its two partitions before the reader opens, and
    /// the events are placed on them directly.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reader_sees_its_partition_only_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) = super::in_process::start_with_topics(app(), (), &[(TOPIC, 2)]).await?;
        let place = super::in_process::place;
        place(&cluster, TOPIC, 1, &[LiftEvent { lift: 7, floor: 3 }])?;
        let bank_a = [
            LiftEvent { lift: 1, floor: 12 },
            LiftEvent { lift: 2, floor: -1 },
        ];
        place(&cluster, TOPIC, 0, &bank_a)?;

        let kafka = tb.broker::<KafkaBroker>();
        let watched = kafka.subscriber(TOPIC);
        eventually("bank A's two events", || {
            watched.received::<LiftEvent>().len() >= 2
        })
        .await?;
        tb.settle().await?;
        assert_eq!(watched.received::<LiftEvent>(), bank_a);
        assert_eq!(watched.outcomes().len(), 2);
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reader_sees_its_partition_only() -> Result<(), Box<dyn Error>> {
        recreate_topic(TOPIC, 2).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;

        // Bank B's event goes first, onto the partition the reader does not hold.
        seed(TOPIC, Some(1), &[LiftEvent { lift: 7, floor: 3 }]).await?;
        seed(
            TOPIC,
            Some(0),
            &[
                LiftEvent { lift: 1, floor: 12 },
                LiftEvent { lift: 2, floor: -1 },
            ],
        )
        .await?;

        let kafka = tb.broker::<KafkaBroker>();
        let watched = kafka.subscriber(TOPIC);
        eventually("bank A's two events", || {
            watched.received::<LiftEvent>().len() >= 2
        })
        .await?;
        assert_eq!(
            watched.received::<LiftEvent>(),
            [
                LiftEvent { lift: 1, floor: 12 },
                LiftEvent { lift: 2, floor: -1 }
            ]
        );
        tb.shutdown().await?;
        Ok(())
    }
}
