//! Settling batches: each record's delivery future gets its outcome, the queue's limits get
//! the records and bytes back, and the observers hear of each batch written, failed or sent
//! again.
//!
//! The invariant: the observers are told only after the producer's state lock is released
//! ([`Released::tell`]), never under it, so an observer that asks the producer something
//! (its queue, its in-flight count) cannot deadlock it; and they hear of a batch before its
//! records' futures resolve, so a caller whose send returned finds it heard. What a round
//! settles is gathered in a [`Released`] under the lock, a batch at a time (its deliveries
//! and one outcome), and the records' futures resolve only once the lock is released: a
//! caller woken by the first of a batch's thousand reports sends its next record without
//! waiting for the lock while the other 999 are resolved, and is not woken again and again.

use std::sync::Arc;
use std::time::Duration;

use super::super::accumulator::{ClosedBatch, OpenBatch, PartitionQueue, State};
use super::super::completion::{Outcome, Promise};
use super::super::transaction::{Origin, TxnState, classify};
use crate::client::ResponseError;
use crate::client::cluster::{NIL_TOPIC_ID, TopicId};
use crate::client::error::Error;
use crate::client::observe::{Event as Observed, Interest, Observers};

/// What a round of the sender settled: the records and bytes that leave the queue's limits,
/// and what the observers hear once the lock is released.
pub(super) struct Released {
    pub records: usize,
    pub bytes: usize,
    /// Whether an observer asked for the producer's events.
    telling: bool,
    told: Few<Told>,
    /// The settled batches' promises and outcomes, resolved once the lock is released.
    outcomes: Few<(Promise, Outcome)>,
}

/// A list that holds its first item in place: most rounds settle one batch, and a round
/// that settles one allocates nothing for it.
struct Few<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Few<T> {
    const fn new() -> Self {
        Few {
            first: None,
            rest: Vec::new(),
        }
    }

    fn push(&mut self, item: T) {
        if self.first.is_none() {
            self.first = Some(item);
        } else {
            self.rest.push(item);
        }
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(&self.rest)
    }

    /// Takes every item out, in the order they came.
    fn take(&mut self) -> impl Iterator<Item = T> + use<T> {
        self.first
            .take()
            .into_iter()
            .chain(std::mem::take(&mut self.rest))
    }
}

/// A round left without [`Released::tell`] (a panic on the way) still resolves its records'
/// futures: no caller waits for an outcome that was decided.
impl Drop for Released {
    fn drop(&mut self) {
        self.resolve();
    }
}

/// A producer event kept for the observers until the lock is released.
enum Told {
    Written {
        node: i32,
        topic: Arc<str>,
        partition: i32,
        records: usize,
        bytes: usize,
        base_offset: i64,
        retries: u32,
        latency: Duration,
    },
    Failed {
        topic: Arc<str>,
        partition: i32,
        records: usize,
        error: Error,
    },
    Retry {
        topic: Arc<str>,
        partition: i32,
        records: usize,
        attempt: u32,
        error: Error,
        delay: Duration,
    },
}

impl Released {
    pub(super) fn new(observers: &Observers) -> Self {
        Released {
            records: 0,
            bytes: 0,
            telling: observers.wants(Interest::PRODUCE),
            told: Few::new(),
            outcomes: Few::new(),
        }
    }

    /// Settles a batch's records: their queue space is released with the round's, and their
    /// futures get `outcome` once the lock is released.
    fn settle(&mut self, promise: Promise, records: usize, bytes: usize, outcome: Outcome) {
        self.records += records;
        self.bytes += bytes;
        self.outcomes.push((promise, outcome));
    }

    /// Tells the observers what the round settled, then resolves the records' futures. Call
    /// it after the state lock is released.
    pub(super) fn tell(mut self, observers: &Observers) {
        for told in self.told.iter() {
            let event = match told {
                Told::Written {
                    node,
                    topic,
                    partition,
                    records,
                    bytes,
                    base_offset,
                    retries,
                    latency,
                } => Observed::BatchWritten {
                    node: *node,
                    topic,
                    partition: *partition,
                    records: *records,
                    bytes: *bytes,
                    base_offset: *base_offset,
                    retries: *retries,
                    latency: *latency,
                },
                Told::Failed {
                    topic,
                    partition,
                    records,
                    error,
                } => Observed::BatchFailed {
                    topic,
                    partition: *partition,
                    records: *records,
                    error,
                },
                Told::Retry {
                    topic,
                    partition,
                    records,
                    attempt,
                    error,
                    delay,
                } => Observed::ProduceRetry {
                    topic,
                    partition: *partition,
                    records: *records,
                    attempt: *attempt,
                    error,
                    delay: *delay,
                },
            };
            observers.emit(&event);
        }
        self.resolve();
    }

    fn resolve(&mut self) {
        for (promise, outcome) in self.outcomes.take() {
            promise.settle(outcome);
        }
    }

    /// Fails the records of a batch still open (never sent).
    pub(super) fn fail_open(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        open: OpenBatch,
        error: &Error,
    ) {
        let records = open.builder.count().max(0) as usize;
        self.failed(topic, partition, records, error);
        self.settle(
            open.promise,
            records,
            open.bytes,
            Outcome::Failed(error.clone()),
        );
    }

