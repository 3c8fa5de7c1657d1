//! [`KafkaSubscriber`]: one consumer for one subscription, and the pump that drives it.
//!
//! Each subscription has its own native consumer (and its own client, as librdkafka has). A
//! pump task on the broker's runtime polls the consumer without pause: it answers rebalances at
//! once, even while nobody reads the stream (a member that is not read yet stays a healthy
//! group member), and moves fetched records into the subscription's queue in whole batches.
//! When the queue holds more than its share of the consumer's buffer limits
//! (`queued.max.messages.kbytes`, `queued.min.messages`), the pump pauses the partitions, so
//! memory stays bounded while rebalance events still flow.
//!
//! Everything that repositions a partition goes through the pump in order: assignments,
//! revocations, losses and seeks each start a new generation of the partition and drop what
//! the queue held of it, so no record fetched before a reposition is handed out after it.
//!
//! The consumer closes (committing what was stored, then leaving the group) when the last of
//! the subscriber, its deliveries and its seekers is dropped.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use futures::task::AtomicWaker;
use ruststream::{BatchSubscriber, Seekable, Str, Subscriber};
use tokio::sync::{mpsc, oneshot, watch};

use crate::broker::BrokerState;
use crate::client::consumer::{
    Consumer, ConsumerEvent, ConsumerHandle, PartitionRecords, StartAt, Subscription,
    TopicPartition,
};
use crate::client::{Client, Error as ClientError, Record, ResponseError};
use crate::eos::EosGroup;
use crate::error::KafkaError;
use crate::message::KafkaMessage;
use crate::seek::{KafkaPosition, KafkaSeeker};
use crate::subscription::{Commit, LaneKey, Plan, StartOffset, Target};
use crate::tracker::Tracked;

/// One partition as the subscription sees it: its shared names and its tracked state.
#[derive(Debug)]
pub(crate) struct Partition {
    pub tp: TopicPartition,
    /// The topic name, shared by every delivery and context of the partition.
    pub topic: Str,
    /// The partition number as decimal text (the `LaneKey::Partition` lane key).
    pub text: Box<str>,
    /// The current generation (also kept in `tracked`); read without the lock on the hot path.
    pub generation: AtomicU64,
    pub tracked: Tracked,
    /// The consumer's position right after the pump last queued records of this partition;
    /// `i64::MIN` until then and after a reposition. The in-process hand-over reads it.
    #[cfg(feature = "testing")]
    queued_through: std::sync::atomic::AtomicI64,
}

/// The topic name as bytes, so that a [`Str`] can share it.
struct TopicName(Arc<str>);

impl AsRef<[u8]> for TopicName {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The partition's topic as a [`Str`] over the partition's own name (no copy). It is shared
/// from the start: a `Str` made from a `String` allocates on its first clone, which would
/// charge the first delivery context of the partition an allocation.
fn shared_topic(topic: &Arc<str>) -> Str {
    Str::from_inner(bytes::Bytes::from_owner(TopicName(Arc::clone(topic))))
        .unwrap_or_else(|_| Str::from(topic.to_string()))
}

impl Partition {
    fn new(tp: TopicPartition) -> Self {
        Self {
            topic: shared_topic(&tp.topic),
            text: tp.partition.to_string().into_boxed_str(),
            tp,
            generation: AtomicU64::new(0),
            tracked: Tracked::default(),
            #[cfg(feature = "testing")]
            queued_through: std::sync::atomic::AtomicI64::new(i64::MIN),
        }
    }

    /// Starts a new generation: outstanding deliveries no longer count.
    fn reposition(&self) -> u64 {
        let mut tracked = self.tracked.lock();
        let generation = tracked.reset();
        self.generation.store(generation, Ordering::Release);
        #[cfg(feature = "testing")]
        self.queued_through.store(i64::MIN, Ordering::Release);
        generation
    }

    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }
}

/// What the pump hands the stream.
enum Item {
    Batch {
        part: Arc<Partition>,
        generation: u64,
        records: PartitionRecords,
        bytes: usize,
    },
    Error(KafkaError),
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Item>,
    bytes: usize,
    records: usize,
    /// The pump paused every partition because the queue is full.
    throttled: bool,
    /// The last error the consumer reported (for the subscribe wait's message).
    last_error: Option<String>,
    /// A refusal that ends the subscribe wait (B10a).
    fatal: Option<String>,
}

/// Whether a subscription's handles and its pump are gone, and whether the broker counts its
/// consumer as closing: from the first of the handle's drop and the core's (the pump may hold
/// the core a moment longer, and a shutdown right after the handle's drop must wait for it)
/// until the pump exits.
#[derive(Debug, Default)]
struct Life {
    pump_exited: bool,
    counted: bool,
}

impl Life {
    /// Counts the consumer as closing, once, unless its pump is gone already.
    fn closing(&mut self, state: &BrokerState) {
        if !self.pump_exited && !self.counted {
            self.counted = true;
            state.consumer_closing();
        }
    }
}

/// A command for the pump.
enum Command {
    Seek {
        to: KafkaPosition,
        done: oneshot::Sender<Result<(), KafkaError>>,
    },
}

