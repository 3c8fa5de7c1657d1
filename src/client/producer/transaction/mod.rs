//! Transactions: records to many partitions, and the offsets of the records consumed to make
//! them, committed or aborted as one (exactly-once consume-transform-produce).
//!
//! A [`TransactionalProducer`] goes through [`init`](TransactionalProducer::init) once (it
//! fences every older producer of its transactional id and aborts what that one left open),
//! then repeats [`begin`](TransactionalProducer::begin), [`send`](TransactionalProducer::send)
//! and [`send_offsets`](TransactionalProducer::send_offsets), and
//! [`commit`](TransactionalProducer::commit) or [`abort`](TransactionalProducer::abort).
//! Misuse is refused without side effects (a second `begin` is `Busy`, a `commit` with nothing
//! open is `NoTransaction`); a failure inside a transaction makes it abortable; a fence or an
//! authorization failure makes the producer unusable until `init` runs again (see
//! [`TransactionErrorKind`]).
//!
//! The protocol is chosen at `init`, from the coordinator's finalized `transaction.version`
//! ([`TransactionProtocol`]): KIP-890's v2 on Kafka 4 clusters that finalize it, the classic
//! one otherwise.
//!
//! Cancel safety: `init`, `commit` and `abort` may be dropped at any await; the producer then
//! stays in that call's phase and the same call, made again, finishes the work (a dropped
//! `commit` may already have reached the coordinator, so only `commit` may follow it). A
//! dropped `send_offsets` leaves the offsets in the transaction or not; a commit after it
//! commits whatever made it.

mod error;
mod protocol;
mod requests;
pub(super) mod state;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub(crate) use error::{Origin, classify};
pub use error::{TransactionError, TransactionErrorKind};
pub use protocol::TransactionProtocol;
pub(crate) use requests::{ProducerIdentity, Requests, undecided};
pub(crate) use state::{Phase, TxnState};

use super::accumulator::State;
use super::{DeliveryFuture, Producer, ProducerRecord, RecordRef};
use crate::client::Client;
use crate::client::config::ProducerConfig;
use crate::client::consumer::{GroupMetadata, OffsetToCommit};
use crate::client::coordinator::CoordinatorKind;
use crate::client::error::{Error, Result};
use crate::client::observe::{Event as ObserverEvent, Interest};

/// A producer whose records and consumed offsets are committed or aborted in transactions.
///
/// Cloning shares the producer and its transaction: a transaction begun through one clone is
/// open for all. Transactional calls run one at a time; one made while another runs is
/// refused as `Busy`.
#[derive(Debug, Clone)]
pub struct TransactionalProducer {
    producer: Producer,
    id: Arc<str>,
    transaction_timeout: Duration,
    call_timeout: Duration,
    calls: Arc<tokio::sync::Mutex<()>>,
}

/// What `commit` and `abort` read from the shared state before talking to the coordinator.
struct Snapshot {
    protocol: TransactionProtocol,
    producer: ProducerIdentity,
    started: bool,
    error: Option<TransactionError>,
    opened_at: Option<Instant>,
    bump_needed: bool,
}

