//! The service of `examples/kafka_positions_timestamp.rs` without macros: the position is the
//! `.start_at(..)` step of the mount chain, the handler is a type implementing `Handle`, and
//! `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_positions_timestamp -- run
//! $ cargo test --example manual_kafka_positions_timestamp
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// Feeds a weather station's readings into the rolling average.
struct Average;

impl Handle<StationReading> for Average {
    fn handle(
        &self,
        reading: &StationReading,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(reading.station, reading.millibar, "averaged");
        ready(Ok(()))
    }
}

/// The service, reading from the first record stamped at or after `since` (epoch ms).
fn service(since: i64) -> impl App<State = ()> {
    let readings = KafkaTopic::new("station-readings.manual_kafka_positions_timestamp")
        .group("averages.manual_kafka_positions_timestamp");
    RustStream::new(AppInfo::new("weather", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(
                subscriber(readings, Average)
                    .start_at(KafkaPosition::timestamp(since))
                    .build(),
            );
        },
    )
}

/// Every start rebuilds the average from the last hour of readings.
fn app() -> impl App<State = ()> {
    let hour_ago = SystemTime::now()
        .checked_sub(Duration::from_hours(1))
        .and_then(|then| then.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX) // ms since the epoch
        });
    service(hour_ago)
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
struct StationReading {
    station: String,
    millibar: u32,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, now_millis, recreate_topic, seed};
    use super::{StationReading, service};

    const READINGS: &str = "station-readings.manual_kafka_positions_timestamp";

    /// The same on the embedded cluster in this process.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_opens_at_the_first_record_since_in_process() -> Result<(), Box<dyn Error>>
    {
        let reading = |millibar| StationReading {
            station: "Brocken".to_owned(),
            millibar,
        };
        // The cluster exists only once the service is starting: the cut is set half a second
        // ahead (room for a slow start), the first reading written before it, the next two
        // after it.
        let since = now_millis() + 500;
        let (tb, cluster) = super::in_process::start_prepared(service(since), (), |cluster| {
            let _ = cluster.create_topic(READINGS, 1);
            super::in_process::seed(cluster, READINGS, None, &[reading(1004)])?;
            // Past the cut however long the first write took on a busy machine.
            while now_millis() <= since + 5 {
                std::thread::sleep(Duration::from_millis(5));
            }
            super::in_process::seed(cluster, READINGS, None, &[reading(998), reading(995)])?;
            Ok(())
        })
        .await?;
        drop(cluster);
        let kafka = tb.broker::<KafkaBroker>();
        let averaged = kafka.subscriber(READINGS);
        eventually("the two recent readings", || {
            averaged.received::<StationReading>().len() >= 2
        })
        .await?;
        assert_eq!(
            averaged.received::<StationReading>(),
            [reading(998), reading(995)]
        );
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_opens_at_the_first_record_since() -> Result<(), Box<dyn Error>> {
        recreate_topic(READINGS, 1).await?;
        let reading = |millibar| StationReading {
            station: "Brocken".to_owned(),
            millibar,
        };
        seed(READINGS, None, &[reading(1004)]).await?;
        // The next record is stamped later than the first by at least a few milliseconds.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let since = now_millis();
        seed(READINGS, None, &[reading(998), reading(995)]).await?;

        let tb = TestApp::start_live_within(service(since), Duration::from_secs(30)).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let averaged = kafka.subscriber(READINGS);
        eventually("the two recent readings", || {
            averaged.received::<StationReading>().len() >= 2
        })
        .await?;
        assert_eq!(
            averaged.received::<StationReading>(),
            [reading(998), reading(995)]
        );
        tb.shutdown().await?;
        Ok(())
    }
}
