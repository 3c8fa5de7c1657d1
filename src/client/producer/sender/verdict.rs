//! What becomes of a batch whose send failed: sent again, or failed for good, and whether the
//! producer needs a new epoch. A pure decision over what the sender knows, so each rule is
//! tested on its own.
//!
//! The invariant: a batch is sent again only where that cannot write it twice or out of
//! order. An idempotent batch keeps its sequence across retries (the broker recognises a
//! retry of what it wrote); a sequence error is retried only when an earlier batch of the
//! partition explains it, or when the epoch is bumped first (outside a transaction, which
//! cannot bump in its middle); a doomed transaction retries nothing; and a batch that gives
//! up after it had a sequence leaves a gap that only a new epoch closes.

use std::time::Duration;

use kafka_protocol::error::ResponseError;

use crate::client::error::Error;

/// What the sender knows of a batch that failed: each fact a yes or a no.
#[derive(Debug, Clone, Copy)]
#[allow(clippy::struct_excessive_bools)]
pub(super) struct Failure<'e> {
    pub error: &'e Error,
    /// The request may have been written although no answer says so (a connection lost
    /// with the request on the wire, an answer that lacks the partition).
    pub unknown_outcome: bool,
    pub idempotent: bool,
    pub transactional: bool,
    /// The open transaction failed or is being aborted.
    pub doomed: bool,
    /// An earlier batch of the partition is still out, or the partition is being resent.
    pub earlier_pending: bool,
    /// The batch had a sequence number (it went out under idempotence).
    pub sequenced: bool,
    /// Retries made so far, and the most allowed (`retries`).
    pub attempts: u32,
    pub retries: u32,
    /// `message.timeout.ms` has passed since the record was produced.
    pub expired: bool,
}

/// The decision.
#[derive(Debug)]
pub(super) enum Verdict {
    /// Every record of the batch fails with `error`.
    Fail {
        error: Error,
        /// The batch's sequence leaves a gap: the producer needs a new epoch.
        bump: bool,
        /// It was retriable but ran out of retries or time (an incident to log).
        gave_up: bool,
    },
    /// The batch goes out again, in its place in the partition's order.
    Retry {
        /// The broker lost the producer's state: only a new epoch helps.
        bump: bool,
        /// The leader may have moved: refresh the topic's metadata.
        refresh: bool,
    },
}

/// Errors after which the leader of the partition may have moved.
fn leadership(code: Option<ResponseError>) -> bool {
    matches!(
        code,
        Some(
            ResponseError::NotLeaderOrFollower
                | ResponseError::LeaderNotAvailable
                | ResponseError::UnknownTopicOrPartition
                | ResponseError::UnknownTopicId
                | ResponseError::FencedLeaderEpoch
                | ResponseError::UnknownLeaderEpoch
                | ResponseError::KafkaStorageError
                | ResponseError::NotEnoughReplicas
        )
    )
}

/// Decides what becomes of a failed batch.
pub(super) fn verdict(f: &Failure<'_>) -> Verdict {
    let code = f.error.code();
    let sequence_trouble = f.idempotent
        && matches!(
            code,
            Some(ResponseError::OutOfOrderSequenceNumber | ResponseError::UnknownProducerId)
        );
    // Either an earlier batch of this partition failed too (and this one will follow it in
    // order), or the broker lost our state: then only a new epoch helps, which a
    // transactional producer cannot take in the middle of a transaction.
    let retriable = !f.doomed
        && (f.error.is_retriable()
            || (sequence_trouble && (!f.transactional || f.earlier_pending)));
    if !retriable || f.attempts >= f.retries || f.expired {
        let error = if f.expired && retriable {
            Error::Timeout(format!("Local: Message timed out after {}", f.error))
        } else {
            f.error.clone()
        };
        return Verdict::Fail {
            error,
            bump: f.idempotent && f.sequenced,
            gave_up: retriable,
        };
    }
    Verdict::Retry {
        bump: sequence_trouble && !f.earlier_pending,
        refresh: f.unknown_outcome || leadership(code),
    }
}

