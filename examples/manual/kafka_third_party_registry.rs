//! The ferry terminal of `kafka_third_party_registry`, without macros: a `Handle` impl over the
//! app state, a hand-built subscription, and the check topic named through
//! `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_third_party_registry --features testing,avro
//! ```

use std::future::Future;
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use std::convert::Infallible;
use std::sync::Arc;

use ruststream_kafka::avro::AvroSchema;
use ruststream_kafka::prelude::*;
use schema_registry_converter::async_impl::avro::{AvroDecoder, AvroEncoder};
use schema_registry_converter::async_impl::schema_registry::SrSettings;
use schema_registry_converter::schema_registry_common::SubjectNameStrategy;
use serde::{Deserialize, Serialize};

/// Where the checks go; the converter looks up `{CHECKS}-value`.
const CHECKS: &str = "boarding-checks.third-party-manual";

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
#[derive(Serialized)]
struct Converted(Vec<u8>);

impl OutgoingDestination for Converted {
    type Form = FixedName;
    const DESTINATION: &'static str = CHECKS;
}

impl MessageHeaders for Converted {
    type Contract = NoHeaders;
}

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
#[derive(Clone)]
struct Terminal {
    tools: Converter,
}

struct Check;

impl Handle<Received, Converted, (), (), Terminal> for Check {
    fn handle(
        &self,
        received: &Received,
        _outs: &(),
        ctx: &mut Context<'_, (), Terminal>,
    ) -> impl Future<Output = Result<Converted, HandlerOutcome>> {
        let tools = ctx.state().tools.clone();
        async move {
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
    }
}

fn boardings() -> KafkaTopic {
    KafkaTopic::new("boardings.third-party-manual").group("terminal.third-party-manual")
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
            b.include(subscriber(boardings(), Check).reply().build());
        })
}

fn main() -> ExitCode {
    run_main(|| app(live::registry_url()))
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_converter_reads_and_frames_through_the_byte_lanes()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::converter_bytes_carried::<super::Boarding, super::BoardingCheck, _>(
            super::app,
            "third-party-manual",
        )
        .await
    }
}
