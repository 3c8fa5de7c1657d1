//! The service of the Testing guide: a pharmacy counter. A prescription without a patient is
//! dropped; a large one is held for a pharmacist's review; every other one is dispensed, keyed
//! by patient so one patient's records stay in order. The live test drives it through the
//! harness and reads what landed back from the cluster.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example guide_testing -- run
//! $ cargo test --example guide_testing
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Above this many units a pharmacist looks first.
const REVIEW_ABOVE: u32 = 90;

/// A prescription handed in at the counter.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "prescriptions.guide_testing")]
struct Prescription {
    patient: Option<String>,
    drug: String,
    units: u32,
}

/// The record key of a dispensed prescription: its patient.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct PatientKey {
    #[serde(rename = "kafka-partition-key")]
    patient: String,
}

/// What the counter hands out.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "dispensed.guide_testing", headers = PatientKey)]
struct Dispensed {
    drug: String,
    units: u32,
}

/// A prescription waiting for a pharmacist.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "review.guide_testing")]
struct Held {
    patient: String,
    drug: String,
    units: u32,
}

#[derive(OutSlot)]
#[publishes(Dispensed, Held)]
struct Counter;

#[subscriber(KafkaTopic::new("prescriptions.guide_testing").group("counter.guide_testing"))]
async fn fill(
    prescription: &Prescription,
    Out(counter): Out<impl Publisher, Counter>,
) -> HandlerOutcome {
    let Some(patient) = &prescription.patient else {
        tracing::warn!(
            prescription.drug,
            "a prescription without a patient is dropped"
        );
        return HandlerOutcome::drop();
    };
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
    match sent {
        Ok(()) => HandlerOutcome::ack(),
        Err(_) => HandlerOutcome::retry(),
    }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("pharmacy", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(fill).out(Counter, Publish::default()).build();
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::TestApp;
    use ruststream_kafka::client::IsolationLevel;
    use ruststream_kafka::prelude::*;

    use super::runs::{START, topic};
    use super::{Dispensed, Held, Prescription, app, readback};

    const PRESCRIPTIONS: &str = "prescriptions.guide_testing";
    const DISPENSED: &str = "dispensed.guide_testing";
    const REVIEW: &str = "review.guide_testing";

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
