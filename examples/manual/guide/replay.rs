//! The quiz-night scoreboard of `examples/guide/replay.rs` without macros: the handlers are
//! types implementing `Handle` (one message, and a batch), and `.start_at(..)` on the mount
//! chain places both at the oldest record on every start.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_guide_replay -- run
//! $ cargo test --example manual_guide_replay
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../../support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "../../support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

// --8<-- [start:rebuild]
/// Rebuilds the board from the oldest retained score, on every start.
struct Tally;

impl Handle<RoundScore> for Tally {
    fn handle(
        &self,
        score: &RoundScore,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(score.team, score.round, score.points, "score counted");
        ready(Ok(()))
    }
}
// --8<-- [end:rebuild]

// --8<-- [start:batch]
/// Writes every answer sheet to the archive in batches, from the oldest on every start.
struct Archive;

impl Handle<[AnswerSheet]> for Archive {
    fn handle(
        &self,
        sheets: &[AnswerSheet],
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), Vec<HandlerOutcome>>> {
        tracing::info!(count = sheets.len(), "answer sheets archived");
        ready(Ok(()))
    }
}
// --8<-- [end:batch]

fn app() -> impl App<State = ()> {
    let scores =
        KafkaTopic::new("round-scores.manual_guide_replay").group("board.manual_guide_replay");
    let sheets =
        KafkaTopic::new("answer-sheets.manual_guide_replay").group("archive.manual_guide_replay");
    RustStream::new(AppInfo::new("quiz-night", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(
                subscriber(scores, Tally)
                    .start_at(KafkaPosition::earliest())
                    .build(),
            );
            b.include(
                subscriber(sheets, Archive)
                    .batch(nonzero!(100))
                    .start_at(KafkaPosition::earliest())
                    .build(),
            );
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// Points a team scored in one round.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct RoundScore {
    team: String,
    round: u32,
    points: u32,
}

/// A team's answers for one round.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct AnswerSheet {
    team: String,
    round: u32,
    answers: Vec<String>,
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{START, eventually, recreate_topic, seed};
    use super::{AnswerSheet, RoundScore, app};

    const SCORES: &str = "round-scores.manual_guide_replay";
    const SHEETS: &str = "answer-sheets.manual_guide_replay";

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
