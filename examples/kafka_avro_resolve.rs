//! Avro schema resolution: a utility bills meter readings. The meters in the field still write
//! the first version of the reading, without a tariff; this service's model has one, with a
//! default. `AvroCodec::resolve_onto` reads every datum with the schema the meters write and
//! resolves it onto the model's schema, so the tariff the meters never wrote takes its default.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_avro_resolve --features avro -- run
//! $ cargo test --example kafka_avro_resolve --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
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
struct MeterReading {
    meter: String,
    kwh: f64,
    #[avro(default = r#""standard""#)]
    tariff: String,
}

/// What the billing run records for the reading.
#[derive(Serialize, Deserialize, AvroSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "meter-bills.avro-resolve")]
struct MeterBill {
    meter: String,
    tariff: String,
}

#[subscriber(
    KafkaTopic::new("meter-readings.avro-resolve").group("billing.avro-resolve"),
    reply
)]
async fn bill(reading: &MeterReading) -> MeterBill {
    tracing::info!(reading.meter, reading.kwh, reading.tariff, "reading billed");
    MeterBill {
        meter: reading.meter.clone(),
        tariff: reading.tariff.clone(),
    }
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
            b.include(bill).out_reply(Publish::default()).codec(bills);
        },
    )
}

#[ruststream::app]
fn service() -> impl App {
    app()
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reading_without_a_tariff_is_billed_on_the_default()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::reader_default_fills_the_gap::<super::MeterBill, _>(
            super::app(),
            "avro-resolve",
        )
        .await
    }
}
