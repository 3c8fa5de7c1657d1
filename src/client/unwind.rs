//! A task's work whose panic becomes an error, so that what the task reports back (and the
//! bookkeeping its owner keeps for it: requests in flight, batches, a pending refresh) always
//! comes back.
//!
//! The client's background loops spawn one task per request and learn its outcome from the
//! value the task returns. A panic inside the work (a bug in a decoder, say) would end the
//! task with nothing returned: its partitions would stay "in flight" and stall with no error.
//! Wrapped, the panic is logged at ERROR and the loop sees a failed request, which it retries
//! or reports like any other.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

use crate::client::error::{Error, Result};

/// Runs `work`; a panic in it is logged and returned as [`Error::Protocol`] naming `what`.
///
/// Cancel safety: as cancel safe as `work` (dropping this drops `work`).
pub(crate) async fn unwound<T>(what: &str, work: impl Future<Output = Result<T>>) -> Result<T> {
    // The work owns what it touches or shares it behind locks that tolerate poisoning, so
    // nothing half-changed is observed after the unwind.
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let why = message(panic.as_ref());
            tracing::error!(task = what, panic = %why, "a client task panicked; its work is reported as failed");
            Err(Error::Protocol(format!("{what} panicked: {why}")))
        }
    }
}

/// Runs `work` now; a panic in it is logged and returned as [`Error::Protocol`] naming `what`
/// (for work a loop does in its own task, such as decoding an answer it polled).
pub(crate) fn unwound_now<T>(what: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(panic) => {
            let why = message(panic.as_ref());
            tracing::error!(task = what, panic = %why, "client work panicked; it is reported as failed");
            Err(Error::Protocol(format!("{what} panicked: {why}")))
        }
    }
}

fn message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_an_error_naming_the_work() {
        let value = 7;
        let result: Result<()> = unwound("decoding a fetch", async move {
            assert!(value != 7, "bad count {value}");
            Ok(())
        })
        .await;
        let error = result.expect_err("the panic is an error").to_string();
        assert!(
            error.contains("decoding a fetch panicked: bad count 7"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn work_that_finishes_is_passed_through() {
        assert_eq!(unwound("x", async { Ok(3) }).await.ok(), Some(3));
        let e = unwound::<()>("x", async { Err(Error::Timeout("t".into())) }).await;
        assert!(matches!(e, Err(Error::Timeout(_))));
    }
}
