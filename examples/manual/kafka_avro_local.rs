//! The station board of `kafka_avro_local`, without macros: a `Handle` impl, a hand-built
//! subscription, and the board line's topic named through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_avro_local --features testing,avro
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use serde::{Deserialize, Serialize};

/// One temperature reading.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Reading {
    station: String,
    tenths_celsius: i32,
}

/// What the station board shows for it.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct BoardLine {
    station: String,
    frost: bool,
}

impl OutgoingDestination for BoardLine {
    type Form = FixedName;
    const DESTINATION: &'static str = "board.avro-local-manual";
}

impl MessageHeaders for BoardLine {
    type Contract = NoHeaders;
}

struct Show;

impl Handle<Reading, BoardLine> for Show {
    fn handle(
        &self,
        reading: &Reading,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<BoardLine, HandlerOutcome>> {
        ready(Ok(BoardLine {
            station: reading.station.clone(),
            frost: reading.tenths_celsius <= 0,
        }))
    }
}

fn readings() -> KafkaTopic {
    KafkaTopic::new("readings.avro-local-manual").group("board.avro-local-manual")
}

/// The service: readings in with their schema, board lines out with theirs.
fn app() -> impl App {
    let codec = |schema| AvroCodec::local(schema).unwrap_or_else(|e| panic!("{e}"));
    let lines = codec(BoardLine::get_schema());
    RustStream::new(AppInfo::new("station-board", "0.1.0")).with_broker_codec(
        KafkaBroker::new([live::bootstrap()]),
        codec(Reading::get_schema()),
        |b| {
            b.include(subscriber(readings(), Show).reply().build())
                .out_reply(Publish::default())
                .codec(lines);
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    use super::{BoardLine, Reading, app, checks};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_reading_is_shown_as_a_bare_board_line() -> Result<(), Box<dyn std::error::Error>>
    {
        checks::bare_avro_answered::<Reading, BoardLine, _>(app(), "avro-local-manual").await
    }
}