    fn failed(&mut self, topic: &Arc<str>, partition: i32, records: usize, error: &Error) {
        if self.telling {
            self.told.push(Told::Failed {
                topic: topic.clone(),
                partition,
                records,
                error: error.clone(),
            });
        }
    }

    /// A batch goes out again after `delay`.
    pub(super) fn retried(&mut self, batch: &ClosedBatch, error: &Error, delay: Duration) {
        if self.telling {
            self.told.push(Told::Retry {
                topic: batch.topic.clone(),
                partition: batch.partition,
                records: batch.records(),
                attempt: batch.attempts,
                error: error.clone(),
                delay,
            });
        }
    }
}

/// The queue of the batch's partition.
pub(super) fn queue_of<'a>(
    state: &'a mut State,
    batch: &ClosedBatch,
) -> Option<&'a mut PartitionQueue> {
    state
        .topics
        .get_mut(&batch.topic)
        .and_then(|q| q.partitions.get_mut(batch.partition as usize))
}

/// A batch the leader `node` wrote at `base_offset`: each record's future gets its offset.
pub(super) fn complete_batch(
    state: &mut State,
    released: &mut Released,
    node: i32,
    batch: ClosedBatch,
    base_offset: i64,
    append_time: i64,
) {
    if let Some(queue) = queue_of(state, &batch) {
        queue.in_flight = queue.in_flight.saturating_sub(1);
        queue.acked_in_epoch = true;
    }
    if released.telling {
        released.told.push(Told::Written {
            node,
            topic: batch.topic.clone(),
            partition: batch.partition,
            records: batch.records(),
            bytes: batch.bytes,
            base_offset,
            retries: batch.attempts,
            latency: batch.created.elapsed(),
        });
    }
    let records = batch.records();
    released.settle(
        batch.promise,
        records,
        batch.bytes,
        Outcome::Written {
            base_offset,
            append_time,
        },
    );
}

/// Fails every record of a batch with `error`.
pub(super) fn fail_batch(released: &mut Released, batch: ClosedBatch, error: &Error) {
    let records = batch.records();
    released.failed(&batch.topic, batch.partition, records, error);
    released.settle(
        batch.promise,
        records,
        batch.bytes,
        Outcome::Failed(error.clone()),
    );
}

/// Fails the batches that waited past `message.timeout.ms`; says whether any had a sequence
/// number (then the partition's sequence has a gap).
pub(super) fn fail_expired(
    state: &mut State,
    expired: Vec<ClosedBatch>,
    released: &mut Released,
) -> bool {
    let sequenced = expired.iter().any(|b| b.sequence.is_some());
    for b in expired {
        let e = Error::Timeout(format!(
            "Local: Message timed out ({} records for {}-{})",
            b.count(),
            b.topic,
            b.partition
        ));
        note_txn_failure(&mut state.txn, &e);
        fail_batch(released, b, &e);
    }
    sequenced
}

/// Records a batch's failure as the open transaction's (the first one dooms it).
pub(super) fn note_txn_failure(txn: &mut Option<TxnState>, error: &Error) {
    if let Some(txn) = txn {
        let e = classify(&txn.id, Origin::Produce, "producing", error.clone());
        txn.failed(e);
    }
}

/// Fails the open batch and every batch waiting in `queue` (those in flight come back on
/// their own); says whether any of them had a sequence number, which leaves a gap.
pub(super) fn drop_queued(
    queue: &mut PartitionQueue,
    topic: &Arc<str>,
    partition: i32,
    error: &Error,
    released: &mut Released,
) -> bool {
    let mut sequenced = false;
    if let Some(open) = queue.open.take() {
        released.fail_open(topic, partition, open, error);
    }
    while let Some(b) = queue.ready.pop_front() {
        sequenced |= b.sequence.is_some();
        fail_batch(released, b, error);
    }
    sequenced
}

/// Fails the batches at the front of `queue` that were placed for another topic than the one
/// the name `topic` now has (`current`, from the metadata: it was deleted and created again):
/// their records go to the topic they were published to or nowhere. Says whether any had a
/// sequence number.
pub(super) fn fail_recreated(
    current: Option<TopicId>,
    queue: &mut PartitionQueue,
    topic: &Arc<str>,
    released: &mut Released,
) -> bool {
    let mut sequenced = false;
    let Some(current) = current else {
        return false;
    };
    while queue
        .ready
        .front()
        .is_some_and(|b| b.topic_id != NIL_TOPIC_ID && b.topic_id != current)
    {
        let Some(b) = queue.ready.pop_front() else {
            break;
        };
        sequenced |= b.sequence.is_some();
        let e = Error::Broker {
            code: ResponseError::UnknownTopicId,
            context: format!(
                "producing to {topic}-{}: the topic was deleted and created again; records \
                 published to the old topic are not written to the new one",
                b.partition
            ),
        };
        fail_batch(released, b, &e);
    }
    sequenced
}
