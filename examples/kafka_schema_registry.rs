//! A Schema Registry service: a front desk confirms room holds. Holds arrive in the Confluent
//! envelope and are turned back into JSON by the broker's registry edge; confirmations leave
//! through the `SchemaFrame` publish layer, which frames them under their subject's id.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_schema_registry \
//!     --features schema-registry -- run
//! $ cargo test --example kafka_schema_registry --features testing,schema-registry
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A guest asks to hold a room.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Hold {
    room: u32,
    guest: String,
}

/// The desk's answer, framed under `hold-confirmations.sr-example-value`.
#[derive(Serialize, Deserialize, JsonSchema, Outgoing, Debug, PartialEq)]
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
    app(SchemaRegistry::new(live::registry_url()))
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_framed_hold_gets_a_framed_confirmation() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_hold_confirmed(super::app, "sr-example").await
    }
}