/// The state a subscription's handles share: the subscriber, every delivery, every seeker.
pub(crate) struct SubCore {
    pub name: String,
    pub commit: Commit,
    pub lane_key: LaneKey,
    /// Whether handing a record over stores its offset (`Commit::Auto` with
    /// `enable.auto.offset.store`).
    auto_store: bool,
    pub state: Arc<BrokerState>,
    pub consumer: ConsumerHandle,
    parts: Mutex<HashMap<TopicPartition, Arc<Partition>>>,
    queue: Mutex<Queue>,
    /// Wakes the stream.
    wake: AtomicWaker,
    /// Tracked deliveries handed back with `nack(true)`, delivered before anything new.
    requeued: Mutex<VecDeque<KafkaMessage>>,
    /// Set when the subscription handle is gone: nothing will deliver a requeued record
    /// again, so a requeue then releases it unsettled.
    detached: AtomicBool,
    commands: mpsc::UnboundedSender<Command>,
    closing: watch::Sender<bool>,
    /// Whether this core and its pump are gone, for the broker's shutdown to wait on closes.
    life: Arc<Mutex<Life>>,
    limits: (usize, usize),
    /// The exactly-once pipeline group this subscription feeds (`Commit::Transactional`).
    pub eos: Option<Arc<EosGroup>>,
    /// The in-process harness count's view of this subscription (empty on a live connection).
    #[cfg(feature = "testing")]
    pub(crate) tap: crate::testing::link::Tap,
}

impl fmt::Debug for SubCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubCore")
            .field("name", &self.name)
            .field("commit", &self.commit)
            .finish_non_exhaustive()
    }
}

impl Drop for SubCore {
    fn drop(&mut self) {
        self.closing.send_replace(true);
        // What this subscription was owed is owed no more (unless its group has other members).
        if let Some(handover) = self.state.handover() {
            handover.recount();
        }
        let mut life = lock(&self.life);
        // The pump now closes the consumer; shutdown waits for that.
        life.closing(&self.state);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SubCore {
    /// Hands a tracked delivery back to the subscription (`nack(true)`).
    pub(crate) fn requeue(&self, message: KafkaMessage) {
        lock(&self.requeued).push_back(message);
        if self.detached.load(Ordering::Acquire) {
            // Held here it would keep this core, and so its consumer and group membership,
            // alive for good; the group's next member reads it from the committed offset.
            let released = std::mem::take(&mut *lock(&self.requeued));
            drop(released);
            return;
        }
        self.wake.wake();
    }

    /// Moves the subscription through its pump; returns once the next delivery reflects
    /// the position.
    pub(crate) async fn seek(&self, to: KafkaPosition) -> Result<(), KafkaError> {
        let (done, outcome) = oneshot::channel();
        self.commands
            .send(Command::Seek { to, done })
            .map_err(|_| {
                KafkaError::Consume(KafkaError::text("the subscription's consumer has stopped"))
            })?;
        outcome.await.map_err(|_| {
            KafkaError::Consume(KafkaError::text(
                "the subscription's consumer stopped during a seek",
            ))
        })??;
        // In process, the records from the new position are ready when the seek returns.
        crate::handover::handed_over(self.state.handover(), None).await;
        Ok(())
    }

    /// The assigned partition `partition` of `topic`, if this subscription reads it.
    pub(crate) fn partition_of(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        lock(&self.parts)
            .iter()
            .find(|(tp, _)| tp.partition == partition && *tp.topic == *topic)
            .map(|(_, part)| Arc::clone(part))
    }

    /// The next offset to read of every assigned partition that has a stored position: what
    /// an exactly-once window commits for this subscription.
    pub(crate) fn stored_positions(&self) -> Vec<(TopicPartition, i64)> {
        let assigned = self.consumer.assignment();
        let parts = lock(&self.parts);
        assigned
            .into_iter()
            .filter_map(|tp| {
                let stored = parts.get(&tp)?.tracked.lock().stored()?;
                Some((tp, stored + 1))
            })
            .collect()
    }

    fn partition(&self, tp: &TopicPartition) -> Arc<Partition> {
        let mut parts = lock(&self.parts);
        Arc::clone(
            parts
                .entry(tp.clone())
                .or_insert_with(|| Arc::new(Partition::new(tp.clone()))),
        )
    }

    fn known_partition(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        lock(&self.parts).get(tp).cloned()
    }

    /// Repositions `tps` and drops what the queue held of them.
    fn reposition(&self, tps: &[TopicPartition]) {
        for tp in tps {
            self.partition(tp).reposition();
        }
        #[cfg(feature = "testing")]
        self.tap.clear(Some(tps));
        let mut queue = lock(&self.queue);
        let Queue {
            items,
            bytes,
            records,
            ..
        } = &mut *queue;
        items.retain(|item| match item {
            Item::Batch {
                part,
                records: batch,
                bytes: size,
                ..
            } if tps.contains(&part.tp) => {
                *bytes -= size;
                *records -= batch.records.len();
                false
            }
            _ => true,
        });
        drop(queue);
        if let Some(group) = &self.eos {
            group.repositioned.notify_waiters();
        }
        if let Some(handover) = self.state.handover() {
            handover.recount();
        }
    }

    /// Every assigned partition with the next offset this subscription hands its handler,
    /// where known: the record in hand, else the first queued one, else the consumer's
    /// position.
    #[cfg(feature = "testing")]
    pub(crate) fn next_to_hand(&self) -> Vec<(TopicPartition, Option<i64>)> {
        let assigned = self.consumer.assignment();
        let current = self.tap.current();
        let queue = lock(&self.queue);
        assigned
            .into_iter()
            .map(|tp| {
                if let Some((held, next)) = &current
                    && *held == tp
                {
                    return (tp, Some(*next));
                }
                let queued = queue.items.iter().find_map(|item| match item {
                    Item::Batch {
                        part,
                        generation,
                        records,
                        ..
                    } if part.tp == tp && part.is_current(*generation) => {
                        records.records.first().map(|r| r.offset)
                    }
                    _ => None,
                });
                let start = queued.or_else(|| self.consumer.position(&tp));
                (tp, start)
            })
            .collect()
    }

    /// Where this subscription has queued `tp` through: the consumer's position when the pump
    /// last queued records of it, else (nothing queued since it was positioned) the position.
    #[cfg(feature = "testing")]
    pub(crate) fn queued_through(&self, tp: &TopicPartition) -> Option<i64> {
        let queued = self
            .known_partition(tp)
            .map_or(i64::MIN, |part| part.queued_through.load(Ordering::Acquire));
        if queued == i64::MIN {
            self.consumer.position(tp)
        } else {
            Some(queued)
        }
    }

    /// Whether the pump paused every partition because the queue is full.
    #[cfg(feature = "testing")]
    pub(crate) fn is_throttled(&self) -> bool {
        lock(&self.queue).throttled
    }

    /// Resumes fetching after the stream drained a throttled queue.
    fn unthrottle(&self, queue: &mut Queue) {
        if queue.throttled && queue.bytes <= self.limits.0 / 2 && queue.records <= self.limits.1 / 2
        {
            queue.throttled = false;
            self.consumer.resume(&self.consumer.assignment());
        }
    }
}

/// One consumer for one subscription; its stream delivers [`KafkaMessage`]s.
pub struct KafkaSubscriber {
    core: Arc<SubCore>,
    current: Option<Current>,
    /// An error met inside an open batch, yielded after the batch.
    pending_error: Option<KafkaError>,
    /// A delivery waiting on the schema registry, handed out before anything else.
    #[cfg(feature = "schema-registry")]
    resolving: std::sync::Mutex<Option<futures::future::BoxFuture<'static, KafkaMessage>>>,
    /// In process, waits for the close this handle's drop starts: it drops after every other
    /// field (fields drop in order), so after `core`.
    #[cfg(feature = "testing")]
    _close_wait: crate::testing::link::CloseWait,
}

struct Current {
    part: Arc<Partition>,
    generation: u64,
    records: std::vec::IntoIter<Record>,
}

impl fmt::Debug for KafkaSubscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaSubscriber")
            .field("topic", &self.core.name)
            .field("commit", &self.core.commit)
            .finish_non_exhaustive()
    }
}

