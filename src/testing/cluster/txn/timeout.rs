//! The coordinator's transaction timeout: an open transaction older than its
//! `transaction.timeout.ms` is aborted and its producer fenced.
//!
//! Kafka looks for expired transactions every
//! `transaction.abort.timed.out.transaction.cleanup.interval.ms`; here a timer per transaction
//! fires at its deadline, on the runtime of the request that began it (so a test's paused
//! clock drives it), and every transactional request checks first as well.

use std::sync::{Arc, Weak};

use tokio::time::Instant;

use super::super::Shared;
use super::{Status, fence_and_abort};

/// Arms the timer of `id`'s transaction number `serial`, which expires at `deadline`.
pub(super) fn arm(shared: &Arc<Shared>, id: &str, serial: u64, deadline: Instant) {
    // A handler called outside a runtime (a unit test) relies on the per-request check.
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let id = id.to_owned();
    runtime.spawn(async move {
        tokio::time::sleep_until(deadline).await;
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let aborted = {
            let mut state = shared.state();
            let due = state.transactions.get(&id).is_some_and(|t| {
                t.status == Status::Ongoing
                    && t.serial == serial
                    && t.started + t.timeout <= Instant::now()
            });
            if due {
                fence_and_abort(&mut state, &id);
            }
            due
        };
        if aborted {
            shared.changed.notify_waiters();
        }
    });
}
