//! The accumulator: per-partition queues of batches, shared by callers and the sender.
//!
//! Callers append under one short lock and wake the sender only when there is something new
//! for it to schedule (a batch closed, or opened where the sender may have work to do before
//! its linger ends); a batch opened otherwise only rings the sender's alarm for the end of its
//! linger (see `sender::Bell`), so a busy producer costs few wake-ups per
//! record. Queue space is reserved before a record enters and released when its delivery is
//! settled, which is what bounds the producer's memory.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::completion::{Completion, Promise};
use super::sender::Bell;
use super::transaction::state::TxnState;
use super::{DeliveryFuture, RecordRef};
use crate::client::Client;
use crate::client::cluster::{NIL_TOPIC_ID as NIL, TopicId as Uuid};
use crate::client::config::ProducerConfig;
use crate::client::error::{Error, Result};
use crate::client::hashing::PartitionHasher;
use crate::client::records::{BatchBuilder, Header, record_size};

/// A batch that takes records.
#[derive(Debug)]
pub(super) struct OpenBatch {
    pub builder: BatchBuilder,
    /// The outcome its records' delivery futures share.
    pub promise: Promise,
    /// The queue space its records hold (librdkafka's sizes, see [`message_size`]).
    pub bytes: usize,
    pub created: Instant,
    /// The id of the topic its records were placed for (nil when the broker sends none).
    pub topic_id: Uuid,
}

/// A batch that takes no more records and waits to be sent (or sent again).
#[derive(Debug)]
pub(super) struct ClosedBatch {
    pub topic: Arc<str>,
    /// The id of the topic its records were placed for: they go to that topic or fail, never
    /// to a topic created again under the same name (nil when the broker sends no ids).
    pub topic_id: Uuid,
    pub partition: i32,
    pub builder: BatchBuilder,
    /// The outcome its records' delivery futures share, and the queue space they hold.
    pub promise: Promise,
    pub bytes: usize,
    pub created: Instant,
    /// The encoded batch, once the producer state it carries is fixed.
    pub encoded: Option<Bytes>,
    /// Its base sequence, once assigned (idempotence).
    pub sequence: Option<i32>,
    /// The producer epoch it was encoded with.
    pub epoch: i16,
    pub attempts: u32,
    /// Its place in the partition's order of batches, so retries go back where they were.
    pub order: u64,
    /// A send of it failed in a way that leaves unknown whether the broker wrote it.
    pub maybe_written: bool,
}

impl ClosedBatch {
    pub fn count(&self) -> i32 {
        self.builder.count()
    }

    /// Its records, as a count.
    pub fn records(&self) -> usize {
        self.builder.count().max(0) as usize
    }
}

/// One partition's queue.
#[derive(Debug, Default)]
pub(super) struct PartitionQueue {
    pub open: Option<OpenBatch>,
    pub ready: VecDeque<ClosedBatch>,
    pub in_flight: usize,
    /// The connection the in-flight batches went out on: a partition's batches may only be
    /// in flight on one connection at a time, or the broker could see them out of order.
    pub in_flight_conn: u64,
    /// A batch of this partition was acknowledged in the current epoch. Until then the broker
    /// may hold no state for us there and accepts any first sequence, so only one batch may
    /// be in flight: a later batch must never be written ahead of an earlier one.
    pub acked_in_epoch: bool,
    pub next_sequence: i32,
    /// The `order` the next closed batch gets.
    pub next_order: u64,
    /// No new send until this instant (retry backoff).
    pub retry_at: Option<Instant>,
    /// The size of the records of the batch closed last (its header aside): a new batch's
    /// buffer starts with room for as much, so a partition's buffers fit what it sends (a
    /// record at a time, or a full batch in one allocation) and a batch of one record is
    /// encoded in a buffer of its exact size.
    pub last_batch_size: usize,
    /// A send failed while others were in flight: wait for all of them before resending, so
    /// that retries go out in sequence order.
    pub draining: bool,
}

impl PartitionQueue {
    /// A new producer id or epoch: the broker holds no sequence for it yet.
    pub fn restart_sequence(&mut self) {
        self.next_sequence = 0;
        self.acked_in_epoch = false;
    }
}

/// The queues by topic, looked up once per record.
pub(super) type TopicMap = HashMap<Arc<str>, TopicQueues, BuildHasherDefault<PartitionHasher>>;