impl Drop for KafkaSubscriber {
    fn drop(&mut self) {
        self.core.detached.store(true, Ordering::Release);
        // Requeued deliveries hold the core; releasing them unsettled lets the consumer close
        // (the group's next member reads them from the committed offset).
        let requeued = std::mem::take(&mut *lock(&self.core.requeued));
        drop(requeued);
        lock(&self.core.life).closing(&self.core.state);
    }
}

impl KafkaSubscriber {
    /// The handle of an opened subscription.
    fn over(core: Arc<SubCore>) -> Self {
        KafkaSubscriber {
            #[cfg(feature = "testing")]
            _close_wait: crate::testing::link::CloseWait::new(&core),
            core,
            current: None,
            pending_error: None,
            #[cfg(feature = "schema-registry")]
            resolving: std::sync::Mutex::new(None),
        }
    }

    /// The subscription's name (its topic, or its entries joined with `,`).
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.core.name
    }

    /// Opens `plan`: validates the consumer configuration, creates the consumer on the
    /// broker's runtime, and for a group waits for the first assignment.
    pub(crate) async fn open(state: Arc<BrokerState>, plan: Plan) -> Result<Self, KafkaError> {
        state.ensure_open(&plan.name)?;
        #[cfg(feature = "testing")]
        crate::testing::link::after_closes(&state).await;
        let runtime = state.runtime().clone();
        // Opening spawns the consumer's tasks: they belong on the broker's runtime, whatever
        // runtime the caller is on.
        runtime
            .spawn(open_here(state, plan))
            .await
            .map_err(|e| KafkaError::Subscribe(Box::new(e)))?
    }

    /// The next delivery after the registry edges. A delivery waiting on the registry is kept
    /// in the subscriber, so dropping a poll loses nothing.
    #[cfg(feature = "schema-registry")]
    fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Result<KafkaMessage, KafkaError>> {
        if let Some(waiting) = self.poll_resolving(cx) {
            return waiting.map(Ok);
        }
        match self.poll_raw(cx) {
            Poll::Ready(Ok(message)) => match self.through_edges(message) {
                Some(message) => Poll::Ready(Ok(message)),
                None => self
                    .poll_resolving(cx)
                    .map_or(Poll::Pending, |waiting| waiting.map(Ok)),
            },
            other => other,
        }
    }

    #[cfg(not(feature = "schema-registry"))]
    fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Result<KafkaMessage, KafkaError>> {
        self.poll_raw(cx)
    }

    /// Polls the delivery waiting on the registry; `None` when there is none.
    #[cfg(feature = "schema-registry")]
    fn poll_resolving(&mut self, cx: &mut Context<'_>) -> Option<Poll<KafkaMessage>> {
        let slot = self
            .resolving
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let waiting = slot.as_mut()?;
        let polled = waiting.as_mut().poll(cx);
        if polled.is_ready() {
            *slot = None;
        }
        Some(polled)
    }

    /// Applies the registry edges to `message`: at once when its schema is at hand, else it
    /// waits in `resolving` (and `None` is returned).
    #[cfg(feature = "schema-registry")]
    fn through_edges(&mut self, mut message: KafkaMessage) -> Option<KafkaMessage> {
        use ruststream::IncomingMessage as _;

        let edges = self.core.state.registry_edges();
        let Some(id) = edges.needs_fetch(message.payload()) else {
            if let Some(json) = edges.transcode(message.payload(), None) {
                message.replace_payload(json);
            }
            return Some(message);
        };
        let edges = edges.clone();
        let waiting = Box::pin(async move {
            let fetched = edges.fetch(id).await;
            if let Some(json) = edges.transcode(message.payload(), fetched) {
                message.replace_payload(json);
            }
            message
        });
        *self
            .resolving
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(waiting);
        None
    }

    /// A ready delivery for a batch after the first, through the edges; one that must wait
    /// on the registry ends the batch and comes first in the next.
    #[cfg(feature = "schema-registry")]
    fn take_for_batch(&mut self) -> Option<Result<KafkaMessage, KafkaError>> {
        match self.take_ready()? {
            Ok(message) => self.through_edges(message).map(Ok),
            Err(err) => Some(Err(err)),
        }
    }

    #[cfg(not(feature = "schema-registry"))]
    fn take_for_batch(&mut self) -> Option<Result<KafkaMessage, KafkaError>> {
        self.take_ready()
    }

    /// The next delivery, or `Pending` (with the task registered to be woken). Nothing is
    /// taken unless it is returned, so dropping a poll loses nothing.
    fn poll_raw(&mut self, cx: &mut Context<'_>) -> Poll<Result<KafkaMessage, KafkaError>> {
        if let Some(err) = self.pending_error.take() {
            return Poll::Ready(Err(err));
        }
        if let Some(item) = self.take_ready() {
            return Poll::Ready(item);
        }
        self.core.wake.register(cx.waker());
        // Whatever arrived between the first look and the registration.
        match self.take_ready() {
            Some(item) => Poll::Ready(item),
            None => Poll::Pending,
        }
    }

    /// A delivery that is ready now, without waiting.
    fn take_ready(&mut self) -> Option<Result<KafkaMessage, KafkaError>> {
        loop {
            if let Some(message) = self.take_requeued() {
                return Some(Ok(message));
            }
            if let Some(current) = &mut self.current {
                if current.part.is_current(current.generation)
                    && let Some(record) = current.records.next()
                {
                    let part = Arc::clone(&current.part);
                    let generation = current.generation;
                    return Some(Ok(self.hand_over(part, generation, record)));
                }
                self.current = None;
                #[cfg(feature = "testing")]
                self.core.tap.clear(None);
            }
            let mut queue = lock(&self.core.queue);
            match queue.items.pop_front()? {
                Item::Batch {
                    part,
                    generation,
                    records,
                    bytes,
                } => {
                    queue.bytes -= bytes;
                    queue.records -= records.records.len();
                    self.core.unthrottle(&mut queue);
                    drop(queue);
                    #[cfg(feature = "testing")]
                    if let Some(first) = records.records.first() {
                        self.core.tap.handing(&part.tp, first.offset);
                    }
                    self.current = Some(Current {
                        part,
                        generation,
                        records: records.records.into_iter(),
                    });
                }
                Item::Error(err) => return Some(Err(err)),
            }
        }
    }

    fn take_requeued(&self) -> Option<KafkaMessage> {
        let mut requeued = lock(&self.core.requeued);
        while let Some(message) = requeued.pop_front() {
            if message.is_current() {
                return Some(message);
            }
            // Repositioned while it was away: the replay brings the record once.
        }
        None
    }

    fn hand_over(&self, part: Arc<Partition>, generation: u64, record: Record) -> KafkaMessage {
        let offset = record.offset;
        match self.core.commit {
            Commit::Auto => {
                if self.core.auto_store {
                    // As librdkafka: handing a record over stores the position after it.
                    let _ = self.core.consumer.store_offset(&part.tp, offset + 1);
                }
            }
            Commit::Tracked | Commit::Transactional(_) => {
                part.tracked.lock().delivered(generation, offset);
            }
        }
        #[cfg(feature = "testing")]
        let tp = part.tp.clone();
        // Counted alive first, then no longer owed: a recount in between sees it twice, never
        // not at all.
        let message = KafkaMessage::new(Arc::clone(&self.core), part, generation, record);
        #[cfg(feature = "testing")]
        self.core.tap.handing(&tp, offset + 1);
        message
    }
}

