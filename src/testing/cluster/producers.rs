//! Producer ids, epochs and sequence numbers (idempotence and fencing).
//!
//! Each partition remembers, per producer id, the epoch it last saw and the last five batches
//! it appended (first and last sequence, offsets), as Kafka's producer state does. A retried
//! batch that matches one of them is answered with the offsets it got the first time instead
//! of being written again; anything else must continue the sequence.

use std::collections::{HashMap, VecDeque};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use crate::client::records::BatchHeader;

use super::server::Cx;

/// Batches remembered per producer and partition for duplicate detection (Kafka's
/// `NUM_BATCHES_TO_RETAIN`, the reason a producer keeps at most five requests in flight).
const BATCHES_KEPT: usize = 5;

/// A batch a partition appended for a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AppendedBatch {
    pub(crate) first_sequence: i32,
    pub(crate) last_sequence: i32,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
    /// The batch's largest timestamp, which Kafka reports as the log-append time of a retry.
    pub(crate) timestamp: i64,
}

/// One producer's state on one partition.
#[derive(Debug, Default)]
struct PartitionProducer {
    epoch: i16,
    batches: VecDeque<AppendedBatch>,
}

/// What the sequence check decided for a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SequenceCheck {
    /// Append it.
    Append,
    /// A retry of a batch already appended: answer with its offsets, append nothing.
    Duplicate(AppendedBatch),
}

/// Where a partition is: topic id and partition index (a topic deleted and created again is
/// a new log with new producer state).
type PartitionKey = (uuid::Uuid, i32);

/// Every producer id the cluster handed out, with its epoch and per-partition sequences.
#[derive(Debug, Default)]
pub(crate) struct Producers {
    next_id: i64,
    partitions: HashMap<(i64, PartitionKey), PartitionProducer>,
}

impl Producers {
    /// Hands out a producer id no one had before (ids start at 0, as a new `KRaft` cluster's
    /// first block does). Also used by the transaction coordinator for transactional ids.
    pub(crate) fn allocate_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Records that `producer_id` now holds `epoch` (a transactional id was re-initialised or
    /// its transaction ended with a bumped epoch): every partition that knew an older epoch
    /// forgets that epoch's sequences, so the producer restarts at sequence 0 there and the
    /// old epoch's batches are refused with `INVALID_PRODUCER_EPOCH`. This is the state a
    /// Kafka partition reaches when a marker with the new epoch is written to it.
    pub(crate) fn bump(&mut self, producer_id: i64, epoch: i16) {
        for ((id, _), state) in &mut self.partitions {
            if *id == producer_id && state.epoch < epoch {
                state.epoch = epoch;
                state.batches.clear();
            }
        }
    }

    /// Checks a batch of an idempotent or transactional producer against what the partition
    /// knows, as Kafka does: a duplicate of one of the last five batches of the same epoch is
    /// answered with its original offsets; an older epoch is refused; a new epoch must start
    /// at sequence 0; the same epoch must continue the sequence. A producer the partition has
    /// never seen may start anywhere.
    pub(crate) fn check(
        &self,
        topic_id: uuid::Uuid,
        partition: i32,
        header: &BatchHeader,
    ) -> Result<SequenceCheck, ResponseError> {
        let Some(state) = self
            .partitions
            .get(&(header.producer_id, (topic_id, partition)))
        else {
            return Ok(SequenceCheck::Append);
        };
        let last_sequence = last_sequence(header);
        let duplicate = state
            .batches
            .iter()
            .find(|b| b.first_sequence == header.base_sequence && b.last_sequence == last_sequence);
        if let Some(found) = duplicate.filter(|_| header.producer_epoch == state.epoch) {
            return Ok(SequenceCheck::Duplicate(*found));
        }
        if header.producer_epoch < state.epoch {
            return Err(ResponseError::InvalidProducerEpoch);
        }
        if header.producer_epoch != state.epoch {
            return if header.base_sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ResponseError::OutOfOrderSequenceNumber)
            };
        }
        let previous = state.batches.back().map_or(-1, |b| b.last_sequence);
        if in_sequence(previous, header.base_sequence) {
            Ok(SequenceCheck::Append)
        } else {
            Err(ResponseError::OutOfOrderSequenceNumber)
        }
    }

    /// Remembers a batch appended at `first_offset` (after [`check`](Self::check) said
    /// [`SequenceCheck::Append`]).
    pub(crate) fn appended(
        &mut self,
        topic_id: uuid::Uuid,
        partition: i32,
        header: &BatchHeader,
        first_offset: i64,
    ) {
        let state = self
            .partitions
            .entry((header.producer_id, (topic_id, partition)))
            .or_default();
        if state.epoch != header.producer_epoch {
            state.epoch = header.producer_epoch;
            state.batches.clear();
        }
        if state.batches.len() == BATCHES_KEPT {
            state.batches.pop_front();
        }
        state.batches.push_back(AppendedBatch {
            first_sequence: header.base_sequence,
            last_sequence: last_sequence(header),
            first_offset,
            last_offset: first_offset + i64::from(header.last_offset_delta),
            timestamp: header.max_timestamp,
        });
    }

    /// Forgets the producers whose last batch on a partition fell below its new log start
    /// (retention removed it), as Kafka evicts producer state the log no longer backs: such
    /// a producer is then new to the partition again.
    pub(crate) fn evict_before(&mut self, topic_id: uuid::Uuid, partition: i32, log_start: i64) {
        self.partitions.retain(|(_, key), state| {
            *key != (topic_id, partition)
                || state
                    .batches
                    .back()
                    .is_none_or(|last| last.last_offset >= log_start)
        });
    }

    /// Forgets every producer's state on the partitions of a deleted topic.
    pub(crate) fn forget_topic(&mut self, topic_id: uuid::Uuid) {
        self.partitions.retain(|(_, (id, _)), _| *id != topic_id);
    }
}

