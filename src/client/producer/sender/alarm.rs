//! The sender's alarm: wakes it at an instant, to the tenth of a millisecond rather than to the
//! next millisecond or two, and lets callers set it without waking the sender.
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
//! The [`Bell`]: a caller that opens a batch needs the sender awake when the batch's linger
//! ends, not now. Waking it now cost a sequential publish a thread's wake-up (another worker
//! unparked, the sender's loop run to learn a deadline, the worker parked again) on top of the
//! one at the linger's end. The caller sets the shared timer for the batch's deadline instead,
//! a system call on its own thread; the sender, which always waits on the timer's readiness,
//! wakes then.
//!
//! The invariants:
//! - [`Alarm::wait_until`] never returns later than tokio's sleep would (the sleep runs beside
//!   the timerfd, which also keeps the alarm working under tokio's paused test clock, which a
//!   kernel timer does not follow), and never before its instant unless a bell was rung for an
//!   earlier one since the sender last [looked](Alarm::looked) or the timer last fired.
//! - The timer never moves later than an instant asked since the sender last looked: a ring or
//!   a wait only ever lowers the instant asked, sets the timer for it, and sets it again if
//!   someone lowered it meanwhile. The sender looks (forgets what was asked) before it reads
//!   the queues, so a batch whose ring found an earlier instant already asked is in the queues
//!   the sender reads when that earlier instant wakes it.

use tokio::time::Instant;

/// A reusable one-shot timer for one task.
#[derive(Debug)]
pub(super) struct Alarm {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    precise: Option<std::sync::Arc<linux::Timer>>,
}

/// Sets the sender's alarm from another task, without waking the sender now.
#[derive(Debug, Clone)]
pub(in crate::client::producer) struct Bell {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    timer: std::sync::Arc<linux::Timer>,
}

impl Bell {
    /// Has the sender woken by `at` (or earlier); `false` when the timer cannot be set, and
    /// the caller must wake the sender itself.
    pub(in crate::client::producer) fn ring_by(&self, at: Instant) -> bool {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        return self.timer.ask_by(at);
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = at;
            false
        }
    }
}

impl Alarm {
    /// An alarm; on Linux backed by a timerfd when one can be made (else tokio's timer alone).
    pub(super) fn new() -> Alarm {
        Alarm {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            precise: linux::Timer::new().map(std::sync::Arc::new),
        }
    }