impl Subscriber for KafkaSubscriber {
    type Message = KafkaMessage;
    type Error = KafkaError;

    /// The deliveries, endlessly. Cancel-safe; calling it again loses nothing.
    fn stream(&mut self) -> impl Stream<Item = Result<KafkaMessage, KafkaError>> + Send + '_ {
        KafkaStream { subscriber: self }
    }
}

/// The stream of a [`KafkaSubscriber`]; `Unpin`, so `stream.next()` needs no pinning.
struct KafkaStream<'a> {
    subscriber: &'a mut KafkaSubscriber,
}

impl Stream for KafkaStream<'_> {
    type Item = Result<KafkaMessage, KafkaError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().subscriber.poll_item(cx).map(Some)
    }
}

/// The batch stream of a [`KafkaSubscriber`].
struct KafkaBatches<'a> {
    subscriber: &'a mut KafkaSubscriber,
    size: NonZeroUsize,
}

impl Stream for KafkaBatches<'_> {
    type Item = Result<Vec<KafkaMessage>, KafkaError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let subscriber = &mut *this.subscriber;
        // In process a batch is cut from what a running publisher has finished writing.
        #[cfg(feature = "testing")]
        if let Some(link) = subscriber.core.tap.link()
            && link.poll_quiet(cx).is_pending()
        {
            return Poll::Pending;
        }
        let first = match subscriber.poll_item(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(err)) => return Poll::Ready(Some(Err(err))),
            Poll::Ready(Ok(first)) => first,
        };
        let mut batch = Vec::with_capacity(this.size.get().min(64));
        batch.push(first);
        while batch.len() < this.size.get() {
            match subscriber.take_for_batch() {
                Some(Ok(message)) => batch.push(message),
                Some(Err(err)) => {
                    subscriber.pending_error = Some(err);
                    break;
                }
                None => break,
            }
        }
        Poll::Ready(Some(Ok(batch)))
    }
}

