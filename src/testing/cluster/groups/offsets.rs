//! Committed offsets: `OffsetCommit` and `OffsetFetch`.
//!
//! Offsets belong to the group id, not to a group's membership: they outlive members, and a
//! group id moving between the classic and the KIP-848 protocol keeps them.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::super::state::State;
use super::super::txn;

/// `offset.metadata.max.bytes`.
const MAX_METADATA: usize = 4096;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Committed {
    pub(super) offset: i64,
    pub(super) leader_epoch: i32,
    pub(super) metadata: String,
}

/// Committed offsets of every group id.
#[derive(Debug, Default)]
pub(super) struct Store {
    by_group: HashMap<String, BTreeMap<(String, i32), Committed>>,
}

impl Store {
    pub(super) fn put(&mut self, group: &str, topic: &str, partition: i32, committed: Committed) {
        self.by_group
            .entry(group.to_owned())
            .or_default()
            .insert((topic.to_owned(), partition), committed);
    }

    pub(super) fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&Committed> {
        self.by_group
            .get(group)?
            .get(&(topic.to_owned(), partition))
    }

    fn all(&self, group: &str) -> impl Iterator<Item = (&(String, i32), &Committed)> {
        self.by_group.get(group).into_iter().flatten()
    }
}

/// `OffsetCommit` after the coordinator check; `group_error` is what the group's validation
/// said (every partition gets it).
pub(super) fn commit(
    state: &mut State,
    request: &OffsetCommitRequest,
    group_error: Option<ResponseError>,
) -> OffsetCommitResponse {
    let group = request.group_id.as_str();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.as_str();
        let partition_count = state.topics.by_name.get(name).map(|t| t.partitions.len());
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let metadata = p.committed_metadata.as_deref().unwrap_or_default();
            let exists = usize::try_from(p.partition_index)
                .is_ok_and(|i| partition_count.is_some_and(|n| i < n));
            let code = if !exists {
                // Kafka checks the partition exists before the coordinator sees the commit.
                Some(ResponseError::UnknownTopicOrPartition)
            } else if let Some(code) = group_error {
                Some(code)
            } else if metadata.len() > MAX_METADATA {
                Some(ResponseError::OffsetMetadataTooLarge)
            } else {
                state.groups.commit(
                    group,
                    name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    Some(metadata.to_owned()),
                );
                None
            };
            partitions.push(
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code.map_or(0, |c| c.code())),
            );
        }
        topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}

fn fetched(
    state: &State,
    group: &str,
    topic: &str,
    partition: i32,
    require_stable: bool,
) -> OffsetFetchResponsePartition {
    let none = OffsetFetchResponsePartition::default()
        .with_partition_index(partition)
        .with_committed_offset(-1)
        .with_committed_leader_epoch(-1)
        .with_metadata(Some(StrBytes::default()));
    if require_stable && txn::has_pending_offsets(state, group, topic, partition) {
        return none.with_error_code(ResponseError::UnstableOffsetCommit.code());
    }
    match state.groups.offsets.get(group, topic, partition) {
        None => none,
        Some(c) => none
            .with_committed_offset(c.offset)
            .with_committed_leader_epoch(c.leader_epoch)
            .with_metadata(Some(StrBytes::from_string(c.metadata.clone()))),
    }
}

/// `OffsetFetch` v1-7 (one group) after the coordinator check.
pub(super) fn fetch(
    state: &State,
    request: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let group = request.group_id.as_str();
    let require_stable = version >= 7 && request.require_stable;
    let topics: Vec<OffsetFetchResponseTopic> = if let Some(topics) = &request.topics {
        answer_topics(topics, |topic, p| {
            fetched(state, group, topic, p, require_stable)
        })
    } else {
        {
            // Every partition with a committed offset.
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for ((topic, partition), _) in state.groups.offsets.all(group) {
                by_topic.entry(topic).or_default().push(*partition);
            }
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|p| fetched(state, group, topic, p, require_stable))
                                .collect(),
                        )
                })
                .collect()
        }
    };
    OffsetFetchResponse::default().with_topics(topics)
}

/// One answer per asked topic, `answer` giving each asked partition's.
fn answer_topics(
    topics: &[OffsetFetchRequestTopic],
    mut answer: impl FnMut(&str, i32) -> OffsetFetchResponsePartition,
) -> Vec<OffsetFetchResponseTopic> {
    topics
        .iter()
        .map(|t| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partition_indexes
                        .iter()
                        .map(|p| answer(t.name.as_str(), *p))
                        .collect(),
                )
        })
        .collect()
}

/// An `OffsetFetch` answer carrying `code` for the group (v2+) and every partition asked for.
pub(super) fn fetch_error(
    request: &OffsetFetchRequest,
    code: ResponseError,
) -> OffsetFetchResponse {
    let topics = answer_topics(request.topics.as_deref().unwrap_or_default(), |_, p| {
        OffsetFetchResponsePartition::default()
            .with_partition_index(p)
            .with_committed_offset(-1)
            .with_committed_leader_epoch(-1)
            .with_metadata(Some(StrBytes::default()))
            .with_error_code(code.code())
    });
    OffsetFetchResponse::default()
        .with_error_code(code.code())
        .with_topics(topics)
}
