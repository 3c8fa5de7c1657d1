//! KIP-899 metadata recovery: when the client asks its bootstrap servers again.
//!
//! Invariant: the bootstrap servers are metadata candidates only while no answer has named a
//! broker yet, or while a rebootstrap is due; an answer that names brokers ends it, as
//! librdkafka decommissions its bootstrap brokers once it has learned the cluster's. A
//! rebootstrap becomes due (with [`MetadataRecovery::Rebootstrap`] only) when every known
//! broker failed in one metadata round, when no metadata could be had for the trigger time
//! since the first request after the last answer, or when a broker answers
//! `REBOOTSTRAP_REQUIRED` (KIP-1102). With [`MetadataRecovery::None`] the learned brokers are
//! all the client ever asks again.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// `metadata.recovery.strategy`: what the client does when none of the brokers it learned
/// of can give it metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetadataRecovery {
    /// `none`: it keeps asking the brokers it learned of, never the bootstrap servers again.
    None,
    /// `rebootstrap` (librdkafka's default): it asks the bootstrap servers again and takes
    /// the brokers their answer names.
    #[default]
    Rebootstrap,
}

impl MetadataRecovery {
    /// The strategy of a `metadata.recovery.strategy` value, `None` for another name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(MetadataRecovery::None),
            "rebootstrap" => Some(MetadataRecovery::Rebootstrap),
            _ => None,
        }
    }
}

/// The recovery state of one client.
#[derive(Debug)]
pub(crate) struct Recovery {
    strategy: MetadataRecovery,
    trigger: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// A rebootstrap is due: the next metadata round asks the bootstrap servers first.
    due: bool,
    /// When the first metadata request after the last answer began.
    failing_since: Option<Instant>,
    /// How many rebootstraps have begun, for logs and tests.
    count: u64,
}

impl Recovery {
    pub(crate) fn new(strategy: MetadataRecovery, trigger: Duration) -> Self {
        Recovery {
            strategy,
            trigger,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A metadata round begins: whether the bootstrap servers are due. Starts the trigger
    /// clock on the first round after an answer, and makes a rebootstrap due once it has run
    /// for the trigger time.
    pub(crate) fn round_begins(&self) -> bool {
        if self.strategy == MetadataRecovery::None {
            return false;
        }
        let mut state = self.state();
        let since = *state.failing_since.get_or_insert_with(Instant::now);
        if !state.due && since.elapsed() >= self.trigger {
            Self::begin(
                &mut state,
                format_args!("no metadata for {:?}", since.elapsed()),
            );
        }
        state.due
    }

    /// Asks for a rebootstrap for `reason`; whether one is now due (never with `none`).
    pub(crate) fn request(&self, reason: std::fmt::Arguments<'_>) -> bool {
        if self.strategy == MetadataRecovery::None {
            tracing::debug!(%reason, "metadata.recovery.strategy=none: not bootstrapping again");
            return false;
        }
        let mut state = self.state();
        if !state.due {
            Self::begin(&mut state, reason);
        }
        true
    }

    fn begin(state: &mut State, reason: std::fmt::Arguments<'_>) {
        state.due = true;
        state.count += 1;
        tracing::info!(%reason, "bootstrapping again (metadata.recovery.strategy=rebootstrap)");
    }

    /// A metadata answer arrived; `named_brokers` says it named brokers, which replace the
    /// bootstrap servers again.
    pub(crate) fn answered(&self, named_brokers: bool) {
        let mut state = self.state();
        state.failing_since = None;
        if named_brokers {
            state.due = false;
        }
    }

    /// How many rebootstraps have begun.
    pub(crate) fn count(&self) -> u64 {
        self.state().count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_trigger_time_counts_from_the_first_round_after_an_answer() {
        let r = Recovery::new(MetadataRecovery::Rebootstrap, Duration::from_mins(5));
        assert!(!r.round_begins());
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!r.round_begins());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(r.round_begins());
        assert_eq!(r.count(), 1);
        r.answered(true);
        assert!(!r.round_begins());
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!r.round_begins(), "the clock restarted with the answer");
    }

    #[tokio::test(start_paused = true)]
    async fn none_never_bootstraps_again() {
        let r = Recovery::new(MetadataRecovery::None, Duration::ZERO);
        assert!(!r.round_begins());
        assert!(!r.request(format_args!("all brokers down")));
        tokio::time::advance(Duration::from_hours(1)).await;
        assert!(!r.round_begins());
        assert_eq!(r.count(), 0);
    }

    #[test]
    fn a_request_is_due_until_an_answer_names_brokers() {
        let r = Recovery::new(MetadataRecovery::Rebootstrap, Duration::from_mins(5));
        assert!(r.request(format_args!("REBOOTSTRAP_REQUIRED")));
        assert!(r.request(format_args!("again")));
        assert_eq!(r.count(), 1, "one rebootstrap while one is due");
        r.answered(false);
        assert!(
            r.state().due,
            "an answer without brokers leaves the bootstrap servers on"
        );
        r.answered(true);
        assert!(!r.state().due);
    }

    #[test]
    fn names() {
        assert_eq!(
            MetadataRecovery::from_name("none"),
            Some(MetadataRecovery::None)
        );
        assert_eq!(
            MetadataRecovery::from_name("rebootstrap"),
            Some(MetadataRecovery::Rebootstrap)
        );
        assert_eq!(MetadataRecovery::from_name("other"), None);
    }
}