impl BatchSubscriber for KafkaSubscriber {
    type Batch = Vec<KafkaMessage>;

    /// Batches of at most `size`, in partition order: one awaited delivery, then what is
    /// already fetched. An error inside an open batch comes after the batch.
    fn batches(
        &mut self,
        size: NonZeroUsize,
    ) -> impl Stream<Item = Result<Vec<KafkaMessage>, KafkaError>> + Send + '_ {
        KafkaBatches {
            subscriber: self,
            size,
        }
    }
}

impl Seekable for KafkaSubscriber {
    type Seeker = KafkaSeeker;

    fn seeker(&self) -> KafkaSeeker {
        KafkaSeeker::new(Arc::clone(&self.core))
    }
}

// --- opening ---

/// Whether a consumer error ends the subscribe wait: a refusal retrying cannot fix.
fn is_fatal_join_error(err: &ClientError) -> bool {
    matches!(
        err.code(),
        Some(
            ResponseError::InconsistentGroupProtocol
                | ResponseError::InvalidGroupId
                | ResponseError::GroupAuthorizationFailed
                | ResponseError::TopicAuthorizationFailed
                | ResponseError::GroupMaxSizeReached
        )
    ) || err.to_string().contains("INCONSISTENT_GROUP_PROTOCOL")
}

/// The refusal a fatal join error stands for, in the words librdkafka uses for it, so the
/// subscribe error names it whatever the client's own text says (B10a: a protocol mismatch
/// must say `protocol`).
fn join_refusal(err: &ClientError) -> Option<&'static str> {
    match err.code()? {
        ResponseError::InconsistentGroupProtocol => Some("inconsistent group protocol"),
        ResponseError::InvalidGroupId => Some("invalid group id"),
        ResponseError::GroupAuthorizationFailed => Some("group authorization failed"),
        ResponseError::TopicAuthorizationFailed => Some("topic authorization failed"),
        ResponseError::GroupMaxSizeReached => Some("group max size reached"),
        _ => None,
    }
}

fn is_unknown_topic(err: &ClientError) -> bool {
    matches!(
        err.code(),
        Some(ResponseError::UnknownTopicOrPartition | ResponseError::UnknownTopicId)
    )
}

async fn open_here(state: Arc<BrokerState>, plan: Plan) -> Result<KafkaSubscriber, KafkaError> {
    let settings = plan.properties.consumer().map_err(KafkaError::subscribe)?;
    note_opened(&state, &plan);
    let mut config = settings.consumer_config();
    let auto_store = config.enable_auto_offset_store;
    #[cfg(feature = "testing")]
    let config_view = in_process_reading(&state, &mut config);
    // The subscription stores offsets itself: at hand-over (Auto) or on settle (Tracked).
    config.enable_auto_offset_store = false;
    // A partition handed back with nothing committed resumes where this member started, not at
    // a reset that moved on (B8, G4); the start itself is never committed (F1).
    config.remember_starts = true;
    // A batch that cannot be read: under Commit::Auto reported and read past, as librdkafka
    // does; where commits follow settled records, the partition holds there instead, so
    // no committed offset passes records nobody handled.
    config.corrupt_batches = match plan.commit {
        Commit::Auto => crate::client::CorruptBatch::Skip,
        Commit::Tracked | Commit::Transactional(_) => crate::client::CorruptBatch::Hold,
    };
    let limits = queue_limits(&config);
    let client = Client::connect(state.observed(settings.client_config()))
        .await
        .map_err(KafkaError::subscribe)?;
    let mut consumer = Consumer::new(client.clone(), config).map_err(KafkaError::subscribe)?;
    let (commands, command_rx) = mpsc::unbounded_channel();
    let (closing, closing_rx) = watch::channel(false);
    let life = Arc::new(Mutex::new(Life::default()));
    let eos = match &plan.commit {
        Commit::Transactional(id) => Some(state.eos().group(id)),
        Commit::Auto | Commit::Tracked => None,
    };
    let core = Arc::new(SubCore {
        name: plan.name.clone(),
        commit: plan.commit.clone(),
        lane_key: plan.lane_key,
        auto_store,
        state: Arc::clone(&state),
        consumer: consumer.handle(),
        parts: Mutex::new(HashMap::new()),
        queue: Mutex::new(Queue::default()),
        wake: AtomicWaker::new(),
        requeued: Mutex::new(VecDeque::new()),
        detached: AtomicBool::new(false),
        commands,
        closing,
        life: Arc::clone(&life),
        limits,
        eos,
        #[cfg(feature = "testing")]
        tap: crate::testing::link::Tap::new(
            state.in_process().cloned(),
            reader_of(&plan, config_view),
        ),
    });
    if let Some(group) = &core.eos {
        group.add(&core);
    }
    #[cfg(feature = "testing")]
    if let Some(link) = core.tap.link() {
        link.reader_opened(&core);
    }
    fence_earlier_pipeline(&state, &plan).await;
    match &plan.target {
        Target::Partitions { topic, partitions } => {
            let pump_task = (
                command_rx,
                closing_rx,
                Arc::clone(&state),
                Arc::clone(&life),
            );
            open_partitions(
                &client,
                consumer,
                &core,
                &plan,
                (topic, partitions),
                pump_task,
            )
            .await?;
        }
        Target::Group { topics, patterns } => {
            let subscription = if patterns.is_empty() {
                Subscription::Topics(topics.clone())
            } else {
                Subscription::Pattern(combined_pattern(topics, patterns))
            };
            consumer
                .subscribe(subscription)
                .map_err(KafkaError::subscribe)?;
            tokio::spawn(pump(
                consumer,
                Arc::downgrade(&core),
                command_rx,
                closing_rx,
                (Arc::clone(&state), Arc::clone(&life)),
            ));
            let nothing_to_wait_for = patterns.is_empty() && none_exists(&client, topics).await;
            if !nothing_to_wait_for {
                wait_for_assignment(&core, &plan).await?;
            }
        }
    }
    hand_over_backlog(&core).await;
    Ok(KafkaSubscriber::over(core))
}