/// The wait before retry number `attempts`: `retry.backoff.ms` doubled per attempt, up to
/// `retry.backoff.max.ms`.
pub(super) fn backoff_for((initial, max): (Duration, Duration), attempts: u32) -> Duration {
    let factor = 1u32 << attempts.min(16);
    initial.saturating_mul(factor).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(code: ResponseError) -> Error {
        Error::Broker {
            code,
            context: "producing to t-0".into(),
        }
    }

    #[track_caller]
    fn assert_retry(v: &Verdict, bump: bool, refresh: bool) {
        assert!(
            matches!(v, Verdict::Retry { bump: b, refresh: r } if *b == bump && *r == refresh),
            "expected a retry (bump {bump}, refresh {refresh}), got {v:?}"
        );
    }

    #[track_caller]
    fn assert_fail(v: &Verdict, error: &Error, bump: bool, gave_up: bool) {
        assert!(
            matches!(v, Verdict::Fail { error: e, bump: b, gave_up: g }
                if e.to_string() == error.to_string() && *b == bump && *g == gave_up),
            "expected a failure with {error} (bump {bump}, gave up {gave_up}), got {v:?}"
        );
    }

    /// An idempotent, non-transactional first failure of a sequenced batch.
    fn failure(error: &Error) -> Failure<'_> {
        Failure {
            error,
            unknown_outcome: false,
            idempotent: true,
            transactional: false,
            doomed: false,
            earlier_pending: false,
            sequenced: true,
            attempts: 0,
            retries: 5,
            expired: false,
        }
    }

    #[test]
    fn a_moved_leader_is_retried_after_a_metadata_refresh() {
        let e = broker(ResponseError::NotLeaderOrFollower);
        assert_retry(&verdict(&failure(&e)), false, true);
        // A retriable error that says nothing of the leader keeps the metadata.
        let e = broker(ResponseError::RequestTimedOut);
        assert_retry(&verdict(&failure(&e)), false, false);
    }

    #[test]
    fn a_request_lost_on_the_wire_is_retried_and_the_leader_looked_up() {
        let e = Error::Timeout("no answer".into());
        let f = Failure {
            unknown_outcome: true,
            ..failure(&e)
        };
        assert_retry(&verdict(&f), false, true);
    }

    #[test]
    fn a_batch_out_of_retries_fails_and_its_sequence_gap_asks_for_a_new_epoch() {
        let e = broker(ResponseError::NotLeaderOrFollower);
        let f = Failure {
            attempts: 5,
            ..failure(&e)
        };
        assert_fail(&verdict(&f), &e, true, true);
        // Without idempotence there is no sequence to mind.
        let f = Failure {
            attempts: 5,
            idempotent: false,
            sequenced: false,
            ..failure(&e)
        };
        assert!(matches!(verdict(&f), Verdict::Fail { bump: false, .. }));
    }

    #[test]
    fn a_batch_past_its_message_timeout_fails_as_timed_out() {
        let e = broker(ResponseError::NotEnoughReplicas);
        let f = Failure {
            expired: true,
            ..failure(&e)
        };
        let Verdict::Fail { error, gave_up, .. } = verdict(&f) else {
            panic!("an expired batch is not retried");
        };
        assert!(gave_up);
        assert!(
            matches!(&error, Error::Timeout(t) if t.starts_with("Local: Message timed out")),
            "{error}"
        );
    }

    #[test]
    fn an_error_for_good_fails_at_once_with_its_own_error() {
        let e = broker(ResponseError::MessageTooLarge);
        let f = Failure {
            sequenced: false,
            ..failure(&e)
        };
        assert_fail(&verdict(&f), &e, false, false);
    }

    #[test]
    fn a_sequence_error_follows_an_earlier_failure_or_bumps_the_epoch() {
        let e = broker(ResponseError::OutOfOrderSequenceNumber);
        // An earlier batch of the partition failed too: this one follows it in order.
        let f = Failure {
            earlier_pending: true,
            ..failure(&e)
        };
        assert_retry(&verdict(&f), false, false);
        // Nothing explains it: the broker lost our state, a new epoch first.
        assert_retry(&verdict(&failure(&e)), true, false);
        let e = broker(ResponseError::UnknownProducerId);
        assert!(matches!(
            verdict(&failure(&e)),
            Verdict::Retry { bump: true, .. }
        ));
    }

    #[test]
    fn a_transaction_cannot_bump_so_an_unexplained_sequence_error_fails_it() {
        let e = broker(ResponseError::OutOfOrderSequenceNumber);
        let f = Failure {
            transactional: true,
            ..failure(&e)
        };
        assert!(matches!(verdict(&f), Verdict::Fail { gave_up: false, .. }));
        let f = Failure {
            transactional: true,
            earlier_pending: true,
            ..failure(&e)
        };
        assert!(matches!(verdict(&f), Verdict::Retry { bump: false, .. }));
    }

    #[test]
    fn a_doomed_transaction_retries_nothing() {
        let e = broker(ResponseError::NotLeaderOrFollower);
        let f = Failure {
            transactional: true,
            doomed: true,
            ..failure(&e)
        };
        assert!(matches!(verdict(&f), Verdict::Fail { gave_up: false, .. }));
    }

    #[test]
    fn retries_back_off_exponentially_up_to_the_ceiling() {
        let config = (Duration::from_millis(100), Duration::from_secs(1));
        assert_eq!(backoff_for(config, 0), Duration::from_millis(100));
        assert_eq!(backoff_for(config, 1), Duration::from_millis(200));
        assert_eq!(backoff_for(config, 3), Duration::from_millis(800));
        assert_eq!(backoff_for(config, 4), Duration::from_secs(1));
        assert_eq!(backoff_for(config, u32::MAX), Duration::from_secs(1));
    }
}
