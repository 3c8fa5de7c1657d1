//! The state of a transactional producer, shared by its calls and its sender task under the
//! accumulator's lock.
//!
//! Invariants it keeps:
//! - A record enters the accumulator only while a transaction is open and not completing; the
//!   check runs under the lock that `commit` and `abort` close the transaction under, so each
//!   record belongs to exactly one transaction: the one whose commit or abort settles it.
//! - With the classic protocol, no batch of a partition leaves before the coordinator has the
//!   partition in the transaction (`registered`).
//! - The first failure of a transaction sticks (`error`): the sender fails the transaction's
//!   unsent batches with it, `commit` refuses with it, and only `abort` clears it (or `init`,
//!   when it is fatal).

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::error::{TransactionError, TransactionErrorKind as Kind};
use super::protocol::TransactionProtocol;

/// Where the producer is in its life.
#[derive(Debug, Clone)]
pub(crate) enum Phase {
    /// No producer id yet.
    Uninitialized,
    /// `init` runs (or ran and was dropped before finishing).
    Initializing,
    /// Between transactions.
    Ready,
    /// A transaction is open.
    Open,
    /// `commit` runs, or failed in a way that only another `commit` can settle.
    Committing,
    /// `abort` runs (or ran and was dropped before finishing).
    Aborting,
    /// Unusable until `init`.
    Failed(TransactionError),
}

#[derive(Debug)]
pub(crate) struct TxnState {
    pub id: Arc<str>,
    /// The id as Produce requests carry it.
    pub wire_id: StrBytes,
    pub protocol: TransactionProtocol,
    pub phase: Phase,
    /// Partitions the coordinator has in the open transaction (classic protocol).
    pub registered: HashSet<(Arc<str>, i32)>,
    /// An `AddPartitionsToTxn` is in flight.
    pub registering: bool,
    /// The coordinator knows of the open transaction, so it must be ended with `EndTxn`.
    pub started: bool,
    /// The first failure of the open transaction.
    pub error: Option<TransactionError>,
    /// When the open transaction began (to explain a fence by the transaction timeout).
    pub opened_at: Option<Instant>,
}

impl TxnState {
    pub fn new(id: &str) -> Self {
        TxnState {
            id: Arc::from(id),
            wire_id: StrBytes::from_string(id.to_owned()),
            protocol: TransactionProtocol::Classic,
            phase: Phase::Uninitialized,
            registered: HashSet::new(),
            registering: false,
            started: false,
            error: None,
            opened_at: None,
        }
    }

    fn refusal(&self, kind: Kind, message: &str) -> TransactionError {
        TransactionError::new(kind, &self.id, message)
    }

    /// Why a call that needs an open, healthy transaction cannot run now.
    pub fn check_open(&self) -> Result<(), TransactionError> {
        match &self.phase {
            Phase::Open => self.error.clone().map_or(Ok(()), Err),
            Phase::Failed(e) => Err(e.clone()),
            Phase::Uninitialized | Phase::Initializing => Err(self.refusal(
                Kind::Uninitialized,
                "the producer is not initialized: call init first",
            )),
            Phase::Ready => Err(self.refusal(
                Kind::NoTransaction,
                "no transaction is open: call begin first",
            )),
            // A commit that failed stays here until the abort: its failure says what to do.
            Phase::Committing | Phase::Aborting => Err(self.error.clone().unwrap_or_else(|| {
                self.refusal(
                    Kind::Busy,
                    "the transaction is being completed; begin the next one after that",
                )
            })),
        }
    }

    /// Opens a transaction.
    pub fn begin(&mut self) -> Result<(), TransactionError> {
        match &self.phase {
            Phase::Ready => {
                self.phase = Phase::Open;
                self.registered.clear();
                self.started = false;
                self.error = None;
                self.opened_at = Some(Instant::now());
                Ok(())
            }
            Phase::Open | Phase::Committing | Phase::Aborting => Err(self.refusal(
                Kind::Busy,
                "a transaction is already open: commit or abort it first",
            )),
            _ => self.check_open(),
        }
    }

    /// Closes the open transaction to new records for a commit (or resumes a commit that did
    /// not finish).
    pub fn start_commit(&mut self) -> Result<(), TransactionError> {
        match &self.phase {
            Phase::Open | Phase::Committing => {
                self.phase = Phase::Committing;
                Ok(())
            }
            Phase::Aborting => Err(self.refusal(
                Kind::Busy,
                "an abort is under way: call abort again to finish it",
            )),
            _ => self.check_open(),
        }
    }

    /// Closes the open transaction for an abort (or resumes one that did not finish).
    pub fn start_abort(&mut self) -> Result<(), TransactionError> {
        match &self.phase {
            Phase::Open | Phase::Aborting => {
                self.phase = Phase::Aborting;
                Ok(())
            }
            Phase::Committing if self.error.is_some() => {
                self.phase = Phase::Aborting;
                Ok(())
            }
            Phase::Committing => Err(self.refusal(
                Kind::Busy,
                "a commit is under way and may have reached the coordinator: call commit again to finish it",
            )),
            _ => self.check_open(),
        }
    }

    /// Starts (or restarts) `init`: allowed before any transaction, between transactions
    /// and after a fatal error.
    pub fn start_init(&mut self) -> Result<(), TransactionError> {
        match &self.phase {
            Phase::Uninitialized | Phase::Initializing | Phase::Ready | Phase::Failed(_) => {
                self.phase = Phase::Initializing;
                self.clear();
                Ok(())
            }
            _ => Err(self.refusal(
                Kind::Busy,
                "a transaction is open: commit or abort it before init",
            )),
        }
    }