impl TransactionalProducer {
    /// A transactional producer on `client` (no I/O: call [`init`](Self::init) next). Fails
    /// when `config` has no `transactional_id` or does not pass librdkafka's checks.
    pub fn new(client: Client, config: ProducerConfig) -> Result<Self> {
        let Some(id) = config.transactional_id.as_deref() else {
            return Err(Error::Config(
                "a transactional producer needs `transactional.id`".into(),
            ));
        };
        let id = Arc::from(id);
        let transaction_timeout = config.transaction_timeout;
        let producer = Producer::start(client, config)?;
        Ok(TransactionalProducer {
            producer,
            id,
            transaction_timeout,
            call_timeout: transaction_timeout,
            calls: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// Sets how long `init`, `commit`, `abort` and `send_offsets` keep retrying before they
    /// fail (librdkafka's default: `transaction.timeout.ms`).
    #[must_use]
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The transactional id.
    #[must_use]
    pub fn transactional_id(&self) -> &str {
        &self.id
    }

    /// The producer id and epoch in use, `(-1, -1)` before `init`.
    #[must_use]
    pub fn producer_id(&self) -> (i64, i16) {
        self.producer.producer_id()
    }

    /// The transaction protocol chosen at `init` (`None` before it).
    #[must_use]
    pub fn protocol(&self) -> Option<TransactionProtocol> {
        self.with_txn(|t| {
            (!matches!(t.phase, Phase::Uninitialized | Phase::Initializing)).then_some(t.protocol)
        })
    }

    /// Whether a transaction is open (also while it is being committed or aborted).
    #[must_use]
    pub fn in_transaction(&self) -> bool {
        self.with_txn(|t| matches!(t.phase, Phase::Open | Phase::Committing | Phase::Aborting))
    }

    /// Whether a [`commit`](Self::commit) started and neither finished nor failed for good:
    /// it timed out or lost its coordinator, so it may have committed, and only calling
    /// `commit` again settles it.
    #[must_use]
    pub fn commit_undecided(&self) -> bool {
        self.with_txn(|t| matches!(t.phase, Phase::Committing) && t.error.is_none())
    }

    /// Whether the producer failed for good (fenced, or a fatal error): every call but
    /// [`init`](Self::init) fails until `init` succeeds again.
    #[must_use]
    pub fn is_failed(&self) -> bool {
        self.with_txn(|t| matches!(t.phase, Phase::Failed(_)))
    }

    /// The client under this producer.
    #[must_use]
    pub fn client(&self) -> &Client {
        self.producer.client()
    }

    /// How many times a batch was sent again after a failed attempt.
    #[must_use]
    pub fn retries(&self) -> u64 {
        self.producer.retries()
    }

    fn with_txn<T>(&self, f: impl FnOnce(&mut TxnState) -> T) -> T {
        let mut state = self.producer.shared.lock();
        match &mut state.txn {
            Some(t) => f(t),
            // `new` makes every producer it builds transactional.
            None => f(&mut TxnState::new(&self.id)),
        }
    }

    fn state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.producer.shared.lock())
    }

    /// The right to make a transactional call now.
    fn call(&self) -> Result<tokio::sync::MutexGuard<'_, ()>> {
        self.calls.try_lock().map_err(|_| {
            Error::Transaction(TransactionError::new(
                TransactionErrorKind::Busy,
                &self.id,
                "another transactional call is under way",
            ))
        })
    }

