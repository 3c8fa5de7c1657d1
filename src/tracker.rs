//! `Commit::Tracked` bookkeeping: per partition, which delivered offsets are still unsettled,
//! and the position that may be stored for commit.
//!
//! The invariant: the stored position never passes an unsettled delivery. Deliveries of a
//! partition are handed out in offset order, so the outstanding offsets form an increasing
//! ring; a settle marks its entry, and settled entries leave from the front only. The position
//! is then (lowest outstanding - 1), or the highest delivered offset when nothing is
//! outstanding, and it only moves up. Offsets that are never delivered (transaction markers,
//! aborted or compacted records) never enter the ring, so they cannot block it.
//!
//! Every reposition of a partition (assignment, revocation, seek) starts a new generation and
//! forgets the ring: a settle carries the generation of its delivery, and one from before the
//! reposition is ignored, so a replayed record is never counted as settled by its earlier copy.
//!
//! Settling takes one partition's lock and allocates nothing (the ring is reused).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The tracked state of one partition.
#[derive(Debug, Default)]
pub(crate) struct Watermark {
    generation: u64,
    /// Delivered offsets in increasing order, with whether each is settled.
    outstanding: VecDeque<(i64, bool)>,
    /// The highest offset delivered in this generation.
    highest: Option<i64>,
    /// The last stored position (an offset that was handled; the commit is this + 1).
    stored: Option<i64>,
}

impl Watermark {
    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The last stored position, if any.
    pub(crate) fn stored(&self) -> Option<i64> {
        self.stored
    }

    /// Forgets everything and starts a new generation, which it returns.
    pub(crate) fn reset(&mut self) -> u64 {
        self.generation += 1;
        self.outstanding.clear();
        self.highest = None;
        self.stored = None;
        self.generation
    }

    /// Records a delivery of `offset` in `generation`; false when the generation is over.
    pub(crate) fn delivered(&mut self, generation: u64, offset: i64) -> bool {
        if generation != self.generation {
            return false;
        }
        if self.highest.is_some_and(|h| offset <= h) {
            // A redelivery of an outstanding record is already in the ring.
            return true;
        }
        self.outstanding.push_back((offset, false));
        self.highest = Some(offset);
        true
    }

    /// Settles `offset` of `generation`. Returns the new stored position when it moved.
    pub(crate) fn settle(&mut self, generation: u64, offset: i64) -> Option<i64> {
        if generation != self.generation {
            return None;
        }
        let at = self
            .outstanding
            .binary_search_by_key(&offset, |(o, _)| *o)
            .ok()?;
        let entry = &mut self.outstanding[at];
        if entry.1 {
            return None;
        }
        entry.1 = true;
        while self
            .outstanding
            .front()
            .is_some_and(|(_, settled)| *settled)
        {
            self.outstanding.pop_front();
        }
        let candidate = match self.outstanding.front() {
            Some((lowest, _)) => lowest - 1,
            None => self.highest?,
        };
        if candidate < 0 || self.stored.is_some_and(|s| candidate <= s) {
            return None;
        }
        self.stored = Some(candidate);
        Some(candidate)
    }

    /// The lowest offset of `generation` delivered and still unsettled, if any.
    pub(crate) fn lowest_outstanding(&self, generation: u64) -> Option<i64> {
        if generation != self.generation {
            return None;
        }
        self.outstanding
            .iter()
            .find(|(_, settled)| !settled)
            .map(|(offset, _)| *offset)
    }

    /// Whether `offset` of `generation` is delivered and still unsettled.
    pub(crate) fn is_outstanding(&self, generation: u64, offset: i64) -> bool {
        generation == self.generation
            && self
                .outstanding
                .binary_search_by_key(&offset, |(o, _)| *o)
                .is_ok_and(|at| !self.outstanding[at].1)
    }
}

/// A [`Watermark`] behind its own lock.
#[derive(Debug, Default)]
pub(crate) struct Tracked(Mutex<Watermark>);

impl Tracked {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Watermark> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Watermark;

    fn delivered(offsets: &[i64]) -> (Watermark, u64) {
        let mut w = Watermark::default();
        let generation = w.reset();
        for o in offsets {
            assert!(w.delivered(generation, *o));
        }
        (w, generation)
    }

    #[test]
    fn only_the_contiguous_prefix_is_stored() {
        let (mut w, g) = delivered(&[3, 4, 5]);
        assert_eq!(
            w.settle(g, 4),
            Some(2),
            "4 settled, 3 still out: 2 is stored"
        );
        assert_eq!(w.settle(g, 5), None, "3 still blocks");
        assert_eq!(w.settle(g, 3), Some(5));
        assert_eq!(w.stored(), Some(5));
    }

    #[test]
    fn the_lowest_unsettled_delivery_is_known_in_its_generation_only() {
        let (mut w, generation) = delivered(&[4, 5, 6]);
        assert_eq!(w.lowest_outstanding(generation), Some(4));
        w.settle(generation, 4);
        w.settle(generation, 6);
        assert_eq!(w.lowest_outstanding(generation), Some(5));
        w.settle(generation, 5);
        assert_eq!(w.lowest_outstanding(generation), None);
        w.delivered(generation, 7);
        assert_eq!(w.lowest_outstanding(generation + 1), None);
    }

    #[test]
    fn duplicate_and_unknown_settles_are_ignored() {
        let (mut w, g) = delivered(&[0, 1]);
        assert_eq!(w.settle(g, 0), Some(0));
        assert_eq!(w.settle(g, 0), None);
        assert_eq!(w.settle(g, 7), None);
        assert_eq!(w.settle(g, 1), Some(1));
    }

    #[test]
    fn a_settle_from_before_a_reposition_is_ignored() {
        let (mut w, g) = delivered(&[10, 11]);
        let next = w.reset();
        assert!(w.delivered(next, 10));
        assert_eq!(w.settle(g, 10), None, "the earlier copy's settle");
        assert!(w.is_outstanding(next, 10));
        assert_eq!(w.settle(next, 10), Some(10));
    }

    #[test]
    fn gaps_never_block() {
        // 5 and 6 were a transaction's marker and an aborted record: never delivered.
        let (mut w, g) = delivered(&[4, 7]);
        assert_eq!(w.settle(g, 4), Some(6));
        assert_eq!(w.settle(g, 7), Some(7));
    }

    #[test]
    fn the_position_only_moves_up() {
        let (mut w, g) = delivered(&[1, 2]);
        assert_eq!(w.settle(g, 1), Some(1));
        assert!(!w.delivered(g + 1, 3), "another generation's delivery");
        assert_eq!(w.settle(g, 2), Some(2));
        assert_eq!(w.settle(g, 2), None);
    }
}
