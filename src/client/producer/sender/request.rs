//! Building what goes on the wire: a batch's sequence and encoding, the Produce request of
//! a round, and what a round holds back (batches lingering, expired, or of a transaction that
//! cannot take them yet).
//!
//! The invariant: a batch is encoded with the producer state it is sent under; it keeps its
//! base sequence (and so its bytes) across retries within an epoch, and is encoded again only
//! when the epoch changed, so the broker recognises a retry of a batch it already wrote.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tokio::time::Instant;

use super::super::accumulator::{ClosedBatch, PartitionQueue, close_open};
use super::super::transaction::TxnState;
use super::body::{one_batch_body, produce_body};
use super::settle::{Released, drop_queued};
use crate::client::cluster::NIL_TOPIC_ID;
use crate::client::config::{Acks, ProducerConfig};
use crate::client::error::{Error, Result};
use crate::client::net::{Connection, InFlight};
use crate::client::records::{ProducerState, patch_producer_state};

/// Produce versions: topic names up to 12, topic ids from 13 (KIP-516), which the broker
/// answers `UNKNOWN_TOPIC_ID` for a topic deleted since (even if created again).
const PRODUCE_VERSIONS: VersionRange = VersionRange { min: 3, max: 13 };

/// The Produce versions that name topics, for batches of a topic whose id is unknown.
const BY_NAME: VersionRange = VersionRange { min: 3, max: 12 };

/// Closes the open batch once it has lingered long enough (at once while flushing) and takes
/// out the batches that waited past `message.timeout.ms`; returns when to look again.
pub(super) fn age(
    queue: &mut PartitionQueue,
    topic: &Arc<str>,
    partition: i32,
    now: Instant,
    flushing: bool,
    config: &ProducerConfig,
    expired: &mut Vec<ClosedBatch>,
) -> Option<Instant> {
    let mut wake: Option<Instant> = None;
    if let Some(open) = &queue.open {
        let due = open.created + config.linger;
        if flushing || now >= due {
            close_open(queue, topic, partition);
        } else {
            wake = Some(due);
        }
    }
    let timeout = config.message_timeout;
    if !timeout.is_zero() {
        while queue
            .ready
            .front()
            .is_some_and(|b| now >= b.created + timeout)
        {
            if let Some(b) = queue.ready.pop_front() {
                expired.push(b);
            }
        }
        if let Some(b) = queue.ready.front() {
            let at = b.created + timeout;
            wake = Some(wake.map_or(at, |w| w.min(at)));
        }
    }
    wake
}

/// Fixes the batch's sequence (first send, or first send in a new epoch) and encodes it: once,
/// at its first send; a batch sent again in a new epoch has its producer fields rewritten in
/// the encoded bytes (the records, compressed or not, are left as they are).
pub(super) fn prepare(
    config: &ProducerConfig,
    queue: &mut PartitionQueue,
    batch: &mut ClosedBatch,
    pid: i64,
    epoch: i16,
) -> Result<()> {
    let mut renumbered = false;
    let producer = if config.enable_idempotence {
        if batch.sequence.is_none() || batch.epoch != epoch {
            batch.sequence = Some(queue.next_sequence);
            queue.next_sequence = queue.next_sequence.wrapping_add(batch.count()) & i32::MAX;
            renumbered = true;
        }
        batch.epoch = epoch;
        ProducerState {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: batch.sequence.unwrap_or(-1),
            transactional: config.transactional_id.is_some(),
        }
    } else {
        ProducerState::NONE
    };
    batch.encoded = Some(match batch.encoded.take() {
        None => batch
            .builder
            .finish(config.compression, config.compression_level, producer)?,
        Some(encoded) if renumbered => patch_producer_state(
            &encoded,
            producer.producer_id,
            producer.producer_epoch,
            producer.base_sequence,
        )?,
        Some(encoded) => encoded,
    });
    Ok(())
}

/// What a planning round of a transactional producer holds back: every queued batch when the
/// transaction is doomed (they fail), and partitions not yet registered with the coordinator
/// (classic protocol; they are collected for `AddPartitionsToTxn`).
pub(super) struct TxnGate {
    drop_unsent: Option<Error>,
    /// A batch with a sequence number failed: the partition's sequence has a gap.
    pub dropped_sequenced: bool,
    /// Partitions waiting for `AddPartitionsToTxn`.
    pub to_register: Vec<(Arc<str>, i32)>,
}

impl TxnGate {
    pub(super) fn new(txn: Option<&TxnState>) -> Self {
        TxnGate {
            drop_unsent: txn.and_then(TxnState::drop_unsent).map(Error::Transaction),
            dropped_sequenced: false,
            to_register: Vec::new(),
        }
    }

