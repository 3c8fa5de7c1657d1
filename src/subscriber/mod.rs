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

//!
//! The pieces: [`shared`] the state the handles share, [`open`] opening a subscription,
//! [`pump`] the task that drives the consumer; this module the subscriber and its streams.

mod open;
pub(crate) mod partition;
mod pump;
pub(crate) mod shared;

use std::fmt;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use futures::Stream;
use ruststream::{BatchSubscriber, Seekable, Subscriber};

use crate::client::Record;
use crate::client::outlined::Outlined;
use crate::connection::BrokerState;
use crate::error::KafkaError;
use crate::message::KafkaMessage;
use crate::seek::KafkaSeeker;
use crate::subscription::{Commit, Plan};
use open::open_here;
use partition::Partition;
use shared::{Item, SubCore, lock};

/// One consumer for one subscription; its stream delivers [`KafkaMessage`]s.
pub struct KafkaSubscriber {
    core: Arc<SubCore>,
    current: Option<Current>,
    /// An error met inside an open batch, yielded after the batch.
    pending_error: Option<KafkaError>,
    /// A delivery waiting on the schema registry, handed out before anything else.
    #[cfg(feature = "schema-registry")]
    resolving: std::sync::Mutex<Option<futures::future::BoxFuture<'static, KafkaMessage>>>,
    /// Declared last, so it drops after `core`: the transport's wait for the drop's hand-over.
    _dropped: Dropped,
}

/// A subscriber's drop as its transport sees it: after the subscriber's own hold on the
/// subscription is gone, the transport's hand-over of what it held (see
/// [`Handover::subscription_dropped`](crate::handover::Handover::subscription_dropped)).
struct Dropped {
    core: std::sync::Weak<SubCore>,
    state: Arc<BrokerState>,
}

impl Drop for Dropped {
    fn drop(&mut self) {
        let Some(handover) = self.state.handover() else {
            return;
        };
        handover.subscription_dropped(&|| self.core.strong_count() == 0, &|| {
            self.state.no_consumer_closing()
        });
    }
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
        // Nothing will hand requeued deliveries out again: released unsettled (the group's next
        // member reads them from the committed offset).
        let requeued = std::mem::take(&mut *lock(&self.core.requeued));
        drop(requeued);
        lock(&self.core.life).closing(&self.core.state);
    }
}

impl KafkaSubscriber {
    /// The handle of an opened subscription.
    pub(super) fn over(core: Arc<SubCore>) -> Self {
        KafkaSubscriber {
            _dropped: Dropped {
                core: Arc::downgrade(&core),
                state: Arc::clone(&core.state),
            },
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
    #[inline(never)]
    pub(crate) fn open(
        state: Arc<BrokerState>,
        plan: Plan,
    ) -> Outlined<'static, Result<Self, KafkaError>> {
        Box::pin(async move {
            state.ensure_open(&plan.name)?;
            if let Some(handover) = state.handover() {
                handover
                    .after_closes(Box::pin(state.consumers_closed()))
                    .await;
            }
            let runtime = state.runtime().clone();
            // Opening spawns the consumer's tasks: they belong on the broker's runtime, whatever
            // runtime the caller is on.
            crate::client::outlined::spawn_on(&runtime, open_here(state, plan))
                .await
                .map_err(|e| KafkaError::Subscribe(Box::new(e)))?
        })
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
                crate::handover::tell(self.core.watch.as_ref(), |w| w.handed_all());
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
                    if let Some(first) = records.records.first() {
                        crate::handover::tell(self.core.watch.as_ref(), |w| {
                            w.handing(&part.tp, first.offset);
                        });
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
        while let Some(delivery) = requeued.pop_front() {
            if delivery.is_current() {
                return Some(KafkaMessage::again(Arc::clone(&self.core), delivery));
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
        // Counted alive first, then no longer owed: a recount in between sees it twice, never
        // not at all.
        let Some(watch) = self.core.watch.clone() else {
            return KafkaMessage::new(Arc::clone(&self.core), part, generation, record);
        };
        let tp = part.tp.clone();
        let message = KafkaMessage::new(Arc::clone(&self.core), part, generation, record);
        watch.handing(&tp, offset + 1);
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
        if let Some(watch) = &subscriber.core.watch
            && watch.poll_batch(cx).is_pending()
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
