//! Error answers for failed requests: the request is decoded so that every topic, partition
//! or group it names gets an entry carrying the code, as a broker answering that error would.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{MetadataResponseBroker, MetadataResponseTopic};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, ApiKey, BrokerId, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, EndTxnRequest, EndTxnResponse, FetchRequest, FetchResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    InitProducerIdRequest, InitProducerIdResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, ProducerId, SyncGroupRequest, SyncGroupResponse, TopicName,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::testing::cluster::server::{Close, Cx, decode, encode};

/// Fetch session errors (`FETCH_SESSION_ID_NOT_FOUND`, `INVALID_FETCH_SESSION_EPOCH`) are the
/// response's own; every other code goes in each partition.
const SESSION_ERRORS: [i16; 2] = [70, 71];

/// Answers every partition of every topic of a request: `parts` lists a topic's partitions,
/// `partition` answers one, `topic` wraps a topic's answers.
fn each<T, P, Q, R>(
    topics: &[T],
    parts: impl Fn(&T) -> &[P],
    partition: impl Fn(&P) -> Q,
    topic: impl Fn(&T, Vec<Q>) -> R,
) -> Vec<R> {
    topics
        .iter()
        .map(|t| topic(t, parts(t).iter().map(&partition).collect()))
        .collect()
}