    fn clear(&mut self) {
        self.registered.clear();
        self.started = false;
        self.error = None;
        self.opened_at = None;
    }

    /// The transaction ended (or `init` finished): ready for the next one.
    pub fn finish(&mut self) {
        self.phase = Phase::Ready;
        self.clear();
    }

    /// The producer is unusable until `init`.
    pub fn fail(&mut self, error: TransactionError) {
        self.phase = Phase::Failed(error);
    }

    /// A failure inside the open transaction: the first one sticks, unless a fatal one follows
    /// an abortable one.
    pub fn failed(&mut self, error: TransactionError) {
        let replace = match &self.error {
            None => true,
            Some(old) => !old.is_fatal() && error.is_fatal(),
        };
        if replace {
            self.error = Some(error);
        }
    }

    /// The error to fail unsent batches with, when they must not be sent: the transaction is
    /// aborting, has failed, or the producer has.
    pub fn drop_unsent(&self) -> Option<TransactionError> {
        match &self.phase {
            Phase::Failed(e) => return Some(e.clone()),
            Phase::Uninitialized | Phase::Initializing => {
                return Some(self.refusal(
                    Kind::Uninitialized,
                    "the producer was re-initialized before this record was sent",
                ));
            }
            _ => {}
        }
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        matches!(self.phase, Phase::Aborting).then(|| {
            self.refusal(
                Kind::Abortable,
                "the transaction was aborted before this record was sent",
            )
        })
    }

    /// Whether a batch of `topic`-`partition` may be sent now, as far as registration goes.
    pub fn may_send(&self, topic: &Arc<str>, partition: i32) -> bool {
        !self.protocol.registers_explicitly()
            || self.registered.contains(&(topic.clone(), partition))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(r: Result<(), TransactionError>) -> Option<Kind> {
        r.err().map(|e| e.kind())
    }

    #[test]
    fn begin_commit_abort_follow_the_state_machine() {
        let mut s = TxnState::new("t");
        assert_eq!(kind(s.begin()), Some(Kind::Uninitialized));
        assert_eq!(kind(s.start_init()), None);
        s.finish();
        assert_eq!(kind(s.start_commit()), Some(Kind::NoTransaction));
        assert_eq!(kind(s.start_abort()), Some(Kind::NoTransaction));
        assert_eq!(kind(s.check_open()), Some(Kind::NoTransaction));
        assert_eq!(kind(s.begin()), None);
        assert_eq!(kind(s.begin()), Some(Kind::Busy), "a second begin");
        assert_eq!(kind(s.check_open()), None);
        assert_eq!(kind(s.start_init()), Some(Kind::Busy));
        assert_eq!(kind(s.start_commit()), None);
        assert_eq!(
            kind(s.check_open()),
            Some(Kind::Busy),
            "no sends while committing"
        );
        assert_eq!(kind(s.begin()), Some(Kind::Busy));
        assert_eq!(kind(s.start_abort()), Some(Kind::Busy), "commit may be out");
        assert_eq!(kind(s.start_commit()), None, "a commit resumes");
        s.finish();
        assert_eq!(kind(s.begin()), None);
        assert_eq!(kind(s.start_abort()), None);
        assert!(s.drop_unsent().is_some(), "an abort drops unsent batches");
        s.finish();
        assert!(s.drop_unsent().is_none());
    }

    #[test]
    fn failures_stick_until_abort_or_init() {
        let mut s = TxnState::new("t");
        let _ = s.start_init();
        s.finish();
        let _ = s.begin();
        let id = s.id.clone();
        s.failed(TransactionError::new(Kind::Abortable, &id, "first"));
        s.failed(TransactionError::new(Kind::Abortable, &id, "second"));
        let e = s.check_open().err();
        assert!(e.is_some_and(|e| e.to_string().contains("first")));
        s.failed(TransactionError::new(Kind::Fenced, &id, "fenced"));
        assert_eq!(kind(s.check_open()), Some(Kind::Fenced), "fatal wins");
        assert_eq!(kind(s.start_commit()), None);
        assert_eq!(
            kind(s.check_open()),
            Some(Kind::Fenced),
            "a failed commit says why"
        );
        assert_eq!(
            kind(s.begin()),
            Some(Kind::Busy),
            "it must be aborted first"
        );
        assert_eq!(
            kind(s.start_abort()),
            None,
            "a failed commit can be aborted"
        );
        s.fail(TransactionError::new(Kind::Fenced, &id, "fenced"));
        assert_eq!(kind(s.begin()), Some(Kind::Fenced));
        assert_eq!(kind(s.start_abort()), Some(Kind::Fenced));
        assert_eq!(kind(s.start_init()), None, "init recovers");
    }

    #[test]
    fn classic_partitions_wait_for_registration() {
        let mut s = TxnState::new("t");
        let topic: Arc<str> = Arc::from("a");
        assert!(!s.may_send(&topic, 0));
        s.registered.insert((topic.clone(), 0));
        assert!(s.may_send(&topic, 0));
        assert!(!s.may_send(&topic, 1));
        s.protocol = TransactionProtocol::V2;
        assert!(s.may_send(&topic, 1));
    }
}
