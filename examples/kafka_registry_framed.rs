//! `SchemaFramed` around the JSON codec: a greenhouse controller reads framed soil readings and
//! answers with framed watering plans. The codec strips the envelope before JSON decodes a
//! reading, and puts the plan subject's id in front of what JSON encodes; the subject is
//! resolved once, at connect, by the `SchemaPrefetch` the codec was built from.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_registry_framed \
//!     --features schema-registry -- run
//! $ cargo test --example kafka_registry_framed --features testing,schema-registry
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream::codec::JsonCodec;
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{SchemaFramed, SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// How wet one bed's soil is, framed by the sensor gateway.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct SoilReading {
    bed: u32,
    moisture_pct: u32,
}

/// How much water a bed gets, framed under `watering-plans.sr-framed-value`.
#[derive(Serialize, Deserialize, JsonSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "watering-plans.sr-framed")]
struct WateringPlan {
    bed: u32,
    litres: u32,
}

/// Below this the soil is too dry.
const DRY_BELOW_PCT: u32 = 30;

#[subscriber(KafkaTopic::new("soil-readings.sr-framed").group("greenhouse.sr-framed"), reply)]
async fn plan(reading: &SoilReading) -> WateringPlan {
    WateringPlan {
        bed: reading.bed,
        litres: if reading.moisture_pct < DRY_BELOW_PCT {
            4
        } else {
            0
        },
    }
}

/// The controller over `registry`: one framed JSON codec for readings in and plans out.
fn app(registry: SchemaRegistry) -> impl App {
    let prefetch = SchemaPrefetch::new(registry);
    let codec = SchemaFramed::new(&prefetch, JsonCodec)
        .register::<WateringPlan>("watering-plans.sr-framed-value");
    // Connect resolves the plan subject through the prefetch, so encoding never waits.
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(prefetch);
    let plans = codec.clone();
    RustStream::new(AppInfo::new("greenhouse", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(plan).out_reply(Publish::default()).codec(plans);
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
    async fn a_framed_reading_gets_a_framed_plan() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_codec_round_trip::<super::WateringPlan, _>(super::app, "sr-framed")
            .await
    }
}
