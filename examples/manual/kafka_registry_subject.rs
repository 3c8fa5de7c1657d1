//! The clinic of `kafka_registry_subject`, without macros: the handler is a `Handle` impl, the
//! subscription is built by hand, the prescription names its topic through
//! `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_subject --features testing,schema-registry
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaFrame, SchemaRegistry, SubjectStrategy};
use serde::{Deserialize, Serialize};

/// The fully qualified record name the clinic's schemas use for a prescription.
const PRESCRIPTION_RECORD: &str = "clinic.v1.Prescription";

/// A patient seen at the front desk, as plain JSON.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Checkup {
    patient: String,
    temperature_tenths: u32,
}

/// What the doctor hands out, framed under [`PRESCRIPTION_RECORD`].
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Prescription {
    patient: String,
    rest_days: u32,
}

impl OutgoingDestination for Prescription {
    type Form = FixedName;
    const DESTINATION: &'static str = "prescriptions.sr-subject-manual";
}

impl MessageHeaders for Prescription {
    type Contract = NoHeaders;
}

/// A fever, in tenths of a degree Celsius.
const FEVER_FROM: u32 = 380;

struct Prescribe;

impl Handle<Checkup, Prescription> for Prescribe {
    fn handle(
        &self,
        checkup: &Checkup,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Prescription, HandlerOutcome>> {
        ready(Ok(Prescription {
            patient: checkup.patient.clone(),
            rest_days: if checkup.temperature_tenths >= FEVER_FROM {
                3
            } else {
                0
            },
        }))
    }
}

fn checkups() -> KafkaTopic {
    KafkaTopic::new("checkups.sr-subject-manual").group("clinic.sr-subject-manual")
}

/// The clinic over `registry`: the layer frames prescriptions under the record-name subject.
fn app(registry: SchemaRegistry) -> impl App {
    let topic = Prescription::DESTINATION;
    let subject = SubjectStrategy::RecordName.subject(topic, PRESCRIPTION_RECORD);
    let broker = KafkaBroker::new([live::bootstrap()]);
    RustStream::new(AppInfo::new("clinic", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry).subject(topic, subject))
        .with_broker(broker, |b| {
            b.include(subscriber(checkups(), Prescribe).reply().build());
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
    async fn a_prescription_is_framed_under_its_record_subject()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_under_the_record_subject(
            super::app,
            "sr-subject-manual",
            super::PRESCRIPTION_RECORD,
        )
        .await
    }
}
