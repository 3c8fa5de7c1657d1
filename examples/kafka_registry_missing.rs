//! A subject that went missing: a bakery schedules oven slots for bread orders, and owns the
//! `oven-slots` subject its slots are framed under. If an operator's cleanup deleted that
//! subject while the service was down, `MissingSubject::AutoRegister` has connect register the
//! schema the `OvenSlot` type carries again (with a warning) instead of refusing to start.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_registry_missing \
//!     --features avro -- run
//! $ cargo test --example kafka_registry_missing --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{MissingSubject, SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A shop's order for a batch of loaves.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
struct BakeOrder {
    loaves: i32,
    bakery: String,
}

/// The oven the batch goes into.
#[derive(Serialize, Deserialize, AvroSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "oven-slots.registry-missing")]
struct OvenSlot {
    loaves: i32,
    oven: i32,
}

#[subscriber(
    KafkaTopic::new("bake-orders.registry-missing").group("ovens.registry-missing"),
    reply
)]
async fn schedule(order: &BakeOrder) -> OvenSlot {
    // Small batches share the first oven; big ones get the second.
    let oven = if order.loaves > 24 { 2 } else { 1 };
    tracing::info!(order.loaves, order.bakery, oven, "batch scheduled");
    OvenSlot {
        loaves: order.loaves,
        oven,
    }
}

/// The service over `registry`. It owns the slot subject, so a missing one is put back.
fn app(registry: SchemaRegistry) -> impl App {
    let schemas = SchemaPrefetch::new(registry).on_missing_subject(MissingSubject::AutoRegister);
    let codec =
        AvroCodec::registry(&schemas).register::<OvenSlot>("oven-slots.registry-missing-value");
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(schemas);
    let slots = codec.clone();
    RustStream::new(AppInfo::new("ovens", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(schedule)
            .out_reply(Publish::default())
            .codec(slots);
    })
}

#[ruststream::app]
fn service() -> impl App {
    app(SchemaRegistry::new(live::registry_url()))
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_slot_subject_is_registered_again_at_connect()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::deleted_subject_registered_again::<super::BakeOrder, super::OvenSlot, _>(
            super::app,
            "registry-missing",
        )
        .await
    }
}