/// For a `Commit::Transactional(id)` subscription, fences an earlier instance of pipeline `id`
/// before any committed offset is read (`transactional::fence_earlier_instance`). A failure is
/// not fatal: the pipeline's own initialization fences it later, and the positions wait until
/// then (at most `transaction.timeout.ms`).
async fn fence_earlier_pipeline(state: &Arc<BrokerState>, plan: &Plan) {
    let Commit::Transactional(id) = &plan.commit else {
        return;
    };
    if let Err(e) = crate::transactional::fence_earlier_instance(state, id).await {
        tracing::warn!(
            subscription = %plan.name,
            transactional_id = %id,
            error = %e,
            "could not fence an earlier instance of the exactly-once pipeline before reading \
             committed offsets; a transaction it left open holds them until it times out"
        );
    }
}

/// In process, what the log already holds for a new subscription is ready when `subscribe`
/// returns; nothing to wait for on a live connection.
async fn hand_over_backlog(core: &SubCore) {
    crate::handover::handed_over(core.state.handover(), None).await;
}

/// How much the subscription's own queue holds before the pump pauses fetching: half of
/// librdkafka's `queued.max.messages.kbytes` (at least 1 MiB) and `queued.min.messages`.
fn queue_limits(config: &crate::client::ConsumerConfig) -> (usize, usize) {
    (
        (config.queued_max_bytes / 2).max(1 << 20),
        config.queued_min_messages.max(1000),
    )
}

/// The isolation and reset the in-process count reads off a consumer configuration, once the
/// configuration reads late topics as the in-process transport hands them over.
#[cfg(feature = "testing")]
fn in_process_reading(
    state: &BrokerState,
    config: &mut crate::client::ConsumerConfig,
) -> (bool, bool) {
    // In process every record is handed over as it is written: a topic a pattern takes up
    // later was written after the subscription began, so all of it is read.
    if state.in_process().is_some() {
        config.late_topic_start = crate::client::LateTopicStart::Earliest;
    }
    (
        config.isolation == crate::client::IsolationLevel::ReadCommitted,
        config.auto_offset_reset == crate::client::OffsetReset::Earliest,
    )
}

/// Opens a manual assignment of `partitions` of `topic` (the ones the topic has) and waits
/// until each knows where it starts.
async fn open_partitions(
    client: &Client,
    mut consumer: Consumer,
    core: &Arc<SubCore>,
    plan: &Plan,
    (topic, partitions): (&String, &[i32]),
    pump_task: PumpTask,
) -> Result<(), KafkaError> {
    let start = match plan.start {
        StartOffset::Committed => StartAt::Committed,
        StartOffset::Earliest => StartAt::Earliest,
        StartOffset::Latest => StartAt::Latest,
    };
    let existing = client.topic(topic).await.ok().map(|t| t.partitions.len());
    let assignment: Vec<(TopicPartition, StartAt)> = partitions
        .iter()
        .filter(|p| existing.is_none_or(|count| usize::try_from(**p).is_ok_and(|p| p < count)))
        .map(|p| (TopicPartition::new(topic, *p), start))
        .collect();
    for (tp, _) in &assignment {
        core.partition(tp).reposition();
    }
    consumer
        .assign(&assignment)
        .map_err(KafkaError::subscribe)?;
    let (command_rx, closing_rx, state, life) = pump_task;
    tokio::spawn(pump(
        consumer,
        Arc::downgrade(core),
        command_rx,
        closing_rx,
        (state, life),
    ));
    wait_for_positions(core, plan).await
}

/// What the pump of a subscription is started with.
type PumpTask = (
    mpsc::UnboundedReceiver<Command>,
    watch::Receiver<bool>,
    Arc<BrokerState>,
    Arc<Mutex<Life>>,
);

/// Notes `plan` for routing; in process, naming a topic creates it (one partition), as a
/// first produce would.
fn note_opened(state: &BrokerState, plan: &Plan) {
    state.note_opened(opened_of(plan));
    #[cfg(feature = "testing")]
    if let Some(link) = state.in_process() {
        let named: Vec<&String> = match &plan.target {
            Target::Group { topics, .. } => topics.iter().collect(),
            Target::Partitions { topic, .. } => vec![topic],
        };
        for topic in named {
            let _ = link.cluster.create_topic(topic, 1);
        }
    }
}

