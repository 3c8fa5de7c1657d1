//! The Confluent envelope taken apart and put together by hand: a ledger is moving to a new
//! registry, where its schemas got new ids. A relay reads each entry's five-byte envelope,
//! swaps the old id for the new one and passes the datum on untouched; an entry that carries
//! no envelope cannot be placed under any schema and is dropped.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_registry_envelope --features schema-registry -- run
//! $ cargo test --example kafka_registry_envelope --features testing,schema-registry
//! ```
//!
//! The tests use the broker at `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`; no registry is involved.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::{encode_envelope, parse_envelope};

/// A ledger entry as it arrived: the envelope and the datum, unread.
#[derive(Deserialized)]
struct Entry<'a>(&'a [u8]);

/// The same datum, framed with the new registry's id.
#[derive(Serialized, Outgoing)]
#[outgoing(name = "migrated-entries.sr-envelope")]
struct Migrated(Vec<u8>);

/// Old registry id to new registry id, for every schema the ledger was written with.
const NEW_IDS: [(u32, u32); 2] = [(31, 931), (32, 932)];

#[subscriber(
    KafkaTopic::new("ledger-entries.sr-envelope").group("ledger-relay.sr-envelope"),
    reply
)]
async fn relay(entry: &Entry<'_>) -> Result<Migrated, HandlerOutcome> {
    let Some((old, datum)) = parse_envelope(entry.0) else {
        tracing::warn!("a ledger entry without the envelope: it names no schema");
        return Err(HandlerOutcome::drop());
    };
    let Some(&(_, new)) = NEW_IDS.iter().find(|(from, _)| *from == old) else {
        tracing::warn!(schema_id = old, "no new id is known for this schema");
        return Err(HandlerOutcome::drop());
    };
    Ok(Migrated(encode_envelope(new, datum)))
}

/// The relay; the ids travel in the bytes, so it needs no registry of its own.
fn app() -> impl App {
    RustStream::new(AppInfo::new("ledger-relay", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(relay);
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
    async fn an_entry_moves_under_its_new_schema_id() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::relay_moves_the_schema_id(super::app, "sr-envelope").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_entry_without_an_envelope_is_dropped() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::unframed_entry_is_dropped(super::app, "sr-envelope").await
    }
}
