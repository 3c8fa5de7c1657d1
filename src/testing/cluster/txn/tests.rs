use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::client::records::BatchHeader;
use crate::testing::cluster::server::Cx;
use crate::testing::cluster::{Listener, Shared};
use crate::testing::{ClusterOptions, EmbeddedCluster};

const TOPIC: &str = "t";

fn cluster() -> EmbeddedCluster {
    let cluster = EmbeddedCluster::new(ClusterOptions {
        transaction_max_timeout: Duration::from_mins(1),
        ..ClusterOptions::default()
    });
    cluster.shared().state().topics.create(TOPIC, 2, 1);
    cluster
}

fn cx(shared: &std::sync::Arc<Shared>, version: i16) -> Cx<'_> {
    Cx {
        cluster: shared,
        node: 0,
        version,
        listener: Listener::Memory,
        client_id: None,
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// `InitProducerId` v4 for `id`; (error, producer id, epoch).
fn init_id(shared: &std::sync::Arc<Shared>, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let r = init_producer_id(
        &cx(shared, 4),
        InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

fn add_partition(
    shared: &std::sync::Arc<Shared>,
    id: &str,
    pid: i64,
    epoch: i16,
    partition: i32,
) -> i16 {
    let r = add_partitions(
        &cx(shared, 3),
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(id)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(vec![partition]),
            ]),
    );
    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

fn end_txn(
    shared: &std::sync::Arc<Shared>,
    version: i16,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> i16 {
    end(
        &cx(shared, version),
        EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
    )
    .error_code
}

/// `TxnOffsetCommit` of offset 5 on partition 0 for group `g`, anonymously; the error code.
fn txn_offset_commit(
    shared: &std::sync::Arc<Shared>,
    version: i16,
    id: &str,
    pid: i64,
    epoch: i16,
) -> i16 {
    offset_commit(
        &cx(shared, version),
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_group_id(GroupId(s("g")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_topics(vec![
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(vec![
                        TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(5),
                    ]),
            ]),
    )
    .topics[0]
        .partitions[0]
        .error_code
}

/// Appends a one-record transactional batch as Produce v11 would after its checks.
fn produce(
    shared: &std::sync::Arc<Shared>,
    pid: i64,
    epoch: i16,
    partition: i32,
) -> Result<i64, ResponseError> {
    produce_at(shared, 11, pid, epoch, partition)
}

/// Appends a one-record transactional batch as Produce at `version` would after its checks
/// (from v12 the partition joins the transaction there).
fn produce_at(
    shared: &std::sync::Arc<Shared>,
    version: i16,
    pid: i64,
    epoch: i16,
    partition: i32,
) -> Result<i64, ResponseError> {
    let mut state = shared.state();
    admit_produce(shared, &mut state, version, pid, epoch, TOPIC, partition)?;
    let header = BatchHeader {
        base_offset: 0,
        partition_leader_epoch: 0,
        attributes: 0b0001_0000,
        last_offset_delta: 0,
        base_timestamp: 1,
        max_timestamp: 1,
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: 0,
        record_count: 1,
    };
    let p = state
        .topics
        .partition_mut(TOPIC, partition)
        .expect("partition");
    Ok(p.log.append(header, &[0u8; 70]))
}

fn stable(shared: &std::sync::Arc<Shared>, partition: i32) -> i64 {
    shared
        .state()
        .topics
        .partition(TOPIC, partition)
        .expect("partition")
        .log
        .last_stable_offset()
}

#[test]
fn init_bumps_the_epoch_of_the_same_producer_id() {
    let c = cluster();
    let shared = c.shared();
    let (e, pid, epoch) = init_id(shared, "a", 10_000);
    assert_eq!((e, epoch), (0, 0));
    let (e, again, epoch) = init_id(shared, "a", 10_000);
    assert_eq!((e, again, epoch), (0, pid, 1));
    let (_, other, _) = init_id(shared, "b", 10_000);
    assert_ne!(other, pid);
}

#[test]
fn a_timeout_above_the_maximum_or_not_positive_is_refused() {
    let c = cluster();
    let refused = ResponseError::InvalidTransactionTimeout.code();
    assert_eq!(init_id(c.shared(), "a", 60_001).0, refused);
    assert_eq!(init_id(c.shared(), "a", 0).0, refused);
    assert_eq!(init_id(c.shared(), "a", 60_000).0, 0);
    assert_eq!(
        init_id(c.shared(), "", 1_000).0,
        ResponseError::InvalidRequest.code()
    );
}

#[test]
fn a_new_init_aborts_the_open_transaction_and_fences_its_producer() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "a", 10_000);
    assert_eq!(add_partition(shared, "a", pid, epoch, 0), 0);
    produce(shared, pid, epoch, 0).expect("appended");
    assert_eq!(stable(shared, 0), 0);
    // The open transaction is aborted first; the retry gets the epoch after the fence.
    assert_eq!(
        init_id(shared, "a", 10_000).0,
        ResponseError::ConcurrentTransactions.code()
    );
    assert_eq!(
        stable(shared, 0),
        2,
        "the abort marker moved the stable offset"
    );
    let (e, same, next) = init_id(shared, "a", 10_000);
    assert_eq!((e, same, next), (0, pid, epoch + 2));
    assert_eq!(
        end_txn(shared, 3, "a", pid, epoch, true),
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(
        end_txn(shared, 1, "a", pid, epoch, true),
        ResponseError::InvalidProducerEpoch.code(),
        "before KIP-588"
    );
    assert_eq!(
        produce(shared, pid, epoch, 0),
        Err(ResponseError::InvalidProducerEpoch)
    );
    assert_eq!(
        add_partition(shared, "a", pid, epoch, 0),
        ResponseError::ProducerFenced.code()
    );
}

#[test]
fn end_follows_the_transaction_state() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "a", 10_000);
    let invalid = ResponseError::InvalidTxnState.code();
    assert_eq!(
        end_txn(shared, 3, "a", pid, epoch, true),
        invalid,
        "nothing open"
    );
    assert_eq!(
        end_txn(shared, 3, "a", pid, epoch, false),
        invalid,
        "nothing open"
    );
    assert_eq!(add_partition(shared, "a", pid, epoch, 1), 0);
    produce(shared, pid, epoch, 1).expect("appended");
    assert_eq!(end_txn(shared, 3, "a", pid, epoch, true), 0);
    assert_eq!(stable(shared, 1), 2);
    assert_eq!(
        end_txn(shared, 3, "a", pid, epoch, true),
        0,
        "a retried commit"
    );
    assert_eq!(end_txn(shared, 3, "a", pid, epoch, false), invalid);
    assert_eq!(
        end_txn(shared, 3, "a", pid + 100, epoch, true),
        ResponseError::InvalidProducerIdMapping.code()
    );
    assert_eq!(
        end_txn(shared, 3, "unknown", pid, epoch, true),
        ResponseError::InvalidProducerIdMapping.code()
    );
}

#[test]
fn produce_needs_the_partition_in_the_open_transaction() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "a", 10_000);
    assert_eq!(
        produce(shared, pid, epoch, 0),
        Err(ResponseError::InvalidTxnState)
    );
    assert_eq!(add_partition(shared, "a", pid, epoch, 0), 0);
    assert_eq!(
        produce(shared, pid, epoch, 1),
        Err(ResponseError::InvalidTxnState)
    );
    assert!(produce(shared, pid, epoch, 0).is_ok());
    assert_eq!(
        produce(shared, pid + 100, 0, 0),
        Err(ResponseError::InvalidProducerIdMapping)
    );
}

