//! Transactions: the coordinator's side (partitions and offsets added, commit and abort).
//!
//! Each transactional id holds a producer id and epoch and moves through Kafka's states:
//! `Empty` after `InitProducerId`, `Ongoing` from the first partition or group added, then
//! `CompleteCommit` or `CompleteAbort`. Kafka answers `EndTxn` once the outcome is logged and
//! writes the markers afterwards; here the markers are written before the answer, so the
//! `Prepare*` states are never observed and `CONCURRENT_TRANSACTIONS` only comes from an
//! `InitProducerId` that had to abort the previous holder's open transaction first (Kafka
//! answers that case the same way, and the client's retry then gets the next epoch).

mod requests;
mod timeout;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::Shared;
use super::state::State;

pub(crate) use requests::{add_offsets, add_partitions, end, init_producer_id, offset_commit};

/// Where a transaction is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Empty,
    Ongoing,
    CompleteCommit,
    CompleteAbort,
}

/// An offset a transaction commits for a group when it commits.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingOffset {
    group: String,
    topic: String,
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: Option<String>,
}

/// One transactional id's coordinator state.
#[derive(Debug)]
struct Txn {
    producer_id: i64,
    /// The producer id before the last rotation: a retried init after an exhausted epoch may
    /// still name it.
    last_producer_id: i64,
    epoch: i16,
    /// The epoch before the last init (when the producer named its own), so that a retry of
    /// that init gets the same answer.
    last_epoch: i16,
    timeout: Duration,
    status: Status,
    partitions: BTreeSet<(String, i32)>,
    groups: BTreeSet<String>,
    offsets: Vec<PendingOffset>,
    started: Instant,
    /// Whether a timer task watches this id's transactions (one per id, however many
    /// transactions it runs).
    timer: bool,
}

/// Every transactional id the cluster knows.
#[derive(Debug, Default)]
pub(crate) struct Transactions {
    by_id: HashMap<String, Txn>,
    /// Current producer id -> transactional id.
    by_producer: HashMap<i64, String>,
}

/// Kafka stops bumping an epoch one short of the largest value, so that a fence can still
/// bump it once; the next init then rotates to a new producer id.
fn exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Wall-clock milliseconds for marker timestamps.
fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Checks a transactional produce to `topic`/`partition` by `producer_id` at `epoch`: the
/// producer must hold the current epoch of its transactional id and have added the partition
/// to its open transaction. Called by Produce, under the state lock, before it appends.
///
/// The answers are those of Kafka's partition leader after it verified the batch with the
/// transaction coordinator (KIP-890 part 1): an unknown producer id is
/// `INVALID_PRODUCER_ID_MAPPING`, a stale or unknown epoch `INVALID_PRODUCER_EPOCH` (the leader
/// turns the coordinator's `PRODUCER_FENCED` into it), a partition outside the open
/// transaction `INVALID_TXN_STATE`.
pub(crate) fn check_produce(
    state: &State,
    producer_id: i64,
    epoch: i16,
    topic: &str,
    partition: i32,
) -> Result<(), ResponseError> {
    let txns = &state.transactions;
    let txn = txns
        .by_producer
        .get(&producer_id)
        .and_then(|id| txns.by_id.get(id))
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    if epoch != txn.epoch {
        return Err(ResponseError::InvalidProducerEpoch);
    }
    let added =
        txn.status == Status::Ongoing && txn.partitions.contains(&(topic.to_owned(), partition));
    if !added {
        return Err(ResponseError::InvalidTxnState);
    }
    Ok(())
}

