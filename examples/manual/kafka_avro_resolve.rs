//! The meter billing of `kafka_avro_resolve`, without macros: a `Handle` impl, a hand-built
//! subscription, and the bill topic named through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_avro_resolve --features testing,avro
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use apache_avro::Schema;
use ruststream_kafka::KafkaError;
use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use serde::{Deserialize, Serialize};

/// The reading the meters write today, as their firmware's schema file spells it.
const METERS_WRITE: &str = r#"{
  "type": "record",
  "name": "MeterReading",
  "fields": [
    {"name": "meter", "type": "string"},
    {"name": "kwh", "type": "double"}
  ]
}"#;

/// The service's reading: one field newer than the meters.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct MeterReading {
    meter: String,
    kwh: f64,
    #[avro(default = r#""standard""#)]
    tariff: String,
}

/// What the billing run records for the reading.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct MeterBill {
    meter: String,
    tariff: String,
}

impl OutgoingDestination for MeterBill {
    type Form = FixedName;
    const DESTINATION: &'static str = "meter-bills.avro-resolve-manual";
}

impl MessageHeaders for MeterBill {
    type Contract = NoHeaders;
}

struct Bill;

impl Handle<MeterReading, MeterBill> for Bill {
    fn handle(
        &self,
        reading: &MeterReading,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<MeterBill, HandlerOutcome>> {
        tracing::info!(reading.meter, reading.kwh, reading.tariff, "reading billed");
        ready(Ok(MeterBill {
            meter: reading.meter.clone(),
            tariff: reading.tariff.clone(),
        }))
    }
}

fn meter_readings() -> KafkaTopic {
    KafkaTopic::new("meter-readings.avro-resolve-manual").group("billing.avro-resolve-manual")
}

/// Reads what the meters write onto `MeterReading`.
fn readings() -> Result<AvroCodec, KafkaError> {
    let written = Schema::parse_str(METERS_WRITE)
        .map_err(|e| KafkaError::InvalidOptions(format!("the meters' schema: {e}")))?;
    AvroCodec::local(written)?.resolve_onto(MeterReading::get_schema())
}

/// The service: readings resolved onto the model, bills written with their own schema.
fn app() -> impl App {
    let readings = readings().unwrap_or_else(|e| panic!("{e}"));
    let bills = AvroCodec::local(MeterBill::get_schema()).unwrap_or_else(|e| panic!("{e}"));
    RustStream::new(AppInfo::new("meter-billing", "0.1.0")).with_broker_codec(
        KafkaBroker::new([live::bootstrap()]),
        readings,
        |b| {
            b.include(subscriber(meter_readings(), Bill).reply().build())
                .out_reply(Publish::default())
                .codec(bills);
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reading_without_a_tariff_is_billed_on_the_default()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::reader_default_fills_the_gap::<super::MeterBill, _>(
            super::app(),
            "avro-resolve-manual",
        )
        .await
    }
}
