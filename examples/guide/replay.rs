//! The service of the Replay guide: a quiz night's scoreboard. The board keeps its scores in
//! memory, so it rebuilds them from the whole retained log on every start, one score at a time;
//! the archive replays the answer sheets in batches the same way. The group's committed offsets do not matter to
//! either: `start_at` places them at the oldest record each time the service starts.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example guide_replay -- run
//! $ cargo test --example guide_replay
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

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

/// Points a team scored in one round.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
struct RoundScore {
    team: String,
    round: u32,
    points: u32,
}

/// A team's answers for one round.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
struct AnswerSheet {
    team: String,
    round: u32,
    answers: Vec<String>,
}

// --8<-- [start:rebuild]
/// Rebuilds the board from the oldest retained score, on every start.
#[subscriber(
    KafkaTopic::new("round-scores.guide_replay").group("board.guide_replay"),
    start_at(KafkaPosition::earliest())
)]
async fn tally(score: &RoundScore) -> HandlerOutcome {
    tracing::info!(score.team, score.round, score.points, "score counted");
    HandlerOutcome::ack()
}
// --8<-- [end:rebuild]

// --8<-- [start:batch]
/// Writes every answer sheet to the archive in batches, from the oldest on every start.
#[subscriber(
    KafkaTopic::new("answer-sheets.guide_replay").group("archive.guide_replay"),
    start_at(KafkaPosition::earliest())
)]
async fn archive(sheets: &[AnswerSheet]) -> HandlerOutcome {
    tracing::info!(count = sheets.len(), "answer sheets archived");
    HandlerOutcome::ack()
}
// --8<-- [end:batch]

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("quiz-night", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(tally);
            b.include(archive.batch(nonzero!(100)));
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{START, eventually, recreate_topic, seed};
    use super::{AnswerSheet, RoundScore, app};

    const SCORES: &str = "round-scores.guide_replay";
    const SHEETS: &str = "answer-sheets.guide_replay";

    /// The same on the embedded cluster in this process.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_start_rebuilds_from_the_oldest_record_in_process() -> Result<(), Box<dyn Error>>
    {
        let score = |team: &str, round, points| RoundScore {
            team: team.to_owned(),
            round,
            points,
        };
        let scores = [
            score("owls", 1, 7),
            score("foxes", 1, 9),
            score("owls", 2, 8),
        ];
        let sheet = |team: &str, answers: &[&str]| AnswerSheet {
            team: team.to_owned(),
            round: 1,
            answers: answers.iter().map(|answer| (*answer).to_owned()).collect(),
        };
        let sheets = [
            sheet("owls", &["Oslo", "1969"]),
            sheet("foxes", &["Bergen", "1969"]),
        ];
        // One start: every `TestApp::start` brings a fresh cluster, so a second one would
        // show nothing the first does not (the live test starts twice in one group).
        let (tb, cluster) = super::in_process::start_prepared(app(), (), |cluster| {
            let _ = cluster.create_topic(SCORES, 1);
            let _ = cluster.create_topic(SHEETS, 1);
            super::in_process::seed(cluster, SCORES, None, &scores)?;
            super::in_process::seed(cluster, SHEETS, None, &sheets)?;
            Ok(())
        })
        .await?;
        drop(cluster);
        let kafka = tb.broker::<KafkaBroker>();
        let board = kafka.subscriber(SCORES);
        eventually("every score", || {
            board.received::<RoundScore>().len() >= scores.len()
        })
        .await?;
        assert_eq!(board.received::<RoundScore>(), scores);
        let archive = kafka.subscriber(SHEETS);
        let archived = || -> Vec<AnswerSheet> { archive.batches().into_iter().flatten().collect() };
        eventually("every answer sheet", || archived().len() >= sheets.len()).await?;
        assert_eq!(archived(), sheets);
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_start_rebuilds_from_the_oldest_record() -> Result<(), Box<dyn Error>> {
        recreate_topic(SCORES, 1).await?;
        recreate_topic(SHEETS, 1).await?;
        let score = |team: &str, round, points| RoundScore {
            team: team.to_owned(),
            round,
            points,
        };
        let scores = [
            score("owls", 1, 7),
            score("foxes", 1, 9),
            score("owls", 2, 8),
        ];
        seed(SCORES, None, &scores).await?;
        let sheet = |team: &str, answers: &[&str]| AnswerSheet {
            team: team.to_owned(),
            round: 1,
            answers: answers.iter().map(|answer| (*answer).to_owned()).collect(),
        };
        let sheets = [
            sheet("owls", &["Oslo", "1969"]),
            sheet("foxes", &["Bergen", "1969"]),
        ];
        seed(SHEETS, None, &sheets).await?;

        // Twice: the second start has the groups' commits from the first, and reads it all again.
        for _ in 0..2 {
            let tb = TestApp::start_live_within(app(), START).await?;
            let kafka = tb.broker::<KafkaBroker>();
            let board = kafka.subscriber(SCORES);
            eventually("every score", || {
                board.received::<RoundScore>().len() >= scores.len()
            })
            .await?;
            assert_eq!(board.received::<RoundScore>(), scores);
            let archive = kafka.subscriber(SHEETS);
            let archived =
                || -> Vec<AnswerSheet> { archive.batches().into_iter().flatten().collect() };
            eventually("every answer sheet", || archived().len() >= sheets.len()).await?;
            assert_eq!(archived(), sheets);
            tb.shutdown().await?;
        }
        Ok(())
    }
}
