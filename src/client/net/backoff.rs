//! Exponential backoff with jitter, as librdkafka's `reconnect.backoff.ms` and
//! `retry.backoff.ms` pairs describe it.

use std::time::Duration;

/// Doubles a delay from `initial` up to `max` on each failure, with ±20 % jitter so that many
/// clients that lost the same broker do not come back in lockstep.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    /// A backoff starting at `initial` and never exceeding `max`.
    #[must_use]
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.min(max);
        Backoff {
            initial,
            max,
            current: initial,
        }
    }

    /// The delay to wait before the next attempt; each call lengthens the following one.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current * 2).min(self.max);
        let jitter = 0.8 + fastrand::f64() * 0.4;
        base.mul_f64(jitter).min(self.max)
    }

    /// Starts again from the initial delay, after a success.
    pub fn reset(&mut self) {
        self.current = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_ceiling_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(80) && first <= Duration::from_millis(120));
        for _ in 0..10 {
            assert!(b.next_delay() <= Duration::from_secs(1));
        }
        let late = b.next_delay();
        assert!(late >= Duration::from_millis(800));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(120));
    }
}
