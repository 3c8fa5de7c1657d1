//! The transactional requests, each sent to its coordinator and retried there until it is
//! answered for good or the call's deadline passes.
//!
//! Retried: a moved or unreachable coordinator (`NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`,
//! a broken connection: the coordinator is looked up again), a loading one
//! (`COORDINATOR_LOAD_IN_PROGRESS`), `CONCURRENT_TRANSACTIONS` (the previous transaction's
//! markers are still being written, or an older producer's transaction is being aborted) and
//! every other retriable code. A request whose answer was lost may have taken effect; each one
//! here is safe to repeat: the coordinator answers a repeated `EndTxn` of the same outcome
//! (with the same epoch, or the one before a KIP-890 bump) with success.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tokio::time::Instant;

use super::protocol::TransactionProtocol;
use crate::client::consumer::{GroupMetadata, OffsetToCommit, by_topic};
use crate::client::coordinator::CoordinatorKind;
use crate::client::error::{Error, ResponseError, Result};
use crate::client::{Client, Connection};

const INIT_PRODUCER_ID_VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };
/// Versions 4 and later are the brokers' batched form; clients speak up to 3.
const ADD_PARTITIONS_VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };
const ADD_OFFSETS_VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };
/// The first wait after `CONCURRENT_TRANSACTIONS`, doubling from there. The previous
/// transaction's markers are usually written within a millisecond or two after its `EndTxn` was
/// answered; the Java client's 20 ms (and our 100 ms retry backoff) made a loop that commits
/// back to back spend most of its time waiting (classic protocol, measured with
/// `benches/transactions.rs`: 2 ms gives 2.5 times the transactions per second). A few more
/// small requests to the coordinator are cheaper.
const CONCURRENT_BACKOFF: Duration = Duration::from_millis(2);

/// The producer's identity in transactional requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerIdentity {
    pub id: i64,
    pub epoch: i16,
}

/// One transactional producer's view of its coordinators.
pub(crate) struct Requests<'a> {
    pub client: &'a Client,
    pub transactional_id: &'a Arc<str>,
    pub deadline: Instant,
}

fn coordinator_moved(e: &Error) -> bool {
    matches!(
        e.code(),
        Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable)
    ) || matches!(e, Error::Io { .. } | Error::Closed(_))
}

fn retriable(e: &Error) -> bool {
    coordinator_moved(e) || e.is_retriable()
}

/// Whether a request that failed with `e` (after its retries) may still have taken effect, or
/// may succeed later: then the call can be made again, and nothing is decided.
pub(crate) fn undecided(e: &Error) -> bool {
    retriable(e)
}