    fn requests(&self, deadline: Instant) -> Requests<'_> {
        Requests {
            client: self.producer.client(),
            transactional_id: &self.id,
            deadline,
        }
    }

    /// Gets a producer id and epoch for the transactional id from its coordinator, which
    /// fences every older producer with the same id and aborts the transaction it left open
    /// (this waits until that abort is done). Also how a producer that failed with a fatal
    /// error becomes usable again: it then fences whoever fenced it.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a dropped `init` leaves the producer initializing, refusing every
    /// transactional call but `init`, and an `InitProducerId` already sent may still have given the
    /// id a new epoch (fencing older producers, this one's earlier epoch included). Call `init`
    /// again; it gets a fresh epoch.
    pub async fn init(&self) -> Result<()> {
        let _call = self.call()?;
        self.with_txn(TxnState::start_init)?;
        let deadline = Instant::now() + self.call_timeout;
        // What a failed producer still had queued fails first (the sender drops it while
        // initializing), so that nothing of it goes out under the new id.
        if !self.settle(deadline).await {
            return Err(Error::Timeout(
                "init: records of the failed producer are still in flight".into(),
            ));
        }
        let requests = self.requests(deadline);
        let identity = match requests
            .init_producer_id(self.transaction_timeout, None)
            .await
        {
            Ok(identity) => identity,
            Err(e) if undecided(&e) => return Err(e),
            Err(e) => {
                let e = classify(&self.id, Origin::Coordinator, "initializing", e);
                if e.is_fatal() {
                    self.fail(&e);
                }
                return Err(e.into());
            }
        };
        let protocol = self.protocol_at_coordinator().await?;
        tracing::debug!(
            transactional_id = %self.id,
            producer_id = identity.id,
            epoch = identity.epoch,
            ?protocol,
            "transactional producer initialized"
        );
        self.state(|s| {
            s.new_producer_epoch(identity.id, identity.epoch);
            if let Some(t) = &mut s.txn {
                t.protocol = protocol;
                t.finish();
            }
        });
        Ok(())
    }

    /// Waits until every record has settled and no registration is in flight (the sender
    /// drops what is unsent in the phases that call this); says whether that happened by
    /// `deadline`.
    async fn settle(&self, deadline: Instant) -> bool {
        let shared = &self.producer.shared;
        shared.wake.notify_one();
        shared
            .wait_until(deadline, |s| {
                s.queued_messages == 0 && !s.txn.as_ref().is_some_and(|t| t.registering)
            })
            .await
    }

    async fn protocol_at_coordinator(&self) -> Result<TransactionProtocol> {
        let client = self.producer.client();
        let node = client
            .coordinator(CoordinatorKind::Transaction, &self.id)
            .await?;
        let conn = client.connection(node).await?;
        Ok(TransactionProtocol::choose(conn.versions()))
    }

    /// Opens a transaction: records sent from now until `commit` or `abort` belong to it.
    ///
    /// Refused with `Busy` while one is open (the open one is untouched), `Uninitialized`
    /// before `init`, and with the fatal error after one.
    pub fn begin(&self) -> Result<()> {
        self.with_txn(TxnState::begin).map_err(Error::from)
    }

    /// Queues `record` in the open transaction and returns the future of its delivery report,
    /// like [`Producer::send`]. Refused when no transaction is open or the open one has failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the record is queued only in the poll that returns, so a `send` dropped before
    /// it returns queued nothing. Once it has returned, the record is delivered even if the
    /// `DeliveryFuture` is dropped.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture> {
        self.producer.send(record).await
    }

    /// Like [`send`](Self::send), but fails when no queue space frees up within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: as [`send`](Self::send), the record is queued only in the poll that returns.
    pub async fn send_timeout(
        &self,
        record: ProducerRecord,
        timeout: Duration,
    ) -> Result<DeliveryFuture> {
        self.producer.send_timeout(record, timeout).await
    }

    /// Like [`send`](Self::send), from borrowed parts (see [`Producer::send_ref`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: as [`send`](Self::send), the record is queued only in the poll that returns.
    pub async fn send_ref(&self, record: RecordRef<'_>) -> Result<DeliveryFuture> {
        self.producer.send_ref(record).await
    }

    /// Like [`send_ref`](Self::send_ref), but fails when no queue space frees up within
    /// `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: as [`send`](Self::send), the record is queued only in the poll that returns.
    pub async fn send_ref_timeout(
        &self,
        record: RecordRef<'_>,
        timeout: Duration,
    ) -> Result<DeliveryFuture> {
        self.producer.send_ref_timeout(record, timeout).await
    }

    /// Puts consumed offsets (next offsets to read, Kafka's convention) in the open
    /// transaction, on behalf of the consumer `group` describes: they become the group's
    /// committed offsets if and only if the transaction commits. The group coordinator
    /// refuses them (an abortable error) when a rebalance has replaced that member (KIP-447).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: requests already sent may still put the offsets (and, on the classic
    /// protocol, the group) in the transaction, and nothing records whether they did. Call
    /// `send_offsets` again with the same offsets before committing; repeating it is harmless.
    pub async fn send_offsets(
        &self,
        offsets: &[OffsetToCommit],
        group: &GroupMetadata,
    ) -> Result<()> {
        let _call = self.call()?;
        let (protocol, producer) = self.state(|s| {
            let producer = identity(s);
            let Some(t) = &mut s.txn else {
                return Err(TransactionError::new(
                    TransactionErrorKind::Fatal,
                    &self.id,
                    "the producer is not transactional",
                ));
            };
            t.check_open()?;
            // v2: the TxnOffsetCommit itself registers the group in the transaction.
            if !t.protocol.registers_explicitly() {
                t.started = true;
            }
            Ok((t.protocol, producer))
        })?;
        if offsets.is_empty() {
            return Ok(());
        }
        let requests = self.requests(Instant::now() + self.call_timeout);
        if protocol.registers_explicitly() {
            let added = requests.add_offsets(producer, &group.group_id).await;
            self.settle_step(added, "adding the group to the transaction")?;
            self.with_txn(|t| t.started = true);
        }
        let committed = requests
            .commit_offsets(protocol, producer, offsets, group)
            .await;
        self.settle_step(committed, "committing offsets in the transaction")
    }

    /// Turns a failed step of the open transaction into its transaction error (remembered, so
    /// that the transaction can only be aborted).
    fn settle_step(&self, outcome: Result<()>, doing: &str) -> Result<()> {
        let Err(e) = outcome else {
            return Ok(());
        };
        let e = classify(&self.id, Origin::Coordinator, doing, e);
        self.with_txn(|t| t.failed(e.clone()));
        Err(e.into())
    }

    fn snapshot(&self) -> Snapshot {
        self.state(|s| {
            let producer = identity(s);
            let bump_needed = s.bump_needed;
            let t = s.txn.as_ref();
            Snapshot {
                protocol: t.map_or(TransactionProtocol::Classic, |t| t.protocol),
                producer,
                started: t.is_some_and(|t| t.started),
                error: t.and_then(|t| t.error.clone()),
                opened_at: t.and_then(|t| t.opened_at),
                bump_needed,
            }
        })
    }

    /// A fatal answer to a transaction that stayed open past its timeout is most likely the
    /// coordinator's abort of it (`PRODUCER_FENCED` on the classic protocol: the abort bumped
    /// the epoch; `INVALID_TXN_STATE` on v2, where the bumped epoch looks like a retry of an
    /// already aborted transaction): say so.
    fn explain(&self, e: TransactionError, opened_at: Option<Instant>) -> TransactionError {
        match opened_at.map(|at| at.elapsed()) {
            Some(open) if e.is_fatal() && open >= self.transaction_timeout => e.explained(&format!(
                "the transaction was open for {open:?}, longer than `transaction.timeout.ms` ({:?}): the coordinator has aborted it",
                self.transaction_timeout
            )),
            _ => e,
        }
    }

    /// Fails the producer with `e` when it is fatal; returns it as the call's error.
    fn fatal_or_abortable(&self, e: TransactionError, opened_at: Option<Instant>) -> Error {
        let e = self.explain(e, opened_at);
        if e.is_fatal() {
            self.fail(&e);
        } else {
            self.with_txn(|t| t.failed(e.clone()));
        }
        e.into()
    }

    /// Marks the producer failed for good, and says so: one WARN and the observers' event.
    fn fail(&self, e: &TransactionError) {
        self.with_txn(|t| t.fail(e.clone()));
        tracing::warn!(transactional_id = %self.id, error = %e,
            "the transactional producer failed: it refuses every call until it is initialized again");
        let observers = &self.producer.shared.client.config().observers;
        if observers.wants(Interest::PRODUCE) {
            let error = Error::from(e.clone());
            observers.emit(&ObserverEvent::ProducerFatal { error: &error });
        }
    }

    /// Sends every record of the transaction, waits for all of them, and commits the
    /// transaction with its offsets.
    ///
    /// If a record failed, the transaction cannot commit: the error is abortable (call
    /// [`abort`](Self::abort)), or fatal. A timeout or a lost coordinator leaves the outcome to
    /// a repeated `commit`, which finishes the same commit.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a dropped `commit` leaves the transaction committing (no record enters it,
    /// `begin` is refused, and `abort` too unless the transaction failed), and an `EndTxn` already
    /// sent may have committed it. Call `commit` again: it finishes the same commit.
    pub async fn commit(&self) -> Result<()> {
        let _call = self.call()?;
        self.with_txn(TxnState::start_commit)?;
        let started = Instant::now();
        let deadline = started + self.call_timeout;
        let left = self.producer.shared.flush_until(deadline).await;
        let flushed = started.elapsed();
        if left > 0 {
            return Err(Error::Timeout(format!(
                "commit: {left} records not delivered within {:?}; call commit again",
                self.call_timeout
            )));
        }
        let s = self.snapshot();
        if let Some(e) = s.error {
            return Err(self.fatal_or_abortable(e, s.opened_at));
        }
        if !s.started {
            self.with_txn(TxnState::finish);
            return Ok(());
        }
        match self
            .requests(deadline)
            .end(s.protocol, s.producer, true)
            .await
        {
            Ok(next) => {
                tracing::debug!(
                    transactional_id = %self.id,
                    ?flushed,
                    ended = ?started.elapsed().saturating_sub(flushed),
                    "transaction committed"
                );
                self.finish(next);
                Ok(())
            }
            Err(e) if undecided(&e) => Err(e),
            Err(e) => {
                let e = classify(&self.id, Origin::Coordinator, "committing", e);
                Err(self.fatal_or_abortable(e, s.opened_at))
            }
        }
    }

    /// The transaction ended: a KIP-890 `EndTxn` handed over the next epoch.
    fn finish(&self, next: Option<ProducerIdentity>) {
        self.state(|s| {
            if let Some(n) = next {
                s.new_producer_epoch(n.id, n.epoch);
            }
            if let Some(t) = &mut s.txn {
                t.finish();
            }
        });
    }

    /// Aborts the open transaction: records not yet sent fail, those written are never
    /// visible to `read_committed` readers, offsets sent with it are dropped.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a dropped `abort` leaves the transaction aborting (unsent records fail,
    /// `begin` and `commit` are refused), and an `EndTxn` already sent may have aborted it; call
    /// `abort` again to finish. Dropped during the epoch bump after a failed batch, the bump may
    /// already have moved the epoch and the repeated abort then fails as fenced: `init` recovers
    /// the producer.
    pub async fn abort(&self) -> Result<()> {
        let _call = self.call()?;
        self.with_txn(TxnState::start_abort)?;
        let deadline = Instant::now() + self.call_timeout;
        if !self.settle(deadline).await {
            return Err(Error::Timeout(format!(
                "abort: records still in flight after {:?}; call abort again",
                self.call_timeout
            )));
        }
        let s = self.snapshot();
        if let Some(e) = s.error.filter(TransactionError::is_fatal) {
            return Err(self.fatal_or_abortable(e, s.opened_at));
        }
        let requests = self.requests(deadline);
        let mut next = None;
        if s.started {
            match requests.end(s.protocol, s.producer, false).await {
                Ok(n) => next = n,
                Err(e) if undecided(&e) => return Err(e),
                Err(e) => {
                    // An abort that fails cannot be aborted in turn: the producer is done.
                    let mut e = classify(&self.id, Origin::Coordinator, "aborting", e);
                    if !e.is_fatal() {
                        e = TransactionError::caused(
                            TransactionErrorKind::Fatal,
                            &self.id,
                            "aborting",
                            e.into(),
                        );
                    }
                    return Err(self.fatal_or_abortable(e, s.opened_at));
                }
            }
        }
        if s.bump_needed && next.is_none() {
            // A batch failed after taking a sequence number: the partition's sequence has a gap
            // only a new epoch closes (KIP-360).
            match requests
                .init_producer_id(self.transaction_timeout, Some(s.producer))
                .await
            {
                Ok(n) => next = Some(n),
                Err(e) if undecided(&e) => return Err(e),
                Err(e) => {
                    let e = classify(&self.id, Origin::Coordinator, "bumping the epoch", e);
                    let e = TransactionError::caused(
                        if e.is_fatal() {
                            e.kind()
                        } else {
                            TransactionErrorKind::Fatal
                        },
                        &self.id,
                        "after an abort",
                        e.into(),
                    );
                    return Err(self.fatal_or_abortable(e, s.opened_at));
                }
            }
        }
        self.finish(next);
        Ok(())
    }

    /// Flushes for up to `timeout`, then stops the producer; returns how many records did not
    /// get delivered. A transaction still open is left to the coordinator, which aborts it
    /// after `transaction.timeout.ms` or when a producer with the same id calls `init`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the producer is stopped only after the flush, so a close dropped during it
    /// leaves the producer open and sending (an open transaction stays open); calling it again
    /// closes it.
    pub async fn close(&self, timeout: Duration) -> usize {
        self.producer.close(timeout).await
    }
}

fn identity(s: &State) -> ProducerIdentity {
    ProducerIdentity {
        id: s.producer_id,
        epoch: s.producer_epoch,
    }
}