    /// The bell that sets this alarm from other tasks, if it has a timer they can set.
    pub(super) fn bell(&self) -> Option<Bell> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        return self.precise.as_ref().map(|timer| Bell {
            timer: std::sync::Arc::clone(timer),
        });
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        None
    }

    /// Forgets the instants asked so far: called before the sender reads the queues, whose
    /// contents then say what it must wake for.
    pub(super) fn looked(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(timer) = &self.precise {
            timer.forget();
        }
    }

    /// Waits until `at`, or until a bell rung for an earlier instant.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wait dropped early leaves the timer set for `at`; the next call sets it
    /// again for its own instant once the sender has looked.
    pub(super) async fn wait_until(&mut self, at: Instant) {
        let sleep = tokio::time::sleep_until(at);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(timer) = &self.precise {
            let left = at.saturating_duration_since(Instant::now());
            // Passed already: tokio's sleep ends the wait, and it counts against the task's
            // cooperative budget, so a loop that keeps waiting for a past instant still yields
            // to the tasks beside it. Far: a millisecond late is nothing (an idle wait, a retry
            // backoff), tokio's timer alone. Either way the timer's readiness is still awaited,
            // for the bells.
            let near = !left.is_zero() && left <= linux::FAR;
            if near && !timer.ask_by(at) {
                sleep.await;
                return;
            }
            tokio::select! {
                biased;
                () = timer.fired() => {}
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
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use nix::errno::Errno;
    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFlags, TimerSetTimeFlags};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    use tokio::time::Instant;

    /// Beyond this, a wait is left to tokio's timer: precision matters for a linger, which is
    /// milliseconds, not for a wait of a second.
    pub(super) const FAR: Duration = Duration::from_millis(100);

    /// Nothing asked.
    const NOTHING: u64 = u64::MAX;

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

    /// A non-blocking `CLOCK_MONOTONIC` timerfd registered with tokio's reactor, which the
    /// sender waits on and callers may set.
    #[derive(Debug)]
    pub(super) struct Timer {
        fd: AsyncFd<Owned>,
        /// The earliest instant asked since the sender last looked, in nanoseconds after
        /// `base` ([`NOTHING`]: none).
        asked: AtomicU64,
        base: Instant,
    }

    impl Timer {
        pub(super) fn new() -> Option<Timer> {
            let made = nix::sys::timerfd::TimerFd::new(
                ClockId::CLOCK_MONOTONIC,
                TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
            )
            .map_err(std::io::Error::from)
            .and_then(|timer| register(Owned(timer)));
            match made {
                Ok(fd) => Some(Timer {
                    fd,
                    asked: AtomicU64::new(NOTHING),
                    base: Instant::now(),
                }),
                Err(e) => {
                    tracing::debug!(error = %e, "no timerfd: the producer lingers on tokio's timer (up to 2 ms late)");
                    None
                }
            }
        }

        fn nanos(&self, at: Instant) -> u64 {
            let after = at.saturating_duration_since(self.base).as_nanos();
            u64::try_from(after).unwrap_or(NOTHING - 1).min(NOTHING - 1)
        }

        /// Sets the timer to fire at `nanos` after the base; `false` when it cannot be set.
        fn set(&self, nanos: u64) -> bool {
            let at = self.base + Duration::from_nanos(nanos);
            // Never zero: that would disarm it.
            let left = at
                .saturating_duration_since(Instant::now())
                .max(Duration::from_nanos(1));
            self.fd
                .get_ref()
                .0
                .set(
                    Expiration::OneShot(TimeSpec::from_duration(left)),
                    TimerSetTimeFlags::empty(),
                )
                .is_ok()
        }

        /// Has the timer fire by `at`: lowers the instant asked to `at` and sets the timer
        /// for it, unless an instant no later is asked already. `false` when the timer cannot
        /// be set.
        pub(super) fn ask_by(&self, at: Instant) -> bool {
            let wanted = self.nanos(at);
            let mut asked = self.asked.load(Ordering::SeqCst);
            loop {
                if asked <= wanted {
                    return true;
                }
                match self.asked.compare_exchange_weak(
                    asked,
                    wanted,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(_) => break,
                    Err(now_asked) => asked = now_asked,
                }
            }
            // Another task may lower the instant between the exchange and the setting, and
            // its setting may come first: set again for whatever is asked now, until what was
            // set is what is asked (or the sender looked, and forgot it).
            let mut setting = wanted;
            loop {
                if !self.set(setting) {
                    return false;
                }
                let asked = self.asked.load(Ordering::SeqCst);
                if asked >= setting {
                    return true;
                }
                setting = asked;
            }
        }

        /// Forgets what was asked (the sender is about to read the queues).
        pub(super) fn forget(&self) {
            // A read-modify-write: it reads the last ring's exchange, so whatever that caller
            // queued before ringing is seen by the sender's next read of the queues.
            self.asked.swap(NOTHING, Ordering::SeqCst);
        }

        /// Waits for the timer to fire; pending forever when it cannot be read (the caller's
        /// tokio sleep ends the wait then).
        ///
        /// # Cancel safety
        ///
        /// Cancel safe: an expiry not yet read stays readable for the next wait.
        pub(super) async fn fired(&self) {
            loop {
                let Ok(mut ready) = self.fd.readable().await else {
                    return std::future::pending().await;
                };
                match self.fd.get_ref().0.wait() {
                    Ok(()) => {
                        // The expiry is read, so the timer is not readable until it is set
                        // again and fires: said now, the next wait does not begin with a read
                        // that finds nothing (a system call per linger).
                        ready.clear_ready();
                        // What was asked is due: a later instant asked from now on sets the
                        // timer again (the same read-modify-write as the sender's look).
                        self.forget();
                        return;
                    }
                    // Readiness left over from an expiry that a later setting has reset.
                    Err(Errno::EAGAIN) => ready.clear_ready(),
                    Err(_) => return std::future::pending().await,
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

    /// A wait dropped before its instant leaves nothing behind once the sender has looked:
    /// the next wait, for a later instant, does not end at the earlier one.
    #[tokio::test]
    async fn a_dropped_wait_does_not_end_the_next_one_early() {
        let mut alarm = Alarm::new();
        let first = Instant::now() + Duration::from_millis(3);
        let _ = tokio::time::timeout(Duration::from_millis(1), alarm.wait_until(first)).await;
        // As the sender does before each round.
        alarm.looked();
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

    /// A bell rung from another task ends a wait for a far instant at the ring's instant: not
    /// before it, and not at the wait's own.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ring_ends_a_far_wait_at_its_instant() {
        let mut alarm = Alarm::new();
        let bell = alarm.bell().expect("a timerfd on Linux");
        alarm.looked();
        let rung_for = Instant::now() + Duration::from_millis(5);
        let ringer = tokio::spawn(async move { bell.ring_by(rung_for) });
        assert!(ringer.await.expect("the ringing task"));
        // A later ring does not move the timer later.
        let far = Instant::now() + Duration::from_hours(1);
        alarm.wait_until(far).await;
        let now = Instant::now();
        assert!(
            now >= rung_for,
            "woke {:?} before the ring's instant",
            rung_for - now
        );
        assert!(
            now - rung_for < Duration::from_millis(500),
            "woke {:?} after the ring's instant",
            now - rung_for
        );
    }

    /// Rings never move the timer later: of two rings, the earlier instant wakes the wait,
    /// whichever came first.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test]
    async fn the_earliest_ring_wins() {
        let mut alarm = Alarm::new();
        let bell = alarm.bell().expect("a timerfd on Linux");
        let early = Instant::now() + Duration::from_millis(5);
        assert!(bell.ring_by(early + Duration::from_millis(200)));
        assert!(bell.ring_by(early));
        assert!(bell.ring_by(early + Duration::from_millis(400)));
        alarm
            .wait_until(Instant::now() + Duration::from_hours(1))
            .await;
        let now = Instant::now();
        assert!(now >= early);
        assert!(
            now < early + Duration::from_millis(150),
            "{:?} late",
            now - early
        );
    }

    /// The sender's round against callers that queue and ring from other threads, as the
    /// producer does: every item queued is taken by the round after its ring's instant, never
    /// left for the sender's far wait. A ring lost between the sender's look and its wait would
    /// leave its item for an hour.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_ring_is_lost_between_a_look_and_a_wait() {
        const ITEMS: u32 = 300;
        use std::sync::{Arc, Mutex};

        let mut alarm = Alarm::new();
        let bell = alarm.bell().expect("a timerfd on Linux");
        let queue: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
        let callers = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move {
                for i in 0..ITEMS {
                    let due = Instant::now() + Duration::from_micros(200 + u64::from(i % 7) * 150);
                    queue
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, due));
                    assert!(bell.ring_by(due));
                    tokio::time::sleep(Duration::from_micros(u64::from(i % 5) * 300)).await;
                }
            })
        };
        let mut taken = 0;
        let mut latest = Duration::ZERO;
        let give_up = Instant::now() + Duration::from_mins(1);
        loop {
            alarm.looked();
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .retain(|&(_, due)| {
                    if now >= due {
                        taken += 1;
                        latest = latest.max(now - due);
                        false
                    } else {
                        next = Some(next.map_or(due, |n| n.min(due)));
                        true
                    }
                });
            assert!(
                Instant::now() < give_up,
                "{taken} of {ITEMS} taken in a minute"
            );
            if taken == ITEMS {
                break;
            }
            // The far wait stands for the sender's idle wait: only a ring (or an item seen
            // above) ends it in time.
            alarm
                .wait_until(next.unwrap_or(now + Duration::from_hours(1)))
                .await;
        }
        callers.await.expect("the callers");
        assert!(
            latest < Duration::from_millis(500),
            "an item waited {latest:?} past its instant"
        );
    }
}