    /// Whether `queue` must not send now.
    pub(super) fn holds(
        &mut self,
        txn: Option<&TxnState>,
        queue: &mut PartitionQueue,
        topic: &Arc<str>,
        partition: i32,
        released: &mut Released,
    ) -> bool {
        if let Some(e) = &self.drop_unsent {
            self.dropped_sequenced |= drop_queued(queue, topic, partition, e, released);
            return true;
        }
        match txn {
            Some(txn) if !txn.may_send(topic, partition) => {
                // Registered as soon as a record waits, so that the round trip overlaps the
                // linger.
                if queue.open.is_some() || !queue.ready.is_empty() {
                    self.to_register.push((topic.clone(), partition));
                }
                true
            }
            _ => false,
        }
    }
}

/// The transactional id and the Produce versions of the transaction protocol.
pub(super) fn txn_produce(txn: &TxnState) -> (StrBytes, VersionRange) {
    (txn.wire_id.clone(), txn.protocol.produce_versions())
}

/// Puts a Produce request of `batches` on the wire of `conn` now; the answer's wait, unless
/// `acks=0`. `scratch` is a buffer the caller keeps for the fields of a one-batch request.
pub(super) fn start_produce(
    conn: &Connection,
    acks: Acks,
    timeout: Duration,
    batches: &[ClosedBatch],
    transactional: Option<&(StrBytes, VersionRange)>,
    scratch: &mut Vec<u8>,
) -> Result<Option<InFlight<ProduceRequest>>> {
    let mut versions =
        transactional.map_or(PRODUCE_VERSIONS, |(_, v)| PRODUCE_VERSIONS.intersect(v));
    if batches.iter().any(|b| b.topic_id == NIL_TOPIC_ID) {
        versions = versions.intersect(&BY_NAME);
    }
    let version = conn.version_of::<ProduceRequest>(versions)?;
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let id = transactional.map(|(id, _)| id.as_str());
    // The broker answers by `timeout` at the latest; allow for the network on top.
    let wait = timeout + Duration::from_secs(5).min(timeout.max(Duration::from_millis(100)));
    if let ([batch], false) = (batches, acks == Acks::None) {
        let (middle, after) = one_batch_body(version, id, acks.wire(), timeout_ms, batch, scratch)?;
        return conn
            .start_around((scratch.as_slice(), middle, after), version, wait)
            .map(Some);
    }
    // The batches go to the socket as they are, not copied into a frame.
    let body = produce_body(version, id, acks.wire(), timeout_ms, batches)?;
    if acks == Acks::None {
        conn.start_encoded_without_response::<ProduceRequest>(body, version)?;
        return Ok(None);
    }
    conn.start_encoded(body, version, wait).map(Some)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::time::Instant;

    use super::prepare;
    use crate::client::config::ProducerConfig;
    use crate::client::producer::accumulator::{ClosedBatch, PartitionQueue};
    use crate::client::records::{BatchBuilder, Codec, RecordBatches};

    fn batch(records: usize) -> ClosedBatch {
        let mut builder = BatchBuilder::new(0);
        for i in 0..records {
            builder.push(1_000, None, Some(format!("r{i}").as_bytes()), &[]);
        }
        ClosedBatch {
            topic: Arc::from("t"),
            topic_id: [0; 16],
            partition: 0,
            builder,
            promise: crate::client::producer::completion::Promise::new(),
            bytes: 0,
            created: Instant::now(),
            encoded: None,
            sequence: None,
            epoch: -1,
            attempts: 0,
            order: 0,
            maybe_written: false,
        }
    }

    /// (producer id, epoch, base sequence, records) of an encoded batch.
    fn header(b: &ClosedBatch) -> (i64, i16, i32, usize) {
        let encoded = b.encoded.clone().unwrap_or_default();
        let Some(Ok(decoded)) = RecordBatches::new(encoded, 1 << 20).next() else {
            panic!("the encoded batch does not decode")
        };
        let h = &decoded.header;
        (
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            decoded.records().map_or(0, |r| r.len()),
        )
    }

    /// A batch is encoded once; sent again in a new epoch it gets the next sequence of that
    /// epoch written into the same bytes (its records, compressed or not, untouched).
    #[test]
    fn a_batch_is_encoded_once_and_renumbered_in_a_new_epoch() {
        for codec in [Codec::None, Codec::Lz4] {
            let config = ProducerConfig {
                enable_idempotence: true,
                compression: codec,
                ..ProducerConfig::default()
            };
            let mut queue = PartitionQueue::default();
            let mut first = batch(3);
            prepare(&config, &mut queue, &mut first, 7, 0).expect("prepared");
            assert_eq!(header(&first), (7, 0, 0, 3));
            let mut second = batch(2);
            prepare(&config, &mut queue, &mut second, 7, 0).expect("prepared");
            assert_eq!(header(&second), (7, 0, 3, 2));
            // A retry in the same epoch keeps its bytes.
            let before = second.encoded.clone();
            prepare(&config, &mut queue, &mut second, 7, 0).expect("prepared");
            assert_eq!(second.encoded, before);
            // The epoch was bumped: sequences start again, and the batch is renumbered.
            queue.restart_sequence();
            second.sequence = None;
            prepare(&config, &mut queue, &mut second, 7, 1).expect("prepared");
            assert_eq!(header(&second), (7, 1, 0, 2), "{codec:?}");
            assert_eq!(queue.next_sequence, 2);
        }
    }
}
