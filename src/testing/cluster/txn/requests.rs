//! The transactional requests: `InitProducerId` (with a transactional id), `AddPartitionsToTxn`,
//! `AddOffsetsToTxn`, `TxnOffsetCommit` and `EndTxn`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, GroupId, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use std::time::Duration;

use tokio::time::Instant;

use super::super::groups::coordinator::coordinator_of;
use super::super::server::Cx;
use super::super::state::State;
use super::{PendingOffset, Status, abort_expired, add, end_from_client, end_v2, init, timeout};
use crate::testing::faults;

/// Each partition's error code in an `AddPartitionsToTxn` answer.
type PartitionOutcome = Box<dyn Fn(&str, i32) -> i16>;

/// `FindCoordinator` key types.
const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

/// Whether this node does not coordinate `key`: Kafka's placement (the key's hash over the
/// coordination partitions), or where a fault moved it.
fn moved(cx: &Cx<'_>, key_type: i8, key: &str) -> bool {
    let node = faults::coordinator_override(cx.cluster, key_type, key)
        .unwrap_or_else(|| coordinator_of(key, cx.cluster.options.nodes));
    node != cx.node
}

/// `PRODUCER_FENCED` arrived with KIP-588; older request versions get `INVALID_PRODUCER_EPOCH`,
/// as Kafka answers them.
fn fenced_for(version: i16, since: i16, error: ResponseError) -> ResponseError {
    if error == ResponseError::ProducerFenced && version < since {
        ResponseError::InvalidProducerEpoch
    } else {
        error
    }
}

fn code(result: Result<(), ResponseError>) -> i16 {
    result.err().map_or(0, |e| e.code())
}

/// Runs `op` on the locked state after aborting expired transactions; wakes waiting readers
/// when either wrote markers.
fn with_state<T>(cx: &Cx<'_>, op: impl FnOnce(&mut State) -> (T, bool)) -> T {
    let (out, changed) = {
        let mut state = cx.cluster.state();
        let expired = abort_expired(&mut state);
        let (out, changed) = op(&mut state);
        (out, changed || expired)
    };
    if changed {
        cx.cluster.changed.notify_waiters();
    }
    out
}

/// `InitProducerId` with a transactional id: the id's producer id, its epoch bumped (fencing the
/// previous holder and aborting its open transaction).
pub(crate) fn init_producer_id(
    cx: &Cx<'_>,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let failed = |e: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(fenced_for(cx.version, 4, e).code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let id = request
        .transactional_id
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    if id.is_empty() {
        return failed(ResponseError::InvalidRequest);
    }
    if moved(cx, TRANSACTION_KEY, &id) {
        return failed(ResponseError::NotCoordinator);
    }
    let max = cx.cluster.options.transaction_max_timeout;
    let timeout = u64::try_from(request.transaction_timeout_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .filter(|t| *t <= max);
    let Some(timeout) = timeout else {
        return failed(ResponseError::InvalidTransactionTimeout);
    };
    let expected =
        (request.producer_id.0 != -1).then_some((request.producer_id.0, request.producer_epoch));
    let outcome = with_state(cx, |state| {
        let outcome = init(state, &id, timeout, expected);
        // Fencing an open transaction wrote abort markers.
        let wrote = outcome == Err(ResponseError::ConcurrentTransactions);
        (outcome, wrote)
    });
    match outcome {
        Ok((producer_id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch),
        Err(e) => failed(e),
    }
}

/// `AddPartitionsToTxn` (v0-3, the producer's form): every partition carries the outcome. A
/// partition of an unknown topic fails with `UNKNOWN_TOPIC_OR_PARTITION` and the others with
/// `OPERATION_NOT_ATTEMPTED`, before the coordinator looks at the transaction.
pub(crate) fn add_partitions(
    cx: &Cx<'_>,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let id = request.v3_and_below_transactional_id.0.as_str().to_owned();
    let wanted: Vec<(String, i32)> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.as_str().to_owned(), *p))
        })
        .collect();
    let producer_id = request.v3_and_below_producer_id.0;
    let epoch = request.v3_and_below_producer_epoch;
    let outcome: PartitionOutcome = if id.is_empty() {
        Box::new(|_, _| ResponseError::InvalidRequest.code())
    } else if moved(cx, TRANSACTION_KEY, &id) {
        Box::new(|_, _| ResponseError::NotCoordinator.code())
    } else {
        let (unknown, result) = with_state(cx, |state| {
            let unknown: Vec<(String, i32)> = wanted
                .iter()
                .filter(|(t, p)| state.topics.partition(t, *p).is_none())
                .cloned()
                .collect();
            if !unknown.is_empty() {
                return ((unknown, Ok(())), false);
            }
            let result = add(state, &id, producer_id, epoch, &wanted, None);
            if let Ok(Some(deadline)) = result {
                timeout::watch(cx.cluster, state, &id, deadline);
            }
            ((unknown, result.map(|_| ())), false)
        });
        if unknown.is_empty() {
            let c = code(result.map_err(|e| fenced_for(cx.version, 2, e)));
            Box::new(move |_, _| c)
        } else {
            Box::new(move |t, p| {
                if unknown.iter().any(|(ut, up)| ut == t && *up == p) {
                    ResponseError::UnknownTopicOrPartition.code()
                } else {
                    ResponseError::OperationNotAttempted.code()
                }
            })
        }
    };
    let topics = request.v3_and_below_topics;
    faults::add_partitions_answer(&topics, outcome)
}

