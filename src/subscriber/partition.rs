//! One partition as a subscription sees it: its names, shared by every delivery of it, and
//! its tracked deliveries under a generation.
//!
//! The invariant: the generation changes only through [`Partition::reposition`], which also
//! starts the tracked state over, so a delivery of an older generation settles nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ruststream::Str;

use crate::client::Observers;
use crate::client::consumer::TopicPartition;
use crate::client::observe::{Event, Settlement};
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
    /// What was handed out and settled of it since the observers were last told.
    pub counts: Counts,
}

/// Deliveries and settlements of one partition not yet told to the observers that count them
/// (`Interest::DELIVERY_COUNTS`): a relaxed atomic add per record, summed into one event
/// per partition when taken.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    delivered: AtomicU64,
    acked: AtomicU64,
    rejected: AtomicU64,
    requeued: AtomicU64,
    refused: AtomicU64,
}

impl Counts {
    /// A record was handed to a handler.
    pub(crate) fn delivered(&self) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// A handler settled a record; `accepted` whether the subscription took it.
    pub(crate) fn settled(&self, outcome: Settlement, accepted: bool) {
        let slot = match (accepted, outcome) {
            (false, _) => &self.refused,
            (true, Settlement::Acked) => &self.acked,
            (true, Settlement::Rejected) => &self.rejected,
            (true, Settlement::Requeued) => &self.requeued,
        };
        slot.fetch_add(1, Ordering::Relaxed);
    }

    /// Tells `observers` what was counted since the last time, if anything was.
    pub(crate) fn tell(&self, tp: &TopicPartition, observers: &Observers) {
        let take = |n: &AtomicU64| n.swap(0, Ordering::Relaxed);
        let (delivered, acked, rejected, requeued, refused) = (
            take(&self.delivered),
            take(&self.acked),
            take(&self.rejected),
            take(&self.requeued),
            take(&self.refused),
        );
        if delivered + acked + rejected + requeued + refused > 0 {
            observers.emit(&Event::DeliveryCounts {
                topic: &tp.topic,
                partition: tp.partition,
                delivered,
                acked,
                rejected,
                requeued,
                refused,
            });
        }
    }
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
    pub(crate) fn new(tp: TopicPartition) -> Self {
        Self {
            topic: shared_topic(&tp.topic),
            text: tp.partition.to_string().into_boxed_str(),
            tp,
            generation: AtomicU64::new(0),
            tracked: Tracked::default(),
            counts: Counts::default(),
        }
    }

    /// Starts a new generation: outstanding deliveries no longer count.
    pub(crate) fn reposition(&self) -> u64 {
        let mut tracked = self.tracked.lock();
        let generation = tracked.reset();
        self.generation.store(generation, Ordering::Release);
        generation
    }

    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::{Counts, TopicPartition};
    use crate::client::Observers;
    use crate::client::observe::{Event, Interest, Observer, Settlement};

    /// Keeps each `DeliveryCounts` event as (delivered, acked, rejected, requeued, refused).
    #[derive(Default)]
    struct Told(Mutex<Vec<(i32, [u64; 5])>>);

    impl Observer for Arc<Told> {
        fn interest(&self) -> Interest {
            Interest::DELIVERY_COUNTS
        }

        fn on_event(&self, event: &Event<'_>) {
            if let Event::DeliveryCounts {
                partition,
                delivered,
                acked,
                rejected,
                requeued,
                refused,
                ..
            } = *event
            {
                let mut told = self
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                told.push((partition, [delivered, acked, rejected, requeued, refused]));
            }
        }
    }

    #[test]
    fn counts_are_told_as_sums_once_and_nothing_when_there_is_nothing() {
        let told = Arc::new(Told::default());
        let observers = Observers::new().with(Arc::new(Arc::clone(&told)));
        let tp = TopicPartition::new("orders", 3);
        let counts = Counts::default();
        counts.tell(&tp, &observers);
        for _ in 0..5 {
            counts.delivered();
        }
        counts.settled(Settlement::Acked, true);
        counts.settled(Settlement::Acked, true);
        counts.settled(Settlement::Rejected, true);
        counts.settled(Settlement::Requeued, true);
        counts.settled(Settlement::Requeued, false);
        counts.tell(&tp, &observers);
        counts.tell(&tp, &observers);
        counts.delivered();
        counts.tell(&tp, &observers);
        let told = told
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert_eq!(*told, vec![(3, [5, 2, 1, 1, 1]), (3, [1, 0, 0, 0, 0])]);
    }
}
