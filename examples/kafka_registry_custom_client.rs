//! A registry that is not an HTTP service: a seed bank ships its one Avro schema inside the
//! binary, as an in-memory catalog implementing `RegistryClient`. The broker's consume edge
//! asks the catalog for the schema of each framed seed packet and turns the Avro datum into
//! the JSON the handler decodes; no registry server is involved.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_registry_custom_client --features avro -- run
//! $ cargo test --example kafka_registry_custom_client --features testing,avro
//! ```
//!
//! The tests use the broker at `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

#[path = "support/live.rs"]
mod live;

/// The in-memory catalog (`support/seed_catalog.rs`): a `RegistryClient` that knows the seed
/// packet schema by id and refuses to register anything.
#[path = "support/seed_catalog.rs"]
mod catalog;

// --8<-- [start:app]
use std::sync::Arc;

use catalog::SeedCatalog;
use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::avro::AvroSchema;
use ruststream_kafka::prelude::*;
use serde::{Deserialize, Serialize};

/// A packet of seeds deposited at the bank (the Avro datum, as JSON after the edge).
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
struct SeedPacket {
    variety: String,
    grams: i32,
}

/// Where the packet is shelved, as plain JSON.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "shelf-labels.sr-custom")]
struct ShelfLabel {
    shelf: String,
    label: String,
}

#[subscriber(KafkaTopic::new("seed-packets.sr-custom").group("seed-bank.sr-custom"), reply)]
async fn shelve(packet: &SeedPacket) -> ShelfLabel {
    let initial = packet
        .variety
        .chars()
        .next()
        .unwrap_or('?')
        .to_ascii_uppercase();
    ShelfLabel {
        shelf: initial.to_string(),
        label: format!("{} ({} g)", packet.variety, packet.grams),
    }
}

/// The bank: its registry is the catalog, reached through `SchemaRegistry::with_client`.
fn app() -> impl App {
    let registry = SchemaRegistry::with_client(Arc::new(SeedCatalog::new()));
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry);
    RustStream::new(AppInfo::new("seed-bank", "0.1.0")).with_broker(broker, |b| {
        b.include(shelve);
    })
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
    async fn the_catalog_answers_the_transcode() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::catalog_answers_the_transcode::<super::SeedPacket, _>(
            super::app(),
            "sr-custom",
            super::catalog::PACKET_SCHEMA_ID,
        )
        .await
    }
}
