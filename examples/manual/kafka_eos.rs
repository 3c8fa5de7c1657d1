//! The converter of `examples/kafka_eos.rs` without macros: the reply body is a type
//! implementing `Handle`, mounted on the same transactional subscription, and the reply
//! position takes the same pipeline and `EosReplies` transform.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_eos -- run
//! $ cargo test --example manual_kafka_eos
//! ```

use std::future::{Future, ready};
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
use ruststream_kafka::prelude::*;

/// The subscription commits its offsets through the `converter.eos` pipeline.
struct Convert;

impl Handle<Celsius, Fahrenheit> for Convert {
    fn handle(
        &self,
        reading: &Celsius,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Fahrenheit, HandlerOutcome>> {
        ready(Ok(Fahrenheit {
            station: reading.station.clone(),
            tenths: reading.tenths * 9 / 5 + 320,
        }))
    }
}

fn readings() -> KafkaTopic {
    KafkaTopic::new("celsius.eos")
        .group("converter.eos")
        .commit(Commit::Transactional("converter.eos".into()))
}

fn app() -> impl App<State = ()> {
    // The policy's id is the pipeline the subscription names and the producer's transactional
    // id; a window of replies and offsets commits every 50 ms.
    let pipeline = EosPublish::new("converter.eos").commit_interval(Duration::from_millis(50));
    RustStream::new(AppInfo::new("converter", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // `EosReplies` hands each reply the coordinates of the reading it answers.
            b.include(subscriber(readings(), Convert).reply().build())
                .out_reply(pipeline)
                .transform(EosReplies);
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A station's reading in tenths of a degree Celsius.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Celsius {
    station: String,
    tenths: i32,
}

impl OutgoingDestination for Celsius {
    type Form = FixedName;
    const DESTINATION: &'static str = "celsius.eos";
}

impl MessageHeaders for Celsius {
    type Contract = NoHeaders;
}

/// The same reading in tenths of a degree Fahrenheit.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Fahrenheit {
    station: String,
    tenths: i32,
}

impl OutgoingDestination for Fahrenheit {
    type Form = FixedName;
    const DESTINATION: &'static str = "fahrenheit.eos";
}

impl MessageHeaders for Fahrenheit {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Celsius, Fahrenheit, app, live, readback};

    const CELSIUS: &str = "celsius.eos";
    const FAHRENHEIT: &str = "fahrenheit.eos";
    const GROUP: &str = "converter.eos";

    /// In process: the reply is visible once its transaction committed with the reading's
    /// offset (what `published` reads is the cluster's committed log).
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reply_commits_with_the_offset_in_process() -> Result<(), Box<dyn Error>> {
        let tb = TestApp::start(app()).await?;
        let kafka = tb.broker::<KafkaBroker>();
        let reading = Celsius {
            station: "ridge".to_owned(),
            tenths: 200,
        };
        kafka.message(&reading).publish().await?;
        kafka
            .subscriber(CELSIUS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        // The window commits within its interval.
        let deadline = Instant::now() + Duration::from_secs(10);
        while kafka
            .published::<Fahrenheit>(FAHRENHEIT)
            .messages()
            .is_empty()
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        kafka
            .published::<Fahrenheit>(FAHRENHEIT)
            .assert_called_once()
            .with(&Fahrenheit {
                station: "ridge".to_owned(),
                tenths: 680,
            });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reply_and_the_offset_commit_together() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(CELSIUS, 1).await?;
        live::ensure_topic(FAHRENHEIT, 1).await?;
        let before = readback::log_ends(FAHRENHEIT, 1).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let reading = Celsius {
            station: "ridge".to_owned(),
            tenths: 200,
        };
        tb.broker::<KafkaBroker>()
            .message(&reading)
            .publish()
            .await?;
        tb.broker::<KafkaBroker>()
            .subscriber(CELSIUS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let converted = Fahrenheit {
            station: "ridge".to_owned(),
            tenths: 680,
        };
        tb.broker::<KafkaBroker>()
            .published::<Fahrenheit>(FAHRENHEIT)
            .assert_called_once()
            .with(&converted);

        // The window commits within its interval: then both halves are on the cluster, the
        // reply visible to `read_committed` and the group's offset past the reading.
        let deadline = Instant::now() + Duration::from_secs(10);
        let landed = loop {
            let landed = readback::committed_values_since(FAHRENHEIT, &before).await?;
            if landed[0].is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            break landed;
        };
        tb.shutdown().await?;
        assert_eq!(landed, [vec![serde_json::to_string(&converted)?]]);
        let end = readback::log_ends(CELSIUS, 1).await?;
        assert_eq!(readback::committed_offset(GROUP, CELSIUS, 0).await?, end[0]);
        Ok(())
    }
}
