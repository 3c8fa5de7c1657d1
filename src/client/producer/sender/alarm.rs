//! The sender's alarm: wakes it at an instant, to the tenth of a millisecond rather than to the
//! next millisecond or two.
//!
//! tokio's timer counts whole milliseconds: a deadline is rounded up to the next tick, and the
//! driver parks for whole milliseconds from the moment it parks, so a sleep ends up to 2 ms late
//! and about 1 ms late on average. A batch that should linger `linger.ms` = 5 ms lingered about
//! 6, which was most of the gap in latency and in throughput at a shallow window to librdkafka
//! (whose timers count microseconds). On Linux the alarm is a timerfd, armed with the time left
//! and polled by tokio's reactor, so it fires within the kernel's timer slack (about 50 µs); no
//! thread, no spinning. Elsewhere, or when no timerfd can be made, it is tokio's sleep.
//!
//! Waits longer than 100 ms (an idle sender, a retry backoff) are left to tokio's timer alone,
//! and so is an instant already past: tokio's sleep then ends at once but counts against the
//! task's cooperative budget, so a loop that keeps waiting for a past instant still yields.
//!
//! The invariant: [`Alarm::wait_until`] never returns before its instant (the timerfd is armed
//! with the time left after reading the clock, and tokio's sleep never ends early), and never
//! later than tokio's sleep would (the sleep runs beside the timerfd, which also keeps the alarm
//! working under tokio's paused test clock, which a kernel timer does not follow).

use tokio::time::Instant;

/// A reusable one-shot timer for one task.
#[derive(Debug)]
pub(super) struct Alarm {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    precise: Option<linux::TimerFd>,
}

impl Alarm {
    /// An alarm; on Linux backed by a timerfd when one can be made (else tokio's timer alone).
    pub(super) fn new() -> Alarm {
        Alarm {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            precise: linux::TimerFd::new(),
        }
    }

