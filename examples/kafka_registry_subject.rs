//! Choosing the subject a reply is framed under: a clinic's prescriptions are registered under
//! their record's own name, `clinic.v1.Prescription`, the one subject every topic that carries
//! a prescription shares, rather than under `prescriptions.sr-subject-value`.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_registry_subject \
//!     --features schema-registry -- run
//! $ cargo test --example kafka_registry_subject --features testing,schema-registry
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaFrame, SchemaRegistry, SubjectStrategy};
use serde::{Deserialize, Serialize};

/// The fully qualified record name the clinic's schemas use for a prescription.
const PRESCRIPTION_RECORD: &str = "clinic.v1.Prescription";

/// A patient seen at the front desk, as plain JSON.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Checkup {
    patient: String,
    temperature_tenths: u32,
}

/// What the doctor hands out, framed under [`PRESCRIPTION_RECORD`].
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "prescriptions.sr-subject")]
struct Prescription {
    patient: String,
    rest_days: u32,
}

/// A fever, in tenths of a degree Celsius.
const FEVER_FROM: u32 = 380;

#[subscriber(KafkaTopic::new("checkups.sr-subject").group("clinic.sr-subject"), reply)]
async fn prescribe(checkup: &Checkup) -> Prescription {
    Prescription {
        patient: checkup.patient.clone(),
        rest_days: if checkup.temperature_tenths >= FEVER_FROM {
            3
        } else {
            0
        },
    }
}

/// The clinic over `registry`: the layer frames prescriptions under the record-name subject.
fn app(registry: SchemaRegistry) -> impl App {
    let topic = "prescriptions.sr-subject";
    let subject = SubjectStrategy::RecordName.subject(topic, PRESCRIPTION_RECORD);
    let broker = KafkaBroker::new([live::bootstrap()]);
    RustStream::new(AppInfo::new("clinic", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry).subject(topic, subject))
        .with_broker(broker, |b| {
            b.include(prescribe);
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
    async fn a_prescription_is_framed_under_its_record_subject()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_under_the_record_subject(
            super::app,
            "sr-subject",
            super::PRESCRIPTION_RECORD,
        )
        .await
    }
}
