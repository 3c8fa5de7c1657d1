//! The greenhouse controller of `kafka_registry_framed`, without macros: the handler is a
//! `Handle` impl, the subscription is built by hand, the plan names its topic through
//! `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_framed --features testing,schema-registry
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::codec::JsonCodec;
use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{SchemaFramed, SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// How wet one bed's soil is, framed by the sensor gateway.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct SoilReading {
    bed: u32,
    moisture_pct: u32,
}

/// How much water a bed gets, framed under `watering-plans.sr-framed-manual-value`.
#[derive(Serialize, Deserialize, JsonSchema, Debug, PartialEq)]
struct WateringPlan {
    bed: u32,
    litres: u32,
}

impl OutgoingDestination for WateringPlan {
    type Form = FixedName;
    const DESTINATION: &'static str = "watering-plans.sr-framed-manual";
}

impl MessageHeaders for WateringPlan {
    type Contract = NoHeaders;
}

/// Below this the soil is too dry.
const DRY_BELOW_PCT: u32 = 30;

struct Plan;

impl Handle<SoilReading, WateringPlan> for Plan {
    fn handle(
        &self,
        reading: &SoilReading,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<WateringPlan, HandlerOutcome>> {
        ready(Ok(WateringPlan {
            bed: reading.bed,
            litres: if reading.moisture_pct < DRY_BELOW_PCT {
                4
            } else {
                0
            },
        }))
    }
}

fn readings() -> KafkaTopic {
    KafkaTopic::new("soil-readings.sr-framed-manual").group("greenhouse.sr-framed-manual")
}

/// The controller over `registry`: one framed JSON codec for readings in and plans out.
fn app(registry: SchemaRegistry) -> impl App {
    let prefetch = SchemaPrefetch::new(registry);
    let codec = SchemaFramed::new(&prefetch, JsonCodec)
        .register::<WateringPlan>("watering-plans.sr-framed-manual-value");
    // Connect resolves the plan subject through the prefetch, so encoding never waits.
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(prefetch);
    let plans = codec.clone();
    RustStream::new(AppInfo::new("greenhouse", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(subscriber(readings(), Plan).reply().build())
            .out_reply(Publish::default())
            .codec(plans);
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
    async fn a_framed_reading_gets_a_framed_plan() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_codec_round_trip::<super::WateringPlan, _>(
            super::app,
            "sr-framed-manual",
        )
        .await
    }
}
