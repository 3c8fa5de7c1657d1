//! `Metadata`, `CreateTopics` and `DeleteTopics`.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::server::Cx;
use super::state::State;
use super::topics::{Topic, valid_name};

/// How a topic config's value is checked.
#[derive(Clone, Copy)]
enum Kind {
    Long,
    Int,
    Double,
    Bool,
    /// One of these (a list of them for `cleanup.policy`).
    OneOf(&'static [&'static str]),
    /// Anything (replica lists and the like).
    Text,
}

/// Topic configs `CreateTopics` accepts (Kafka's topic-level configs) with their types; any
/// other name, or a value that does not parse as its type, is refused with `INVALID_CONFIG`
/// as Kafka refuses it.
const TOPIC_CONFIGS: &[(&str, Kind)] = &[
    ("cleanup.policy", Kind::OneOf(&["delete", "compact"])),
    (
        "compression.type",
        Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
    ),
    ("compression.gzip.level", Kind::Int),
    ("compression.lz4.level", Kind::Int),
    ("compression.zstd.level", Kind::Int),
    ("delete.retention.ms", Kind::Long),
    ("file.delete.delay.ms", Kind::Long),
    ("flush.messages", Kind::Long),
    ("flush.ms", Kind::Long),
    ("follower.replication.throttled.replicas", Kind::Text),
    ("index.interval.bytes", Kind::Int),
    ("leader.replication.throttled.replicas", Kind::Text),
    ("local.retention.bytes", Kind::Long),
    ("local.retention.ms", Kind::Long),
    ("max.compaction.lag.ms", Kind::Long),
    ("max.message.bytes", Kind::Int),
    ("message.downconversion.enable", Kind::Bool),
    ("message.timestamp.after.max.ms", Kind::Long),
    ("message.timestamp.before.max.ms", Kind::Long),
    (
        "message.timestamp.type",
        Kind::OneOf(&["CreateTime", "LogAppendTime"]),
    ),
    ("min.cleanable.dirty.ratio", Kind::Double),
    ("min.compaction.lag.ms", Kind::Long),
    ("min.insync.replicas", Kind::Int),
    ("preallocate", Kind::Bool),
    ("remote.storage.enable", Kind::Bool),
    ("retention.bytes", Kind::Long),
    ("retention.ms", Kind::Long),
    ("segment.bytes", Kind::Int),
    ("segment.index.bytes", Kind::Int),
    ("segment.jitter.ms", Kind::Long),
    ("segment.ms", Kind::Long),
    ("unclean.leader.election.enable", Kind::Bool),
];

impl Kind {
    fn accepts(self, value: &str) -> bool {
        let value = value.trim();
        match self {
            Kind::Long => value.parse::<i64>().is_ok(),
            Kind::Int => value.parse::<i32>().is_ok(),
            Kind::Double => value.parse::<f64>().is_ok(),
            Kind::Bool => value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false"),
            Kind::OneOf(allowed) => value
                .split(',')
                .all(|v| allowed.iter().any(|a| a.eq_ignore_ascii_case(v.trim()))),
            Kind::Text => true,
        }
    }
}

/// `DYNAMIC_TOPIC_CONFIG`, the source of a config set on the topic.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;

/// The cluster id every node reports.
fn cluster_id(cx: &Cx<'_>) -> StrBytes {
    StrBytes::from_string(format!("embedded-{}", cx.cluster.id))
}

/// Metadata: every broker, and the requested topics (all when the list is null). A missing
/// topic the request may create is created but still reported `UNKNOWN_TOPIC_OR_PARTITION`
/// this once, as a Kafka 4 broker answers while its controller creates the topic.
pub(crate) fn handle(cx: &Cx<'_>, request: MetadataRequest) -> MetadataResponse {
    let brokers = cx
        .cluster
        .node_ids()
        .map(|node| {
            let (host, port) = cx.cluster.advertised(cx.listener, node);
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(node))
                .with_host(StrBytes::from_string(host))
                .with_port(i32::from(port))
        })
        .collect();
    let mut state = cx.cluster.state();
    let topics = match request.topics {
        None => state
            .topics
            .by_name
            .iter()
            .map(|(name, topic)| describe(cx, name, topic))
            .collect(),
        Some(requested) => {
            let may_create =
                request.allow_auto_topic_creation && cx.cluster.options.auto_create_topics;
            let mut created = false;
            let answer = requested
                .into_iter()
                .map(|wanted| {
                    let name = match wanted.name {
                        Some(name) => name.0.as_str().to_owned(),
                        None => match state.topics.name_of(wanted.topic_id) {
                            Some(name) => name.to_owned(),
                            None => {
                                return MetadataResponseTopic::default()
                                    .with_error_code(ResponseError::UnknownTopicId.code())
                                    .with_topic_id(wanted.topic_id);
                            }
                        },
                    };
                    if let Some(topic) = state.topics.by_name.get(&name) {
                        return describe(cx, &name, topic);
                    }
                    let error = if !valid_name(&name) {
                        ResponseError::InvalidTopicException
                    } else if may_create && state.topics.colliding(&name).is_none() {
                        let options = &cx.cluster.options;
                        state
                            .topics
                            .create(&name, options.num_partitions, options.nodes);
                        created = true;
                        // A KRaft broker asks its controller to create the topic and answers
                        // at once, before the topic exists in its metadata.
                        ResponseError::UnknownTopicOrPartition
                    } else {
                        ResponseError::UnknownTopicOrPartition
                    };
                    MetadataResponseTopic::default()
                        .with_error_code(error.code())
                        .with_name(Some(TopicName(StrBytes::from_string(name))))
                })
                .collect();
            if created {
                drop(state);
                cx.cluster.changed.notify_waiters();
            }
            answer
        }
    };
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(cluster_id(cx)))
        // KRaft brokers name a live broker as the controller: clients cannot reach the
        // controller quorum itself.
        .with_controller_id(BrokerId(0))
        .with_topics(topics)
}

