//! A batch's outcome, shared by the delivery futures of all its records.
//!
//! The invariant: a batch's outcome is set exactly once, by its [`Promise`] (settled, or
//! dropped unsettled, which fails the records with `Closed`), and every delivery future of the
//! batch resolves to it: one polled before it was set is woken once it is, one polled after
//! reads it at once. A record's own offset and timestamp follow from the batch's base offset
//! and append time, its place in the batch and its own creation time.
//!
//! Why one per batch: a channel per record cost an allocation, its atomics on two threads and a
//! free on another core for every record; a batch of a thousand records now shares one.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};

use super::Written;
use crate::client::error::{Error, Result};

/// What a batch's records get.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Written at `base_offset` (-1 with `acks=0`); `append_time` is the broker's log-append
    /// time, -1 where the topic keeps create times.
    Written {
        base_offset: i64,
        append_time: i64,
    },
    Failed(Error),
}

#[derive(Debug, Default)]
struct Slot {
    /// The waker of the batch's first record, if it was polled before the outcome was set
    /// (kept apart: a batch of one record, a sequential publish's, needs no list).
    first: Option<Waker>,
    /// The same for each later record, at its place in the batch less one (a record polled
    /// again replaces its own, so this never outgrows the batch).
    wakers: Vec<Option<Waker>>,
}

/// The shared half: what the futures read.
///
/// The outcome is read without a lock once set (a record's second poll, after its wake-up,
/// is one atomic load). The wakers are kept under the lock, and the outcome is set before
/// the lock is taken to wake them: a record that finds no outcome under the lock has its
/// waker taken, and woken, after.
#[derive(Debug, Default)]
pub(super) struct Completion {
    outcome: OnceLock<Outcome>,
    slot: Mutex<Slot>,
}

impl Completion {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        // A panic while the slot was held leaves it consistent (each change is one store).
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The outcome of the record at `index` of the batch, created at `timestamp`, or `Pending`
    /// (and a wake-up once it is set).
    pub(super) fn poll_record(
        &self,
        index: u32,
        timestamp: i64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Written>> {
        if let Some(outcome) = self.outcome.get() {
            return Poll::Ready(Self::record_outcome(outcome, index, timestamp));
        }
        let mut slot = self.slot();
        if let Some(outcome) = self.outcome.get() {
            return Poll::Ready(Self::record_outcome(outcome, index, timestamp));
        }
        let place = match (index as usize).checked_sub(1) {
            None => Some(&mut slot.first),
            Some(at) => {
                if slot.wakers.len() <= at {
                    slot.wakers.resize(at + 1, None);
                }
                slot.wakers.get_mut(at)
            }
        };
        if let Some(place) = place {
            match place {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => *place = Some(cx.waker().clone()),
            }
        }
        Poll::Pending
    }

    /// What the record at `index`, created at `timestamp`, gets of its batch's `outcome`.
    fn record_outcome(outcome: &Outcome, index: u32, timestamp: i64) -> Result<Written> {
        match outcome {
            Outcome::Written {
                base_offset,
                append_time,
            } => Ok(Written::new(
                if *base_offset < 0 {
                    -1
                } else {
                    base_offset + i64::from(index)
                },
                if *append_time >= 0 {
                    *append_time
                } else {
                    timestamp
                },
            )),
            Outcome::Failed(error) => Err(error.clone()),
        }
    }
}

/// The batch's half: the one owner that sets the outcome. Dropped unsettled (the producer's
/// sender stopped with the batch in hand), it fails the batch's records with `Closed`, so no
/// future waits for an outcome that will never come.
#[derive(Debug)]
pub(super) struct Promise {
    shared: Arc<Completion>,
}

impl Promise {
    pub(super) fn new() -> Self {
        Promise {
            shared: Arc::new(Completion::default()),
        }
    }

    /// What a record of this batch awaits.
    pub(super) fn completion(&self) -> Arc<Completion> {
        Arc::clone(&self.shared)
    }

    /// Sets the outcome and wakes the records that wait for it (outside the slot's lock).
    pub(super) fn settle(self, outcome: Outcome) {
        self.set(outcome);
    }

    fn set(&self, outcome: Outcome) {
        if self.shared.outcome.set(outcome).is_err() {
            return; // settled already
        }
        let (first, wakers) = {
            let mut slot = self.shared.slot();
            (slot.first.take(), std::mem::take(&mut slot.wakers))
        };
        for waker in first.into_iter().chain(wakers.into_iter().flatten()) {
            waker.wake();
        }
    }
}

impl Drop for Promise {
    fn drop(&mut self) {
        if self.shared.outcome.get().is_none() {
            self.set(Outcome::Failed(Error::Closed(
                "producer stopped before delivery".into(),
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn each_record_gets_its_offset_and_its_own_timestamp_unless_the_broker_gave_one() {
        let promise = Promise::new();
        let shared = promise.completion();
        let (woken, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        assert!(shared.poll_record(0, 10, &mut cx).is_pending());
        assert!(shared.poll_record(2, 12, &mut cx).is_pending());
        // polled again with the same waker: one place, one wake-up
        assert!(shared.poll_record(2, 12, &mut cx).is_pending());
        promise.settle(Outcome::Written {
            base_offset: 100,
            append_time: -1,
        });
        assert_eq!(woken.0.load(Ordering::SeqCst), 2);
        let Poll::Ready(Ok(w)) = shared.poll_record(2, 12, &mut cx) else {
            panic!("settled");
        };
        assert_eq!((w.offset, w.timestamp), (102, 12));

        let promise = Promise::new();
        let shared = promise.completion();
        promise.settle(Outcome::Written {
            base_offset: -1,
            append_time: 77,
        });
        let Poll::Ready(Ok(w)) = shared.poll_record(5, 12, &mut cx) else {
            panic!("settled");
        };
        assert_eq!((w.offset, w.timestamp), (-1, 77));
    }

    #[test]
    fn a_promise_dropped_unsettled_fails_its_records_and_wakes_them() {
        let promise = Promise::new();
        let shared = promise.completion();
        let (woken, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        assert!(shared.poll_record(0, 1, &mut cx).is_pending());
        drop(promise);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        match shared.poll_record(0, 1, &mut cx) {
            Poll::Ready(Err(Error::Closed(why))) => assert!(why.contains("stopped"), "{why}"),
            other => panic!("expected Closed, got {other:?}"),
        }
    }

    #[test]
    fn a_failure_reaches_every_record() {
        let promise = Promise::new();
        let shared = promise.completion();
        promise.settle(Outcome::Failed(Error::Timeout("late".into())));
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        for i in 0..3 {
            assert!(matches!(
                shared.poll_record(i, 0, &mut cx),
                Poll::Ready(Err(Error::Timeout(_)))
            ));
        }
    }
}