/// How routing sees `plan`.
fn opened_of(plan: &Plan) -> crate::broker::Opened {
    let (topics, pattern, partitions) = match &plan.target {
        Target::Group { topics, patterns } => {
            let pattern = (!patterns.is_empty())
                .then(|| regex::Regex::new(&combined_pattern(&[], patterns)).ok())
                .flatten();
            (topics.clone(), pattern, false)
        }
        Target::Partitions { topic, .. } => (vec![topic.clone()], None, true),
    };
    crate::broker::Opened {
        name: plan.name.clone(),
        group: plan.group.clone(),
        topics,
        pattern,
        partitions,
    }
}

/// One regular expression for literal topics and patterns together.
fn combined_pattern(topics: &[String], patterns: &[String]) -> String {
    let mut parts: Vec<String> = topics
        .iter()
        .map(|t| format!("^{}$", regex::escape(t)))
        .collect();
    parts.extend(patterns.iter().map(|p| format!("(?:{p})")));
    parts.join("|")
}

/// True when the cluster answers and has none of `topics` (nothing can be assigned yet).
async fn none_exists(client: &Client, topics: &[String]) -> bool {
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    if client.refresh_metadata(&names).await.is_err() {
        return false;
    }
    client.with_metadata(|m| topics.iter().all(|t| !m.topics.contains_key(t.as_str())))
}

const WAIT_STEP: Duration = Duration::from_millis(10);

