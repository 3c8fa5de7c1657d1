//! The service of `examples/kafka_keys.rs` without macros: the lanes are the mount chain's
//! `.workers_by_key(n)`, the handler is a type implementing `Handle` that reads the record key
//! off its context, and `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_keys -- run
//! $ cargo test --example manual_kafka_keys
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

// --8<-- [start:app]
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::context::keys::Key;
use ruststream_kafka::prelude::*;

/// Applies a thermostat set point.
struct Apply;

impl Handle<SetPoint, (), (), KafkaContext> for Apply {
    fn handle(
        &self,
        set_point: &SetPoint,
        _outs: &(),
        ctx: &mut Context<'_, KafkaContext>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        let room = ctx.context(Key).map(String::from_utf8_lossy);
        tracing::info!(?room, set_point.seq, set_point.celsius, "set point applied");
        ready(Ok(()))
    }
}

fn app() -> impl App {
    // The record key is the room: what keys the lanes is the descriptor's word.
    let set_points = KafkaTopic::new("set-points.manual_kafka_keys")
        .group("thermostats.manual_kafka_keys")
        .lane_key(LaneKey::RecordKey);
    RustStream::new(AppInfo::new("thermostats", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // Set points for one room apply in the order they were sent; four rooms are handled
            // at a time.
            b.include(
                subscriber(set_points, Apply)
                    .workers_by_key(nonzero!(4))
                    .build(),
            );
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
struct SetPoint {
    room: String,
    seq: u32,
    celsius: f32,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, seed_keyed, topic};
    use super::{SetPoint, app};

    const SET_POINTS: &str = "set-points.manual_kafka_keys";

    /// On the embedded cluster in this process: each set point goes in through the harness,
    /// its room as the record key (the `kafka-partition-key` header).
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_room_applies_its_set_points_in_order_in_process() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let records = set_points();
        for (room, set_point) in &records {
            let key = RoomKey { room };
            tb.broker::<KafkaBroker>()
                .publish_with_headers(SET_POINTS, set_point, &key)
                .await?;
        }
        each_room_applies_its_set_points_in_order_body(tb, &records).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_room_applies_its_set_points_in_order() -> Result<(), Box<dyn Error>> {
        topic(SET_POINTS, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let records = set_points();
        seed_keyed(SET_POINTS, &records).await?;
        each_room_applies_its_set_points_in_order_body(tb, &records).await
    }

    /// The record key as the harness takes it: the `kafka-partition-key` header.
    #[cfg(feature = "testing")]
    #[derive(serde::Serialize)]
    struct RoomKey<'a> {
        #[serde(rename = "kafka-partition-key")]
        room: &'a str,
    }

    /// Seven set points for three rooms, keyed by room.
    fn set_points() -> Vec<(&'static str, SetPoint)> {
        let set_point = |room: &str, seq: u32| SetPoint {
            room: room.to_owned(),
            seq,
            celsius: 19.5,
        };
        let rooms = [
            "kitchen", "study", "kitchen", "hall", "study", "kitchen", "hall",
        ];
        rooms
            .iter()
            .zip(1..)
            .map(|(room, seq)| (*room, set_point(room, seq)))
            .collect()
    }

    /// The test body, whichever way the service was started.
    async fn each_room_applies_its_set_points_in_order_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
        records: &[(&str, SetPoint)],
    ) -> Result<(), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();
        let applied = kafka.subscriber(SET_POINTS);
        eventually("every set point", || {
            applied.received::<SetPoint>().len() >= records.len()
        })
        .await?;
        let received = applied.received::<SetPoint>();
        for room in ["kitchen", "study", "hall"] {
            let seqs: Vec<u32> = received
                .iter()
                .filter(|set_point| set_point.room == room)
                .map(|set_point| set_point.seq)
                .collect();
            let sent: Vec<u32> = records
                .iter()
                .filter(|(key, _)| *key == room)
                .map(|(_, set_point)| set_point.seq)
                .collect();
            assert_eq!(seqs, sent, "{room}");
        }
        tb.shutdown().await?;
        Ok(())
    }
}
