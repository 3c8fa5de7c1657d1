//! Avro through the registry codec: a courier desk answers each parcel pickup with a receipt.
//! Pickups arrive framed in Avro; `AvroCodec::registry` reads them with the writer schema the
//! envelope names (resolved by the broker's `SchemaPrefetch` before the codec runs) and writes
//! receipts with the subject's registered schema, framed under its id. Connect resolves the
//! receipt subject and checks the app's model is compatible with it.
//!
//! ```text
//! scripts/kafka up
//! SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_avro_codec \
//!     --features avro -- run
//! cargo test --example kafka_avro_codec --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../tests/support/registry.rs"]
mod registry;

// --8<-- [start:app]
use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A parcel waiting at a counter.
#[derive(Debug, PartialEq, Serialize, Deserialize, AvroSchema)]
struct Pickup {
    parcel: i64,
    counter: String,
}

/// What the courier hands back.
#[derive(Debug, PartialEq, Serialize, Deserialize, AvroSchema, Outgoing)]
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
    let url =
        std::env::var("SCHEMA_REGISTRY_URL").unwrap_or_else(|_| "http://localhost:8081".into());
    app(SchemaRegistry::new(url))
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::codec::Codec;
    use ruststream::testing::TestApp;
    use ruststream_kafka::avro::AvroCodec;
    use ruststream_kafka::prelude::*;
    use ruststream_kafka::schema_registry::parse_envelope;
    use ruststream_kafka::{SchemaPrefetch, SchemaRegistry};

    use super::{Pickup, PickupReceipt, app, live, readback, registry::RegistryDouble};

    /// Bytes published exactly as given.
    #[derive(Serialized, Outgoing)]
    #[outgoing(name = "pickups.avro-codec")]
    struct Framed(Vec<u8>);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_avro_pickup_is_answered_with_an_avro_receipt() -> Result<(), Box<dyn Error>> {
        live::ensure_topic("pickups.avro-codec", 1).await?;
        live::ensure_topic("pickup-receipts.avro-codec", 1).await?;
        let before = readback::log_ends("pickup-receipts.avro-codec", 1).await?;
        let double = RegistryDouble::start().await;
        let registry = SchemaRegistry::new(double.url());
        registry
            .register_avro::<Pickup>("pickups.avro-codec-value")
            .await?;
        let receipts = registry
            .register_avro::<PickupReceipt>("pickup-receipts.avro-codec-value")
            .await?;

        // Another producer frames a pickup with its own registry codec.
        let producer = SchemaPrefetch::new(registry.clone());
        let framed = AvroCodec::registry(&producer)
            .register::<Pickup>("pickups.avro-codec-value")
            .encode(&Pickup {
                parcel: 77,
                counter: "north".into(),
            })?;

        let tb = TestApp::start_live_within(app(registry.clone()), Duration::from_secs(30)).await?;
        tb.broker::<KafkaBroker>()
            .message(&Framed(framed.to_vec()))
            .publish()
            .await?;
        tb.broker::<KafkaBroker>()
            .subscriber("pickups.avro-codec")
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;

        let landed = readback::records_since(
            "pickup-receipts.avro-codec",
            0,
            before[0],
            ruststream_kafka::client::IsolationLevel::ReadCommitted,
        )
        .await?;
        let value = landed[0].value.clone().ok_or("no value")?;
        let (id, _) = parse_envelope(&value).ok_or("the receipt is not framed")?;
        assert_eq!(id, receipts);
        registry.schema_by_id(id).await?;
        let reader = AvroCodec::registry(&SchemaPrefetch::new(registry));
        assert_eq!(
            reader.decode::<PickupReceipt>(&value)?,
            PickupReceipt {
                parcel: 77,
                signed: true
            }
        );
        Ok(())
    }
}