fn describe(cx: &Cx<'_>, name: &str, topic: &Topic) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .zip(0..)
        .map(|(partition, index)| {
            let replicas: Vec<BrokerId> = topic
                .replicas(partition, cx.cluster.options.nodes)
                .into_iter()
                .map(BrokerId)
                .collect();
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(BrokerId(partition.leader))
                .with_leader_epoch(partition.leader_epoch)
                .with_isr_nodes(replicas.clone())
                .with_replica_nodes(replicas)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
        .with_topic_id(topic.id)
        .with_partitions(partitions)
}

/// `CreateTopics`: validates each topic as Kafka's controller does, then creates it unless the
/// request only validates.
pub(crate) fn create_topics(cx: &Cx<'_>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut seen = HashSet::new();
    let duplicated: HashSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.as_str().to_owned())
        .filter(|name| !seen.insert(name.clone()))
        .collect();
    let mut state = cx.cluster.state();
    let mut changed = false;
    let results = request
        .topics
        .into_iter()
        .map(|wanted| {
            let name = wanted.name.0.as_str().to_owned();
            let result = CreatableTopicResult::default().with_name(wanted.name.clone());
            if duplicated.contains(&name) {
                return result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Found multiple entries for {name} in the request."
                    ))));
            }
            match create_one(cx, &mut state, &name, &wanted, request.validate_only) {
                Ok(created) => {
                    changed |= !request.validate_only;
                    let configs = (cx.version >= 5).then(|| {
                        created
                            .configs
                            .into_iter()
                            .map(|(name, value)| {
                                CreatableTopicConfigs::default()
                                    .with_name(StrBytes::from_string(name))
                                    .with_value(Some(StrBytes::from_string(value)))
                                    .with_config_source(DYNAMIC_TOPIC_CONFIG)
                            })
                            .collect()
                    });
                    result
                        .with_topic_id(created.id)
                        .with_num_partitions(created.partitions)
                        .with_replication_factor(created.replication_factor)
                        .with_configs(configs)
                }
                Err((error, message)) => result
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    drop(state);
    if changed {
        cx.cluster.changed.notify_waiters();
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// What a successful creation reports.
struct Created {
    id: uuid::Uuid,
    partitions: i32,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
}

fn create_one(
    cx: &Cx<'_>,
    state: &mut State,
    name: &str,
    wanted: &CreatableTopic,
    validate_only: bool,
) -> Result<Created, (ResponseError, String)> {
    let nodes = cx.cluster.options.nodes;
    if !valid_name(name) {
        return Err((
            ResponseError::InvalidTopicException,
            format!(
                "Topic name '{name}' is illegal: it must be 1 to 249 characters of [a-zA-Z0-9._-] and not '.' or '..'."
            ),
        ));
    }
    if state.topics.by_name.contains_key(name) {
        return Err((
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    if let Some(existing) = state.topics.colliding(name) {
        return Err((
            ResponseError::InvalidTopicException,
            format!("Topic '{name}' collides with existing topic: {existing}"),
        ));
    }
    let (partitions, replication_factor) = sizes(cx, wanted)?;
    if replication_factor > i16::try_from(nodes).unwrap_or(i16::MAX) {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only {nodes} broker(s) are registered."
            ),
        ));
    }
    let configs = topic_configs(wanted)?;
    if validate_only {
        return Ok(Created {
            id: uuid::Uuid::nil(),
            partitions,
            replication_factor,
            configs,
        });
    }
    let topic =
        state
            .topics
            .create_with(name, partitions, nodes, replication_factor, configs.clone());
    for (partition, assignment) in topic.partitions.iter_mut().zip(&wanted.assignments) {
        if let Some(first) = assignment.broker_ids.first() {
            partition.leader = first.0;
        }
    }
    Ok(Created {
        id: topic.id,
        partitions,
        replication_factor,
        configs,
    })
}

/// Partitions and replication factor of a topic to create, from the counts (`-1` for the
/// defaults) or from a manual assignment.
fn sizes(cx: &Cx<'_>, wanted: &CreatableTopic) -> Result<(i32, i16), (ResponseError, String)> {
    let nodes = cx.cluster.options.nodes;
    if wanted.assignments.is_empty() {
        let partitions = match wanted.num_partitions {
            -1 => cx.cluster.options.num_partitions,
            n if n <= 0 => {
                return Err((
                    ResponseError::InvalidPartitions,
                    "Number of partitions was set to an invalid non-positive value.".to_owned(),
                ));
            }
            n => n,
        };
        let replication_factor = match wanted.replication_factor {
            // default.replication.factor
            -1 => 1,
            n if n <= 0 => {
                return Err((
                    ResponseError::InvalidReplicationFactor,
                    "Replication factor must be larger than 0, or -1 to use the default value."
                        .to_owned(),
                ));
            }
            n => n,
        };
        Ok((partitions, replication_factor))
    } else {
        if wanted.num_partitions != -1 || wanted.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".to_owned(),
            ));
        }
        let partitions = i32::try_from(wanted.assignments.len()).unwrap_or(i32::MAX);
        let replication_factor = wanted
            .assignments
            .first()
            .map_or(0, |a| i16::try_from(a.broker_ids.len()).unwrap_or(i16::MAX));
        let known = |b: &BrokerId| (0..i32::from(nodes)).contains(&b.0);
        if wanted.assignments.iter().any(|a| {
            a.broker_ids.is_empty()
                || !a.broker_ids.iter().all(known)
                || a.broker_ids.len() != usize::try_from(replication_factor).unwrap_or(0)
        }) {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                "The manual partition assignment names unknown brokers or differs in length."
                    .to_owned(),
            ));
        }
        Ok((partitions, replication_factor))
    }
}

