//! Committed offsets of a consumer group: `OffsetCommit` and `OffsetFetch` at its coordinator.
//!
//! Kafka's convention holds throughout: the committed offset is the offset of the next record
//! to read, not of the last one read. A commit without a member (generation -1, empty member
//! id) is what a consumer with a manual assignment sends: the group keeps the offsets without
//! anyone joining it.
//!
//! Coordinator moves (`NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`, a broken connection),
//! loading coordinators and unstable offsets (an open transaction, with `require_stable`) are
//! retried here; membership errors (`ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`,
//! `REBALANCE_IN_PROGRESS`, `FENCED_INSTANCE_ID`) are returned, since only the caller knows
//! whether to rejoin.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::client::Client;
use crate::client::coordinator::CoordinatorKind;
use crate::client::error::{Error, Result};

/// `OffsetCommit` versions with topic names (v10 moved to topic ids).
const OFFSET_COMMIT_VERSIONS: VersionRange = VersionRange { min: 2, max: 9 };
/// `OffsetFetch` versions with one group per request (v8 batched groups).
const OFFSET_FETCH_VERSIONS: VersionRange = VersionRange { min: 1, max: 7 };
const ATTEMPTS: u32 = 20;

/// Who commits: a group member's identity, checked by the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The generation (classic protocol) or member epoch (KIP-848).
    pub generation: i32,
    /// The member id the coordinator gave.
    pub member_id: String,
    /// `group.instance.id` for static members.
    pub instance_id: Option<String>,
}

/// A consumer's group and membership: what a transactional producer sends with the offsets it
/// commits on the consumer's behalf, so that the group coordinator can refuse them from a member
/// that a rebalance has replaced (KIP-447).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// `group.id`.
    pub group_id: String,
    /// The membership, or `None` for a consumer with a manual assignment (its offsets are
    /// committed without a membership check).
    pub member: Option<GroupMember>,
}

/// One offset to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetToCommit {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The next offset to read.
    pub offset: i64,
    /// The leader epoch of the last record read (-1 if unknown).
    pub leader_epoch: i32,
    /// Free-form metadata stored with the offset.
    pub metadata: Option<String>,
}

/// A committed offset as the coordinator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The next offset to read, or -1 when the group has committed nothing for it.
    pub offset: i64,
    /// The leader epoch stored with it (-1 if none).
    pub leader_epoch: i32,
    /// The metadata stored with it.
    pub metadata: Option<String>,
}

/// The committed offsets of one group.
#[derive(Debug, Clone)]
pub struct Offsets {
    client: Client,
    group: String,
}

/// `offsets` grouped by topic, in the order topics first appear (requests nest partitions
/// under their topic), each offset made into a request partition by `partition`.
pub(crate) fn by_topic<P>(
    offsets: &[OffsetToCommit],
    partition: impl Fn(&OffsetToCommit) -> P,
) -> impl Iterator<Item = (&str, Vec<P>)> {
    let mut topics: Vec<(&str, Vec<P>)> = Vec::new();
    for o in offsets {
        match topics.iter_mut().find(|(t, _)| *t == o.topic) {
            Some((_, ps)) => ps.push(partition(o)),
            None => topics.push((&o.topic, vec![partition(o)])),
        }
    }
    topics.into_iter()
}

fn coordinator_moved(code: Option<ResponseError>) -> bool {
    matches!(
        code,
        Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable)
    )
}

fn retry_here(code: Option<ResponseError>) -> bool {
    coordinator_moved(code)
        || matches!(
            code,
            Some(ResponseError::CoordinatorLoadInProgress | ResponseError::UnstableOffsetCommit)
        )
}

impl Offsets {
    /// The offsets of `group`.
    pub fn new(client: Client, group: impl Into<String>) -> Self {
        Offsets {
            client,
            group: group.into(),
        }
    }