#[derive(Debug, Default)]
pub(super) struct TopicQueues {
    /// The topic (the map's key, shared by its batches and delivery reports).
    pub name: Arc<str>,
    pub partitions: Vec<PartitionQueue>,
    /// The sticky partition of keyless records and until when (wall clock, ms).
    pub sticky: Option<(i32, i64)>,
    /// The topic's partition count, as the metadata said at `metadata_generation`.
    pub partition_count: i32,
    /// The topic's id, read with the count.
    pub topic_id: Uuid,
    pub metadata_generation: u64,
}

/// What [`Shared::admit`] read of a record, once, for every attempt to place it.
#[derive(Debug, Clone, Copy)]
struct Admitted {
    size: usize,
    timestamp: i64,
    now: i64,
}

/// Where [`Shared::place`] left a record.
enum Placement {
    Placed {
        delivery: DeliveryFuture,
        wake: Wake,
    },
    /// The topic's partition count is unknown, or the metadata changed since it was read.
    UnknownTopic,
    /// No queue space now.
    Full,
}

/// What the sender must hear of a record just placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// Nothing new for it: the record joined an open batch.
    Not,
    /// A batch opened whose linger ends at this instant, and the sender has nothing to do
    /// for it before then: its alarm is rung for the instant (woken now where it cannot be).
    At(Instant),
    /// Something to send or to prepare now.
    Now,
}

#[derive(Debug)]
pub(super) struct State {
    pub topics: TopicMap,
    pub queued_messages: usize,
    pub queued_bytes: usize,
    /// Callers currently waiting in `flush`: linger is ignored while any are.
    pub flushing: usize,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// An epoch bump is due before the next send (idempotence).
    pub bump_needed: bool,
    pub fatal: Option<Error>,
    /// The transaction state of a transactional producer.
    pub txn: Option<TxnState>,
}

impl State {
    /// Why a record may not enter now (a failed producer, or no open transaction).
    fn refusal(&self) -> Option<Error> {
        if let Some(e) = &self.fatal {
            return Some(e.clone());
        }
        self.txn
            .as_ref()
            .and_then(|t| t.check_open().err())
            .map(Error::Transaction)
    }

    /// Takes a new producer id and epoch (after `InitProducerId` or a KIP-890 `EndTxn`): every
    /// partition's sequences start again at zero. Only between transactions, when nothing is
    /// queued.
    pub fn new_producer_epoch(&mut self, producer_id: i64, epoch: i16) {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.bump_needed = false;
        for queues in self.topics.values_mut() {
            for queue in &mut queues.partitions {
                queue.restart_sequence();
            }
        }
    }
}

/// What the callers and the sender task share.
#[derive(Debug)]
pub(super) struct Shared {
    pub client: Client,
    pub config: ProducerConfig,
    state: Mutex<State>,
    /// Wakes the sender.
    pub wake: Notify,
    /// Rings the sender's alarm for a batch's linger (set once the sender runs, where its
    /// alarm has a timer other tasks can set).
    pub bell: OnceLock<Bell>,
    /// Wakes callers waiting for queue space or for a flush to finish.
    pub settled: Notify,
    pub closed: AtomicBool,
    /// Batches sent again after a failure (a counter for users and tests).
    pub retries: AtomicU64,
}

fn now_ms() -> i64 {
    // Whole seconds and the milliseconds of the last one: no 128-bit division per record.
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        i64::try_from(d.as_secs())
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000)
            .saturating_add(i64::from(d.subsec_millis()))
    })
}

