//! `KafkaTopics`: several topics, listed or matched by a `^`-anchored pattern, read by one
//! consumer of one group. Each delivery reports the topic it came from, and a retried delivery
//! goes back to that topic.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_multi_topic -- run
//! $ cargo test --example kafka_multi_topic
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

/// Puts arrivals and departures on one board, each line saying which topic it came from.
#[subscriber(
    KafkaTopics::new(["arrivals.kafka_multi_topic", "departures.kafka_multi_topic"])
        .group("board.kafka_multi_topic"),
    reply
)]
async fn show(flight: &Flight, Ctx(topic): Ctx<Topic>) -> BoardLine {
    BoardLine {
        flight: flight.code.clone(),
        topic: topic.to_string(),
    }
}

/// Logs a sighting from every `sightings-<species>` topic there is, those created later too.
#[subscriber(
    KafkaTopics::pattern("^sightings-[a-z]+\\.kafka_multi_topic$").group("survey.kafka_multi_topic")
)]
async fn log_sighting(sighting: &Sighting, Ctx(topic): Ctx<Topic>) -> HandlerOutcome {
    tracing::info!(sighting.ring, %topic, "sighting logged");
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("airfield", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // A set of topics is no single topic a copy could go to: a retried delivery goes
            // back to the topic it arrived on.
            b.include(show)
                .out_retry(Publish::default())
                .transform(ToSourceTopic);
            b.include(log_sighting)
                .out_retry(Publish::default())
                .transform(ToSourceTopic);
        },
    )
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Flight {
    code: String,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "board.kafka_multi_topic")]
struct BoardLine {
    flight: String,
    topic: String,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Sighting {
    ring: String,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{Place, eventually, topic};
    use super::{BoardLine, Flight, Sighting, app};

    /// On the embedded cluster in this process: the same body, its records placed on the
    /// cluster directly.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_listed_topic_and_every_matching_one_is_read_in_process()
    -> Result<(), Box<dyn Error>> {
        let (tb, cluster) = super::in_process::start_with_topics(
            app(),
            (),
            &[
                ("arrivals.kafka_multi_topic", 1),
                ("departures.kafka_multi_topic", 1),
                ("sightings-owls.kafka_multi_topic", 1),
                ("sightings-foxes.kafka_multi_topic", 1),
            ],
        )
        .await?;
        every_listed_topic_and_every_matching_one_is_read_body(tb, &Place::Embedded(cluster)).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_listed_topic_and_every_matching_one_is_read() -> Result<(), Box<dyn Error>> {
        for name in [
            "arrivals.kafka_multi_topic",
            "departures.kafka_multi_topic",
            "sightings-owls.kafka_multi_topic",
            "sightings-foxes.kafka_multi_topic",
        ] {
            topic(name, 1).await?;
        }
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        every_listed_topic_and_every_matching_one_is_read_body(tb, &Place::Live).await
    }

    /// The test body, whichever way the service was started.
    async fn every_listed_topic_and_every_matching_one_is_read_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
        place: &Place,
    ) -> Result<(), Box<dyn Error>> {
        let flight = |code: &str| Flight {
            code: code.to_owned(),
        };
        place
            .seed("arrivals.kafka_multi_topic", None, &[flight("LX318")])
            .await?;
        place
            .seed("departures.kafka_multi_topic", None, &[flight("AY1072")])
            .await?;
        let sighting = |ring: &str| Sighting {
            ring: ring.to_owned(),
        };
        place
            .seed("sightings-owls.kafka_multi_topic", None, &[sighting("O-4")])
            .await?;
        place
            .seed(
                "sightings-foxes.kafka_multi_topic",
                None,
                &[sighting("F-9")],
            )
            .await?;

        let kafka = tb.broker::<KafkaBroker>();
        let board = || kafka.published::<BoardLine>("board.kafka_multi_topic");
        eventually("two board lines", || board().messages().len() >= 2).await?;
        let mut lines = board().decoded();
        lines.sort_by(|a, b| a.topic.cmp(&b.topic));
        assert_eq!(
            lines,
            [
                BoardLine {
                    flight: "LX318".to_owned(),
                    topic: "arrivals.kafka_multi_topic".to_owned(),
                },
                BoardLine {
                    flight: "AY1072".to_owned(),
                    topic: "departures.kafka_multi_topic".to_owned(),
                },
            ]
        );

        let survey = kafka.subscriber("^sightings-[a-z]+\\.kafka_multi_topic$");
        eventually("both sightings", || {
            survey.received::<Sighting>().len() >= 2
        })
        .await?;
        let mut rings: Vec<String> = survey
            .received::<Sighting>()
            .into_iter()
            .map(|sighting| sighting.ring)
            .collect();
        rings.sort();
        assert_eq!(rings, ["F-9", "O-4"]);
        tb.shutdown().await?;
        Ok(())
    }
}
