//! The courier desk of `kafka_avro_codec`, without macros: a `Handle` impl, a hand-built
//! subscription, and the receipt's topic named through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_avro_codec --features testing,avro
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A parcel waiting at a counter.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Pickup {
    parcel: i64,
    counter: String,
}

/// What the courier hands back.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct PickupReceipt {
    parcel: i64,
    signed: bool,
}

impl OutgoingDestination for PickupReceipt {
    type Form = FixedName;
    const DESTINATION: &'static str = "pickup-receipts.avro-manual";
}

impl MessageHeaders for PickupReceipt {
    type Contract = NoHeaders;
}

struct Collect;

impl Handle<Pickup, PickupReceipt> for Collect {
    fn handle(
        &self,
        pickup: &Pickup,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<PickupReceipt, HandlerOutcome>> {
        ready(Ok(PickupReceipt {
            parcel: pickup.parcel,
            signed: !pickup.counter.is_empty(),
        }))
    }
}

fn pickups() -> KafkaTopic {
    KafkaTopic::new("pickups.avro-manual").group("courier.avro-manual")
}

/// The service over `registry`: one codec reads pickups and writes receipts.
fn app(registry: SchemaRegistry) -> impl App {
    let prefetch = SchemaPrefetch::new(registry);
    let codec = AvroCodec::registry(&prefetch)
        .register::<PickupReceipt>("pickup-receipts.avro-manual-value");
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(prefetch);
    let replies = codec.clone();
    RustStream::new(AppInfo::new("courier", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(subscriber(pickups(), Collect).reply().build())
            .out_reply(Publish::default())
            .codec(replies);
    })
}

fn main() -> ExitCode {
    run_main(|| {
        let url =
            std::env::var("SCHEMA_REGISTRY_URL").unwrap_or_else(|_| "http://localhost:8081".into());
        app(SchemaRegistry::new(url))
    })
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_avro_pickup_is_answered_with_an_avro_receipt()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::avro_pickup_answered::<super::Pickup, super::PickupReceipt, _>(
            super::app,
            "avro-manual",
        )
        .await
    }
}
