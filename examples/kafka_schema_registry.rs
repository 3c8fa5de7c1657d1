//! A Schema Registry service: a front desk confirms room holds. Holds arrive in the Confluent
//! envelope and are turned back into JSON by the broker's registry edge; confirmations leave
//! through the `SchemaFrame` publish layer, which frames them under their subject's id.
//!
//! ```text
//! scripts/kafka up
//! SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_schema_registry \
//!     --features schema-registry -- run
//! cargo test --example kafka_schema_registry --features testing,schema-registry
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../tests/support/registry.rs"]
mod registry;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A guest asks to hold a room.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Hold {
    room: u32,
    guest: String,
}

/// The desk's answer, framed under `hold-confirmations.sr-example-value`.
#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing, JsonSchema)]
#[outgoing(name = "hold-confirmations.sr-example")]
struct HoldConfirmed {
    room: u32,
    guest: String,
    nights_left: u32,
}

#[subscriber(KafkaTopic::new("holds.sr-example").group("front-desk.sr-example"), reply)]
async fn confirm(hold: &Hold) -> HoldConfirmed {
    HoldConfirmed {
        room: hold.room,
        guest: hold.guest.clone(),
        nights_left: 3,
    }
}

/// The service over `registry`: framed deliveries in, framed replies out. The reply subject
/// is registered at startup so the layer finds it.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("front-desk", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry.clone()))
        .on_startup(async move |()| {
            registry
                .register_json::<HoldConfirmed>("hold-confirmations.sr-example-value")
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(confirm);
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

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;
    use ruststream_kafka::schema_registry::{encode_envelope, parse_envelope};
    use ruststream_kafka::{SchemaRegistry, SchemaType};

    use super::{HoldConfirmed, app, live, readback, registry::RegistryDouble};

    /// Bytes published exactly as given.
    #[derive(Serialized, Outgoing)]
    #[outgoing(name = "holds.sr-example")]
    struct Framed(Vec<u8>);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_framed_hold_gets_a_framed_confirmation() -> Result<(), Box<dyn Error>> {
        live::ensure_topic("holds.sr-example", 1).await?;
        live::ensure_topic("hold-confirmations.sr-example", 1).await?;
        let before = readback::log_ends("hold-confirmations.sr-example", 1).await?;
        let double = RegistryDouble::start().await;
        let holds = double.register(
            "holds.sr-example-value",
            "JSON",
            r#"{"type":"object","properties":{"room":{"type":"integer"}}}"#,
        );
        let registry = SchemaRegistry::new(double.url());

        let tb = TestApp::start_live_within(app(registry.clone()), Duration::from_secs(30)).await?;
        let hold = br#"{"room":12,"guest":"Mira"}"#;
        tb.broker::<KafkaBroker>()
            .message(&Framed(encode_envelope(holds, hold)))
            .publish()
            .await?;
        tb.broker::<KafkaBroker>()
            .subscriber("holds.sr-example")
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;

        let landed = readback::records_since(
            "hold-confirmations.sr-example",
            0,
            before[0],
            ruststream_kafka::client::IsolationLevel::ReadCommitted,
        )
        .await?;
        let value = landed[0].value.clone().ok_or("no value")?;
        let (id, datum) = parse_envelope(&value).ok_or("the confirmation is not framed")?;
        let subject = registry.warm("hold-confirmations.sr-example-value").await?;
        assert_eq!(subject.schema_type(), SchemaType::Json);
        assert_eq!(id, subject.id());
        assert_eq!(
            serde_json::from_slice::<HoldConfirmed>(datum)?,
            HoldConfirmed {
                room: 12,
                guest: "Mira".into(),
                nights_left: 3
            }
        );
        Ok(())
    }
}
