//! The greenhouse of `kafka_registry_register`, without macros: a `Handle` impl, a hand-built
//! subscription, and the plan topic named through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_register --features testing,schema-registry
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// What a bed's sensor reports.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct SoilSample {
    bed: u32,
    moisture: u32,
}

/// How much water the bed gets.
#[derive(Serialize, Deserialize, JsonSchema, Debug, PartialEq)]
struct WateringPlan {
    bed: u32,
    litres: u32,
}

impl OutgoingDestination for WateringPlan {
    type Form = FixedName;
    const DESTINATION: &'static str = "watering-plans.registry-register-manual";
}

impl MessageHeaders for WateringPlan {
    type Contract = NoHeaders;
}

struct Plan;

impl Handle<SoilSample, WateringPlan> for Plan {
    fn handle(
        &self,
        sample: &SoilSample,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<WateringPlan, HandlerOutcome>> {
        let litres = 40u32.saturating_sub(sample.moisture) / 4;
        tracing::info!(sample.bed, litres, "watering planned");
        ready(Ok(WateringPlan {
            bed: sample.bed,
            litres,
        }))
    }
}

fn samples() -> KafkaTopic {
    KafkaTopic::new("soil-samples.registry-register-manual")
        .group("greenhouse.registry-register-manual")
}

/// The service over `registry`: one subject registered, one warmed, at startup.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("greenhouse", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry.clone()))
        .on_startup(async move |()| {
            registry
                .register_json::<WateringPlan>("watering-plans.registry-register-manual-value")
                .await?;
            registry
                .warm("soil-samples.registry-register-manual-value")
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(subscriber(samples(), Plan).reply().build());
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
    async fn startup_registers_the_plans_and_warms_the_samples()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::startup_registers_and_warms(super::app, "registry-register-manual").await
    }
}
