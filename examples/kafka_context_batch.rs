//! The batch context: a batch spans many records, so its `KafkaBatchContext` carries what the
//! whole subscription shares, the seek handle. A seek from a batch handler applies once the batch
//! has settled: the next batch starts at the target.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_context_batch -- run
//! $ cargo test --example kafka_context_batch
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
use ruststream_kafka::context::KafkaBatchContext;
use ruststream_kafka::prelude::*;

/// Shows slides on the lobby wall. A slide may ask for the run from an earlier offset of
/// partition 0 to be drawn again, for a slide whose first drawing went wrong.
#[subscriber(
    KafkaTopic::new("slides.kafka_context_batch")
        .group("lobby-wall.kafka_context_batch")
        .start(StartOffset::Earliest)
)]
async fn show(slides: &[Slide], ctx: &mut Context<'_, KafkaBatchContext>) -> HandlerOutcome {
    tracing::info!(count = slides.len(), "slides shown");
    let Some(from) = slides.iter().find_map(|slide| slide.redraw_from) else {
        return HandlerOutcome::ack();
    };
    if let Err(err) = ctx
        .context(SeekHandle)
        .seek(KafkaPosition::offset(0, from))
        .await
    {
        tracing::warn!(error = %err, from, "redraw refused");
    }
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("lobby-wall", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(show.batch(nonzero!(20)));
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
struct Slide {
    number: u32,
    redraw_from: Option<i64>,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, recreate_topic, seed};
    use super::{Slide, app};

    const SLIDES: &str = "slides.kafka_context_batch";

    /// The same on the embedded cluster in this process.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_batch_starts_where_the_seek_pointed_in_process() -> Result<(), Box<dyn Error>>
    {
        let slide = |number, redraw_from| Slide {
            number,
            redraw_from,
        };
        let (tb, cluster) = super::in_process::start_prepared(app(), (), |cluster| {
            let _ = cluster.create_topic(SLIDES, 1);
            super::in_process::seed(
                cluster,
                SLIDES,
                None,
                &[
                    slide(0, None),
                    slide(1, Some(2)),
                    slide(2, None),
                    slide(3, None),
                ],
            )?;
            Ok(())
        })
        .await?;
        drop(cluster);
        let kafka = tb.broker::<KafkaBroker>();
        let shown = kafka.subscriber(SLIDES);
        eventually("the redrawn run", || shown.received::<Slide>().len() >= 6).await?;
        assert_eq!(
            shown.batches::<Slide>(),
            [
                vec![
                    slide(0, None),
                    slide(1, Some(2)),
                    slide(2, None),
                    slide(3, None)
                ],
                vec![slide(2, None), slide(3, None)],
            ]
        );
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_batch_starts_where_the_seek_pointed() -> Result<(), Box<dyn Error>> {
        recreate_topic(SLIDES, 1).await?;
        let slide = |number, redraw_from| Slide {
            number,
            redraw_from,
        };
        // Slide 1 (offset 1) asks for the run from offset 2 to be drawn again.
        seed(
            SLIDES,
            None,
            &[
                slide(0, None),
                slide(1, Some(2)),
                slide(2, None),
                slide(3, None),
            ],
        )
        .await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;

        let kafka = tb.broker::<KafkaBroker>();
        let shown = kafka.subscriber(SLIDES);
        eventually("the redrawn run", || shown.received::<Slide>().len() >= 6).await?;
        assert_eq!(
            shown.batches::<Slide>(),
            [
                vec![
                    slide(0, None),
                    slide(1, Some(2)),
                    slide(2, None),
                    slide(3, None)
                ],
                vec![slide(2, None), slide(3, None)],
            ]
        );
        tb.shutdown().await?;
        Ok(())
    }
}
