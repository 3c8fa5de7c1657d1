//! When a client asks for its telemetry subscription and when it pushes: KIP-714's client state
//! machine, as the Java client runs it, without the I/O.
//!
//! Invariants:
//! - a broker's error that retrying cannot fix (an invalid request or record, an unsupported
//!   version, a code the client does not know) ends telemetry for the client's life;
//! - no step comes sooner than `floor` after a failed one, so a broker that keeps failing is
//!   never asked in a tight loop;
//! - the first push after a new subscription comes after a jittered interval (half to one and a
//!   half times it), so clients started together spread their pushes.

use std::time::Duration;

use kafka_protocol::error::ResponseError;

/// What the client does next, after `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Ask for the subscription (`GetTelemetrySubscriptions`).
    Subscribe { after: Duration },
    /// Push the subscribed metrics (`PushTelemetry`).
    Push { after: Duration },
    /// Telemetry is over for this client.
    Disabled,
}

/// What happened to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The broker answered without error. For a subscription: whether it asks for any metric.
    Ok { wants_metrics: bool },
    /// The broker answered with this error code.
    Refused(i16),
    /// No answer: the connection failed or the time ran out.
    Unanswered,
}

/// The step after a `GetTelemetrySubscriptions`: push within the interval when metrics are
/// wanted, ask again after it when none are.
pub(super) fn after_subscribe(
    outcome: Outcome,
    interval: Duration,
    floor: Duration,
    jitter: f64,
) -> Step {
    match outcome {
        Outcome::Ok {
            wants_metrics: true,
        } => Step::Push {
            after: interval.mul_f64(jitter.clamp(0.5, 1.5)),
        },
        Outcome::Ok {
            wants_metrics: false,
        } => Step::Subscribe { after: interval },
        Outcome::Refused(code) => after_refusal(code, interval, floor, true),
        Outcome::Unanswered => Step::Subscribe {
            after: floor.max(Duration::from_secs(1)).min(interval),
        },
    }
}

/// The step after a `PushTelemetry`.
pub(super) fn after_push(outcome: Outcome, interval: Duration, floor: Duration) -> Step {
    match outcome {
        Outcome::Ok { .. } => Step::Push { after: interval },
        Outcome::Refused(code) => after_refusal(code, interval, floor, false),
        // The subscription may have changed while the broker was away.
        Outcome::Unanswered => Step::Subscribe {
            after: floor.max(Duration::from_secs(1)).min(interval),
        },
    }
}

fn after_refusal(code: i16, interval: Duration, floor: Duration, subscribing: bool) -> Step {
    match ResponseError::try_from_code(code) {
        // The subscription changed, or the broker wants another codec: ask again now.
        Some(ResponseError::UnknownSubscriptionId | ResponseError::UnsupportedCompressionType) => {
            Step::Subscribe { after: floor }
        }
        // Too soon or too big: wait for the next interval (the push that follows is smaller,
        // or the tally has been reset).
        Some(ResponseError::ThrottlingQuotaExceeded | ResponseError::TelemetryTooLarge) => {
            let after = interval.max(floor);
            if subscribing {
                Step::Subscribe { after }
            } else {
                Step::Push { after }
            }
        }
        // A broker that is starting or moving things: not the client's fault.
        Some(e) if e.is_retriable() => Step::Subscribe {
            after: interval.max(floor),
        },
        _ => Step::Disabled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(30);
    const FLOOR: Duration = Duration::from_millis(100);

    fn code(e: ResponseError) -> i16 {
        e.code()
    }

    #[test]
    fn a_subscription_with_metrics_leads_to_a_jittered_push() {
        let ok = Outcome::Ok {
            wants_metrics: true,
        };
        assert_eq!(
            after_subscribe(ok, INTERVAL, FLOOR, 0.5),
            Step::Push {
                after: Duration::from_secs(15)
            }
        );
        assert_eq!(
            after_subscribe(ok, INTERVAL, FLOOR, 9.0),
            Step::Push {
                after: Duration::from_secs(45)
            }
        );
    }

    #[test]
    fn a_subscription_without_metrics_is_asked_again_after_its_interval() {
        let none = Outcome::Ok {
            wants_metrics: false,
        };
        assert_eq!(
            after_subscribe(none, INTERVAL, FLOOR, 1.0),
            Step::Subscribe { after: INTERVAL }
        );
    }

    #[test]
    fn pushes_repeat_every_interval() {
        let ok = Outcome::Ok {
            wants_metrics: true,
        };
        assert_eq!(
            after_push(ok, INTERVAL, FLOOR),
            Step::Push { after: INTERVAL }
        );
    }

    #[test]
    fn a_changed_subscription_or_codec_is_asked_for_at_once_but_not_in_a_tight_loop() {
        for e in [
            ResponseError::UnknownSubscriptionId,
            ResponseError::UnsupportedCompressionType,
        ] {
            assert_eq!(
                after_push(Outcome::Refused(code(e)), INTERVAL, FLOOR),
                Step::Subscribe { after: FLOOR }
            );
        }
    }

    #[test]
    fn throttled_or_too_large_waits_for_the_next_interval() {
        let throttled = Outcome::Refused(code(ResponseError::ThrottlingQuotaExceeded));
        assert_eq!(
            after_push(throttled, INTERVAL, FLOOR),
            Step::Push { after: INTERVAL }
        );
        assert_eq!(
            after_subscribe(throttled, INTERVAL, FLOOR, 1.0),
            Step::Subscribe { after: INTERVAL }
        );
        let large = Outcome::Refused(code(ResponseError::TelemetryTooLarge));
        assert_eq!(
            after_push(large, INTERVAL, FLOOR),
            Step::Push { after: INTERVAL }
        );
    }

    #[test]
    fn errors_retrying_cannot_fix_end_telemetry() {
        for e in [
            ResponseError::InvalidRequest,
            ResponseError::InvalidRecord,
            ResponseError::UnsupportedVersion,
        ] {
            assert_eq!(
                after_push(Outcome::Refused(code(e)), INTERVAL, FLOOR),
                Step::Disabled
            );
            assert_eq!(
                after_subscribe(Outcome::Refused(code(e)), INTERVAL, FLOOR, 1.0),
                Step::Disabled
            );
        }
        assert_eq!(
            after_push(Outcome::Refused(-999), INTERVAL, FLOOR),
            Step::Disabled
        );
    }

    #[test]
    fn a_lost_broker_is_asked_again_soon_for_the_subscription() {
        assert_eq!(
            after_push(Outcome::Unanswered, INTERVAL, FLOOR),
            Step::Subscribe {
                after: Duration::from_secs(1)
            }
        );
        assert_eq!(
            after_subscribe(Outcome::Unanswered, Duration::from_millis(500), FLOOR, 1.0),
            Step::Subscribe {
                after: Duration::from_millis(500)
            }
        );
    }
}
