//! `AsyncAPI` `kafka` bindings (feature `asyncapi`): what the generated document says about
//! topics, consumer groups and client ids. Computed from descriptors and policies alone (the
//! document is built before connecting), never from credentials.

use ruststream::asyncapi::{Binding, Bindings};
use serde::Serialize;

/// The version of the `AsyncAPI` Kafka bindings written.
const BINDING_VERSION: &str = "0.5.0";

/// A binding, or none when it cannot be built (a binding never fails the document).
fn kafka<T: Serialize>(body: &T) -> Bindings {
    Binding::new("kafka", BINDING_VERSION, body)
        .map_or_else(|_| Bindings::new(), |b| Bindings::new().with(b))
}

/// A JSON schema admitting exactly one string.
#[derive(Serialize)]
struct OneValue<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "enum")]
    values: [&'a str; 1],
}

impl<'a> OneValue<'a> {
    fn new(value: &'a str) -> Self {
        Self {
            kind: "string",
            values: [value],
        }
    }
}

#[derive(Serialize)]
struct Channel<'a> {
    topic: &'a str,
}

#[derive(Serialize)]
struct Operation<'a> {
    #[serde(rename = "groupId", skip_serializing_if = "Option::is_none")]
    group_id: Option<OneValue<'a>>,
    #[serde(rename = "clientId", skip_serializing_if = "Option::is_none")]
    client_id: Option<OneValue<'a>>,
}

/// The channel binding of one topic.
pub(crate) fn channel(topic: &str) -> Bindings {
    kafka(&Channel { topic })
}

/// The operation binding of a subscription: its own group and the last `client.id` of its
/// passthrough (the broker's defaults are not the descriptor's to describe).
pub(crate) fn operation<'a>(
    group: Option<&'a str>,
    config: impl Iterator<Item = (&'a str, &'a str)>,
) -> Bindings {
    let client_id = config
        .filter(|(k, _)| *k == "client.id")
        .last()
        .map(|(_, v)| v);
    if group.is_none() && client_id.is_none() {
        return Bindings::new();
    }
    kafka(&Operation {
        group_id: group.map(OneValue::new),
        client_id: client_id.map(OneValue::new),
    })
}

#[cfg(feature = "schema-registry")]
#[derive(Serialize)]
struct Server<'a> {
    #[serde(rename = "schemaRegistryUrl")]
    url: &'a str,
    #[serde(rename = "schemaRegistryVendor")]
    vendor: &'static str,
}

/// The server binding: the schema registry's address (credentials already taken out), when
/// the broker has a registry reached through the shipped client.
#[cfg(feature = "schema-registry")]
pub(crate) fn server(registry_url: Option<&str>) -> Bindings {
    registry_url.map_or_else(Bindings::new, |url| {
        kafka(&Server {
            url,
            vendor: "confluent",
        })
    })
}

#[cfg(feature = "schema-registry")]
#[derive(Serialize)]
struct FramedMessage {
    #[serde(rename = "schemaIdLocation")]
    location: &'static str,
    #[serde(rename = "schemaIdPayloadEncoding")]
    encoding: &'static str,
    #[serde(rename = "schemaLookupStrategy")]
    strategy: &'static str,
}

/// The message binding of a framing policy: the id rides in the payload, Confluent-encoded.
#[cfg(feature = "protobuf")]
pub(crate) fn framed_message(strategy: crate::schema_registry::SubjectStrategy) -> Bindings {
    kafka(&FramedMessage {
        location: "payload",
        encoding: "confluent",
        strategy: strategy.binding_name(),
    })
}

#[cfg(test)]
mod tests {
    use super::{channel, operation};

    #[test]
    fn bindings_carry_topic_group_and_the_last_client_id() {
        let json = serde_json::to_string(&channel("orders")).expect("serializes");
        assert!(json.contains("orders") && json.contains("0.5.0"), "{json}");
        let config = [("client.id", "first"), ("client.id", "last")];
        let json =
            serde_json::to_string(&operation(Some("svc"), config.into_iter())).expect("serializes");
        assert!(
            json.contains("last") && !json.contains("first") && json.contains("svc"),
            "{json}"
        );
        assert!(operation(None, std::iter::empty()).is_empty());
    }

    /// Every publish policy describes its channel as the topic it writes to, the transactional
    /// ones included: a document generated for an exactly-once service must name its outputs.
    #[test]
    fn every_publish_policy_binds_its_channel_to_the_topic() {
        use ruststream::PublishPolicy;

        use crate::{ConnectedKafkaBroker, KafkaEosPublish, KafkaPublish};

        fn topic_of<P: PublishPolicy<ConnectedKafkaBroker>>(policy: &P) -> String {
            let bindings = policy.channel_bindings("orders.out");
            assert!(!bindings.is_empty(), "no channel binding");
            serde_json::to_string(&bindings).expect("serializes")
        }
        let transactional = KafkaPublish::default().transactional_id("svc-1");
        let expected = serde_json::to_string(&channel("orders.out")).expect("serializes");
        assert!(expected.contains("\"topic\":\"orders.out\""), "{expected}");
        assert_eq!(topic_of(&KafkaPublish::default()), expected);
        assert_eq!(topic_of(&transactional), expected);
        assert_eq!(topic_of(&transactional.per_partition()), expected);
        assert_eq!(topic_of(&KafkaEosPublish::new("pipeline-1")), expected);
    }

    #[cfg(feature = "protobuf")]
    #[test]
    fn registry_bindings_name_the_vendor_and_the_lookup_strategy() {
        use crate::SubjectStrategy;
        let json = serde_json::to_string(&super::server(Some("http://registry:8081")))
            .expect("serializes");
        assert!(
            json.contains("http://registry:8081") && json.contains("confluent"),
            "{json}"
        );
        assert!(super::server(None).is_empty());
        let json = serde_json::to_string(&super::framed_message(SubjectStrategy::RecordName))
            .expect("serializes");
        assert!(
            json.contains("\"schemaIdLocation\":\"payload\"")
                && json.contains("\"schemaIdPayloadEncoding\":\"confluent\"")
                && json.contains("RecordNameStrategy"),
            "{json}"
        );
    }
}
