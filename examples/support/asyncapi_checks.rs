//! What the `AsyncAPI` examples check, written once: each check reads the document the fleet
//! service of `kafka_asyncapi` (or its manual twin) generates.
#![allow(dead_code)]

use std::error::Error;

use ruststream::asyncapi::build_spec;
use ruststream_kafka::prelude::App;
use serde_json::Value;

pub type Outcome<T = ()> = Result<T, Box<dyn Error>>;

/// The password the tests build the cluster with; it must not appear in the document.
pub const SECRET: &str = "s3cret-fleet-pass";

/// The five tests both twins carry, each reading the document of `super::fleet` over
/// `super::cluster(SECRET)`; expanded inside the example's `tests` module.
macro_rules! fleet_document_tests {
    () => {
        use super::checks::{self, Outcome, SECRET};

        fn document() -> Outcome<serde_json::Value> {
            checks::document(&super::fleet(super::cluster(SECRET)))
        }

        #[test]
        fn server_channels_and_operations_carry_kafka_bindings() -> Outcome {
            checks::every_binding_is_kafka(&document()?)
        }

        #[test]
        fn the_server_names_the_cluster_and_its_registry() -> Outcome {
            checks::server_and_registry(&document()?);
            Ok(())
        }

        #[test]
        fn no_credential_reaches_the_document() -> Outcome {
            checks::no_credentials(&document()?);
            Ok(())
        }

        #[test]
        fn each_channel_names_its_topic() -> Outcome {
            checks::channel_topics(&document()?)
        }

        #[test]
        fn receive_operations_name_their_group() -> Outcome {
            checks::operation_groups(&document()?)
        }
    };
}
pub(crate) use fleet_document_tests;

/// The document `app` generates, as JSON.
pub fn document<A: App>(app: &A) -> Outcome<Value> {
    Ok(serde_json::from_str(&build_spec(app).to_json()?)?)
}

/// The `kafka` binding under `bindings`, which must be there.
fn kafka<'a>(bindings: &'a Value, place: &str) -> Outcome<&'a Value> {
    bindings
        .get("kafka")
        .ok_or_else(|| format!("{place} has no kafka binding: {bindings}").into())
}

/// The server, a channel and a receive operation each carry a `kafka` binding of the version
/// the document is written for.
pub fn every_binding_is_kafka(doc: &Value) -> Outcome {
    for (place, bindings) in [
        ("the server", &doc["servers"]["fleet"]["bindings"]),
        (
            "the pings channel",
            &doc["channels"]["vehicle-pings"]["bindings"],
        ),
        (
            "the pings operation",
            &doc["operations"]["receive_vehicle_pings"]["bindings"],
        ),
    ] {
        assert_eq!(
            kafka(bindings, place)?["bindingVersion"],
            "0.5.0",
            "{place}"
        );
    }
    Ok(())
}

/// The server is the bootstrap list as a coordinate (no protocol version), with the registry's
/// address and vendor in its binding.
pub fn server_and_registry(doc: &Value) {
    assert_eq!(
        doc["servers"]["fleet"],
        serde_json::json!({
            "host": "kafka-a.fleet.example:9093,kafka-b.fleet.example:9093",
            "protocol": "kafka",
            "bindings": {
                "kafka": {
                    "bindingVersion": "0.5.0",
                    "schemaRegistryUrl": "https://schemas.fleet.example:8081",
                    "schemaRegistryVendor": "confluent",
                },
            },
        })
    );
}

/// Neither the SASL password nor the registry's basic credentials are written anywhere.
pub fn no_credentials(doc: &Value) {
    let text = doc.to_string();
    assert!(!text.contains(SECRET), "the secret is in {text}");
    assert!(!text.contains("sasl"), "a SASL setting is in {text}");
    assert!(!text.contains("fleet-svc"), "a user name is in {text}");
}

/// A single topic, a partition reader's topic and a reply topic each name their topic; a
/// subscription to two topics has no single topic to name.
pub fn channel_topics(doc: &Value) -> Outcome {
    let channels = &doc["channels"];
    for topic in ["vehicle-pings", "fuel-log", "vehicle-positions"] {
        let binding = kafka(&channels[topic]["bindings"], topic)?;
        assert_eq!(binding["topic"], topic);
    }
    assert!(
        channels["breakdowns,breakdowns.night"]["bindings"].is_null(),
        "{channels}"
    );
    Ok(())
}

/// A receive operation names the group its subscription joins and the `client.id` set on it;
/// the partition reader joins no group and sets no client id, so it names neither.
pub fn operation_groups(doc: &Value) -> Outcome {
    let operations = &doc["operations"];
    let one_of = |value: &str| serde_json::json!({"type": "string", "enum": [value]});
    let pings = kafka(
        &operations["receive_vehicle_pings"]["bindings"],
        "the pings operation",
    )?;
    assert_eq!(pings["groupId"], one_of("fleet-tracker"));
    assert_eq!(pings["clientId"], one_of("tracker-east"));
    let breakdowns = kafka(
        &operations["receive_breakdowns_breakdowns_night"]["bindings"],
        "the breakdowns operation",
    )?;
    assert_eq!(breakdowns["groupId"], one_of("roadside"));
    assert!(breakdowns.get("clientId").is_none(), "{breakdowns}");
    // The broker's default group is not the reader's to report.
    assert!(
        operations["receive_fuel_log"]["bindings"].is_null(),
        "{operations}"
    );
    Ok(())
}