#[test]
fn unknown_partitions_fail_alone_and_the_others_are_not_attempted() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "a", 10_000);
    let r = add_partitions(
        &cx(shared, 3),
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s("a")))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(vec![0, 7]),
            ]),
    );
    let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(
        codes,
        vec![
            ResponseError::OperationNotAttempted.code(),
            ResponseError::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(
        produce(shared, pid, epoch, 0),
        Err(ResponseError::InvalidTxnState)
    );
}

#[test]
fn offsets_wait_in_the_transaction_until_it_ends() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "a", 10_000);
    let commit_offsets = || txn_offset_commit(shared, 3, "a", pid, epoch);
    assert_eq!(
        commit_offsets(),
        ResponseError::InvalidTxnState.code(),
        "group not added"
    );
    let added = add_offsets(
        &cx(shared, 3),
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s("a")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_group_id(GroupId(s("g"))),
    );
    assert_eq!(added.error_code, 0);
    assert_eq!(commit_offsets(), 0);
    assert!(has_pending_offsets(&shared.state(), "g", TOPIC, 0));
    assert!(!has_pending_offsets(&shared.state(), "g", TOPIC, 1));
    assert_eq!(end_txn(shared, 3, "a", pid, epoch, false), 0);
    assert!(!has_pending_offsets(&shared.state(), "g", TOPIC, 0));
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, _) = init_id(shared, "a", 10_000);
    shared
        .state()
        .transactions
        .get_mut("a")
        .expect("known")
        .epoch = i16::MAX - 1;
    let (e, fresh, epoch) = init_id(shared, "a", 10_000);
    assert_eq!((e, epoch), (0, 0));
    assert_ne!(fresh, pid);
    assert_eq!(
        produce(shared, pid, i16::MAX - 1, 0),
        Err(ResponseError::InvalidProducerIdMapping)
    );
}

#[tokio::test(start_paused = true)]
async fn the_coordinator_aborts_a_transaction_past_its_timeout() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "a", 1_000);
    assert_eq!(add_partition(shared, "a", pid, epoch, 0), 0);
    produce(shared, pid, epoch, 0).expect("appended");
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(stable(shared, 0), 0, "still open");
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::task::yield_now().await;
    assert_eq!(stable(shared, 0), 2, "aborted by the timer");
    assert_eq!(
        end_txn(shared, 3, "a", pid, epoch, true),
        ResponseError::ProducerFenced.code()
    );
    let (e, same, next) = init_id(shared, "a", 1_000);
    assert_eq!((e, same, next), (0, pid, epoch + 2));
}