    /// The group's id.
    #[must_use]
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Commits `offsets`, as `member` or (when `None`) without membership.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it keeps no state; an `OffsetCommit` already sent may still be applied, and
    /// committing the same offsets again is harmless.
    pub async fn commit(
        &self,
        member: Option<&GroupMember>,
        offsets: &[OffsetToCommit],
    ) -> Result<()> {
        self.retrying(|| self.commit_once(member, offsets)).await
    }

    /// Runs `op` again while the coordinator moves or loads (up to `ATTEMPTS` tries).
    async fn retrying<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut backoff = self.client.retry_backoff();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match op().await {
                Err(e)
                    if attempt < ATTEMPTS
                        && (retry_here(e.code()) || matches!(e, Error::Io { .. })) =>
                {
                    if coordinator_moved(e.code()) || matches!(e, Error::Io { .. }) {
                        self.client
                            .forget_coordinator(CoordinatorKind::Group, &self.group);
                    }
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                other => return other,
            }
        }
    }

    async fn commit_once(
        &self,
        member: Option<&GroupMember>,
        offsets: &[OffsetToCommit],
    ) -> Result<()> {
        let node = self
            .client
            .coordinator(CoordinatorKind::Group, &self.group)
            .await?;
        let topics: Vec<OffsetCommitRequestTopic> = by_topic(offsets, |o| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(o.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(o.leader_epoch)
                .with_committed_metadata(o.metadata.clone().map(StrBytes::from_string))
        })
        .map(|(topic, partitions)| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(partitions)
        })
        .collect();
        let response = self
            .client
            .send_to(node, OFFSET_COMMIT_VERSIONS, |_| {
                OffsetCommitRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
                    .with_generation_id_or_member_epoch(member.map_or(-1, |m| m.generation))
                    .with_member_id(StrBytes::from_string(
                        member.map_or_else(String::new, |m| m.member_id.clone()),
                    ))
                    .with_group_instance_id(
                        member
                            .and_then(|m| m.instance_id.clone())
                            .map(StrBytes::from_string),
                    )
                    .with_retention_time_ms(-1)
                    .with_topics(topics)
            })
            .await?;
        for t in &response.topics {
            for p in &t.partitions {
                Error::check(p.error_code, || {
                    format!(
                        "committing {}-{} for group {}",
                        t.name.0.as_str(),
                        p.partition_index,
                        self.group
                    )
                })?;
            }
        }
        Ok(())
    }

    /// The committed offsets of `partitions`. With `require_stable`, offsets that an open
    /// transaction may still change are waited for (`read_committed` consumers want this).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn fetch(
        &self,
        partitions: &[(&str, i32)],
        require_stable: bool,
    ) -> Result<Vec<CommittedOffset>> {
        self.retrying(|| self.fetch_once(partitions, require_stable))
            .await
    }

    async fn fetch_once(
        &self,
        partitions: &[(&str, i32)],
        require_stable: bool,
    ) -> Result<Vec<CommittedOffset>> {
        let node = self
            .client
            .coordinator(CoordinatorKind::Group, &self.group)
            .await?;
        let mut topics: Vec<OffsetFetchRequestTopic> = Vec::new();
        for &(topic, partition) in partitions {
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partition_indexes.push(partition),
                None => topics.push(
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partition_indexes(vec![partition]),
                ),
            }
        }
        let response = self
            .client
            .send_to(node, OFFSET_FETCH_VERSIONS, |_| {
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
                    .with_topics(Some(topics))
                    .with_require_stable(require_stable)
            })
            .await?;
        Error::check(response.error_code, || {
            format!("fetching offsets of group {}", self.group)
        })?;
        let mut out = Vec::with_capacity(partitions.len());
        for t in response.topics {
            for p in t.partitions {
                Error::check(p.error_code, || {
                    format!(
                        "fetching the offset of {}-{} for group {}",
                        t.name.0.as_str(),
                        p.partition_index,
                        self.group
                    )
                })?;
                out.push(CommittedOffset {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.metadata.map(|m| m.to_string()),
                });
            }
        }
        Ok(out)
    }
}