/// The sequence of a batch's last record; sequences wrap from `i32::MAX` to 0.
fn last_sequence(header: &BatchHeader) -> i32 {
    let delta = header.last_offset_delta.max(0);
    if header.base_sequence > i32::MAX - delta {
        delta - (i32::MAX - header.base_sequence) - 1
    } else {
        header.base_sequence + delta
    }
}

fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// `InitProducerId` without a transactional id: like Kafka, a fresh producer id at epoch 0
/// every time, whatever id and epoch the request carries (an idempotent producer that wants
/// to reset its sequences simply gets a new id).
pub(crate) fn init_producer_id(
    cx: &Cx<'_>,
    _request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let producer_id = cx.cluster.state().producers.allocate_id();
    InitProducerIdResponse::default()
        .with_producer_id(producer_id.into())
        .with_producer_epoch(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(producer_id: i64, epoch: i16, sequence: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            partition_leader_epoch: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id,
            producer_epoch: epoch,
            base_sequence: sequence,
            record_count: records,
        }
    }

    const TOPIC: uuid::Uuid = uuid::Uuid::from_u64_pair(1, 1);

    fn append(
        p: &mut Producers,
        h: &BatchHeader,
        offset: i64,
    ) -> Result<SequenceCheck, ResponseError> {
        let outcome = p.check(TOPIC, 0, h)?;
        if outcome == SequenceCheck::Append {
            p.appended(TOPIC, 0, h, offset);
        }
        Ok(outcome)
    }

    #[test]
    fn a_retried_batch_gets_its_first_offsets_back() {
        let mut p = Producers::default();
        assert_eq!(
            append(&mut p, &batch(1, 0, 0, 3), 10),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(
            append(&mut p, &batch(1, 0, 3, 2), 13),
            Ok(SequenceCheck::Append)
        );
        let Ok(SequenceCheck::Duplicate(first)) = append(&mut p, &batch(1, 0, 0, 3), 99) else {
            panic!("a duplicate");
        };
        assert_eq!((first.first_offset, first.last_offset), (10, 12));
    }

    #[test]
    fn only_the_last_five_batches_are_recognised() {
        let mut p = Producers::default();
        for i in 0..6 {
            assert_eq!(
                append(&mut p, &batch(1, 0, i, 1), i64::from(i)),
                Ok(SequenceCheck::Append)
            );
        }
        assert_eq!(
            append(&mut p, &batch(1, 0, 0, 1), 6),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
        assert!(matches!(
            append(&mut p, &batch(1, 0, 1, 1), 6),
            Ok(SequenceCheck::Duplicate(_))
        ));
    }

    #[test]
    fn gaps_old_epochs_and_new_epochs_follow_kafka() {
        let mut p = Producers::default();
        // An unknown producer may start at any sequence.
        assert_eq!(
            append(&mut p, &batch(1, 3, 40, 1), 0),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(
            append(&mut p, &batch(1, 3, 42, 1), 1),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            append(&mut p, &batch(1, 2, 41, 1), 1),
            Err(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            append(&mut p, &batch(1, 4, 5, 1), 1),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            append(&mut p, &batch(1, 4, 0, 1), 1),
            Ok(SequenceCheck::Append)
        );
        p.bump(1, 5);
        assert_eq!(
            append(&mut p, &batch(1, 4, 1, 1), 2),
            Err(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            append(&mut p, &batch(1, 5, 1, 1), 2),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            append(&mut p, &batch(1, 5, 0, 1), 2),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn retention_past_a_producers_batches_forgets_it() {
        let mut p = Producers::default();
        assert_eq!(
            append(&mut p, &batch(1, 0, 0, 2), 0),
            Ok(SequenceCheck::Append)
        );
        p.evict_before(TOPIC, 0, 1);
        assert_eq!(
            append(&mut p, &batch(1, 0, 7, 1), 2),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
        p.evict_before(TOPIC, 0, 2);
        assert_eq!(
            append(&mut p, &batch(1, 0, 7, 1), 2),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn sequences_wrap_after_the_largest_int() {
        let mut p = Producers::default();
        assert_eq!(
            append(&mut p, &batch(1, 0, i32::MAX - 1, 2), 0),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(
            append(&mut p, &batch(1, 0, 0, 1), 2),
            Ok(SequenceCheck::Append)
        );
    }
}
