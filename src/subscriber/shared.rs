//! The state a subscription's handles share (the subscriber, every delivery, every seeker):
//! its partitions with their generations and tracked deliveries, and the queue the pump fills
//! and the stream drains.
//!
//! The invariant: a partition's generation changes only through [`SubCore::reposition`],
//! which also drops what the queue held of it, so a batch or a delivery of an older
//! generation is never handed out (the stream checks the generation before it hands out a
//! record), and a settle from before the reposition counts for nothing.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::task::AtomicWaker;
use tokio::sync::{mpsc, oneshot, watch};

pub(crate) use super::partition::Partition;
use crate::client::Record;
use crate::client::consumer::{ConsumerHandle, GroupMetadata, PartitionRecords, TopicPartition};
use crate::client::observe::Interest;
use crate::connection::BrokerState;
use crate::eos::sources::{EosGroup, Source};
use crate::error::KafkaError;
use crate::handover::{self, Alive, Watch, Watched};
use crate::position::KafkaPosition;
use crate::subscription::{Commit, LaneKey};

/// A tracked delivery handed back with `nack(true)`: what it was made of, until the stream
/// hands it out again. Still a delivery alive for the transport's count meanwhile.
pub(crate) struct Requeued {
    pub part: Arc<Partition>,
    pub generation: u64,
    pub record: Record,
    pub alive: Alive,
}

impl Requeued {
    /// Whether no reposition came since it was handed out.
    pub(super) fn is_current(&self) -> bool {
        self.part.is_current(self.generation)
    }
}

/// What the pump hands the stream.
pub(super) enum Item {
    Batch {
        part: Arc<Partition>,
        generation: u64,
        records: PartitionRecords,
        bytes: usize,
    },
    Error(KafkaError),
}

#[derive(Default)]
pub(super) struct Queue {
    pub(super) items: VecDeque<Item>,
    pub(super) bytes: usize,
    pub(super) records: usize,
    /// The pump paused every partition because the queue is full.
    pub(super) throttled: bool,
    /// The last error the consumer reported (for the subscribe wait's message).
    pub(super) last_error: Option<String>,
    /// A refusal that ends the subscribe wait (B10a).
    pub(super) fatal: Option<String>,
}

/// Whether a subscription's handles and its pump are gone, and whether the broker counts its
/// consumer as closing: from the first of the handle's drop and the core's (the pump may hold
/// the core a moment longer, and a shutdown right after the handle's drop must wait for it)
/// until the pump exits.
#[derive(Debug, Default)]
pub(super) struct Life {
    pub(super) pump_exited: bool,
    pub(super) counted: bool,
}

impl Life {
    /// Counts the consumer as closing, once, unless its pump is gone already.
    pub(super) fn closing(&mut self, state: &BrokerState) {
        if !self.pump_exited && !self.counted {
            self.counted = true;
            state.consumer_closing();
        }
    }
}

/// A command for the pump.
pub(super) enum Command {
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
    pub(super) auto_store: bool,
    pub state: Arc<BrokerState>,
    pub consumer: ConsumerHandle,
    pub(super) parts: Mutex<HashMap<TopicPartition, Arc<Partition>>>,
    pub(super) queue: Mutex<Queue>,
    /// Wakes the stream.
    pub(super) wake: AtomicWaker,
    /// Tracked deliveries handed back with `nack(true)`, delivered before anything new.
    pub(super) requeued: Mutex<VecDeque<Requeued>>,
    /// Set when the subscription handle is gone: nothing will deliver a requeued record
    /// again, so a requeue then releases it unsettled.
    pub(super) detached: AtomicBool,
    pub(super) commands: mpsc::UnboundedSender<Command>,
    pub(super) closing: watch::Sender<bool>,
    /// Whether this core and its pump are gone, for the broker's shutdown to wait on closes.
    pub(super) life: Arc<Mutex<Life>>,
    pub(super) limits: (usize, usize),
    /// The exactly-once pipeline group this subscription feeds (`Commit::Transactional`).
    pub eos: Option<Arc<EosGroup>>,
    /// The transport's watch of this subscription (none on a live connection).
    pub(crate) watch: Option<Arc<dyn Watch>>,
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
        // Nothing is handed out or settled any more: what was counted is told now.
        self.tell_counts();
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

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SubCore {
    /// Hands a tracked delivery back to the subscription (`nack(true)`).
    pub(crate) fn requeue(&self, delivery: Requeued) {
        lock(&self.requeued).push_back(delivery);
        if self.detached.load(Ordering::Acquire) {
            // Nothing will hand it out again: released unsettled at once, it is no longer
            // counted alive, and the group's next member reads it from the committed offset.
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

    pub(super) fn partition(&self, tp: &TopicPartition) -> Arc<Partition> {
        let mut parts = lock(&self.parts);
        Arc::clone(
            parts
                .entry(tp.clone())
                .or_insert_with(|| Arc::new(Partition::new(tp.clone()))),
        )
    }

    pub(super) fn known_partition(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        lock(&self.parts).get(tp).cloned()
    }

    /// Repositions `tps` and drops what the queue held of them.
    pub(super) fn reposition(&self, tps: &[TopicPartition]) {
        for tp in tps {
            self.partition(tp).reposition();
        }
        handover::tell(self.watch.as_ref(), |w| w.repositioned(tps));
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

    /// Tells the observers that count deliveries what each partition handed out and settled
    /// since the last time.
    pub(super) fn tell_counts(&self) {
        let observers = self.state.observers();
        if !observers.wants(Interest::DELIVERY_COUNTS) {
            return;
        }
        let parts: Vec<Arc<Partition>> = lock(&self.parts).values().cloned().collect();
        for part in parts {
            part.counts.tell(&part.tp, observers);
        }
    }

    /// Resumes fetching after the stream drained a throttled queue.
    pub(super) fn unthrottle(&self, queue: &mut Queue) {
        if queue.throttled && queue.bytes <= self.limits.0 / 2 && queue.records <= self.limits.1 / 2
        {
            queue.throttled = false;
            self.consumer.resume(&self.consumer.assignment());
        }
    }
}

impl Watched for SubCore {
    fn consumer(&self) -> &ConsumerHandle {
        &self.consumer
    }

    fn next_to_hand(
        &self,
        in_hand: Option<&(TopicPartition, i64)>,
    ) -> Vec<(TopicPartition, Option<i64>)> {
        let assigned = self.consumer.assignment();
        let queue = lock(&self.queue);
        assigned
            .into_iter()
            .map(|tp| {
                if let Some((held, next)) = in_hand
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

    fn is_throttled(&self) -> bool {
        lock(&self.queue).throttled
    }
}

impl Source for SubCore {
    fn name(&self) -> &str {
        &self.name
    }

    fn partition_of(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        SubCore::partition_of(self, topic, partition)
    }

    fn stored_positions(&self) -> Vec<(TopicPartition, i64)> {
        SubCore::stored_positions(self)
    }

    fn group_metadata(&self) -> Option<GroupMetadata> {
        self.consumer.group_metadata()
    }

    fn seek(
        &self,
        to: KafkaPosition,
    ) -> Pin<Box<dyn Future<Output = Result<(), KafkaError>> + Send + '_>> {
        Box::pin(SubCore::seek(self, to))
    }
}
