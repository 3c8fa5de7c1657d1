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
//! A near wait (up to 100 ms) waits on the timerfd alone. Registering tokio's sleep beside it
//! cost a system call and a wake-up per wait: tokio's driver is told of a timer earlier than
//! the one it parks for by a write to its eventfd, even from its own thread, and its next park
//! returns at once for it. The sleep stays for far waits, and is the fallback when the timer
//! cannot be set or read. It is one sleep, kept registered and moved: a far wait is mostly
//! for the answer to the request just sent, a little later than the last one's, and a sleep
//! moved later is a number changed, where a new sleep earlier than the driver's next wake is
//! that eventfd write again.
//!
//! The invariants:
//! - [`Alarm::wait_until`] never returns before its instant unless a bell was rung for an
//!   earlier one since the sender last [looked](Alarm::looked) or the timer last fired, and no
//!   later than tokio's sleep would: a far wait runs the sleep beside the timerfd (which also
//!   keeps far waits working under tokio's paused test clock, which a kernel timer does not
//!   follow; a near wait there ends in real time), and a near wait falls back to the sleep
//!   when the timer cannot be set or read.
//! - The timer never moves later than an instant asked since the sender last looked: a ring or
//!   a wait only ever lowers the instant asked, sets the timer for it, and sets it again if
//!   someone lowered it meanwhile. The sender looks (forgets what was asked) before it reads
//!   the queues, so a batch whose ring found an earlier instant already asked is in the queues
//!   the sender reads when that earlier instant wakes it.
//! - What the timer is set for is known: a setting and its record change together, under one
//!   lock (the record first, so that it also says what a setting under way will set), and so
//!   do the taking of an expiry and the record's clearing.
//! - An expiry is taken by the clock, not by reading the timer: readiness means the timer
//!   fired when the real-clock instant its setting expires at has passed (kept with the lock,
//!   taken before the setting's system call, so the kernel's expiry is no earlier). A setting
//!   resets the kernel's count of expiries, and tokio's reactor is edge-triggered, so an
//!   expiry left unread is no readiness later; readiness whose instant has not come is left
//!   over from a setting since reset, and is dropped. The real clock, not tokio's: under
//!   tokio's paused test clock a near wait still ends in real time, as the kernel's timer
//!   does. A setting for the instant the record
//!   holds (the sender's wait for the batch whose caller rang) is no system call and takes no
//!   lock: the record is read without it, and the only settings that can change it meanwhile
//!   are rings, which move the timer earlier or, when they raced another ring, set it again
//!   for the earliest instant asked.

use tokio::time::Instant;

/// A reusable one-shot timer for one task.
#[derive(Debug)]
pub(super) struct Alarm {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    precise: Option<std::sync::Arc<linux::Timer>>,
    /// tokio's sleep for far waits, made by the first and moved by the others.
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
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
            sleep: None,
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
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(timer) = &self.precise {
            let left = at.saturating_duration_since(Instant::now());
            // Passed already: tokio's sleep ends the wait, and it counts against the task's
            // cooperative budget, so a loop that keeps waiting for a past instant still yields
            // to the tasks beside it. Far: a millisecond late is nothing (an idle wait, a retry
            // backoff), tokio's timer, with the timer's readiness still awaited for the bells.
            let near = !left.is_zero() && left <= linux::FAR;
            if near {
                if timer.ask_by(at) && timer.fired().await.is_ok() {
                    return;
                }
                sleep_until(&mut self.sleep, at).await;
                return;
            }
            tokio::select! {
                biased;
                Ok(()) = timer.fired() => {}
                () = sleep_until(&mut self.sleep, at) => {}
            }
            return;
        }
        sleep_until(&mut self.sleep, at).await;
    }
}