impl Shared {
    pub fn new(client: Client, config: ProducerConfig) -> Self {
        let txn = config.transactional_id.as_deref().map(TxnState::new);
        Shared {
            client,
            config,
            state: Mutex::new(State {
                topics: TopicMap::default(),
                queued_messages: 0,
                queued_bytes: 0,
                flushing: 0,
                producer_id: -1,
                producer_epoch: -1,
                bump_needed: false,
                fatal: None,
                txn,
            }),
            wake: Notify::new(),
            bell: OnceLock::new(),
            settled: Notify::new(),
            closed: AtomicBool::new(false),
            retries: AtomicU64::new(0),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn outstanding(&self) -> usize {
        self.lock().queued_messages
    }

    /// Records accepted and not settled, and their bytes.
    pub fn queued(&self) -> (usize, usize) {
        let s = self.lock();
        (s.queued_messages, s.queued_bytes)
    }

    pub fn producer_id(&self) -> (i64, i16) {
        let s = self.lock();
        (s.producer_id, s.producer_epoch)
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// The partition count of `topic`, looking it up (and waiting for it to exist, within the
    /// message timeout) when needed.
    async fn partition_count(&self, topic: &str) -> Result<(i32, Uuid)> {
        match self.known_partition_count(topic) {
            Some(count) => count,
            // Learning a topic is rare: its future is boxed so that every send does not carry it.
            None => Box::pin(self.learn_partition_count(topic)).await,
        }
    }

    /// The partition count the metadata already has for `topic`.
    fn known_partition_count(&self, topic: &str) -> Option<Result<(i32, Uuid)>> {
        let (n, id) = self
            .client
            .with_metadata(|m| m.topics.get(topic).map(|t| (t.partitions.len(), t.id)))?;
        (n > 0).then(|| {
            i32::try_from(n)
                .map(|n| (n, id))
                .map_err(|_| Error::protocol("partition count"))
        })
    }

    /// Refreshes the metadata until it knows `topic`'s partitions, or `message.timeout.ms`
    /// (at most a minute) passes.
    async fn learn_partition_count(&self, topic: &str) -> Result<(i32, Uuid)> {
        let deadline = Instant::now() + self.config.message_timeout.min(Duration::from_mins(1));
        let mut backoff = self.client.retry_backoff();
        loop {
            if let Some(known) = self.known_partition_count(topic) {
                return known;
            }
            let outcome = self.client.refresh_metadata(&[topic]).await;
            let after = self
                .client
                .with_metadata(|m| m.topics.get(topic).map(|t| (t.partitions.len(), t.error)));
            if let Some((n, _)) = after
                && n > 0
            {
                continue;
            }
            if Instant::now() >= deadline {
                return Err(match (outcome, after) {
                    (Err(e), _) => e,
                    (Ok(()), Some((_, Some(code)))) => Error::Broker {
                        code,
                        context: format!("topic {topic}"),
                    },
                    _ => Error::Broker {
                        code: crate::client::ResponseError::UnknownTopicOrPartition,
                        context: format!("topic {topic}"),
                    },
                });
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    fn choose_partition(
        &self,
        queues: &mut TopicQueues,
        record: &RecordRef<'_>,
        count: i32,
        now_ms: i64,
    ) -> i32 {
        if let Some(p) = self.config.partitioner.partition_for(record.key, count) {
            return p;
        }
        // Keyless records stick to one random partition for a while so that batches fill
        // (librdkafka's sticky.partitioning.linger.ms). Timed on the wall clock the record's
        // timestamp was read from (one clock read per record); a deadline further away than
        // the linger itself means the clock went back, and a new partition is chosen.
        let linger =
            i64::try_from(self.config.sticky_partitioning_linger.as_millis()).unwrap_or(i64::MAX);
        match queues.sticky {
            Some((p, until)) if now_ms < until && until - now_ms <= linger && p < count => p,
            _ => {
                let p = fastrand::i32(0..count.max(1));
                queues.sticky = Some((p, now_ms.saturating_add(linger)));
                p
            }
        }
    }

    /// Queues `record` in its partition's open batch, waiting for queue space (at most
    /// `queue_timeout` when set), and returns the future of its delivery report.
    ///
    /// The common case takes the lock once: the producer's state, the topic's partition count
    /// (cached with the metadata generation it was read at), the queue space and the append.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: queue space is reserved and the record appended only in the poll that returns,
    /// after the last await, so a dropped call queues nothing. Once it has returned, the record is
    /// delivered even if the `DeliveryFuture` is dropped.
    pub async fn enqueue(
        &self,
        record: RecordRef<'_>,
        queue_timeout: Option<Duration>,
    ) -> Result<DeliveryFuture> {
        if let Some(delivery) = self.enqueue_now(&record)? {
            return Ok(delivery);
        }
        // The topic's partitions are not known yet, or the queue is full: rare, and boxed, so
        // that every send's future (which a caller with many publishes in flight keeps one of
        // per record) stays small.
        Box::pin(self.enqueue_waiting(record, queue_timeout)).await
    }

    /// The common case of [`enqueue`](Self::enqueue), without waiting: the record queued, or
    /// `None` when its topic must be learnt or the queue has no room.
    pub(super) fn enqueue_now(&self, record: &RecordRef<'_>) -> Result<Option<DeliveryFuture>> {
        let admitted = self.admit(record)?;
        Ok(match self.try_place(record, admitted)? {
            Placement::Placed { delivery, .. } => Some(delivery),
            Placement::UnknownTopic | Placement::Full => None,
        })
    }

    /// Checks what needs no lock (a topic name, an open producer) and reads what a record
    /// needs once: its size, its timestamp and the wall clock.
    fn admit(&self, record: &RecordRef<'_>) -> Result<Admitted> {
        if record.topic.is_empty() {
            return Err(Error::InvalidRecord("empty topic name".into()));
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("producer".into()));
        }
        let now = now_ms();
        Ok(Admitted {
            size: message_size(record.key, record.value, record.headers),
            timestamp: record.timestamp.unwrap_or(now),
            now,
        })
    }

    /// One attempt to place the record under the lock; wakes the sender when it has something
    /// new to look at.
    fn try_place(&self, record: &RecordRef<'_>, admitted: Admitted) -> Result<Placement> {
        let generation = self.client.metadata_generation();
        let placed = {
            let mut state = self.lock();
            self.place(
                &mut state,
                record,
                admitted.size,
                generation,
                (admitted.timestamp, admitted.now),
            )?
        };
        if let Placement::Placed { wake, .. } = &placed {
            let rung = match *wake {
                Wake::Not => true,
                Wake::At(at) => self.bell.get().is_some_and(|bell| bell.ring_by(at)),
                Wake::Now => false,
            };
            if !rung {
                self.wake.notify_one();
            }
        }
        Ok(placed)
    }

    /// [`enqueue`](Self::enqueue) when the record could not be placed at once: learns the
    /// topic's partitions, waits for room (bounded by `queue_timeout`), and places it.
    async fn enqueue_waiting(
        &self,
        record: RecordRef<'_>,
        queue_timeout: Option<Duration>,
    ) -> Result<DeliveryFuture> {
        let admitted = self.admit(&record)?;
        let mut deadline: Option<Instant> = None;
        loop {
            let generation = self.client.metadata_generation();
            match self.try_place(&record, admitted)? {
                Placement::Placed { delivery, .. } => return Ok(delivery),
                Placement::UnknownTopic => {
                    let (count, id) = self.partition_count(record.topic).await?;
                    let mut state = self.lock();
                    let topic = match state.topics.get_key_value(record.topic) {
                        Some((k, _)) => k.clone(),
                        None => Arc::from(record.topic),
                    };
                    let queues = state.topics.entry(topic.clone()).or_default();
                    if queues.topic_id != id && queues.topic_id != NIL {
                        // The topic was deleted and created again: what was placed for the old
                        // one is closed as it is, and new records start batches of the new one.
                        tracing::warn!(topic = %topic, "the topic was deleted and created again; \
                            records queued for the old topic will not be written to the new one");
                        for (p, queue) in queues.partitions.iter_mut().enumerate() {
                            close_open(queue, &topic, p as i32);
                        }
                    }
                    queues.name = topic;
                    queues.partition_count = count;
                    queues.topic_id = id;
                    queues.metadata_generation = generation;
                    if queues.partitions.len() < count as usize {
                        queues
                            .partitions
                            .resize_with(count as usize, PartitionQueue::default);
                    }
                }
                Placement::Full => {
                    // The queue timeout runs from the first time the queue was found full.
                    if deadline.is_none() {
                        deadline = queue_timeout.and_then(|t| Instant::now().checked_add(t));
                    }
                    self.wait_for_room(admitted.size, deadline).await?;
                }
            }
        }
    }

    /// Places the record under the lock, if its topic's partitions are known and there is
    /// room; otherwise says which of the two is missing.
    fn place(
        &self,
        state: &mut State,
        record: &RecordRef<'_>,
        size: usize,
        generation: u64,
        (timestamp, now_ms): (i64, i64),
    ) -> Result<Placement> {
        if let Some(e) = state.refusal() {
            return Err(e);
        }
        if size > self.config.message_max_bytes {
            return Err(Error::InvalidRecord(format!(
                "Message size too large: a record of {size} bytes is over message.max.bytes = {}",
                self.config.message_max_bytes
            )));
        }
        let room = self.has_room(state, size);
        let Some(queues) = state.topics.get_mut(record.topic) else {
            return Ok(Placement::UnknownTopic);
        };
        let count = queues.partition_count;
        if count <= 0 || queues.metadata_generation != generation {
            return Ok(Placement::UnknownTopic);
        }
        if let Some(p) = record.partition
            && (p < 0 || p >= count)
        {
            return Err(Error::InvalidRecord(format!(
                "Unknown partition {p} of topic {} ({count} partitions)",
                record.topic
            )));
        }
        if !room {
            return Ok(Placement::Full);
        }
        let partition = match record.partition {
            Some(p) => p,
            None => self.choose_partition(queues, record, count, now_ms),
        };
        // The name borrowed, not cloned: its count is shared with every delivery report of
        // the topic, which other threads take and drop, and a clone per record here made that
        // cache line bounce between cores on every send.
        let TopicQueues {
            name: topic,
            partitions,
            topic_id,
            ..
        } = queues;
        let Some(queue) = partitions.get_mut(partition as usize) else {
            return Err(Error::protocol("partition beyond the topic's queues"));
        };
        let (delivery, mut wake) = self.append(
            queue,
            (topic, *topic_id),
            partition,
            record,
            size,
            timestamp,
        );
        // A flush sends at once, and a transaction registers a new partition first: both are
        // for the sender to do now, not at the linger's end.
        if matches!(wake, Wake::At(_)) && (state.flushing > 0 || state.txn.is_some()) {
            wake = Wake::Now;
        }
        state.queued_messages += 1;
        state.queued_bytes += size;
        Ok(Placement::Placed {
            delivery: DeliveryFuture {
                completion: delivery.0,
                index: delivery.1,
                timestamp,
                topic: Arc::clone(topic),
                partition,
            },
            wake,
        })
    }

    /// Adds the record to the open batch (closing it first when the record does not fit);
    /// gives what its delivery future awaits (the batch's completion and the record's place
    /// in it), and says whether the sender has something new to look at.
    fn append(
        &self,
        queue: &mut PartitionQueue,
        (topic, topic_id): (&Arc<str>, Uuid),
        partition: i32,
        record: &RecordRef<'_>,
        size: usize,
        timestamp: i64,
    ) -> ((Arc<Completion>, u32), Wake) {
        let limit = self.config.batch_size.min(self.config.message_max_bytes);
        let limits = (limit, self.config.batch_num_messages);
        let mut wake = Wake::Not;
        // Its place in the batch (the offset delta the builder gives it), if the open batch
        // takes it; else that batch is closed and the record opens the next.
        let mut placed = None;
        if let Some(open) = &mut queue.open {
            placed = open.builder.push_within(
                limits,
                timestamp,
                record.key,
                record.value,
                record.headers,
            );
            if placed.is_none() {
                close_open(queue, topic, partition);
                wake = Wake::Now;
            }
        }
        let hint = queue.last_batch_size;
        let linger = self.config.linger;
        let open = queue.open.get_or_insert_with(|| {
            let created = Instant::now();
            // The partition's first batch wakes the sender now: it may have a leader to dial
            // or a producer id to fetch, which the linger hides. Later ones (a batch closed
            // before, so `hint` is set) only need it at the linger's end.
            if wake == Wake::Not {
                wake = if hint > 0 && !linger.is_zero() {
                    Wake::At(created + linger)
                } else {
                    Wake::Now
                };
            }
            let first = record_size(0, 0, record.key, record.value, record.headers);
            OpenBatch {
                builder: BatchBuilder::new(hint.clamp(first, limit.max(first))),
                promise: Promise::new(),
                bytes: 0,
                created,
                topic_id,
            }
        });
        // A new batch takes its first record whatever its size: one over the limit goes
        // alone (the broker judges it against its own limit).
        let index = placed.unwrap_or_else(|| {
            let index = open.builder.count().max(0) as u32;
            open.builder
                .push(timestamp, record.key, record.value, record.headers);
            index
        });
        open.bytes += size;
        let delivery = (open.promise.completion(), index);
        if open.builder.size() >= limit
            || open.builder.count() as usize >= self.config.batch_num_messages
        {
            close_open(queue, topic, partition);
            wake = Wake::Now;
        }
        (delivery, wake)
    }

    /// Whether a record of `size` bytes fits in the queue now.
    fn has_room(&self, state: &State, size: usize) -> bool {
        let max_bytes = self.config.queue_max_kbytes.saturating_mul(1024);
        // A record larger than the byte budget may still go alone into an empty queue.
        let fits_bytes = state.queued_bytes + size <= max_bytes || state.queued_messages == 0;
        state.queued_messages < self.config.queue_max_messages && fits_bytes
    }

    /// Waits until a record of `size` bytes may fit (settled records made room), the producer
    /// closes, or `deadline` passes.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    async fn wait_for_room(&self, size: usize, deadline: Option<Instant>) -> Result<()> {
        let notified = self.settled.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Looked at again once registered: a release in between is not missed.
        if self.has_room(&self.lock(), size) {
            return Ok(());
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("producer".into()));
        }
        match deadline {
            None => notified.await,
            Some(d) => {
                if tokio::time::timeout_at(d, notified).await.is_err() {
                    return Err(Error::Timeout(
                        "local queue full (queue.buffering.max.messages/kbytes)".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Settles records: releases their queue space and wakes waiters.
    pub fn release(&self, state: &mut State, messages: usize, bytes: usize) {
        state.queued_messages = state.queued_messages.saturating_sub(messages);
        state.queued_bytes = state.queued_bytes.saturating_sub(bytes);
        self.settled.notify_waiters();
    }

    /// [`flush_until`](Self::flush_until) `timeout` from now.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits; dropping it ends this caller's flush (linger applies again), and
    /// the records keep going.
    pub async fn flush(&self, timeout: Duration) -> usize {
        self.flush_until(Instant::now() + timeout).await
    }

    /// Sends everything now and waits until all is settled or `deadline` passes; returns how
    /// many records were still outstanding.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits; dropping it ends this caller's flush (linger applies again), and
    /// the records keep going.
    pub async fn flush_until(&self, deadline: Instant) -> usize {
        struct Flushing<'a>(&'a Shared);
        impl Drop for Flushing<'_> {
            fn drop(&mut self) {
                let mut state = self.0.lock();
                state.flushing = state.flushing.saturating_sub(1);
            }
        }
        self.lock().flushing += 1;
        let _flushing = Flushing(self);
        self.wake.notify_one();
        if self.wait_until(deadline, |s| s.queued_messages == 0).await {
            0
        } else {
            self.lock().queued_messages
        }
    }

    /// Waits until `done` holds (checked whenever records settle or the sender reports
    /// progress) or `deadline` passes; says whether it holds.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn wait_until(&self, deadline: Instant, done: impl Fn(&State) -> bool) -> bool {
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(&self.lock()) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return done(&self.lock());
            }
        }
    }
}

/// Moves the open batch of `queue` to its ready queue.
pub(super) fn close_open(queue: &mut PartitionQueue, topic: &Arc<str>, partition: i32) {
    if let Some(open) = queue.open.take() {
        queue.last_batch_size = open
            .builder
            .size()
            .saturating_sub(crate::client::records::BATCH_HEADER_SIZE);
        let order = queue.next_order;
        queue.next_order += 1;
        queue.ready.push_back(ClosedBatch {
            topic: topic.clone(),
            topic_id: open.topic_id,
            partition,
            builder: open.builder,
            promise: open.promise,
            bytes: open.bytes,
            created: open.created,
            encoded: None,
            sequence: None,
            epoch: -1,
            attempts: 0,
            order,
            maybe_written: false,
        });
    }
}

/// A record's size as librdkafka counts it against `message.max.bytes`: a fixed 36 bytes of
/// framing, the key and the value, and per header its name, its value and their two
/// (zigzag varint) lengths. Users moving from librdkafka keep the same limit this way; the
/// batch around a record of exactly this size is a little larger, which the broker's own
/// limit (`max.message.bytes`, 1 MiB + 12 by default) leaves room for.
pub(crate) fn message_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header]) -> usize {
    const FRAMING: usize = 36;
    let headers: usize = headers
        .iter()
        .map(|h| {
            let value = h.value.as_ref().map_or(0, Bytes::len);
            h.key.len() + value + zigzag_len(h.key.len()) + zigzag_len(value)
        })
        .sum();
    FRAMING + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len) + headers
}

fn zigzag_len(n: usize) -> usize {
    let mut v = (n as u64) << 1;
    let mut len = 1;
    while v >= 0x80 {
        v >>= 7;
        len += 1;
    }
    len
}

#[cfg(test)]
mod message_size_tests {
    use bytes::Bytes;

    use super::message_size;
    use crate::client::records::Header;

    #[test]
    fn counts_like_librdkafka() {
        let header = Header::new(Bytes::from_static(b"n"), Some(Bytes::from(vec![0u8; 64])));
        let value = vec![0u8; 1_000_000 - 36 - 68];
        assert_eq!(message_size(None, Some(&value), &[header]), 1_000_000);
        assert_eq!(
            message_size(None, Some(&vec![0u8; 999_964]), &[]),
            1_000_000
        );
    }
}
