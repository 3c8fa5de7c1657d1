//! Pacing of one direction of one connection: the latency schedule and the token bucket.
//!
//! [`Schedule`] never lets a chunk overtake the one before it: a chunk is due at its arrival time
//! plus its own delay, or when the previous chunk was due, whichever is later. [`TokenBucket`]
//! never lets more than `rate` bytes per second (plus one bucket, a tenth of a second's worth, as
//! burst) through over any interval.

use std::time::Duration;

use tokio::time::Instant;

/// When chunks of one direction are due under a latency fault (order kept).
#[derive(Debug, Default)]
pub struct Schedule {
    last_due: Option<Instant>,
}

impl Schedule {
    /// The instant a chunk that arrived at `arrival` with this `delay` is due.
    pub fn due(&mut self, arrival: Instant, delay: Duration) -> Instant {
        let mut due = arrival + delay;
        if let Some(last) = self.last_due {
            due = due.max(last);
        }
        self.last_due = Some(due);
        due
    }
}

/// A token bucket for one direction of one connection.
///
/// Integer arithmetic: the tokens are counted in byte-nanoseconds (a byte is worth
/// `1_000_000_000` of them), so a refill is `elapsed_ns * rate` with nothing rounded away.
#[derive(Debug)]
pub struct TokenBucket {
    rate: u64,
    capacity: u64,
    /// May go below zero: the debt is what the caller sleeps off before sending.
    tokens: i128,
    refilled: Instant,
}

const NANOS: i128 = 1_000_000_000;

impl TokenBucket {
    /// A full bucket for `rate` bytes per second (at least 1); it holds a tenth of a second's
    /// worth, at least one byte and at most 64 KiB.
    #[must_use]
    pub fn new(rate: u64, now: Instant) -> Self {
        let rate = rate.max(1);
        let capacity = (rate / 10).clamp(1, 64 * 1024);
        Self {
            rate,
            capacity,
            tokens: i128::from(capacity) * NANOS,
            refilled: now,
        }
    }

    /// The rate this bucket was made for.
    #[must_use]
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The largest piece [`TokenBucket::take`] hands out at once.
    #[must_use]
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = i128::try_from(now.saturating_duration_since(self.refilled).as_nanos())
            .unwrap_or(i128::MAX);
        let full = i128::from(self.capacity) * NANOS;
        self.tokens = self
            .tokens
            .saturating_add(elapsed.saturating_mul(i128::from(self.rate)))
            .min(full);
        self.refilled = now;
    }

    /// Takes up to `want` bytes (at most one bucket): returns how many, and how long to wait
    /// before sending them. The caller sleeps that long, then sends exactly that many bytes.
    pub fn take(&mut self, want: usize, now: Instant) -> (usize, Duration) {
        self.refill(now);
        let piece = u64::try_from(want)
            .unwrap_or(u64::MAX)
            .clamp(1, self.capacity);
        self.tokens -= i128::from(piece) * NANOS;
        let pause = if self.tokens < 0 {
            let ns = (-self.tokens) / i128::from(self.rate) + 1;
            Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
        } else {
            Duration::ZERO
        };
        (piece as usize, pause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_keeps_order() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        assert_eq!(
            s.due(t0, Duration::from_millis(100)),
            t0 + Duration::from_millis(100)
        );
        // a later chunk with a shorter delay waits for the one before it
        assert_eq!(
            s.due(t0 + Duration::from_millis(10), Duration::from_millis(20)),
            t0 + Duration::from_millis(100)
        );
        assert_eq!(
            s.due(t0 + Duration::from_millis(50), Duration::from_millis(80)),
            t0 + Duration::from_millis(130)
        );
    }

    #[test]
    fn bucket_paces_at_its_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, t0);
        assert_eq!(b.capacity(), 100);
        // simulate sending 10 000 bytes in pieces, advancing a virtual clock by each wait
        let mut now = t0;
        let mut left = 10_000usize;
        while left > 0 {
            let (n, wait) = b.take(left, now);
            now += wait;
            left -= n;
        }
        let secs = now.duration_since(t0).as_secs_f64();
        // the first bucket is free: 9 900 bytes at 1 000 B/s
        assert!((9.8..=10.0).contains(&secs), "{secs}");
    }

    #[test]
    fn tiny_rates_still_move() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(0, t0);
        assert_eq!(b.rate(), 1);
        let (n, wait) = b.take(10, t0);
        assert_eq!((n, wait), (1, Duration::ZERO));
        let (n, wait) = b.take(10, t0);
        assert_eq!(n, 1);
        assert!(wait >= Duration::from_millis(999));
    }
}
