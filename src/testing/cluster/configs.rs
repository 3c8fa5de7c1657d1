//! `DescribeConfigs`: the configs a topic was created with, and none for a broker.
//!
//! The embedded brokers keep only the topic configs a client set (`CreateTopics`), so that is
//! what they describe, each as a dynamic topic config (`config_source` 1), as Kafka reports a
//! config set on the topic. Kafka would also list every default; tools such as
//! `kafka-topics --describe` show only the non-default ones, which is what this answers with.
//! A broker resource is described with no configs: the brokers have no settable ones.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::server::Cx;

/// `ConfigResource.Type` as the protocol numbers it.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// `ConfigSource.DYNAMIC_TOPIC_CONFIG`.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;

/// `DescribeConfigs` v1-4.
#[allow(
    clippy::needless_pass_by_value,
    reason = "dispatch hands every handler its request"
)]
pub(crate) fn describe(cx: &Cx<'_>, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let keys = resource.configuration_keys.as_ref();
            let wanted = |key: &str| keys.is_none_or(|keys| keys.iter().any(|k| k.as_str() == key));
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match resource.resource_type {
                TOPIC => {
                    let state = cx.cluster.state();
                    match state.topics.by_name.get(name) {
                        Some(topic) => result.with_configs(
                            topic
                                .configs
                                .iter()
                                .filter(|(key, _)| wanted(key))
                                .map(|(key, value)| {
                                    DescribeConfigsResourceResult::default()
                                        .with_name(StrBytes::from_string(key.clone()))
                                        .with_value(Some(StrBytes::from_string(value.clone())))
                                        .with_config_source(DYNAMIC_TOPIC_CONFIG)
                                })
                                .collect(),
                        ),
                        None => refused(
                            result,
                            ResponseError::UnknownTopicOrPartition,
                            format!("The topic '{name}' does not exist."),
                        ),
                    }
                }
                BROKER => {
                    let known = name.is_empty()
                        || name
                            .parse::<i32>()
                            .is_ok_and(|id| cx.cluster.node_ids().any(|n| n == id));
                    if known {
                        result
                    } else {
                        refused(
                            result,
                            ResponseError::InvalidRequest,
                            format!("Unexpected broker id, expected a node of the cluster: {name}"),
                        )
                    }
                }
                other => refused(
                    result,
                    ResponseError::InvalidRequest,
                    format!("Unsupported resource type {other} in the embedded cluster"),
                ),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn refused(
    result: DescribeConfigsResult,
    code: ResponseError,
    message: String,
) -> DescribeConfigsResult {
    result
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;

    use super::*;
    use crate::testing::cluster::Listener;
    use crate::testing::{ClusterOptions, EmbeddedCluster};

    fn resource(kind: i8, name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(keys.map(|keys| {
                keys.iter()
                    .map(|k| StrBytes::from_string((*k).to_owned()))
                    .collect()
            }))
    }

    #[test]
    fn topics_list_what_they_were_created_with_and_brokers_nothing() {
        let cluster = EmbeddedCluster::new(ClusterOptions::default());
        let shared = cluster.shared();
        shared.state().topics.create("plain", 1, 1);
        shared.state().topics.create("compacted", 1, 1);
        if let Some(topic) = shared.state().topics.by_name.get_mut("compacted") {
            topic
                .configs
                .insert("cleanup.policy".to_owned(), "compact".to_owned());
            topic
                .configs
                .insert("max.message.bytes".to_owned(), "2048".to_owned());
        }
        let cx = Cx {
            cluster: shared,
            node: 0,
            version: 4,
            listener: Listener::Memory,
            client_id: None,
        };
        let request = DescribeConfigsRequest::default().with_resources(vec![
            resource(TOPIC, "plain", None),
            resource(TOPIC, "compacted", None),
            resource(TOPIC, "compacted", Some(&["max.message.bytes"])),
            resource(TOPIC, "missing", None),
            resource(BROKER, "0", None),
            resource(BROKER, "7", None),
            resource(8, "x", None),
        ]);
        let results = describe(&cx, request).results;
        let names = |i: usize| -> Vec<(String, Option<String>)> {
            results[i]
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.to_string(),
                        c.value.as_ref().map(ToString::to_string),
                    )
                })
                .collect()
        };
        assert!(results[0].configs.is_empty() && results[0].error_code == 0);
        assert_eq!(
            names(1),
            [
                ("cleanup.policy".to_owned(), Some("compact".to_owned())),
                ("max.message.bytes".to_owned(), Some("2048".to_owned())),
            ]
        );
        assert!(
            results[1]
                .configs
                .iter()
                .all(|c| c.config_source == DYNAMIC_TOPIC_CONFIG)
        );
        assert_eq!(
            names(2),
            [("max.message.bytes".to_owned(), Some("2048".to_owned()))]
        );
        assert_eq!(
            results[3].error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
        assert_eq!(results[4].error_code, 0);
        assert_eq!(results[5].error_code, ResponseError::InvalidRequest.code());
        assert_eq!(results[6].error_code, ResponseError::InvalidRequest.code());
    }
}