impl Requests<'_> {
    fn txn_id(&self) -> TransactionalId {
        TransactionalId(StrBytes::from_string(self.transactional_id.to_string()))
    }

    /// Runs `op` against the coordinator of `key` until it succeeds, fails for good, or the
    /// deadline passes (then the last error is returned).
    async fn at_coordinator<T, F, Fut>(&self, kind: CoordinatorKind, key: &str, op: F) -> Result<T>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut backoff = self.client.retry_backoff();
        let mut concurrent =
            crate::client::Backoff::new(CONCURRENT_BACKOFF, self.client.config().retry_backoff_max);
        loop {
            let outcome = async {
                let node = self.client.coordinator(kind, key).await?;
                let conn = self.client.connection(node).await?;
                op(conn).await
            }
            .await;
            let error = match outcome {
                Ok(t) => return Ok(t),
                Err(e) if retriable(&e) => e,
                Err(e) => return Err(e),
            };
            if coordinator_moved(&error) {
                self.client.forget_coordinator(kind, key);
            }
            let delay = if error.code() == Some(ResponseError::ConcurrentTransactions) {
                concurrent.next_delay()
            } else {
                backoff.next_delay()
            };
            if Instant::now() + delay >= self.deadline {
                return Err(error);
            }
            tracing::debug!(key, error = %error, "transactional request retried");
            tokio::time::sleep(delay).await;
        }
    }

    /// How long a single request may wait for its answer: what is left of the call, at least
    /// a moment.
    fn request_timeout(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(500))
    }

    /// `InitProducerId` for the transactional id: fences every older producer of the id
    /// (aborting its open transaction) when `current` is `None`, bumps our own epoch when it is
    /// `Some` (after an abort that left a sequence gap).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: once an `InitProducerId` is sent the coordinator may still act on it (a new
    /// epoch that fences older producers and aborts what they left open, or the bump of ours), and
    /// the identity it answers with is lost. The caller must not send under the old epoch; running
    /// it again gets the current one.
    pub async fn init_producer_id(
        &self,
        transaction_timeout: Duration,
        current: Option<ProducerIdentity>,
    ) -> Result<ProducerIdentity> {
        let timeout_ms = i32::try_from(transaction_timeout.as_millis()).unwrap_or(i32::MAX);
        self.at_coordinator(
            CoordinatorKind::Transaction,
            self.transactional_id,
            |conn| async move {
                let version =
                    conn.version_of::<InitProducerIdRequest>(INIT_PRODUCER_ID_VERSIONS)?;
                if current.is_some() && version < 3 {
                    return Err(Error::Unsupported(
                        "InitProducerId v3 (bumping the epoch of a transactional producer)".into(),
                    ));
                }
                let (id, epoch) = current.map_or((-1, -1), |c| (c.id, c.epoch));
                let request = InitProducerIdRequest::default()
                    .with_transactional_id(Some(self.txn_id()))
                    .with_transaction_timeout_ms(timeout_ms)
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(epoch);
                let response = conn.send(&request, version, self.request_timeout()).await?;
                Error::check(response.error_code, || "InitProducerId".to_owned())?;
                if response.producer_id.0 < 0 || response.producer_epoch < 0 {
                    return Err(Error::protocol(
                        "InitProducerId answered without a producer id",
                    ));
                }
                Ok(ProducerIdentity {
                    id: response.producer_id.0,
                    epoch: response.producer_epoch,
                })
            },
        )
        .await
    }

    /// `AddPartitionsToTxn` (classic protocol). On success every partition is in the
    /// transaction; on failure none may be assumed to be.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a request already sent may still add the partitions to the transaction, so
    /// the caller must count them as possibly added (the transaction then needs its `EndTxn`).
    /// Repeating the call is harmless.
    pub async fn add_partitions(
        &self,
        producer: ProducerIdentity,
        partitions: &[(Arc<str>, i32)],
    ) -> Result<()> {
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for (topic, partition) in partitions {
            match topics.iter_mut().find(|t| t.name.0.as_str() == &**topic) {
                Some(t) => t.partitions.push(*partition),
                None => topics.push(
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(vec![*partition]),
                ),
            }
        }
        self.at_coordinator(
            CoordinatorKind::Transaction,
            self.transactional_id,
            |conn| {
                let topics = topics.clone();
                async move {
                    let version =
                        conn.version_of::<AddPartitionsToTxnRequest>(ADD_PARTITIONS_VERSIONS)?;
                    let request = AddPartitionsToTxnRequest::default()
                        .with_v3_and_below_transactional_id(self.txn_id())
                        .with_v3_and_below_producer_id(ProducerId(producer.id))
                        .with_v3_and_below_producer_epoch(producer.epoch)
                        .with_v3_and_below_topics(topics);
                    let response = conn.send(&request, version, self.request_timeout()).await?;
                    let mut answered = 0usize;
                    // The first real error decides: OPERATION_NOT_ATTEMPTED only says that another
                    // partition of the request failed.
                    let mut not_attempted = None;
                    for t in &response.results_by_topic_v3_and_below {
                        for p in &t.results_by_partition {
                            answered += 1;
                            let context = || {
                                format!(
                                    "adding {}-{} to the transaction",
                                    t.name.0.as_str(),
                                    p.partition_index
                                )
                            };
                            if p.partition_error_code == ResponseError::OperationNotAttempted.code()
                            {
                                not_attempted = Some(context());
                                continue;
                            }
                            Error::check(p.partition_error_code, context)?;
                        }
                    }
                    if let Some(context) = not_attempted {
                        return Err(Error::Broker {
                            code: ResponseError::OperationNotAttempted,
                            context,
                        });
                    }
                    if answered < partitions.len() {
                        return Err(Error::protocol(
                            "AddPartitionsToTxn answer lacks partitions it was asked about",
                        ));
                    }
                    Ok(())
                }
            },
        )
        .await
    }

    /// `AddOffsetsToTxn` (classic protocol): puts the group's offsets topic partition in the
    /// transaction.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a request already sent may still add the group to the transaction, so the
    /// caller must count it as possibly added (the transaction then needs its `EndTxn`). Repeating
    /// the call is harmless.
    pub async fn add_offsets(&self, producer: ProducerIdentity, group_id: &str) -> Result<()> {
        self.at_coordinator(
            CoordinatorKind::Transaction,
            self.transactional_id,
            |conn| async move {
                let version = conn.version_of::<AddOffsetsToTxnRequest>(ADD_OFFSETS_VERSIONS)?;
                let request = AddOffsetsToTxnRequest::default()
                    .with_transactional_id(self.txn_id())
                    .with_producer_id(ProducerId(producer.id))
                    .with_producer_epoch(producer.epoch)
                    .with_group_id(GroupId(StrBytes::from_string(group_id.to_owned())));
                let response = conn.send(&request, version, self.request_timeout()).await?;
                Error::check(response.error_code, || {
                    format!("adding the offsets of group {group_id} to the transaction")
                })
            },
        )
        .await
    }

    /// `TxnOffsetCommit` at the group's coordinator, as the group member (KIP-447: the
    /// coordinator refuses offsets from a member of an older generation).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a `TxnOffsetCommit` already sent may still put the offsets in the
    /// transaction, where they commit or abort with it. Repeating the call with the same offsets is
    /// harmless.
    pub async fn commit_offsets(
        &self,
        protocol: TransactionProtocol,
        producer: ProducerIdentity,
        offsets: &[OffsetToCommit],
        group: &GroupMetadata,
    ) -> Result<()> {
        let topics: Vec<TxnOffsetCommitRequestTopic> = by_topic(offsets, |o| {
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(o.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(o.leader_epoch)
                .with_committed_metadata(o.metadata.clone().map(StrBytes::from_string))
        })
        .map(|(topic, partitions)| {
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(partitions)
        })
        .collect();
        let member = group.member.as_ref();
        let versions = protocol.txn_offset_commit_versions();
        self.at_coordinator(CoordinatorKind::Group, &group.group_id, |conn| {
            let topics = topics.clone();
            async move {
                let version = conn.version_of::<TxnOffsetCommitRequest>(versions)?;
                let request = TxnOffsetCommitRequest::default()
                    .with_transactional_id(self.txn_id())
                    .with_group_id(GroupId(StrBytes::from_string(group.group_id.clone())))
                    .with_producer_id(ProducerId(producer.id))
                    .with_producer_epoch(producer.epoch)
                    .with_generation_id(member.map_or(-1, |m| m.generation))
                    .with_member_id(StrBytes::from_string(
                        member.map_or_else(String::new, |m| m.member_id.clone()),
                    ))
                    .with_group_instance_id(
                        member
                            .and_then(|m| m.instance_id.clone())
                            .map(StrBytes::from_string),
                    )
                    .with_topics(topics);
                let response = conn.send(&request, version, self.request_timeout()).await?;
                let mut answered = 0usize;
                for t in &response.topics {
                    for p in &t.partitions {
                        answered += 1;
                        Error::check(p.error_code, || {
                            format!(
                                "committing the offset of {}-{} for group {} in the transaction",
                                t.name.0.as_str(),
                                p.partition_index,
                                group.group_id
                            )
                        })?;
                    }
                }
                if answered < offsets.len() {
                    return Err(Error::protocol(
                        "TxnOffsetCommit answer lacks partitions it was sent",
                    ));
                }
                Ok(())
            }
        })
        .await
    }

    /// `EndTxn`: commits or aborts. With the v2 protocol the answer carries the producer id
    /// and epoch of the next transaction.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: an `EndTxn` already sent may still end the transaction (and, on the v2
    /// protocol, move the epoch) while its answer is lost. Repeat it with the same outcome and
    /// identity before anything else; the coordinator accepts the repeat.
    pub async fn end(
        &self,
        protocol: TransactionProtocol,
        producer: ProducerIdentity,
        commit: bool,
    ) -> Result<Option<ProducerIdentity>> {
        self.at_coordinator(
            CoordinatorKind::Transaction,
            self.transactional_id,
            |conn| async move {
                let version = conn.version_of::<EndTxnRequest>(protocol.end_txn_versions())?;
                let request = EndTxnRequest::default()
                    .with_transactional_id(self.txn_id())
                    .with_producer_id(ProducerId(producer.id))
                    .with_producer_epoch(producer.epoch)
                    .with_committed(commit);
                let response = conn.send(&request, version, self.request_timeout()).await?;
                Error::check(response.error_code, || {
                    if commit {
                        "EndTxn(commit)"
                    } else {
                        "EndTxn(abort)"
                    }
                    .to_owned()
                })?;
                if version < 5 || response.producer_id.0 < 0 {
                    return Ok(None);
                }
                if response.producer_epoch < 0 {
                    return Err(Error::protocol(
                        "EndTxn answered with a negative producer epoch",
                    ));
                }
                Ok(Some(ProducerIdentity {
                    id: response.producer_id.0,
                    epoch: response.producer_epoch,
                }))
            },
        )
        .await
    }
}