/// The `AddPartitionsToTxn` (v0-3) answer with `code(topic, partition)` for each partition.
pub(crate) fn add_partitions_answer(
    topics: &[AddPartitionsToTxnTopic],
    code: impl Fn(&str, i32) -> i16,
) -> AddPartitionsToTxnResponse {
    let results = topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(code(t.name.0.as_str(), *p))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(partitions)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

/// The `TxnOffsetCommit` answer with `code` in every partition.
pub(crate) fn txn_offset_commit_answer(
    topics: &[TxnOffsetCommitRequestTopic],
    code: i16,
) -> TxnOffsetCommitResponse {
    let topics = each(
        topics,
        |t| &t.partitions,
        |p| {
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        },
        |t, partitions| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        },
    );
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The answer to a request of `api` (body `body`) that fails with `code`; `None` for a
/// Produce that wants no answer.
pub(crate) fn error_response(
    cx: &Cx<'_>,
    api: ApiKey,
    body: Bytes,
    code: i16,
) -> Result<Option<Bytes>, Close> {
    match api {
        ApiKey::Produce => {
            let request: ProduceRequest = decode(cx, body)?;
            if request.acks == 0 {
                return Ok(None);
            }
            encode(cx, &produce(&request, code))
        }
        ApiKey::Fetch => encode(cx, &fetch(cx.version, &decode(cx, body)?, code)),
        ApiKey::ListOffsets => encode(cx, &list_offsets(&decode(cx, body)?, code)),
        ApiKey::Metadata => encode(cx, &metadata(cx, &decode(cx, body)?, code)),
        ApiKey::CreateTopics => {
            let request: CreateTopicsRequest = decode(cx, body)?;
            encode(cx, &create_topics(&request, code))
        }
        ApiKey::DeleteTopics => {
            let request: DeleteTopicsRequest = decode(cx, body)?;
            encode(cx, &delete_topics(&request, code))
        }
        ApiKey::DescribeConfigs => {
            let request: DescribeConfigsRequest = decode(cx, body)?;
            let results = request
                .resources
                .iter()
                .map(|r| {
                    DescribeConfigsResult::default()
                        .with_resource_type(r.resource_type)
                        .with_resource_name(r.resource_name.clone())
                        .with_error_code(code)
                })
                .collect();
            encode(
                cx,
                &DescribeConfigsResponse::default().with_results(results),
            )
        }
        ApiKey::InitProducerId => {
            let _: InitProducerIdRequest = decode(cx, body)?;
            let response = InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            encode(cx, &response)
        }
        ApiKey::AddPartitionsToTxn => {
            let request: AddPartitionsToTxnRequest = decode(cx, body)?;
            let response = add_partitions_answer(&request.v3_and_below_topics, |_, _| code);
            // Version 4 (the brokers' batched form) has a response-wide code as well.
            let response = if cx.version >= 4 {
                response.with_error_code(code)
            } else {
                response
            };
            encode(cx, &response)
        }
        ApiKey::AddOffsetsToTxn => {
            let _: AddOffsetsToTxnRequest = decode(cx, body)?;
            encode(
                cx,
                &AddOffsetsToTxnResponse::default().with_error_code(code),
            )
        }
        ApiKey::EndTxn => {
            let _: EndTxnRequest = decode(cx, body)?;
            let response = EndTxnResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            encode(cx, &response)
        }
        ApiKey::TxnOffsetCommit => {
            let request: TxnOffsetCommitRequest = decode(cx, body)?;
            encode(cx, &txn_offset_commit_answer(&request.topics, code))
        }
        _ => group_error(cx, api, body, code),
    }
}

/// The group coordinator's requests; any other API closes the connection.
fn group_error(cx: &Cx<'_>, api: ApiKey, body: Bytes, code: i16) -> Result<Option<Bytes>, Close> {
    match api {
        ApiKey::FindCoordinator => {
            let request: FindCoordinatorRequest = decode(cx, body)?;
            encode(cx, &find_coordinator(cx.version, &request, code))
        }
        ApiKey::JoinGroup => {
            let request: JoinGroupRequest = decode(cx, body)?;
            let response = JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1)
                .with_member_id(request.member_id);
            encode(cx, &response)
        }
        ApiKey::SyncGroup => {
            let _: SyncGroupRequest = decode(cx, body)?;
            encode(cx, &SyncGroupResponse::default().with_error_code(code))
        }
        ApiKey::Heartbeat => {
            let _: HeartbeatRequest = decode(cx, body)?;
            encode(cx, &HeartbeatResponse::default().with_error_code(code))
        }
        ApiKey::LeaveGroup => {
            let _: LeaveGroupRequest = decode(cx, body)?;
            encode(cx, &LeaveGroupResponse::default().with_error_code(code))
        }
        ApiKey::DescribeGroups => {
            let request: DescribeGroupsRequest = decode(cx, body)?;
            let groups = request
                .groups
                .iter()
                .map(|g| {
                    DescribedGroup::default()
                        .with_group_id(g.clone())
                        .with_error_code(code)
                })
                .collect();
            encode(cx, &DescribeGroupsResponse::default().with_groups(groups))
        }
        ApiKey::ListGroups => {
            let _: ListGroupsRequest = decode(cx, body)?;
            encode(cx, &ListGroupsResponse::default().with_error_code(code))
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let _: ConsumerGroupHeartbeatRequest = decode(cx, body)?;
            let response = ConsumerGroupHeartbeatResponse::default()
                .with_error_code(code)
                .with_member_epoch(-1);
            encode(cx, &response)
        }
        ApiKey::OffsetCommit => {
            let request: OffsetCommitRequest = decode(cx, body)?;
            encode(cx, &offset_commit(&request, code))
        }
        ApiKey::OffsetFetch => encode(cx, &offset_fetch(cx, &decode(cx, body)?, code)),
        other => Err(Close::Malformed(format!(
            "a failure was armed for {other:?}, which the embedded brokers do not serve"
        ))),
    }
}

fn produce(request: &ProduceRequest, code: i16) -> ProduceResponse {
    let responses = each(
        &request.topic_data,
        |t| &t.partition_data,
        |p| {
            PartitionProduceResponse::default()
                .with_index(p.index)
                .with_error_code(code)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1)
        },
        |t, partitions| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(partitions)
        },
    );
    ProduceResponse::default().with_responses(responses)
}

fn fetch(version: i16, request: &FetchRequest, code: i16) -> FetchResponse {
    // Sessions (and the response-wide code) arrived in version 7.
    if version >= 7 && SESSION_ERRORS.contains(&code) {
        return FetchResponse::default().with_error_code(code);
    }
    let responses = each(
        &request.topics,
        |t| &t.partitions,
        |p| {
            PartitionData::default()
                .with_partition_index(p.partition)
                .with_error_code(code)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_records(Some(Bytes::new()))
        },
        |t, partitions| {
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        },
    );
    FetchResponse::default()
        .with_session_id(request.session_id.max(0))
        .with_responses(responses)
}