    /// Waits until `at`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wait dropped early leaves the timer armed for `at`; the next call re-arms
    /// it for its own instant.
    pub(super) async fn wait_until(&mut self, at: Instant) {
        let sleep = tokio::time::sleep_until(at);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(precise) = self.precise.as_mut() {
            tokio::select! {
                biased;
                () = precise.fire_at(at) => {}
                () = sleep => {}
            }
            return;
        }
        sleep.await;
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux {
    use std::os::fd::{AsFd, AsRawFd, RawFd};
    use std::time::Duration;

    use nix::errno::Errno;
    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFlags, TimerSetTimeFlags};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    use tokio::time::Instant;

    /// Beyond this, a wait is left to tokio's timer: precision matters for a linger, which is
    /// milliseconds, not for a wait of a second.
    const FAR: Duration = Duration::from_millis(100);

    /// The timer, owned: its descriptor is the one it was made with until it is dropped.
    #[derive(Debug)]
    struct Owned(nix::sys::timerfd::TimerFd);

    impl AsRawFd for Owned {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }

    /// Registers the timer with tokio's reactor.
    ///
    /// tokio 1.54 deprecated its safe constructors (in favour of `unsafe` ones) because a type
    /// whose `as_raw_fd` may change or close its descriptor would break the reactor's
    /// book-keeping. A timer moved into the `AsyncFd` is the case that is sound: it keeps one
    /// descriptor, open until the `AsyncFd` drops it.
    #[allow(deprecated)]
    fn register(timer: Owned) -> std::io::Result<AsyncFd<Owned>> {
        AsyncFd::with_interest(timer, Interest::READABLE)
    }

    /// A non-blocking `CLOCK_MONOTONIC` timerfd registered with tokio's reactor.
    #[derive(Debug)]
    pub(super) struct TimerFd {
        fd: AsyncFd<Owned>,
        /// The instant it is armed for, until it fires.
        armed: Option<Instant>,
    }

    impl TimerFd {
        pub(super) fn new() -> Option<TimerFd> {
            let made = nix::sys::timerfd::TimerFd::new(
                ClockId::CLOCK_MONOTONIC,
                TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
            )
            .map_err(std::io::Error::from)
            .and_then(|timer| register(Owned(timer)));
            match made {
                Ok(fd) => Some(TimerFd { fd, armed: None }),
                Err(e) => {
                    tracing::debug!(error = %e, "no timerfd: the producer lingers on tokio's timer (up to 2 ms late)");
                    None
                }
            }
        }

        /// Fires once `at` has passed; pending forever when `at` is far or the timer cannot
        /// be armed (the caller's tokio sleep ends the wait then).
        ///
        /// # Cancel safety
        ///
        /// Cancel safe: the timer stays armed for `at`, and a later call for another instant
        /// re-arms it (which also resets what it had counted).
        pub(super) async fn fire_at(&mut self, at: Instant) {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Passed already: tokio's sleep ends the wait, and it counts against the task's
                // cooperative budget, so a loop that keeps waiting for a past instant still
                // yields to the tasks beside it (returning here at once would not).
                return std::future::pending().await;
            }
            if left > FAR {
                // A millisecond late is nothing here (an idle wait, a retry backoff): tokio's
                // timer alone, without two system calls.
                return std::future::pending().await;
            }
            if self.armed != Some(at) {
                // Never zero: that would disarm it.
                let value = TimeSpec::from_duration(left.max(Duration::from_nanos(1)));
                let armed = self
                    .fd
                    .get_ref()
                    .0
                    .set(Expiration::OneShot(value), TimerSetTimeFlags::empty());
                if armed.is_err() {
                    self.armed = None;
                    return std::future::pending().await;
                }
                self.armed = Some(at);
            }
            loop {
                let Ok(mut ready) = self.fd.readable().await else {
                    return std::future::pending().await;
                };
                match self.fd.get_ref().0.wait() {
                    Ok(()) => {
                        // The expiry is read, so the timer is not readable until it is armed
                        // again and fires: said now, the next wait does not begin with a read
                        // that finds nothing (a system call per linger).
                        ready.clear_ready();
                        self.armed = None;
                        return;
                    }
                    // Readiness left over from an expiry that a re-arm has since reset.
                    Err(Errno::EAGAIN) => ready.clear_ready(),
                    Err(_) => {
                        self.armed = None;
                        return std::future::pending().await;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Alarm;
    use tokio::time::Instant;

    /// Never early, and well within tokio's millisecond of lateness where a timerfd exists.
    #[tokio::test]
    async fn fires_at_its_instant_not_a_millisecond_later() {
        let mut alarm = Alarm::new();
        let mut late = Vec::new();
        for i in 0..40u32 {
            // Deadlines at every fraction of a millisecond.
            let at = Instant::now() + Duration::from_micros(2_000 + u64::from(i) * 137);
            alarm.wait_until(at).await;
            let now = Instant::now();
            assert!(now >= at, "woke {:?} early", at - now);
            late.push(now - at);
        }
        late.sort();
        let median = late[late.len() / 2];
        #[cfg(any(target_os = "linux", target_os = "android"))]
        assert!(
            median < Duration::from_micros(500),
            "median lateness {median:?}: {late:?}"
        );
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = median;
    }

    /// A wait dropped before its instant leaves nothing behind: the next wait, for a later
    /// instant, does not end at the earlier one.
    #[tokio::test]
    async fn a_dropped_wait_does_not_end_the_next_one_early() {
        let mut alarm = Alarm::new();
        let first = Instant::now() + Duration::from_millis(3);
        let _ = tokio::time::timeout(Duration::from_millis(1), alarm.wait_until(first)).await;
        let second = Instant::now() + Duration::from_millis(20);
        alarm.wait_until(second).await;
        assert!(Instant::now() >= second);
        // And one for an instant already past returns at once.
        let started = Instant::now();
        alarm.wait_until(started - Duration::from_millis(1)).await;
        assert!(started.elapsed() < Duration::from_millis(5));
    }

    /// A loop that keeps waiting for an instant already past still lets the tasks beside it
    /// run (a sender whose deadline passed before the work it waits for was done must not
    /// starve that work).
    #[tokio::test(flavor = "current_thread")]
    async fn a_past_instant_still_yields_to_other_tasks() {
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        tokio::spawn(async move { flag.store(true, std::sync::atomic::Ordering::SeqCst) });
        let mut alarm = Alarm::new();
        let past = Instant::now() - Duration::from_millis(1);
        for _ in 0..1_000 {
            alarm.wait_until(past).await;
            if ran.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
        }
        panic!("1 000 waits for a past instant never yielded to the spawned task");
    }

    /// Under tokio's paused clock (which a kernel timer does not follow), tokio's sleep still
    /// ends the wait.
    #[tokio::test(start_paused = true)]
    async fn works_under_the_paused_clock() {
        let mut alarm = Alarm::new();
        let at = Instant::now() + Duration::from_hours(1);
        alarm.wait_until(at).await;
        assert!(Instant::now() >= at);
    }
}
