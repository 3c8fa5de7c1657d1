//! [`KafkaMessage`]: one delivery, the record plus its settlement handle.
//!
//! A delivery references the fetched buffer: payload, key and headers are slices of it, never
//! copies. The header map is built on first read (and eagerly under `Commit::Transactional`,
//! which adds the exactly-once source header). Settling is synchronous: the futures `ack` and
//! `nack` return are ready at once, so both are cancel-safe.

use std::fmt;
use std::future::{Future, ready};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use ruststream::{AckError, HeaderMap, IncomingMessage, Partitioned, Positioned, Str};

use crate::client::Record;
use crate::client::observe::{Event, Interest, Settlement};
use crate::eos::{EOS_SOURCE_HEADER, source_header_value};
use crate::handover::Alive;
use crate::position::KafkaPosition;
use crate::subscriber::shared::{Partition, Requeued, SubCore};
use crate::subscription::{Commit, LaneKey};

/// The header a record's native key travels in: a publish moves it into the key, a delivery
/// shows the key under it.
pub const PARTITION_KEY_HEADER: &str = "kafka-partition-key";

/// Whether a header named `name` carries the record key: header names match without regard to
/// ASCII case, so a `Kafka-Partition-Key` a proxy capitalized still keys the record.
pub(crate) fn is_partition_key(name: &str) -> bool {
    name.len() == PARTITION_KEY_HEADER.len() && name.eq_ignore_ascii_case(PARTITION_KEY_HEADER)
}

/// One delivery: the record and its settlement handle. It may outlive its subscription; the
/// consumer closes when the last delivery, the subscriber and every seeker are gone.
pub struct KafkaMessage {
    /// First, so that it drops first: the transport counts the delivery gone while its
    /// subscription is still held.
    alive: Alive,
    core: Arc<SubCore>,
    part: Arc<Partition>,
    generation: u64,
    record: Record,
    headers: OnceLock<HeaderMap>,
}

impl fmt::Debug for KafkaMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaMessage")
            .field("topic", &self.topic())
            .field("partition", &self.partition())
            .field("offset", &self.offset())
            .field("payload_len", &self.payload().len())
            .finish_non_exhaustive()
    }
}

impl KafkaMessage {
    pub(crate) fn new(
        core: Arc<SubCore>,
        part: Arc<Partition>,
        generation: u64,
        record: Record,
    ) -> Self {
        let message = Self {
            alive: Alive::open(core.state.handover()),
            core,
            part,
            generation,
            record,
            headers: OnceLock::new(),
        };
        if matches!(message.core.commit, Commit::Transactional(_)) {
            let _ = message.headers.set(message.build_headers());
        }
        let observers = message.core.state.observers();
        if observers.wants(Interest::DELIVERY_COUNTS) {
            message.part.counts.delivered();
        }
        if observers.wants(Interest::DELIVERY) {
            observers.emit(&Event::Delivered {
                topic: message.topic(),
                partition: message.partition(),
                offset: message.offset(),
            });
        }
        message
    }

    /// A delivery handed back with `nack(true)`, handed out again as it was (not reported
    /// delivered a second time).
    pub(crate) fn again(core: Arc<SubCore>, requeued: Requeued) -> Self {
        let Requeued {
            part,
            generation,
            record,
            alive,
        } = requeued;
        Self {
            alive,
            core,
            part,
            generation,
            record,
            headers: OnceLock::new(),
        }
    }

    /// Replaces the payload handlers see (the registry edge's JSON for a framed record).
    #[cfg(feature = "schema-registry")]
    pub(crate) fn replace_payload(&mut self, payload: Vec<u8>) {
        self.record.value = Some(payload.into());
    }

    /// The topic the record came from.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.part.topic
    }

    /// Its partition.
    #[must_use]
    pub fn partition(&self) -> i32 {
        self.part.tp.partition
    }

    /// Its offset.
    #[must_use]
    pub fn offset(&self) -> i64 {
        self.record.offset
    }

    /// The record's timestamp in ms since the epoch, when it has one.
    #[must_use]
    pub fn timestamp_millis(&self) -> Option<i64> {
        (self.record.timestamp >= 0).then_some(self.record.timestamp)
    }

    /// The record's native key.
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        self.record.key.as_deref()
    }

    pub(crate) fn shared_topic(&self) -> &Str {
        &self.part.topic
    }

    pub(crate) fn shared_key(&self) -> Option<&Bytes> {
        self.record.key.as_ref()
    }

    pub(crate) fn core(&self) -> &Arc<SubCore> {
        &self.core
    }

    fn build_headers(&self) -> HeaderMap {
        let wire = &self.record.headers;
        let extra = usize::from(self.record.key.is_some())
            + usize::from(matches!(self.core.commit, Commit::Transactional(_)));
        if wire.is_empty() && extra == 0 {
            return HeaderMap::new();
        }
        let mut map = HeaderMap::with_capacity(wire.len() + extra);
        for header in wire {
            let name = match Str::from_inner(header.key) {
                Ok(name) => name,
                Err(bad) => Str::from(String::from_utf8_lossy(&bad.into_inner()).into_owned()),
            };
            if is_partition_key(&name) {
                continue;
            }
            map.insert(name, header.value.unwrap_or_default());
        }
        if let Some(key) = &self.record.key {
            map.insert(PARTITION_KEY_HEADER, key.clone());
        }
        if matches!(self.core.commit, Commit::Transactional(_)) {
            map.insert(
                EOS_SOURCE_HEADER,
                source_header_value(self.topic(), self.partition(), self.offset()),
            );
        }
        map
    }

    /// Tells the observers that ask how this delivery was settled.
    fn report(&self, outcome: Settlement, settled: &Result<(), AckError>) {
        if self.core.state.observers().wants(Interest::DELIVERY_COUNTS) {
            self.part.counts.settled(outcome, settled.is_ok());
        }
        if self.core.state.observers().wants(Interest::DELIVERY) {
            report_settled(
                &self.core,
                self.topic(),
                self.partition(),
                self.offset(),
                outcome,
                settled,
            );
        }
    }

    /// Settles this delivery in the tracked watermark, storing the position when it moved.
    fn settle(&self) -> Result<(), AckError> {
        let stored = self
            .part
            .tracked
            .lock()
            .settle(self.generation, self.record.offset);
        let Some(position) = stored else {
            return Ok(());
        };
        match &self.core.commit {
            Commit::Tracked => {
                self.core
                    .consumer
                    .store_offset(&self.part.tp, position + 1)
                    .map_err(|e| AckError::Broker(Box::new(e)))?;
            }
            // The exactly-once window commits the watermark itself; it may be waiting for it.
            Commit::Transactional(_) => {
                if let Some(group) = &self.core.eos {
                    group.settled.notify_waiters();
                }
            }
            Commit::Auto => {}
        }
        Ok(())
    }
}

