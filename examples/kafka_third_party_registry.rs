//! Another Schema Registry stack doing the schema work: a ferry terminal checks boarding passes
//! with `schema_registry_converter`, and this crate only carries its bytes.
//!
//! The handler reads each delivery as the plain byte view it arrived as, hands it to the
//! converter (which looks the writer schema up through its own client and cache), and sends
//! back the framed `Vec<u8>` the converter produced through the byte lane, untouched. No type
//! of the converter crosses into this crate's codecs; only buffers do.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_third_party_registry \
//!     --features avro -- run
//! $ cargo test --example kafka_third_party_registry --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use std::convert::Infallible;
use std::sync::Arc;

use ruststream_kafka::avro::AvroSchema;
use ruststream_kafka::prelude::*;
use schema_registry_converter::async_impl::avro::{AvroDecoder, AvroEncoder};
use schema_registry_converter::async_impl::schema_registry::SrSettings;
use schema_registry_converter::schema_registry_common::SubjectNameStrategy;
use serde::{Deserialize, Serialize};

/// Where the checks go; the converter looks up `{CHECKS}-value`.
const CHECKS: &str = "boarding-checks.third-party";

/// A delivery exactly as it arrived, envelope and all.
#[derive(Deserialized)]
#[wire(decode = as_received)]
struct Received(Vec<u8>);

#[allow(
    clippy::unnecessary_wraps,
    reason = "the shape `#[wire(decode)]` asks for"
)]
fn as_received(bytes: &[u8]) -> Result<Received, Infallible> {
    Ok(Received(bytes.to_vec()))
}

/// The converter's output, published as it is.
#[derive(Serialized, Outgoing)]
#[outgoing(name = "boarding-checks.third-party")]
struct Converted(Vec<u8>);

/// A boarding pass as the gates write it.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
struct Boarding {
    pass: i64,
    deck: String,
}

/// The terminal's answer.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
struct BoardingCheck {
    pass: i64,
    cleared: bool,
}

/// The converter's two halves, built once at startup and shared by every delivery.
#[derive(Clone)]
struct Converter {
    reader: Arc<AvroDecoder>,
    writer: Arc<AvroEncoder>,
}

impl Converter {
    fn new(registry_url: String) -> Self {
        // The converter builds reqwest clients of its own; with this crate's pure-Rust TLS they
        // need the process-wide rustls provider.
        let _ = rustls_graviola::default_provider().install_default();
        let registry = SrSettings::new(registry_url);
        Self {
            reader: Arc::new(AvroDecoder::new(registry.clone())),
            writer: Arc::new(AvroEncoder::new(registry)),
        }
    }

    /// The pass inside `framed`, or why it cannot be read (the delivery is then dropped).
    async fn boarding(&self, framed: &[u8]) -> Result<Boarding, HandlerOutcome> {
        let decoded = self.reader.decode(Some(framed)).await.map_err(|error| {
            tracing::warn!(%error, "a boarding pass the converter cannot read");
            HandlerOutcome::drop()
        })?;
        apache_avro::from_value(&decoded.value).map_err(|error| {
            tracing::warn!(%error, "a boarding record of another shape");
            HandlerOutcome::drop()
        })
    }

    /// `answer` framed under the checks subject; a registry hiccup retries the delivery.
    async fn framed(&self, answer: BoardingCheck) -> Result<Converted, HandlerOutcome> {
        let subject = SubjectNameStrategy::TopicNameStrategy(CHECKS.to_owned(), false);
        let bytes = self
            .writer
            .encode_struct(answer, &subject)
            .await
            .map_err(|error| {
                tracing::warn!(%error, "the converter could not frame a check");
                HandlerOutcome::retry()
            })?;
        Ok(Converted(bytes))
    }
}

/// What the handler reads from the app state.
#[derive(Clone, FromRef)]
struct Terminal {
    tools: Converter,
}

#[subscriber(
    KafkaTopic::new("boardings.third-party").group("terminal.third-party"),
    reply
)]
async fn check(
    received: &Received,
    State(tools): State<Converter>,
) -> Result<Converted, HandlerOutcome> {
    let boarding = tools.boarding(&received.0).await?;
    // Foot passengers and cars board; nobody boards onto the bridge.
    let cleared = boarding.deck != "bridge";
    tracing::info!(boarding.pass, cleared, "boarding pass checked");
    tools
        .framed(BoardingCheck {
            pass: boarding.pass,
            cleared,
        })
        .await
}

/// The service: a plain broker, and the converter as state.
fn app(registry_url: String) -> impl App<State = Terminal> {
    RustStream::new(AppInfo::new("terminal", "0.1.0"))
        .on_startup(async move |()| {
            Ok::<_, Infallible>(Terminal {
                tools: Converter::new(registry_url),
            })
        })
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            b.include(check);
        })
}

#[ruststream::app]
fn service() -> impl App<State = Terminal> {
    app(live::registry_url())
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_converter_reads_and_frames_through_the_byte_lanes()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::converter_bytes_carried::<super::Boarding, super::BoardingCheck, _>(
            super::app,
            "third-party",
        )
        .await
    }
}
