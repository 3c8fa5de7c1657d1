//! The pharmacy counter of `examples/guide/testing.rs` without macros: the handler is a type
//! implementing `Handle` over its `Out` entry, the slot and the destinations are written by
//! hand, and the live test is the same.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_guide_testing -- run
//! $ cargo test --example manual_guide_testing
//! ```

use std::process::ExitCode;

use ruststream::WithHeaders;
use ruststream::runtime::cli::run_main;
use ruststream::runtime::{ListOffer, OutSlot, PublishedThrough};
use serde::{Deserialize, Serialize};

#[path = "../../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../../support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../../support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "../../support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Above this many units a pharmacist looks first.
const REVIEW_ABOVE: u32 = 90;

/// The slot dispensed and held prescriptions leave through.
struct Counter;

impl OutSlot for Counter {
    const NAME: &'static str = "Counter";
    type Destination = <(Dispensed, (Held, ())) as ListOffer>::Offer;
}

impl PublishedThrough<Counter> for Dispensed {}
impl PublishedThrough<Counter> for Held {}

struct Fill;

impl<Entry> Handle<Prescription, (), Outs<(Entry,)>> for Fill
where
    Entry: OutEntry<Counter, Wire: Publisher>,
{
    async fn handle(
        &self,
        prescription: &Prescription,
        outs: &Outs<(Entry,)>,
        _ctx: &mut Context<'_>,
    ) -> Result<(), HandlerOutcome> {
        let Some(patient) = &prescription.patient else {
            tracing::warn!(
                prescription.drug,
                "a prescription without a patient is dropped"
            );
            return Err(HandlerOutcome::drop());
        };
        let counter = outs.get(Counter);
        let sent = if prescription.units > REVIEW_ABOVE {
            let held = Held {
                patient: patient.clone(),
                drug: prescription.drug.clone(),
                units: prescription.units,
            };
            counter.message(&held).publish().await
        } else {
            let key = PatientKey {
                patient: patient.clone(),
            };
            let dispensed = Dispensed {
                drug: prescription.drug.clone(),
                units: prescription.units,
            };
            counter
                .message(&dispensed)
                .with_headers(&key)
                .publish()
                .await
        };
        sent.map_err(|_| HandlerOutcome::retry())
    }
}

fn prescriptions() -> KafkaTopic {
    KafkaTopic::new("prescriptions.manual_guide_testing").group("counter.manual_guide_testing")
}

fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("pharmacy", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(prescriptions(), Fill).build())
                .out(Counter, Publish::default())
                .build();
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A prescription handed in at the counter.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Prescription {
    patient: Option<String>,
    drug: String,
    units: u32,
}

impl OutgoingDestination for Prescription {
    type Form = FixedName;
    const DESTINATION: &'static str = "prescriptions.manual_guide_testing";
}

impl MessageHeaders for Prescription {
    type Contract = NoHeaders;
}

/// The record key of a dispensed prescription: its patient.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct PatientKey {
    #[serde(rename = "kafka-partition-key")]
    patient: String,
}

/// What the counter hands out.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Dispensed {
    drug: String,
    units: u32,
}

impl OutgoingDestination for Dispensed {
    type Form = FixedName;
    const DESTINATION: &'static str = "dispensed.manual_guide_testing";
}

impl MessageHeaders for Dispensed {
    type Contract = WithHeaders<PatientKey>;
}

/// A prescription waiting for a pharmacist.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Held {
    patient: String,
    drug: String,
    units: u32,
}

impl OutgoingDestination for Held {
    type Form = FixedName;
    const DESTINATION: &'static str = "review.manual_guide_testing";
}

impl MessageHeaders for Held {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::TestApp;
    use ruststream_kafka::client::IsolationLevel;
    use ruststream_kafka::prelude::*;

    use super::runs::{START, topic};
    use super::{Dispensed, Held, Prescription, app, readback};

    const PRESCRIPTIONS: &str = "prescriptions.manual_guide_testing";
    const DISPENSED: &str = "dispensed.manual_guide_testing";
    const REVIEW: &str = "review.manual_guide_testing";

    fn prescription(patient: Option<&str>, drug: &str, units: u32) -> Prescription {
        Prescription {
            patient: patient.map(str::to_owned),
            drug: drug.to_owned(),
            units,
        }
    }

    // --8<-- [start:test]
    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_counter_dispenses_drops_and_holds_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) = super::in_process::start_with_topics(app(), (), &[]).await?;
        the_counter_dispenses_drops_and_holds_body(tb).await?;
        // On the cluster: the dispensed record is keyed by the patient.
        let records = cluster.records(DISPENSED);
        let [(_, record)] = &records[..] else {
            return Err(format!("one dispensed record expected, got {}", records.len()).into());
        };
        assert_eq!(record.key.as_deref(), Some(&b"p-17"[..]));
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_counter_dispenses_drops_and_holds() -> Result<(), Box<dyn Error>> {
        for name in [PRESCRIPTIONS, DISPENSED, REVIEW] {
            topic(name, 1).await?;
        }
        let dispensed_before = readback::log_ends(DISPENSED, 1).await?;
        let review_before = readback::log_ends(REVIEW, 1).await?;
        let tb = TestApp::start_live_within(app(), START).await?;
        let (dispensed, held) = the_counter_dispenses_drops_and_holds_body(tb).await?;

        // On the cluster: one dispensed record under the patient's key, one held record.
        let records = readback::records_since(
            DISPENSED,
            0,
            dispensed_before[0],
            IsolationLevel::ReadCommitted,
        )
        .await?;
        let [record] = &records[..] else {
            return Err(format!("one dispensed record expected, got {}", records.len()).into());
        };
        assert_eq!(record.key.as_deref(), Some(&b"p-17"[..]));
        assert_eq!(readback::text(record), serde_json::to_string(&dispensed)?);
        let review = readback::committed_values_since(REVIEW, &review_before).await?;
        assert_eq!(review, [vec![serde_json::to_string(&held)?]]);
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started; it returns what
    /// the live test then reads back.
    async fn the_counter_dispenses_drops_and_holds_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(Dispensed, Held), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();

        // Dispensed, keyed by the patient.
        kafka
            .message(&prescription(Some("p-17"), "amoxicillin", 21))
            .publish()
            .await?;
        kafka
            .subscriber(PRESCRIPTIONS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        let dispensed = Dispensed {
            drug: "amoxicillin".to_owned(),
            units: 21,
        };
        kafka
            .published::<Dispensed>(DISPENSED)
            .assert_called_once()
            .with(&dispensed);

        // No patient: dropped, nothing published.
        kafka
            .message(&prescription(None, "ibuprofen", 10))
            .publish()
            .await?;
        kafka
            .subscriber(PRESCRIPTIONS)
            .assert_called(2)
            .settled(HandlerOutcome::drop());

        // Too many units: held for review instead of dispensed.
        kafka
            .message(&prescription(Some("p-23"), "insulin", 120))
            .publish()
            .await?;
        kafka
            .subscriber(PRESCRIPTIONS)
            .assert_called(3)
            .settled(HandlerOutcome::ack());
        let held = Held {
            patient: "p-23".to_owned(),
            drug: "insulin".to_owned(),
            units: 120,
        };
        kafka
            .published::<Held>(REVIEW)
            .assert_called_once()
            .with(&held);
        kafka.published::<Dispensed>(DISPENSED).assert_called_once();
        tb.shutdown().await?;
        Ok((dispensed, held))
    }
    // --8<-- [end:test]
}