impl IncomingMessage for KafkaMessage {
    fn payload(&self) -> &[u8] {
        self.record.value.as_deref().unwrap_or_default()
    }

    fn headers(&self) -> &HeaderMap {
        self.headers.get_or_init(|| self.build_headers())
    }

    fn partition_key(&self) -> Option<&[u8]> {
        match self.core.lane_key {
            LaneKey::Partition => Some(self.part.text.as_bytes()),
            LaneKey::RecordKey => self.record.key.as_deref(),
        }
    }

    /// Under `Commit::Auto` a no-op (the position was stored at hand-over); under
    /// `Commit::Tracked` it settles the delivery and stores the watermark; under
    /// `Commit::Transactional` it settles for the exactly-once window. Ready at once.
    fn ack(self) -> impl Future<Output = Result<(), AckError>> + Send {
        let settled = match self.core.commit {
            Commit::Auto => Ok(()),
            Commit::Tracked | Commit::Transactional(_) => self.settle(),
        };
        self.report(Settlement::Acked, &settled);
        ready(settled)
    }

    /// `nack(false)` settles like `ack`. `nack(true)`: unsupported under `Commit::Auto`;
    /// under `Commit::Tracked` the delivery comes back on this subscription before anything
    /// newly fetched (still outstanding until settled); under `Commit::Transactional` nothing
    /// happens here: the open window cannot settle, aborts, and its replay brings the record
    /// back. Ready at once.
    fn nack(self, requeue: bool) -> impl Future<Output = Result<(), AckError>> + Send {
        let outcome = if requeue {
            Settlement::Requeued
        } else {
            Settlement::Rejected
        };
        // Told before the settlement: a requeue hands the delivery itself back.
        let reporting = self
            .core
            .state
            .observers()
            .wants(Interest::DELIVERY)
            .then(|| (Arc::clone(&self.core), self.part.tp.clone(), self.offset()));
        let counting = self
            .core
            .state
            .observers()
            .wants(Interest::DELIVERY_COUNTS)
            .then(|| Arc::clone(&self.part));
        let settled = match (&self.core.commit, requeue) {
            // Under Transactional a requeue is the open window's business: it aborts, and its
            // replay brings the record back.
            (Commit::Auto, false) | (Commit::Transactional(_), true) => Ok(()),
            (Commit::Auto, true) => Err(AckError::Unsupported),
            (Commit::Tracked | Commit::Transactional(_), false) => self.settle(),
            (Commit::Tracked, true) => {
                let KafkaMessage {
                    alive,
                    core,
                    part,
                    generation,
                    record,
                    headers: _,
                } = self;
                core.requeue(Requeued {
                    part,
                    generation,
                    record,
                    alive,
                });
                Ok(())
            }
        };
        if let Some(part) = counting {
            part.counts.settled(outcome, settled.is_ok());
        }
        if let Some((core, tp, offset)) = reporting {
            report_settled(&core, &tp.topic, tp.partition, offset, outcome, &settled);
        }
        ready(settled)
    }
}

fn report_settled(
    core: &SubCore,
    topic: &str,
    partition: i32,
    offset: i64,
    outcome: Settlement,
    settled: &Result<(), AckError>,
) {
    core.state.observers().emit(&Event::Settled {
        topic,
        partition,
        offset,
        outcome,
        accepted: settled.is_ok(),
    });
}

impl Positioned for KafkaMessage {
    type Position = KafkaPosition;

    /// This record's own position: seeking to it redelivers it and what follows.
    fn position(&self) -> KafkaPosition {
        KafkaPosition::topic_offset(self.topic(), self.partition(), self.offset())
    }
}

impl Partitioned for KafkaMessage {
    fn partition_key(&self) -> Option<&[u8]> {
        IncomingMessage::partition_key(self)
    }
}