/// The configs of a topic to create; unknown names and null values are `INVALID_CONFIG`.
fn topic_configs(
    wanted: &CreatableTopic,
) -> Result<BTreeMap<String, String>, (ResponseError, String)> {
    let mut configs = BTreeMap::new();
    for config in &wanted.configs {
        let key = config.name.as_str();
        let Some((_, kind)) = TOPIC_CONFIGS.iter().find(|(name, _)| *name == key) else {
            return Err((
                ResponseError::InvalidConfig,
                format!("Unknown topic config name: {key}"),
            ));
        };
        let Some(value) = &config.value else {
            return Err((
                ResponseError::InvalidConfig,
                format!("Null value not supported for topic configs: {key}"),
            ));
        };
        if !kind.accepts(value.as_str()) {
            return Err((
                ResponseError::InvalidConfig,
                format!("Invalid value {} for configuration {key}", value.as_str()),
            ));
        }
        configs.insert(key.to_owned(), value.as_str().to_owned());
    }
    Ok(configs)
}

/// `DeleteTopics`: by name (v1-5, and v6 entries with a name) or by id (v6).
pub(crate) fn delete_topics(cx: &Cx<'_>, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<String>, uuid::Uuid)> = if cx.version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.0.as_str().to_owned()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n.0.as_str().to_owned()), uuid::Uuid::nil()))
            .collect()
    };
    let mut state = cx.cluster.state();
    let mut changed = false;
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let (name, result) = match name {
                Some(name) => {
                    let found = state.topics.by_name.contains_key(&name);
                    let result = if found {
                        Ok(())
                    } else {
                        Err(ResponseError::UnknownTopicOrPartition)
                    };
                    (Some(name), result)
                }
                None => match state.topics.name_of(id) {
                    Some(name) => (Some(name.to_owned()), Ok(())),
                    None => (None, Err(ResponseError::UnknownTopicId)),
                },
            };
            let mut response = DeletableTopicResult::default()
                .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))));
            match result {
                Ok(()) => {
                    if let Some(gone) = name.as_deref().and_then(|n| remove(&mut state, n)) {
                        changed = true;
                        response = response.with_topic_id(gone);
                    }
                }
                Err(error) => {
                    response = response.with_error_code(error.code()).with_topic_id(id);
                }
            }
            response
        })
        .collect();
    drop(state);
    if changed {
        cx.cluster.changed.notify_waiters();
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

/// Deletes `name` with what hangs off its partitions; returns its id.
fn remove(state: &mut State, name: &str) -> Option<uuid::Uuid> {
    let topic = state.topics.delete(name)?;
    state.producers.forget_topic(topic.id);
    Some(topic.id)
}

#[cfg(test)]
mod tests {
    use super::super::topics::Topics;

    #[test]
    fn colliding_names_are_found() {
        let mut topics = Topics::default();
        topics.create("a.b", 1, 1);
        assert_eq!(topics.colliding("a_b"), Some("a.b"));
        assert_eq!(topics.colliding("a.b"), None);
    }
}