/// A transactional produce under the KIP-890 protocol (Produce v12 and later): the partition
/// leader has the coordinator add the partition to the producer's transaction, beginning one
/// when none is open, instead of expecting an `AddPartitionsToTxn` before it. The answers are
/// the leader's: an unknown producer id is `INVALID_PRODUCER_ID_MAPPING`, a stale epoch
/// `INVALID_PRODUCER_EPOCH`. Older versions are checked as [`check_produce`] does.
pub(crate) fn admit_produce(
    shared: &Arc<Shared>,
    state: &mut State,
    version: i16,
    producer_id: i64,
    epoch: i16,
    topic: &str,
    partition: i32,
) -> Result<(), ResponseError> {
    if version < 12 {
        return check_produce(state, producer_id, epoch, topic, partition);
    }
    let id = state
        .transactions
        .by_producer
        .get(&producer_id)
        .cloned()
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    let began = add(
        state,
        &id,
        producer_id,
        epoch,
        &[(topic.to_owned(), partition)],
        None,
    )
    .map_err(|e| match e {
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        other => other,
    })?;
    if let Some(deadline) = began {
        timeout::watch(shared, state, &id, deadline);
    }
    Ok(())
}

/// Whether an open transaction holds an offset for `group` on `topic`/`partition` that it has
/// not committed yet (`OffsetFetch` with `require_stable` answers `UNSTABLE_OFFSET_COMMIT`).
pub(crate) fn has_pending_offsets(state: &State, group: &str, topic: &str, partition: i32) -> bool {
    state.transactions.by_id.values().any(|t| {
        t.status == Status::Ongoing
            && t.offsets
                .iter()
                .any(|o| o.group == group && o.topic == topic && o.partition == partition)
    })
}

