//! The service of the Retries and dead letters guide: a courier desk. Parcels from two regional
//! topics go back to their own region's topic when no courier is free, and a parcel the
//! recipient declined is dropped at once. Express parcels are tried again after a pause, three
//! deliveries at most, and one with no route then lands on the dead-letter topic.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example guide_retries -- run
//! $ cargo test --example guide_retries
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// How long a parcel waits for a free courier before it is tried again.
const COURIER_BACKOFF: Duration = Duration::from_millis(100);

/// A parcel to hand to a courier.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
struct Parcel {
    tracking: String,
    to: String,
    declined: bool,
}

// --8<-- [start:handler]
#[subscriber(
    KafkaTopics::new(["parcels-east.guide_retries", "parcels-west.guide_retries"])
        .group("couriers.guide_retries")
        .commit(Commit::Tracked)
)]
async fn dispatch(
    parcel: &Parcel,
    Ctx(region): Ctx<Topic>,
    State(couriers): State<Arc<Couriers>>,
) -> HandlerOutcome {
    if parcel.declined {
        // Trying again would not change the recipient's mind.
        tracing::info!(parcel.tracking, "declined parcel dropped");
        return HandlerOutcome::drop();
    }
    match couriers.assign(parcel) {
        Ok(()) => HandlerOutcome::ack(),
        Err(reason) => {
            // Reading the topic is what hands the Kafka context to the retry position, where
            // `ToSourceTopic` finds the region to send the copy back to.
            tracing::warn!(parcel.tracking, %region, reason, "not dispatched, trying again");
            HandlerOutcome::retry_after(COURIER_BACKOFF)
        }
    }
}

#[subscriber(
    KafkaTopic::new("express.guide_retries")
        .group("express-couriers.guide_retries")
        .commit(Commit::Tracked)
)]
async fn rush(parcel: &Parcel, State(couriers): State<Arc<Couriers>>) -> HandlerOutcome {
    match couriers.assign(parcel) {
        Ok(()) => HandlerOutcome::ack(),
        Err(reason) => {
            tracing::warn!(parcel.tracking, reason, "express not dispatched, waiting");
            HandlerOutcome::retry_after(COURIER_BACKOFF)
        }
    }
}
// --8<-- [end:handler]

#[ruststream::app]
fn app() -> impl App<State = Desk> {
    RustStream::new(AppInfo::new("courier-desk", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(Desk::default()))
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            // Each retry is a copy sent back to the topic its parcel came from.
            b.include(dispatch)
                .out_retry(Publish::default())
                .transform(ToSourceTopic);
            // Three deliveries at most, then the dead-letter topic.
            b.include(rush)
                .max_attempts(nonzero!(3u32))
                .dead_letter("parcels-dead.guide_retries");
        })
}
// --8<-- [end:app]

/// What the handler shares, built once at startup.
#[derive(Clone, Default, FromRef)]
struct Desk {
    couriers: Arc<Couriers>,
}

/// Couriers that never go to `nowhere` and are all busy the first time a parcel asks.
#[derive(Debug, Default)]
struct Couriers {
    asked: Mutex<HashSet<String>>,
}

impl Couriers {
    fn assign(&self, parcel: &Parcel) -> Result<(), &'static str> {
        if parcel.to == "nowhere" {
            return Err("no route");
        }
        let first_ask = self
            .asked
            .lock()
            .is_ok_and(|mut asked| asked.insert(parcel.tracking.clone()));
        if first_ask {
            return Err("every courier busy");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::runtime::RETRY_COUNT_HEADER;
    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::{START, eventually, recreate_topic, topic};
    use super::{Parcel, app, readback};

    const EAST: &str = "parcels-east.guide_retries";
    const WEST: &str = "parcels-west.guide_retries";
    const EXPRESS: &str = "express.guide_retries";
    const DEAD: &str = "parcels-dead.guide_retries";

    fn parcel(tracking: &str, to: &str, declined: bool) -> Parcel {
        Parcel {
            tracking: tracking.to_owned(),
            to: to.to_owned(),
            declined,
        }
    }

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published (the dead letter too) is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parcels_are_retried_dropped_or_dead_lettered_in_process() -> Result<(), Box<dyn Error>>
    {
        parcels_are_retried_dropped_or_dead_lettered_body(TestApp::start(app()).await?).await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parcels_are_retried_dropped_or_dead_lettered() -> Result<(), Box<dyn Error>> {
        // Copies an earlier run left unsettled would come back into this one.
        for name in [EAST, WEST] {
            recreate_topic(name, 1).await?;
        }
        topic(EXPRESS, 1).await?;
        topic(DEAD, 1).await?;
        let dead_before = readback::log_ends(DEAD, 1).await?;
        let tb = TestApp::start_live_within(app(), START).await?;
        parcels_are_retried_dropped_or_dead_lettered_body(tb).await?;
        let landed = readback::committed_values_since(DEAD, &dead_before).await?;
        assert_eq!(
            landed,
            [vec![serde_json::to_string(&parcel(
                "X-5", "nowhere", false
            ))?]]
        );
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn parcels_are_retried_dropped_or_dead_lettered_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();
        let desk = kafka.subscriber(&format!("{EAST},{WEST}"));

        // Busy once: the copy goes back to the west topic after the pause and is dispatched.
        kafka
            .publish(WEST, &parcel("W-1", "harbour", false))
            .await?;
        eventually("the second try", || desk.outcomes().len() >= 2).await?;
        assert_eq!(desk.outcomes(), [Outcome::Nack, Outcome::Ack]);
        // The harness records a publish once the broker has acknowledged it, which can be after
        // the copy was already delivered; each `published` call reads the record as it is then.
        eventually("the recorded copy", || {
            kafka.published::<Parcel>(WEST).messages().len() >= 2
        })
        .await?;
        let west = kafka.published::<Parcel>(WEST);
        let copies = west.messages();
        assert_eq!(copies.len(), 2);
        assert_eq!(copies[1].headers().get_str(RETRY_COUNT_HEADER), Some("1"));
        kafka.published::<Parcel>(EAST).assert_not_called();

        // Declined: dropped, no copy.
        kafka.publish(EAST, &parcel("E-2", "mill", true)).await?;
        eventually("the declined parcel", || desk.outcomes().len() >= 3).await?;
        assert_eq!(desk.outcomes()[2], Outcome::Drop);
        kafka.published::<Parcel>(EAST).assert_called_once();

        // Express, busy once: tried again after the pause and dispatched.
        let express = kafka.subscriber(EXPRESS);
        kafka
            .publish(EXPRESS, &parcel("X-4", "tower", false))
            .await?;
        eventually("the express retry", || express.outcomes().len() >= 2).await?;
        assert_eq!(express.outcomes(), [Outcome::Nack, Outcome::Ack]);

        // No route: three deliveries, then the dead-letter topic holds the parcel.
        let lost = parcel("X-5", "nowhere", false);
        kafka.publish(EXPRESS, &lost).await?;
        eventually("the dead letter", || {
            kafka.published::<Parcel>(DEAD).messages().len() == 1
        })
        .await?;
        let tries = || {
            express
                .received::<Parcel>()
                .iter()
                .filter(|tried| **tried == lost)
                .count()
        };
        eventually("the third try", || tries() >= 3).await?;
        assert_eq!(tries(), 3);
        let dead = kafka.published::<Parcel>(DEAD);
        assert_eq!(
            dead.messages()[0].headers().get_str(RETRY_COUNT_HEADER),
            Some("3")
        );
        tb.shutdown().await?;
        Ok(())
    }
}
