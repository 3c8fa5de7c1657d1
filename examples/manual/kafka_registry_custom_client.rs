//! The seed bank of `kafka_registry_custom_client`, without macros: the handler is a `Handle`
//! impl, the subscription is built by hand, the label names its topic through
//! `OutgoingDestination`. The registry is the same in-memory catalog.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_custom_client --features testing,avro
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;
use std::sync::Arc;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

#[path = "../support/seed_catalog.rs"]
mod catalog;

use catalog::SeedCatalog;
use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::avro::AvroSchema;
use ruststream_kafka::prelude::*;
use serde::{Deserialize, Serialize};

/// A packet of seeds deposited at the bank (the Avro datum, as JSON after the edge).
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct SeedPacket {
    variety: String,
    grams: i32,
}

/// Where the packet is shelved, as plain JSON.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct ShelfLabel {
    shelf: String,
    label: String,
}

impl OutgoingDestination for ShelfLabel {
    type Form = FixedName;
    const DESTINATION: &'static str = "shelf-labels.sr-custom-manual";
}

impl MessageHeaders for ShelfLabel {
    type Contract = NoHeaders;
}

struct Shelve;

impl Handle<SeedPacket, ShelfLabel> for Shelve {
    fn handle(
        &self,
        packet: &SeedPacket,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<ShelfLabel, HandlerOutcome>> {
        let initial = packet
            .variety
            .chars()
            .next()
            .unwrap_or('?')
            .to_ascii_uppercase();
        ready(Ok(ShelfLabel {
            shelf: initial.to_string(),
            label: format!("{} ({} g)", packet.variety, packet.grams),
        }))
    }
}

fn packets() -> KafkaTopic {
    KafkaTopic::new("seed-packets.sr-custom-manual").group("seed-bank.sr-custom-manual")
}

/// The bank: its registry is the catalog, reached through `SchemaRegistry::with_client`.
fn app() -> impl App {
    let registry = SchemaRegistry::with_client(Arc::new(SeedCatalog::new()));
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry);
    RustStream::new(AppInfo::new("seed-bank", "0.1.0")).with_broker(broker, |b| {
        b.include(subscriber(packets(), Shelve).reply().build());
    })
}

fn main() -> ExitCode {
    run_main(app)
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_catalog_answers_the_transcode() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::catalog_answers_the_transcode::<super::SeedPacket, _>(
            super::app(),
            "sr-custom-manual",
            super::catalog::PACKET_SCHEMA_ID,
        )
        .await
    }
}