/// `AddOffsetsToTxn`: puts the group (Kafka: its offsets topic partition) in the transaction.
pub(crate) fn add_offsets(cx: &Cx<'_>, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    let id = request.transactional_id.0.as_str().to_owned();
    let GroupId(group) = request.group_id;
    let group = group.to_string();
    let result = if id.is_empty() {
        Err(ResponseError::InvalidRequest)
    } else if moved(cx, TRANSACTION_KEY, &id) {
        Err(ResponseError::NotCoordinator)
    } else {
        with_state(cx, |state| {
            let result = add(
                state,
                &id,
                request.producer_id.0,
                request.producer_epoch,
                &[],
                Some(&group),
            );
            if let Ok(Some(deadline)) = result {
                timeout::watch(cx.cluster, state, &id, deadline);
            }
            (result.map(|_| ()), false)
        })
    };
    AddOffsetsToTxnResponse::default()
        .with_error_code(code(result.map_err(|e| fenced_for(cx.version, 2, e))))
}

/// `EndTxn`: commits or aborts, markers written before the answer. From v5 (KIP-890) every
/// end bumps the epoch and the answer names the producer id and epoch to go on with.
pub(crate) fn end(cx: &Cx<'_>, request: EndTxnRequest) -> EndTxnResponse {
    let TransactionalId(id) = request.transactional_id;
    let id = id.to_string();
    let (producer_id, epoch) = (request.producer_id.0, request.producer_epoch);
    let result = if id.is_empty() {
        Err(ResponseError::InvalidRequest)
    } else if moved(cx, TRANSACTION_KEY, &id) {
        Err(ResponseError::NotCoordinator)
    } else {
        with_state(cx, |state| {
            let was_open = state
                .transactions
                .get(&id)
                .is_some_and(|t| t.status == Status::Ongoing);
            let result = if cx.version >= 5 {
                end_v2(state, &id, producer_id, epoch, request.committed)
            } else {
                end_from_client(state, &id, producer_id, epoch, request.committed)
                    .map(|()| (-1, -1))
            };
            let wrote = was_open && result.is_ok();
            (result, wrote)
        })
    };
    let (error, (next_id, next_epoch)) = match result {
        Ok(next) => (0, next),
        Err(e) => (fenced_for(cx.version, 2, e).code(), (-1, -1)),
    };
    EndTxnResponse::default()
        .with_error_code(error)
        .with_producer_id(ProducerId(next_id))
        .with_producer_epoch(next_epoch)
}

/// `TxnOffsetCommit`, at the group coordinator: the offsets wait in the transaction and reach
/// the group only when it commits. The producer must hold the transaction's epoch and have
/// added the group (`AddOffsetsToTxn`); a member of another generation is refused (KIP-447).
pub(crate) fn offset_commit(
    cx: &Cx<'_>,
    request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let id = request.transactional_id.0.as_str().to_owned();
    let group = request.group_id.0.as_str().to_owned();
    let result = if moved(cx, GROUP_KEY, &group) {
        Err(ResponseError::NotCoordinator)
    } else {
        with_state(cx, |state| {
            let result = stage_offsets(state, &id, &group, &request, cx.version);
            if let Ok(Some(deadline)) = result {
                timeout::watch(cx.cluster, state, &id, deadline);
            }
            (result.map(|_| ()), false)
        })
    };
    let topics = request.topics;
    faults::txn_offset_commit_answer(&topics, code(result))
}

/// Validates a `TxnOffsetCommit` and keeps its offsets in the transaction. From v5 (KIP-890)
/// the group joins the transaction here, beginning one if none is open (no `AddOffsetsToTxn`);
/// returns the transaction's deadline when this began it.
fn stage_offsets(
    state: &mut State,
    id: &str,
    group: &str,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> Result<Option<Instant>, ResponseError> {
    let txn = state
        .transactions
        .get(id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    if txn.producer_id != request.producer_id.0 {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    // The group coordinator verifies with the transaction coordinator, which turns its
    // PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for this caller.
    if txn.epoch != request.producer_epoch {
        return Err(ResponseError::InvalidProducerEpoch);
    }
    let implicit = version >= 5;
    if !implicit && (txn.status != Status::Ongoing || !txn.groups.contains(group)) {
        return Err(ResponseError::InvalidTxnState);
    }
    state.groups.validate_txn_commit(
        group,
        request.member_id.as_str(),
        request.group_instance_id.as_deref(),
        request.generation_id,
    )?;
    let began = if implicit {
        add(
            state,
            id,
            request.producer_id.0,
            request.producer_epoch,
            &[],
            Some(group),
        )
        .map_err(|e| match e {
            ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
            other => other,
        })?
    } else {
        None
    };
    let Some(txn) = state.transactions.get_mut(id) else {
        return Err(ResponseError::UnknownServerError);
    };
    for t in &request.topics {
        for p in &t.partitions {
            let offset = PendingOffset {
                group: group.to_owned(),
                topic: t.name.0.as_str().to_owned(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.as_str().to_owned()),
            };
            txn.offsets.retain(|o| {
                !(o.group == offset.group
                    && o.topic == offset.topic
                    && o.partition == offset.partition)
            });
            txn.offsets.push(offset);
        }
    }
    Ok(began)
}