fn list_offsets(request: &ListOffsetsRequest, code: i16) -> ListOffsetsResponse {
    let topics = each(
        &request.topics,
        |t| &t.partitions,
        |p| {
            ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1)
        },
        |t, partitions| {
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        },
    );
    ListOffsetsResponse::default().with_topics(topics)
}

fn create_topics(request: &CreateTopicsRequest, code: i16) -> CreateTopicsResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            CreatableTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code)
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

fn delete_topics(request: &DeleteTopicsRequest, code: i16) -> DeleteTopicsResponse {
    let by_name = request.topic_names.iter().map(|name| {
        DeletableTopicResult::default()
            .with_name(Some(name.clone()))
            .with_error_code(code)
    });
    let by_state = request.topics.iter().map(|t| {
        DeletableTopicResult::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_error_code(code)
    });
    DeleteTopicsResponse::default().with_responses(by_name.chain(by_state).collect())
}

/// `REBOOTSTRAP_REQUIRED`, which a broker sends as the whole answer's code (KIP-1102).
const REBOOTSTRAP_REQUIRED: i16 = 129;

/// Every topic asked about (all known ones for a request of all topics) carries the code; the
/// brokers are listed so the client can still reach the cluster. `REBOOTSTRAP_REQUIRED` is the
/// answer's own code from version 13 on, with no topic, as a broker sends it.
fn metadata(cx: &Cx<'_>, request: &MetadataRequest, code: i16) -> MetadataResponse {
    if code == REBOOTSTRAP_REQUIRED && cx.version >= 13 {
        return MetadataResponse::default()
            .with_controller_id(BrokerId(-1))
            .with_error_code(code);
    }
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
    let names: Vec<(Option<TopicName>, uuid::Uuid)> = match &request.topics {
        Some(topics) => topics
            .iter()
            .map(|t| (t.name.clone(), t.topic_id))
            .collect(),
        None => cx
            .cluster
            .state()
            .topics
            .by_name
            .iter()
            .map(|(name, t)| {
                // Topic ids arrived in version 10.
                let id = if cx.version >= 10 {
                    t.id
                } else {
                    uuid::Uuid::nil()
                };
                (Some(TopicName(StrBytes::from_string(name.clone()))), id)
            })
            .collect(),
    };
    let topics = names
        .into_iter()
        .map(|(name, id)| {
            MetadataResponseTopic::default()
                .with_name(name)
                .with_topic_id(id)
                .with_error_code(code)
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_controller_id(BrokerId(0))
        .with_topics(topics)
}

/// Version 4 answers per key; older versions have one answer.
fn find_coordinator(
    version: i16,
    request: &FindCoordinatorRequest,
    code: i16,
) -> FindCoordinatorResponse {
    if version < 4 {
        return FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_node_id(BrokerId(-1))
            .with_port(-1);
    }
    let coordinators = request
        .coordinator_keys
        .iter()
        .map(|key| {
            Coordinator::default()
                .with_key(key.clone())
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(code)
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}

fn offset_commit(request: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    let topics = each(
        &request.topics,
        |t| &t.partitions,
        |p| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        },
        |t, partitions| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        },
    );
    OffsetCommitResponse::default().with_topics(topics)
}

/// The group-level code where the version has one (v2+), and the code in every partition
/// asked about.
fn offset_fetch(cx: &Cx<'_>, request: &OffsetFetchRequest, code: i16) -> OffsetFetchResponse {
    if cx.version >= 8 {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let topics = each(
                    g.topics.as_deref().unwrap_or_default(),
                    |t| &t.partition_indexes,
                    |p| {
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(*p)
                            .with_committed_offset(-1)
                            .with_committed_leader_epoch(-1)
                            .with_error_code(code)
                    },
                    |t, partitions| {
                        OffsetFetchResponseTopics::default()
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id)
                            .with_partitions(partitions)
                    },
                );
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(code)
                    .with_topics(topics)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = each(
        request.topics.as_deref().unwrap_or_default(),
        |t| &t.partition_indexes,
        |p| {
            OffsetFetchResponsePartition::default()
                .with_partition_index(*p)
                .with_committed_offset(-1)
                .with_committed_leader_epoch(-1)
                .with_error_code(code)
        },
        |t, partitions| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        },
    );
    OffsetFetchResponse::default()
        .with_error_code(if cx.version >= 2 { code } else { 0 })
        .with_topics(topics)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{
        AddOffsetsToTxnRequest, ConsumerGroupHeartbeatRequest, CreateTopicsRequest,
        DeleteTopicsRequest, DescribeGroupsRequest, EndTxnRequest, FetchRequest,
        FindCoordinatorRequest, HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest,
        LeaveGroupRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest,
        OffsetFetchRequest, ProduceRequest, SyncGroupRequest, TxnOffsetCommitRequest,
    };
    use kafka_protocol::protocol::Encodable;

    use super::*;
    use crate::testing::cluster::{Listener, versions};
    use crate::testing::{ClusterOptions, EmbeddedCluster};

    fn body<T: Encodable + Default>(version: i16) -> Bytes {
        let mut out = bytes::BytesMut::new();
        T::default()
            .encode(&mut out, version)
            .expect("a default request encodes");
        out.freeze()
    }

    /// A default request of `api` at `version`, `None` for APIs answered elsewhere.
    fn request(api: ApiKey, version: i16) -> Option<Bytes> {
        Some(match api {
            ApiKey::Produce => {
                let mut out = bytes::BytesMut::new();
                ProduceRequest::default()
                    .with_acks(-1)
                    .encode(&mut out, version)
                    .expect("encodes");
                out.freeze()
            }
            ApiKey::Fetch => body::<FetchRequest>(version),
            ApiKey::ListOffsets => body::<ListOffsetsRequest>(version),
            ApiKey::Metadata => body::<MetadataRequest>(version),
            ApiKey::CreateTopics => body::<CreateTopicsRequest>(version),
            ApiKey::DeleteTopics => body::<DeleteTopicsRequest>(version),
            ApiKey::DescribeConfigs => body::<DescribeConfigsRequest>(version),
            ApiKey::InitProducerId => body::<InitProducerIdRequest>(version),
            ApiKey::AddPartitionsToTxn => body::<AddPartitionsToTxnRequest>(version),
            ApiKey::AddOffsetsToTxn => body::<AddOffsetsToTxnRequest>(version),
            ApiKey::EndTxn => body::<EndTxnRequest>(version),
            ApiKey::TxnOffsetCommit => body::<TxnOffsetCommitRequest>(version),
            ApiKey::FindCoordinator => body::<FindCoordinatorRequest>(version),
            ApiKey::JoinGroup => body::<JoinGroupRequest>(version),
            ApiKey::SyncGroup => body::<SyncGroupRequest>(version),
            ApiKey::Heartbeat => body::<HeartbeatRequest>(version),
            ApiKey::LeaveGroup => body::<LeaveGroupRequest>(version),
            ApiKey::DescribeGroups => body::<DescribeGroupsRequest>(version),
            ApiKey::ListGroups => body::<ListGroupsRequest>(version),
            ApiKey::ConsumerGroupHeartbeat => body::<ConsumerGroupHeartbeatRequest>(version),
            ApiKey::OffsetCommit => body::<OffsetCommitRequest>(version),
            ApiKey::OffsetFetch => body::<OffsetFetchRequest>(version),
            _ => return None,
        })
    }

    #[test]
    fn every_served_api_has_an_error_answer_at_every_version() {
        let cluster = EmbeddedCluster::new(ClusterOptions::default());
        let shared = cluster.shared();
        shared.state().topics.create("t", 1, 1);
        for (api, min, max) in versions::SUPPORTED {
            for version in *min..=*max {
                let Some(body) = request(*api, version) else {
                    continue;
                };
                let cx = Cx {
                    cluster: shared,
                    node: 0,
                    version,
                    listener: Listener::Memory,
                    client_id: None,
                };
                let answer = error_response(&cx, *api, body, 15);
                assert!(
                    matches!(answer, Ok(Some(_))),
                    "{api:?} v{version}: {answer:?}"
                );
            }
        }
    }
}