#[tokio::test(start_paused = true)]
async fn the_timer_follows_the_next_transactions_of_the_id() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "a", 1_000);
    assert_eq!(add_partition(shared, "a", pid, epoch, 0), 0);
    produce(shared, pid, epoch, 0).expect("appended");
    assert_eq!(end_txn(shared, 3, "a", pid, epoch, true), 0);
    tokio::time::sleep(Duration::from_millis(600)).await;
    // The second transaction begins before the first one's deadline and keeps its own.
    assert_eq!(add_partition(shared, "a", pid, epoch, 0), 0);
    produce(shared, pid, epoch, 0).expect("appended");
    tokio::time::sleep(Duration::from_millis(900)).await;
    tokio::task::yield_now().await;
    assert_eq!(stable(shared, 0), 2, "still open at 1.5 s");
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::task::yield_now().await;
    assert_eq!(stable(shared, 0), 4, "aborted at its own deadline");
    assert!(!shared.state().transactions.get("a").expect("known").timer);
}

/// `EndTxn` v5 for `id`: (error, next producer id, next epoch).
fn end_v5(
    shared: &std::sync::Arc<Shared>,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> (i16, i64, i16) {
    let r = end(
        &cx(shared, 5),
        EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
    );
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// A Produce v12 batch: the partition joins the transaction on its own.
fn produce_v12(
    shared: &std::sync::Arc<Shared>,
    pid: i64,
    epoch: i16,
    partition: i32,
) -> Result<(), ResponseError> {
    produce_at(shared, 12, pid, epoch, partition).map(|_| ())
}

#[tokio::test]
async fn produce_v12_begins_the_transaction_and_end_v5_bumps_the_epoch() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "v2", 10_000);
    // No AddPartitionsToTxn: the produce registers the partition and opens the transaction.
    produce_v12(shared, pid, epoch, 1).expect("admitted");
    assert!(shared.state().transactions.get("v2").is_some_and(
        |t| t.status == Status::Ongoing && t.partitions.contains(&(TOPIC.to_owned(), 1))
    ));
    let (e, next_pid, next) = end_v5(shared, "v2", pid, epoch, true);
    assert_eq!((e, next_pid, next), (0, pid, epoch + 1));
    // A retry of that commit, still at the old epoch, is answered with the new pair.
    assert_eq!(end_v5(shared, "v2", pid, epoch, true), (0, pid, epoch + 1));
    // The other outcome at the old epoch is not a retry.
    assert_eq!(
        end_v5(shared, "v2", pid, epoch, false).0,
        ResponseError::InvalidTxnState.code()
    );
    // The old epoch can no longer write.
    assert_eq!(
        produce_v12(shared, pid, epoch, 0),
        Err(ResponseError::InvalidProducerEpoch)
    );
    // An abort with nothing open still moves the epoch on; a commit with nothing open fails.
    assert_eq!(
        end_v5(shared, "v2", pid, next, true).0,
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(end_v5(shared, "v2", pid, next, false), (0, pid, next + 1));
    // Two epochs behind is fenced, an unknown producer id unmapped.
    assert_eq!(
        end_v5(shared, "v2", pid, epoch, false).0,
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(
        end_v5(shared, "v2", pid + 1000, next + 1, false).0,
        ResponseError::InvalidProducerIdMapping.code()
    );
}

#[tokio::test]
async fn end_v5_writes_markers_under_the_bumped_epoch() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "markers", 10_000);
    produce_v12(shared, pid, epoch, 0).expect("admitted and written");
    assert_eq!(stable(shared, 0), 0, "open");
    let (e, _, next) = end_v5(shared, "markers", pid, epoch, false);
    assert_eq!((e, next), (0, epoch + 1));
    assert_eq!(stable(shared, 0), 2, "the abort marker closed it");
    // The next transaction writes under the new epoch from sequence 0.
    produce_v12(shared, pid, next, 0).expect("the new epoch is admitted");
}

#[tokio::test]
async fn txn_offset_commit_v5_adds_the_group_itself() {
    let c = cluster();
    let shared = c.shared();
    let (_, pid, epoch) = init_id(shared, "offsets", 10_000);
    let commit = |version: i16| txn_offset_commit(shared, version, "offsets", pid, epoch);
    // The classic protocol wants AddOffsetsToTxn first.
    assert_eq!(commit(4), ResponseError::InvalidTxnState.code());
    assert_eq!(commit(5), 0);
    assert!(
        shared
            .state()
            .transactions
            .get("offsets")
            .is_some_and(|t| { t.status == Status::Ongoing && t.groups.contains("g") })
    );
    let (e, _, _) = end_v5(shared, "offsets", pid, epoch, true);
    assert_eq!(e, 0);
    assert_eq!(shared.state().groups.committed("g", TOPIC, 0), Some(5));
}