/// Waits for the first assignment and a concrete start for each of its partitions (B7-B10).
async fn wait_for_assignment(core: &SubCore, plan: &Plan) -> Result<(), KafkaError> {
    let bound = core.state.assignment_timeout();
    let deadline = Instant::now() + bound;
    let group = plan.group.as_deref().unwrap_or_default();
    loop {
        {
            let queue = lock(&core.queue);
            if let Some(fatal) = &queue.fatal {
                return Err(KafkaError::Subscribe(KafkaError::text(format!(
                    "subscription {:?} in consumer group {group:?} could not be opened: the \
                     cluster refused its join: {fatal}",
                    plan.name
                ))));
            }
        }
        if core.consumer.has_assignment() && positions_known(core) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let mut message = format!(
                "subscription {:?} in consumer group {group:?} was not assigned its partitions \
                 within {bound:?}",
                plan.name
            );
            if let Some(err) = &lock(&core.queue).last_error {
                message.push_str("; the consumer last reported: ");
                message.push_str(err);
            }
            return Err(KafkaError::Subscribe(KafkaError::text(message)));
        }
        tokio::time::sleep(WAIT_STEP.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// Waits until a manual assignment knows where each partition starts.
async fn wait_for_positions(core: &SubCore, plan: &Plan) -> Result<(), KafkaError> {
    let deadline = Instant::now() + core.state.assignment_timeout();
    while !positions_known(core) {
        if Instant::now() >= deadline {
            return Err(KafkaError::Subscribe(KafkaError::text(format!(
                "subscription {:?} could not be opened: the start positions of its partitions \
                 could not be read",
                plan.name
            ))));
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
    Ok(())
}

fn positions_known(core: &SubCore) -> bool {
    core.consumer
        .assignment()
        .iter()
        .all(|tp| core.consumer.position(tp).is_some())
}

// --- the pump ---

async fn pump(
    mut consumer: Consumer,
    core: Weak<SubCore>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut closing: watch::Receiver<bool>,
    (state, life): (Arc<BrokerState>, Arc<Mutex<Life>>),
) {
    let mut held: Option<KafkaPosition> = None;
    let mut unknown_topic = false;
    loop {
        tokio::select! {
            biased;
            _ = closing.changed() => break,
            Some(command) = commands.recv() => {
                let Some(core) = core.upgrade() else { break };
                match command {
                    Command::Seek { to, done } => {
                        let outcome = seek(&core, &mut held, to).await;
                        let _ = done.send(outcome);
                    }
                }
            }
            event = consumer.poll() => {
                let Some(core) = core.upgrade() else { break };
                match event {
                    Ok(event) => on_event(&core, event, &mut held, &mut unknown_topic).await,
                    Err(_) => break,
                }
            }
        }
    }
    // The subscription's client is its own (as librdkafka's consumer handle): it ends its
    // KIP-714 telemetry with the consumer.
    let client = consumer.client().clone();
    if let Err(e) = consumer.close().await {
        tracing::warn!(error = %e, "closing a subscription's consumer failed");
    }
    client.push_final_metrics().await;
    let mut life = lock(&life);
    life.pump_exited = true;
    if life.counted {
        state.consumer_closed();
    }
}

/// Notes that the pump queued `tp` through `position`.
#[cfg(feature = "testing")]
fn part_queued(core: &SubCore, tp: &TopicPartition, position: i64) {
    if let Some(part) = core.known_partition(tp) {
        part.queued_through.fetch_max(position, Ordering::AcqRel);
    }
}

async fn on_event(
    core: &SubCore,
    event: ConsumerEvent,
    held: &mut Option<KafkaPosition>,
    unknown_topic: &mut bool,
) {
    match event {
        ConsumerEvent::Records(records) => {
            let tp = TopicPartition {
                topic: Arc::clone(&records.topic),
                partition: records.partition,
            };
            let Some(part) = core.known_partition(&tp) else {
                return;
            };
            let generation = part.generation.load(Ordering::Acquire);
            let bytes: usize = records
                .records
                .iter()
                .map(|r| r.value.as_ref().map_or(0, bytes::Bytes::len) + 64)
                .sum();
            let mut queue = lock(&core.queue);
            queue.bytes += bytes;
            queue.records += records.records.len();
            queue.items.push_back(Item::Batch {
                part,
                generation,
                records,
                bytes,
            });
            if !queue.throttled && (queue.bytes > core.limits.0 || queue.records > core.limits.1) {
                queue.throttled = true;
                core.consumer.pause(&core.consumer.assignment());
            }
            drop(queue);
            #[cfg(feature = "testing")]
            if let Some(link) = core.tap.link() {
                if let Some(position) = core.consumer.position(&tp) {
                    part_queued(core, &tp, position);
                }
                link.records_queued();
            }
            if *unknown_topic {
                *unknown_topic = false;
                tracing::debug!(subscription = %core.name, "the subscribed topic is readable again");
            }
            core.wake.wake();
        }
        ConsumerEvent::Assigned(tps) => {
            core.reposition(&tps);
            if lock(&core.queue).throttled {
                core.consumer.pause(&tps);
            }
            if let Some(position) = held.take()
                && let Err(err) = seek_assigned(core, &position).await
            {
                let err = match err {
                    KafkaError::InvalidOptions(m) => KafkaError::InvalidOptions(format!(
                        "subscription {:?} could not be opened at its start position: {m}",
                        core.name
                    )),
                    other => other,
                };
                lock(&core.queue).items.push_back(Item::Error(err));
                core.wake.wake();
            }
        }
        ConsumerEvent::Revoked(revocation) => {
            core.reposition(&revocation.partitions);
            drop(revocation);
        }
        ConsumerEvent::Lost(tps) => core.reposition(&tps),
        ConsumerEvent::Error(err) => {
            if is_unknown_topic(&err) {
                if *unknown_topic {
                    tracing::debug!(subscription = %core.name, error = %err, "topic still unknown");
                } else {
                    *unknown_topic = true;
                    tracing::warn!(subscription = %core.name, error = %err, "a subscribed topic does not exist (yet)");
                }
                lock(&core.queue).last_error = Some(err.to_string());
                return;
            }
            let mut queue = lock(&core.queue);
            queue.last_error = Some(err.to_string());
            if is_fatal_join_error(&err) && !core.consumer.has_assignment() {
                queue.fatal = Some(match join_refusal(&err) {
                    Some(refusal) => format!("{refusal}: {err}"),
                    None => err.to_string(),
                });
            }
            queue.items.push_back(Item::Error(KafkaError::consume(err)));
            drop(queue);
            core.wake.wake();
        }
    }
}

/// Applies a seek: now on the assigned partitions, or held for the first assignment.
async fn seek(
    core: &SubCore,
    held: &mut Option<KafkaPosition>,
    to: KafkaPosition,
) -> Result<(), KafkaError> {
    if core.consumer.assignment().is_empty() {
        *held = Some(to);
        return Ok(());
    }
    seek_assigned(core, &to).await
}

async fn seek_assigned(core: &SubCore, to: &KafkaPosition) -> Result<(), KafkaError> {
    let assigned = core.consumer.assignment();
    let targets: Vec<(TopicPartition, StartAt)> = match to {
        KafkaPosition::Earliest => assigned
            .iter()
            .map(|tp| (tp.clone(), StartAt::Earliest))
            .collect(),
        KafkaPosition::Latest => assigned
            .iter()
            .map(|tp| (tp.clone(), StartAt::Latest))
            .collect(),
        KafkaPosition::Timestamp(t) => assigned
            .iter()
            .map(|tp| (tp.clone(), StartAt::Timestamp(*t)))
            .collect(),
        KafkaPosition::Offset {
            topic,
            partition,
            offset,
        } => assigned
            .iter()
            .filter(|tp| {
                tp.partition == *partition && topic.as_deref().is_none_or(|t| *t == *tp.topic)
            })
            .map(|tp| (tp.clone(), StartAt::Offset(*offset)))
            .collect(),
    };
    if targets.is_empty() {
        let listed = if assigned.is_empty() {
            "empty".to_owned()
        } else {
            assigned
                .iter()
                .map(|tp| format!("{}[{}]", tp.topic, tp.partition))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(KafkaError::InvalidOptions(format!(
            "position {to:?} names no partition assigned to subscription {:?}; assigned: {listed}",
            core.name
        )));
    }
    for (tp, start) in targets {
        // A seek commits nothing (F3, F6): the tracked state and the offset stored from the acks
        // before it are cleared first, so no commit carries the group past records the seek
        // replays, nor back to where it moved; the group's offset stays until a replayed record
        // is settled. Under `Commit::Auto` with the automatic store, the store follows the
        // hand-over as librdkafka's does and is left alone.
        core.reposition(std::slice::from_ref(&tp));
        if !(core.commit == Commit::Auto && core.auto_store) {
            core.consumer
                .clear_stored_offset(&tp)
                .map_err(KafkaError::consume)?;
        }
        core.consumer
            .seek(&tp, start)
            .await
            .map_err(KafkaError::consume)?;
    }
    core.wake.wake();
    #[cfg(feature = "testing")]
    core.tap.recount();
    Ok(())
}

/// What `plan` reads, for the in-process harness count.
#[cfg(feature = "testing")]
fn reader_of(
    plan: &Plan,
    (read_committed, earliest): (bool, bool),
) -> crate::testing::link::Reader {
    let opened = opened_of(plan);
    let partitions = match &plan.target {
        Target::Partitions { partitions, .. } => Some(partitions.clone()),
        Target::Group { .. } => None,
    };
    crate::testing::link::Reader {
        group: opened.group,
        topics: opened.topics,
        pattern: opened.pattern,
        partitions,
        read_committed,
        earliest,
    }
}
