//! The coordinator's transaction timeout: an open transaction older than its
//! `transaction.timeout.ms` is aborted and its producer fenced.
//!
//! Kafka looks for expired transactions every
//! `transaction.abort.timed.out.transaction.cleanup.interval.ms`; here one timer task per
//! transactional id sleeps until the deadline of its open transaction, on the runtime of the
//! request that began it (so a test's paused clock drives it), and ends once no transaction
//! of the id is open. Every transactional request checks first as well.

use std::sync::{Arc, Weak};

use tokio::time::Instant;

use super::super::Shared;
use super::super::state::State;
use super::{Status, fence_and_abort};

/// Makes sure a timer watches `id`, whose transaction just began and expires at `deadline`.
/// Called under the state lock.
pub(super) fn watch(shared: &Arc<Shared>, state: &mut State, id: &str, deadline: Instant) {
    let Some(txn) = state.transactions.get_mut(id) else {
        return;
    };
    if txn.timer {
        // The running task finds the new deadline when it wakes.
        return;
    }
    // A handler called outside a runtime (a unit test) relies on the per-request check.
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    txn.timer = true;
    let weak = Arc::downgrade(shared);
    runtime.spawn(run(weak, id.to_owned(), deadline));
}

/// Sleeps until the open transaction's deadline, aborts it if it is still open then, and
/// follows the id's next transactions while they keep coming.
async fn run(shared: Weak<Shared>, id: String, mut deadline: Instant) {
    loop {
        tokio::time::sleep_until(deadline).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let aborted = {
            let mut state = shared.state();
            let Some(txn) = state.transactions.get_mut(&id) else {
                return;
            };
            if txn.status != Status::Ongoing {
                txn.timer = false;
                return;
            }
            let due = txn.started + txn.timeout;
            if due > Instant::now() {
                // A later transaction of the same id: sleep on.
                deadline = due;
                false
            } else {
                txn.timer = false;
                fence_and_abort(&mut state, &id);
                true
            }
        };
        if aborted {
            shared.changed.notify_waiters();
            return;
        }
    }
}
