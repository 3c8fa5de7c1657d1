//! The bakery of `kafka_registry_missing`, without macros: a `Handle` impl, a hand-built
//! subscription, and the slot topic named through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_missing --features testing,avro
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{MissingSubject, SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A shop's order for a batch of loaves.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct BakeOrder {
    loaves: i32,
    bakery: String,
}

/// The oven the batch goes into.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct OvenSlot {
    loaves: i32,
    oven: i32,
}

impl OutgoingDestination for OvenSlot {
    type Form = FixedName;
    const DESTINATION: &'static str = "oven-slots.registry-missing-manual";
}

impl MessageHeaders for OvenSlot {
    type Contract = NoHeaders;
}

struct Schedule;

impl Handle<BakeOrder, OvenSlot> for Schedule {
    fn handle(
        &self,
        order: &BakeOrder,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<OvenSlot, HandlerOutcome>> {
        // Small batches share the first oven; big ones get the second.
        let oven = if order.loaves > 24 { 2 } else { 1 };
        tracing::info!(order.loaves, order.bakery, oven, "batch scheduled");
        ready(Ok(OvenSlot {
            loaves: order.loaves,
            oven,
        }))
    }
}

fn orders() -> KafkaTopic {
    KafkaTopic::new("bake-orders.registry-missing-manual").group("ovens.registry-missing-manual")
}

/// The service over `registry`. It owns the slot subject, so a missing one is put back.
fn app(registry: SchemaRegistry) -> impl App {
    let schemas = SchemaPrefetch::new(registry).on_missing_subject(MissingSubject::AutoRegister);
    let codec = AvroCodec::registry(&schemas)
        .register::<OvenSlot>("oven-slots.registry-missing-manual-value");
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(schemas);
    let slots = codec.clone();
    RustStream::new(AppInfo::new("ovens", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(subscriber(orders(), Schedule).reply().build())
            .out_reply(Publish::default())
            .codec(slots);
    })
}

fn main() -> ExitCode {
    run_main(|| app(SchemaRegistry::new(live::registry_url())))
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_slot_subject_is_registered_again_at_connect()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::deleted_subject_registered_again::<super::BakeOrder, super::OvenSlot, _>(
            super::app,
            "registry-missing-manual",
        )
        .await
    }
}