/// The alarm's sleep, moved to `at` (made by the first call).
fn sleep_until(
    sleep: &mut Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    at: Instant,
) -> std::pin::Pin<&mut tokio::time::Sleep> {
    match sleep {
        Some(sleep) => {
            if sleep.deadline() != at {
                sleep.as_mut().reset(at);
            }
            sleep.as_mut()
        }
        none => none.insert(Box::pin(tokio::time::sleep_until(at))).as_mut(),
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux {
    use std::os::fd::{AsFd, AsRawFd, RawFd};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard, PoisonError};
    use std::time::Duration;

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
        /// What the timer is set for, or is being set for by the holder of `setting`, in
        /// nanoseconds after `base` ([`NOTHING`]: disarmed, or its expiry read); changed only
        /// under `setting`, with the setting or the read it records.
        armed: AtomicU64,
        /// Held across a setting of the timer, or the taking of its expiry, and the change of
        /// `armed`; holds when, on the real clock, the last setting fires (`None`: disarmed,
        /// or its expiry taken).
        setting: Mutex<Option<std::time::Instant>>,
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
                    armed: AtomicU64::new(NOTHING),
                    setting: Mutex::new(None),
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

        fn setting(&self) -> MutexGuard<'_, Option<std::time::Instant>> {
            // No panic can come between a setting's records and its system call: a poisoned
            // lock is taken over as it is.
            self.setting.lock().unwrap_or_else(PoisonError::into_inner)
        }

        /// Sets the timer to fire at `nanos` after the base (no system call when it is set
        /// for that already); `false` when it cannot be set.
        fn set(&self, nanos: u64) -> bool {
            if self.armed.load(Ordering::SeqCst) == nanos {
                return true;
            }
            let mut setting = self.setting();
            if self.armed.load(Ordering::SeqCst) == nanos {
                return true;
            }
            let at = self.base + Duration::from_nanos(nanos);
            // Never zero: that would disarm it.
            let left = at
                .saturating_duration_since(Instant::now())
                .max(Duration::from_nanos(1));
            // Recorded before the system call: a wait for this instant that reads the record
            // meanwhile (the sender, woken by the answer to the last batch, waiting for the one
            // this caller just queued) relies on the setting under way instead of queueing
            // behind it for the lock.
            self.armed.store(nanos, Ordering::SeqCst);
            // Read before the system call: the kernel counts `left` from a later moment.
            *setting = Some(std::time::Instant::now() + left);
            let set = self.fd.get_ref().0.set(
                Expiration::OneShot(TimeSpec::from_duration(left)),
                TimerSetTimeFlags::empty(),
            );
            if set.is_err() {
                // Only a broken descriptor refuses a valid setting, and then every setting
                // fails: each caller that rang wakes the sender itself.
                self.armed.store(NOTHING, Ordering::SeqCst);
                *setting = None;
            }
            set.is_ok()
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

        /// Waits for the timer to fire; the error when tokio cannot poll it (the caller's
        /// tokio sleep ends the wait then).
        ///
        /// # Cancel safety
        ///
        /// Cancel safe: readiness not yet taken stays for the next wait.
        pub(super) async fn fired(&self) -> std::io::Result<()> {
            loop {
                let mut ready = self.fd.readable().await?;
                let due = {
                    let mut setting = self.setting();
                    // No `read`: the clock says whether the setting's instant has come,
                    // without a system call per linger (see the invariants above).
                    let due = setting.is_some_and(|at| std::time::Instant::now() >= at);
                    if due {
                        *setting = None;
                        self.armed.store(NOTHING, Ordering::SeqCst);
                    }
                    due
                };
                // Taken, or left over from an expiry a later setting has reset: either way
                // the timer is not ready again until it fires again. tokio keeps readiness that
                // came after this wait began.
                ready.clear_ready();
                if due {
                    // What was asked is due: a later instant asked from now on sets the
                    // timer again (the same read-modify-write as the sender's look).
                    self.forget();
                    return Ok(());
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

    /// The far waits share one sleep, moved from wait to wait: a wait dropped before its
    /// instant does not end the next one early when the next is later, nor late when it is
    /// earlier.
    #[tokio::test]
    async fn far_waits_moved_either_way_end_at_their_instants() {
        let mut alarm = Alarm::new();
        let start = Instant::now();
        let first = start + Duration::from_millis(400);
        let _ = tokio::time::timeout(Duration::from_millis(5), alarm.wait_until(first)).await;
        alarm.looked();
        // Moved earlier: ends at its own instant, well before the first.
        let earlier = start + Duration::from_millis(200);
        alarm.wait_until(earlier).await;
        let now = Instant::now();
        assert!(now >= earlier);
        assert!(
            now < first,
            "ended {:?} after the earlier instant",
            now - earlier
        );
        // Dropped, then moved later: not ended at the dropped wait's instant.
        let dropped = Instant::now() + Duration::from_millis(150);
        let _ = tokio::time::timeout(Duration::from_millis(5), alarm.wait_until(dropped)).await;
        alarm.looked();
        let later = Instant::now() + Duration::from_millis(300);
        alarm.wait_until(later).await;
        assert!(Instant::now() >= later);
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
