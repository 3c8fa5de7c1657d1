//! Avro with no registry: a weather station's readings are bare Avro datums written with one
//! pinned schema. `AvroCodec::local` reads them and writes the daily summaries the same way;
//! nothing is framed and nothing is looked up.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_avro_local --features avro -- run
//! $ cargo test --example kafka_avro_local --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use serde::{Deserialize, Serialize};

/// One temperature reading.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
struct Reading {
    station: String,
    tenths_celsius: i32,
}

/// What the station board shows for it.
#[derive(Serialize, Deserialize, AvroSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "board.avro-local")]
struct BoardLine {
    station: String,
    frost: bool,
}

#[subscriber(KafkaTopic::new("readings.avro-local").group("board.avro-local"), reply)]
async fn show(reading: &Reading) -> BoardLine {
    BoardLine {
        station: reading.station.clone(),
        frost: reading.tenths_celsius <= 0,
    }
}

/// The service: readings in with their schema, board lines out with theirs.
fn app() -> impl App {
    let readings = AvroCodec::local(Reading::get_schema()).unwrap_or_else(|e| panic!("{e}"));
    let lines = AvroCodec::local(BoardLine::get_schema()).unwrap_or_else(|e| panic!("{e}"));
    RustStream::new(AppInfo::new("station-board", "0.1.0")).with_broker_codec(
        KafkaBroker::new([live::bootstrap()]),
        readings,
        |b| {
            b.include(show).out_reply(Publish::default()).codec(lines);
        },
    )
}

#[ruststream::app]
fn service() -> impl App {
    app()
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_reading_is_shown_as_a_bare_board_line() -> Result<(), Box<dyn std::error::Error>>
    {
        super::checks::bare_avro_answered::<super::Reading, super::BoardLine, _>(
            super::app(),
            "avro-local",
        )
        .await
    }
}