impl Transactions {
    fn get(&self, id: &str) -> Option<&Txn> {
        self.by_id.get(id)
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Txn> {
        self.by_id.get_mut(id)
    }

    /// `id`'s transaction, if `producer_id` at `epoch` holds it (the coordinator's checks
    /// before it acts for a producer).
    fn held(&mut self, id: &str, producer_id: i64, epoch: i16) -> Result<&mut Txn, ResponseError> {
        let txn = self
            .get_mut(id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        if txn.producer_id != producer_id {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        if txn.epoch != epoch {
            return Err(ResponseError::ProducerFenced);
        }
        Ok(txn)
    }
}

/// The producer id and epoch `InitProducerId` hands out for `id`; `expected` is the id and
/// epoch the producer says it holds (v3+), if any.
///
/// An open transaction of the previous holder is aborted first (its epoch bumped, so it is
/// fenced) and the answer is `CONCURRENT_TRANSACTIONS`: the retry gets the next epoch, as
/// with Kafka.
fn init(
    state: &mut State,
    id: &str,
    timeout: Duration,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), ResponseError> {
    if state.transactions.get(id).is_none() {
        let producer_id = state.producers.allocate_id();
        state
            .transactions
            .by_producer
            .insert(producer_id, id.to_owned());
        state.transactions.by_id.insert(
            id.to_owned(),
            Txn {
                producer_id,
                last_producer_id: -1,
                epoch: -1,
                last_epoch: -1,
                timeout,
                status: Status::Empty,
                partitions: BTreeSet::new(),
                groups: BTreeSet::new(),
                offsets: Vec::new(),
                started: Instant::now(),
                timer: false,
            },
        );
    }
    let Some(txn) = state.transactions.get(id) else {
        return Err(ResponseError::UnknownServerError);
    };
    if let Some((pid, epoch)) = expected {
        let valid = txn.epoch == -1
            || pid == txn.producer_id
            || (pid == txn.last_producer_id && exhausted(epoch));
        if !valid {
            return Err(ResponseError::ProducerFenced);
        }
    }
    if txn.status == Status::Ongoing {
        fence_and_abort(state, id);
        return Err(ResponseError::ConcurrentTransactions);
    }
    let rotate = exhausted(txn.epoch) && expected.is_none_or(|(_, e)| e == txn.epoch);
    let (producer_id, epoch, last_epoch, last_producer_id) = if rotate {
        let fresh = state.producers.allocate_id();
        let last_epoch = if expected.is_some() { txn.epoch } else { -1 };
        (fresh, 0, last_epoch, txn.producer_id)
    } else {
        let (epoch, last_epoch) = match expected {
            None => (txn.epoch.saturating_add(1), -1),
            Some((_, e)) if txn.epoch == -1 || e == txn.epoch => {
                (txn.epoch.saturating_add(1), txn.epoch)
            }
            // A retry of an init that was answered but not heard: the same answer again.
            Some((_, e)) if e == txn.last_epoch => (txn.epoch, txn.last_epoch),
            Some(_) => return Err(ResponseError::ProducerFenced),
        };
        (txn.producer_id, epoch, last_epoch, txn.last_producer_id)
    };
    let previous = txn.producer_id;
    if previous != producer_id {
        state.transactions.by_producer.remove(&previous);
        state
            .transactions
            .by_producer
            .insert(producer_id, id.to_owned());
    }
    let Some(txn) = state.transactions.get_mut(id) else {
        return Err(ResponseError::UnknownServerError);
    };
    txn.producer_id = producer_id;
    txn.last_producer_id = last_producer_id;
    txn.epoch = epoch;
    txn.last_epoch = last_epoch;
    txn.timeout = timeout;
    txn.status = Status::Empty;
    txn.partitions.clear();
    txn.groups.clear();
    txn.offsets.clear();
    state.producers.bump(producer_id, epoch);
    Ok((producer_id, epoch))
}

/// Adds partitions and groups to `id`'s transaction (`AddPartitionsToTxn`, `AddOffsetsToTxn`);
/// returns the transaction's deadline when this began it (its timeout starts now).
fn add(
    state: &mut State,
    id: &str,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, i32)],
    group: Option<&str>,
) -> Result<Option<Instant>, ResponseError> {
    let txn = state.transactions.held(id, producer_id, epoch)?;
    let mut began = None;
    if txn.status != Status::Ongoing {
        txn.status = Status::Ongoing;
        txn.started = Instant::now();
        txn.partitions.clear();
        txn.groups.clear();
        txn.offsets.clear();
        began = Some(txn.started + txn.timeout);
    }
    txn.partitions.extend(partitions.iter().cloned());
    if let Some(group) = group {
        txn.groups.insert(group.to_owned());
    }
    Ok(began)
}

/// `EndTxn` from the producer: commits or aborts the open transaction (markers written on every
/// partition it wrote to, offsets committed or dropped). A repeated end with the outcome
/// already reached succeeds; the other outcome, or an end without a transaction, is
/// `INVALID_TXN_STATE`.
fn end_from_client(
    state: &mut State,
    id: &str,
    producer_id: i64,
    epoch: i16,
    commit: bool,
) -> Result<(), ResponseError> {
    let txn = state.transactions.held(id, producer_id, epoch)?;
    match (txn.status, commit) {
        (Status::Ongoing, _) => {
            complete(state, id, commit);
            Ok(())
        }
        (Status::CompleteCommit, true) | (Status::CompleteAbort, false) => Ok(()),
        _ => Err(ResponseError::InvalidTxnState),
    }
}

/// `EndTxn` v5 and later (KIP-890): every end bumps the producer epoch (a new producer id once
/// the epoch is exhausted), and the answer carries the id and epoch the producer goes on with.
/// A retry of an end already done (its epoch one behind) is answered with the current pair;
/// an abort with nothing open still bumps the epoch. As Kafka's coordinator decides it.
fn end_v2(
    state: &mut State,
    id: &str,
    producer_id: i64,
    epoch: i16,
    commit: bool,
) -> Result<(i64, i16), ResponseError> {
    let txn = state
        .transactions
        .get(id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    let retry_on_overflow = txn.last_producer_id == producer_id
        && epoch == i16::MAX - 1
        && txn.epoch == 0
        && txn.producer_id != producer_id;
    if txn.producer_id != producer_id && !retry_on_overflow {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    let retry_on_bump = i32::from(txn.epoch) == i32::from(epoch) + 1;
    let retry = retry_on_bump || retry_on_overflow;
    let valid = match txn.status {
        Status::Ongoing | Status::Empty => epoch == txn.epoch,
        Status::CompleteCommit | Status::CompleteAbort => retry || epoch == txn.epoch,
    };
    if !valid {
        return Err(ResponseError::ProducerFenced);
    }
    let current = (txn.producer_id, txn.epoch);
    match (txn.status, commit) {
        (Status::Ongoing, _) => Ok(bump_and_complete(state, id, commit)),
        (Status::CompleteCommit, true) | (Status::CompleteAbort, false) if retry => Ok(current),
        (Status::CompleteCommit | Status::CompleteAbort | Status::Empty, false) if !retry => {
            Ok(bump_and_complete(state, id, false))
        }
        _ => Err(ResponseError::InvalidTxnState),
    }
}

/// Ends `id`'s transaction under a bumped epoch, markers included, and rotates to a new
/// producer id when the epoch is used up; returns the pair the producer goes on with.
fn bump_and_complete(state: &mut State, id: &str, commit: bool) -> (i64, i16) {
    let Some(txn) = state.transactions.get_mut(id) else {
        return (-1, -1);
    };
    let rotate = exhausted(txn.epoch);
    txn.epoch = txn.epoch.saturating_add(1);
    txn.last_epoch = -1;
    if txn.status == Status::Ongoing {
        complete(state, id, commit);
    } else {
        let producer_id = txn.producer_id;
        let epoch = txn.epoch;
        txn.status = Status::CompleteAbort;
        state.producers.bump(producer_id, epoch);
    }
    if rotate {
        let fresh = state.producers.allocate_id();
        let Some(txn) = state.transactions.get_mut(id) else {
            return (-1, -1);
        };
        let old = txn.producer_id;
        txn.last_producer_id = old;
        txn.producer_id = fresh;
        txn.epoch = 0;
        state.transactions.by_producer.remove(&old);
        state.transactions.by_producer.insert(fresh, id.to_owned());
    }
    state
        .transactions
        .get(id)
        .map_or((-1, -1), |t| (t.producer_id, t.epoch))
}

/// Writes the outcome of `id`'s open transaction: a marker on each of its partitions, its
/// offsets committed to their groups on commit, and the transaction complete.
fn complete(state: &mut State, id: &str, commit: bool) {
    let State {
        topics,
        producers,
        transactions,
        groups,
        ..
    } = state;
    let Some(txn) = transactions.get_mut(id) else {
        return;
    };
    let timestamp = wall_ms();
    for (topic, partition) in std::mem::take(&mut txn.partitions) {
        if let Some(p) = topics.partition_mut(&topic, partition) {
            p.log
                .end_transaction(txn.producer_id, txn.epoch, commit, timestamp);
        }
    }
    let offsets = std::mem::take(&mut txn.offsets);
    if commit {
        for o in offsets {
            groups.commit(
                &o.group,
                &o.topic,
                o.partition,
                o.offset,
                o.leader_epoch,
                o.metadata,
            );
        }
    }
    txn.groups.clear();
    txn.status = if commit {
        Status::CompleteCommit
    } else {
        Status::CompleteAbort
    };
    producers.bump(txn.producer_id, txn.epoch);
}

/// Aborts `id`'s open transaction on the coordinator's own account (a newer producer's init,
/// or the transaction timeout): the epoch is bumped first, so the old producer is fenced, and
/// the markers carry the new epoch, as Kafka's coordinator does.
fn fence_and_abort(state: &mut State, id: &str) {
    let Some(txn) = state.transactions.get_mut(id) else {
        return;
    };
    txn.epoch = txn.epoch.saturating_add(1);
    txn.last_epoch = -1;
    complete(state, id, false);
}

/// Aborts every open transaction that outlived its timeout; returns whether any was.
fn abort_expired(state: &mut State) -> bool {
    let now = Instant::now();
    let expired: Vec<String> = state
        .transactions
        .by_id
        .iter()
        .filter(|(_, t)| t.status == Status::Ongoing && t.started + t.timeout <= now)
        .map(|(id, _)| id.clone())
        .collect();
    for id in &expired {
        fence_and_abort(state, id);
    }
    !expired.is_empty()
}

#[cfg(test)]
mod tests;
