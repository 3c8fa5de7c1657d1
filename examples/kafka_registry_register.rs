//! Registering at startup: a greenhouse turns soil samples into watering plans. The service
//! owns the `watering-plans` subject and registers its JSON Schema when it starts (an identical
//! schema keeps its id); the `soil-samples` subject belongs to the sensors' team, so the service
//! only warms it: a missing subject stops startup, and nothing is registered there.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_registry_register \
//!     --features schema-registry -- run
//! $ cargo test --example kafka_registry_register --features testing,schema-registry
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// What a bed's sensor reports.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct SoilSample {
    bed: u32,
    moisture: u32,
}

/// How much water the bed gets, framed under `watering-plans.registry-register-value`.
#[derive(Serialize, Deserialize, JsonSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "watering-plans.registry-register")]
struct WateringPlan {
    bed: u32,
    litres: u32,
}

#[subscriber(
    KafkaTopic::new("soil-samples.registry-register").group("greenhouse.registry-register"),
    reply
)]
async fn plan(sample: &SoilSample) -> WateringPlan {
    let litres = 40u32.saturating_sub(sample.moisture) / 4;
    tracing::info!(sample.bed, litres, "watering planned");
    WateringPlan {
        bed: sample.bed,
        litres,
    }
}

/// The service over `registry`: one subject registered, one warmed, at startup.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("greenhouse", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry.clone()))
        .on_startup(async move |()| {
            registry
                .register_json::<WateringPlan>("watering-plans.registry-register-value")
                .await?;
            registry
                .warm("soil-samples.registry-register-value")
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(plan);
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
    async fn startup_registers_the_plans_and_warms_the_samples()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::startup_registers_and_warms(super::app, "registry-register").await
    }
}
