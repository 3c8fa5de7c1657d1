//! Avro through the registry codec: a courier desk answers each parcel pickup with a receipt.
//! Pickups arrive framed in Avro; `AvroCodec::registry` reads them with the writer schema the
//! envelope names (resolved by the broker's `SchemaPrefetch` before the codec runs) and writes
//! receipts with the subject's registered schema, framed under its id. Connect resolves the
//! receipt subject and checks the app's model is compatible with it.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_avro_codec \
//!     --features avro -- run
//! $ cargo test --example kafka_avro_codec --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A parcel waiting at a counter.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
struct Pickup {
    parcel: i64,
    counter: String,
}

/// What the courier hands back.
#[derive(Serialize, Deserialize, AvroSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "pickup-receipts.avro-codec")]
struct PickupReceipt {
    parcel: i64,
    signed: bool,
}

#[subscriber(KafkaTopic::new("pickups.avro-codec").group("courier.avro-codec"), reply)]
async fn collect(pickup: &Pickup) -> PickupReceipt {
    PickupReceipt {
        parcel: pickup.parcel,
        signed: !pickup.counter.is_empty(),
    }
}

/// The service over `registry`: one codec reads pickups and writes receipts.
fn app(registry: SchemaRegistry) -> impl App {
    let prefetch = SchemaPrefetch::new(registry);
    let codec = AvroCodec::registry(&prefetch)
        .register::<PickupReceipt>("pickup-receipts.avro-codec-value");
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(prefetch);
    let replies = codec.clone();
    RustStream::new(AppInfo::new("courier", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(collect)
            .out_reply(Publish::default())
            .codec(replies);
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
    async fn an_avro_pickup_is_answered_with_an_avro_receipt()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::avro_pickup_answered::<super::Pickup, super::PickupReceipt, _>(
            super::app,
            "avro-codec",
        )
        .await
    }
}
