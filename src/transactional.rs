//! Transactions: [`KafkaTransactionalPublish`] (the policy), [`KafkaTransactionalPublisher`]
//! (its live handle), and per-partition lanes ([`KafkaPartitionedPublish`],
//! [`TransactionalPartitions`], [`PartitionLanes`]).
//!
//! A transactional publisher owns one transactional producer, created and initialized when it
//! pairs, so an older holder of the same transactional id is fenced before the handle exists.
//! The handle keeps its own "a transaction is open" flag next to the producer's phase: the flag
//! decides where a publish goes (into the transaction, or through the broker's shared plain
//! producer) and answers misuse (`TransactionBusy`, `NoTransaction`) without touching the
//! producer, so a refused call never disturbs the open transaction. Only a commit that
//! succeeded, or any abort, lowers the flag: a failed commit leaves the transaction for the
//! caller to abort.
//!
//! Commit and abort run on the broker's runtime: once started they finish, and their outcome
//! lands in the shared state, even when the caller's runtime stops or the caller gives up.

use std::collections::HashMap;
use std::fmt;
use std::future::ready;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ruststream::runtime::{OutPipeline, Slot};
use ruststream::{
    Lend, OutgoingMessage, PairError, PublishPolicy, Publisher, TransactionalPublisher,
};
use tokio::sync::OnceCell;

use crate::client::consumer::{GroupMetadata, OffsetToCommit};
use crate::client::outlined::Outlined;
use crate::client::{
    DeliveryFuture, Error as ClientError, TransactionErrorKind, TransactionalProducer,
};
use crate::connection::{BrokerState, ConnectedKafkaBroker};
use crate::error::KafkaError;
use crate::produce::{KafkaOptions, Outgoing, hand_over, producer_record, report, send, under_way};

/// The call deadline of `init`, `commit` and `abort` unless the policy sets one.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(30);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The transactional publish policy: a transactional id, the queue timeout and the deadline of
/// the transaction calls. Reached from [`KafkaPublish::transactional_id`](crate::KafkaPublish::transactional_id).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct KafkaTransactionalPublish {
    id: String,
    queue_timeout: Option<Duration>,
    transaction_timeout: Duration,
}

impl KafkaTransactionalPublish {
    pub(crate) fn new(id: String, queue_timeout: Option<Duration>) -> Self {
        Self {
            id,
            queue_timeout,
            transaction_timeout: TRANSACTION_TIMEOUT,
        }
    }

    /// How long a publish may wait for room in the producer's local queue; unset waits as
    /// long as it takes (as [`KafkaPublish::queue_timeout`](crate::KafkaPublish::queue_timeout)).
    pub const fn queue_timeout(mut self, timeout: Duration) -> Self {
        self.queue_timeout = Some(timeout);
        self
    }

    /// How long the transaction calls (initializing at pairing, `commit`, `abort`) keep trying
    /// before they fail; default 30 s. This is a call deadline, not `transaction.timeout.ms`
    /// (that one is the cluster's limit on how long a transaction may stay open; pass it with
    /// `KafkaBroker::producer_config("transaction.timeout.ms", ..)`).
    pub const fn transaction_timeout(mut self, timeout: Duration) -> Self {
        self.transaction_timeout = timeout;
        self
    }

    /// One transactional id per source partition instead of one for all: partition `n` gets
    /// `"{id}-p{n}"`, so handlers of different partitions run their transactions side by side.
    pub fn per_partition(self) -> KafkaPartitionedPublish {
        KafkaPartitionedPublish { template: self }
    }

    /// The transactional id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    fn for_partition(&self, partition: i32) -> Self {
        Self {
            id: format!("{}-p{partition}", self.id),
            ..self.clone()
        }
    }
}

impl PublishPolicy<ConnectedKafkaBroker> for KafkaTransactionalPublish {
    type Live = KafkaTransactionalPublisher;

    /// Creates the transactional producer and initializes its transactions (fencing every
    /// older producer of the id); a failure fails the pairing.
    fn pair(
        self,
        connected: &ConnectedKafkaBroker,
    ) -> impl Future<Output = Result<KafkaTransactionalPublisher, PairError>> + Send {
        let state = connected.shared_state();
        async move {
            open_transactional(&state, &self)
                .await
                .map_err(PairError::new)
        }
    }

    /// The channel names the topic the transactions write to.
    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ruststream::asyncapi::Bindings {
        crate::bindings::channel(channel)
    }
}

impl ConnectedKafkaBroker {
    /// A transactional publisher for `policy`: a producer with the broker's producer
    /// properties plus `transactional.id`, initialized within the policy's transaction
    /// timeout. Initializing fences every older producer of the same id and aborts what it
    /// left open.
    ///
    /// Fails with [`KafkaError::Closed`] after shutdown, and with [`KafkaError::Publish`]
    /// when the configuration is refused (as librdkafka refuses it at producer creation) or
    /// the initialization fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: no publisher is handed out and nothing is kept for one. An initialization
    /// already running on the broker's runtime still finishes there (so older holders of the id may
    /// be fenced all the same) and its producer is then dropped; call again for a publisher.
    pub async fn transactional_publisher(
        &self,
        policy: KafkaTransactionalPublish,
    ) -> Result<KafkaTransactionalPublisher, KafkaError> {
        open_transactional(&self.shared_state(), &policy).await
    }
}

/// Creates and initializes the producer of `policy` on the broker's runtime.
pub(crate) async fn open_transactional(
    state: &Arc<BrokerState>,
    policy: &KafkaTransactionalPublish,
) -> Result<KafkaTransactionalPublisher, KafkaError> {
    state.ensure_open(policy.id())?;
    let timeout = policy.transaction_timeout;
    let producer = state
        .eos()
        .group(policy.id())
        .initializing(initialized_producer(state, policy.id(), timeout))
        .await?;
    Ok(KafkaTransactionalPublisher {
        inner: Arc::new(TxInner {
            state: Arc::clone(state),
            producer,
            id: policy.id.clone(),
            queue_timeout: policy.queue_timeout,
            timeout,
            open: Mutex::new(false),
        }),
    })
}

/// A producer with transactional id `id`, created and initialized (`InitProducerId`: a new
/// epoch, which aborts what an earlier holder of the id left open) on the broker's runtime.
#[inline(never)]
fn initialized_producer<'a>(
    state: &'a Arc<BrokerState>,
    id: &'a str,
    timeout: Duration,
) -> Outlined<'a, Result<TransactionalProducer, KafkaError>> {
    Box::pin(async move {
        let mut properties = state.producer_properties().clone();
        properties.set("transactional.id", id);
        let settings = properties.producer().map_err(KafkaError::publish)?;
        let config = settings.producer_config();
        let client = state.client().clone();
        // The producer's sender task belongs on the broker's runtime, and so does the
        // initialization: a caller on a short-lived runtime must not strand either.
        on_runtime(state, async move {
            let producer = TransactionalProducer::new(client, config)
                .map_err(KafkaError::publish)?
                .with_call_timeout(timeout);
            producer.init().await.map_err(KafkaError::publish)?;
            Ok(producer)
        })
        .await
    })
}

/// Fences transactional id `id` unless a producer with it was initialized on this connection:
/// a `Commit::Transactional(id)` subscription does this before it reads committed offsets.
/// An earlier instance killed inside a transaction that carried offsets leaves them pending,
/// and a `read_committed` reader gets `UNSTABLE_OFFSET_COMMIT` for them until the transaction
/// ends. The runtime may open the subscription before it pairs the pipeline (an `Out` slot
/// does), so without this the pipeline's own initialization, which would abort that
/// transaction, waits behind the subscription until `transaction.timeout.ms` ends it.
pub(crate) async fn fence_earlier_instance(
    state: &Arc<BrokerState>,
    id: &str,
) -> Result<(), KafkaError> {
    let group = state.eos().group(id);
    group
        .fence_once(async {
            let producer = initialized_producer(state, id, TRANSACTION_TIMEOUT).await?;
            // Nothing is open: the throwaway producer has nothing to flush.
            producer.close(Duration::ZERO).await;
            Ok(())
        })
        .await
}

/// Runs `work` on the broker's runtime and waits for it.
async fn on_runtime<T: Send + 'static>(
    state: &BrokerState,
    work: impl Future<Output = Result<T, KafkaError>> + Send + 'static,
) -> Result<T, KafkaError> {
    crate::client::outlined::spawn_on(state.runtime(), work)
        .await
        .map_err(|e| KafkaError::Publish(Box::new(e)))?
}

struct TxInner {
    state: Arc<BrokerState>,
    producer: TransactionalProducer,
    id: String,
    queue_timeout: Option<Duration>,
    timeout: Duration,
    /// Whether this handle (or a clone) has a transaction open.
    open: Mutex<bool>,
}

impl TxInner {
    fn is_open(&self) -> bool {
        *lock(&self.open)
    }

    fn no_transaction(&self) -> KafkaError {
        KafkaError::NoTransaction {
            id: self.id.clone(),
        }
    }
}

/// A live transactional publisher: one transactional producer, fenced by its id.
///
/// Records published between `begin_transaction` and `commit` become visible together to
/// `read_committed` readers (Kafka's default isolation), or never when the transaction is
/// aborted. Outside a transaction a publish goes through the broker's shared plain producer.
/// Clones share the producer and the transaction: a transaction begun through one clone is
/// open for all of them.
///
/// One producer runs one transaction at a time. Flows that transact side by side need a
/// publisher each ([`TransactionalPartitions`] gives one per source partition).
#[derive(Clone)]
pub struct KafkaTransactionalPublisher {
    inner: Arc<TxInner>,
}

impl fmt::Debug for KafkaTransactionalPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaTransactionalPublisher")
            .field("id", &self.inner.id)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl KafkaTransactionalPublisher {
    /// The transactional id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    pub(crate) fn state(&self) -> &Arc<BrokerState> {
        &self.inner.state
    }

    /// The call deadline of the transaction calls.
    pub(crate) fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Opens a transaction now (no I/O: the producer registers partitions as records come).
    /// Whether the producer is still inside a transaction: after an abort or a commit that
    /// failed undecided (a timeout, a lost connection), which only another `abort` finishes;
    /// until then no transaction can begin.
    pub(crate) fn unfinished(&self) -> bool {
        self.inner.producer.in_transaction()
    }

    /// Whether a commit may have reached the coordinator without an answer: only another
    /// `commit` settles it (an abort would be refused, and replaying would write twice).
    pub(crate) fn commit_undecided(&self) -> bool {
        self.inner.producer.commit_undecided()
    }

    /// Whether the producer failed for good (fenced, fatal) and needs [`Self::reinit`].
    pub(crate) fn failed_for_good(&self) -> bool {
        self.inner.producer.is_failed()
    }

    /// Initializes the failed producer again (`InitProducerId`: a new epoch, which also aborts
    /// whatever the coordinator still holds open for the id), on the broker's runtime.
    pub(crate) async fn reinit(&self) -> Result<(), KafkaError> {
        let inner = Arc::clone(&self.inner);
        inner.state.ensure_open(&inner.id)?;
        let state = Arc::clone(&inner.state);
        on_runtime(&state, async move {
            inner.producer.init().await.map_err(KafkaError::publish)?;
            *lock(&inner.open) = false;
            Ok(())
        })
        .await
    }

    pub(crate) fn begin(&self) -> Result<(), KafkaError> {
        let inner = &self.inner;
        inner.state.ensure_open(&inner.id)?;
        let mut open = lock(&inner.open);
        if *open {
            return Err(KafkaError::TransactionBusy {
                id: inner.id.clone(),
            });
        }
        inner.producer.begin().map_err(KafkaError::publish)?;
        *open = true;
        Ok(())
    }

    /// Queues `record` in the open transaction, never anywhere else: refused when none is
    /// open.
    pub(crate) async fn enqueue(
        &self,
        record: &Outgoing<'_>,
    ) -> Result<DeliveryFuture, ClientError> {
        let producer = &self.inner.producer;
        match self.inner.queue_timeout {
            Some(bound) => producer.send_ref_timeout(record.borrowed(), bound).await,
            None => producer.send_ref(record.borrowed()).await,
        }
    }

    /// Adds consumed offsets to the open transaction on behalf of the consumer `group`
    /// describes.
    pub(crate) async fn send_offsets(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: GroupMetadata,
    ) -> Result<(), KafkaError> {
        let inner = Arc::clone(&self.inner);
        inner.state.ensure_open(&inner.id)?;
        if !inner.is_open() {
            return Err(inner.no_transaction());
        }
        let state = Arc::clone(&inner.state);
        on_runtime(&state, async move {
            inner
                .producer
                .send_offsets(&offsets, &group)
                .await
                .map_err(KafkaError::publish)
        })
        .await
    }
}

impl Publisher for KafkaTransactionalPublisher {
    type Payload = Lend;
    type Error = KafkaError;
    type Options = KafkaOptions;

    /// Publishes one record and waits for its delivery report: into the open transaction when
    /// one is open, else through the broker's shared plain producer. Not cancel-safe: a
    /// dropped call may still deliver the record.
    async fn publish(
        &self,
        msg: OutgoingMessage<'_, &[u8]>,
        options: Option<&KafkaOptions>,
    ) -> Result<(), KafkaError> {
        let (name, payload, headers) = msg.into_parts();
        let inner = &self.inner;
        let _under_way = under_way(&inner.state);
        inner.state.ensure_open(name)?;
        let record = producer_record(name, payload, headers, options)?;
        let delivery = if inner.is_open() {
            report(self.enqueue(&record).await).await?
        } else {
            let producer = inner.state.producer().await?;
            send(producer, record, inner.queue_timeout).await?
        };
        if let Some(wait) = hand_over(&inner.state, &delivery) {
            wait.await;
        }
        Ok(())
    }
}

impl TransactionalPublisher for KafkaTransactionalPublisher {
    /// Opens a transaction; ready at once. Fails with [`KafkaError::TransactionBusy`] while
    /// one is open on this publisher or a clone (which stays open, untouched), with
    /// [`KafkaError::Closed`] after shutdown, and with [`KafkaError::Publish`] when the
    /// producer cannot transact (fenced, or an earlier call left it unusable).
    fn begin_transaction(&self) -> impl Future<Output = Result<(), KafkaError>> + Send {
        ready(self.begin())
    }

    /// Delivers every record of the open transaction and commits it. Fails with
    /// [`KafkaError::NoTransaction`] when none is open, [`KafkaError::Closed`] after
    /// shutdown, and [`KafkaError::Publish`] when the commit fails (the message says `fenced`
    /// when a newer producer took the id over); after a failure the transaction stays open
    /// for [`abort`](TransactionalPublisher::abort). Once started the commit runs to its end
    /// on the broker's runtime, even if this future is dropped.
    async fn commit(&self) -> Result<(), KafkaError> {
        let inner = Arc::clone(&self.inner);
        inner.state.ensure_open(&inner.id)?;
        if !inner.is_open() {
            return Err(inner.no_transaction());
        }
        let state = Arc::clone(&inner.state);
        on_runtime(&state, async move {
            inner.producer.commit().await.map_err(KafkaError::publish)?;
            *lock(&inner.open) = false;
            Ok(())
        })
        .await?;
        // In process, committed records are ready for `read_committed` readers at once.
        crate::handover::handed_over(state.handover(), None).await;
        Ok(())
    }

    /// Aborts the open transaction: its records are never visible to `read_committed`
    /// readers. Fails with [`KafkaError::NoTransaction`] when none is open,
    /// [`KafkaError::Closed`] after shutdown, and [`KafkaError::Publish`] when the abort
    /// fails. The transaction counts as closed afterwards either way; an abort that did not
    /// finish is finished by calling `abort` again. Once started the abort runs to its end on
    /// the broker's runtime, even if this future is dropped.
    async fn abort(&self) -> Result<(), KafkaError> {
        let inner = Arc::clone(&self.inner);
        inner.state.ensure_open(&inner.id)?;
        // The producer may still be inside an abort this handle gave up on: finishing it is
        // what unblocks the next `begin_transaction`.
        if !inner.is_open() && !inner.producer.in_transaction() {
            return Err(inner.no_transaction());
        }
        let state = Arc::clone(&inner.state);
        let task = Arc::clone(&inner);
        let outcome = on_runtime(&state, async move {
            let aborted = abort_or_finish(&task.producer).await;
            *lock(&task.open) = false;
            aborted
        })
        .await;
        *lock(&inner.open) = false;
        outcome
    }
}

/// Aborts the open transaction. A commit that failed undecided (it may have reached the
/// coordinator) cannot be aborted, only finished: it is finished, so that the producer can
/// transact again, and the abort reports that its records were committed after all.
async fn abort_or_finish(producer: &TransactionalProducer) -> Result<(), KafkaError> {
    let refused = match producer.abort().await {
        Ok(()) => return Ok(()),
        Err(ClientError::Transaction(e)) if e.kind() == TransactionErrorKind::Busy => e,
        Err(e) => return Err(KafkaError::publish(e)),
    };
    match producer.commit().await {
        Ok(()) => Err(KafkaError::Publish(KafkaError::text(format!(
            "{refused}; the earlier commit had reached the coordinator and has now completed: \
             the transaction's records are committed"
        )))),
        Err(e) => Err(KafkaError::Publish(KafkaError::text(format!(
            "{refused}; finishing the earlier commit failed too: {e}"
        )))),
    }
}

/// The policy of per-partition transactional publishers, from
/// [`KafkaTransactionalPublish::per_partition`]; pairs into [`TransactionalPartitions`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct KafkaPartitionedPublish {
    template: KafkaTransactionalPublish,
}

impl PublishPolicy<ConnectedKafkaBroker> for KafkaPartitionedPublish {
    type Live = TransactionalPartitions;

    /// Immediate and without I/O: each partition's producer is created on first use.
    fn pair(
        self,
        connected: &ConnectedKafkaBroker,
    ) -> impl Future<Output = Result<TransactionalPartitions, PairError>> + Send {
        ready(Ok(TransactionalPartitions {
            inner: Arc::new(Lanes {
                state: connected.shared_state(),
                template: self.template,
                by_partition: Mutex::default(),
            }),
        }))
    }

    /// The channel names the topic every partition's transactions write to.
    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ruststream::asyncapi::Bindings {
        crate::bindings::channel(channel)
    }
}

struct Lanes {
    state: Arc<BrokerState>,
    template: KafkaTransactionalPublish,
    /// Callers racing for a partition's first use share its cell, so one producer is created
    /// rather than several that would fence each other.
    by_partition: Mutex<HashMap<i32, LaneCell>>,
}

/// One partition's publisher, set once its producer is initialized.
type LaneCell = Arc<OnceCell<KafkaTransactionalPublisher>>;

/// Transactional publishers, one per source partition (`"{base}-p{partition}"`), created on
/// first use and kept.
///
/// Under the default `LaneKey::Partition` worker pools, a partition's deliveries are handled
/// one after another, so each partition's publisher runs one transaction at a time while
/// different partitions transact side by side. The ids follow the partitions, not the worker
/// count, so fencing keeps working when the pool size changes. Record-key lanes spread one
/// partition over several lanes, which would then share one publisher and collide
/// ([`KafkaError::TransactionBusy`]).
///
/// Clones share the cache.
#[derive(Clone)]
pub struct TransactionalPartitions {
    inner: Arc<Lanes>,
}

impl fmt::Debug for TransactionalPartitions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionalPartitions")
            .field("base_id", &self.inner.template.id())
            .finish_non_exhaustive()
    }
}

impl TransactionalPartitions {
    /// The publisher of `partition` (transactional id `"{base}-p{partition}"`), created and
    /// initialized on the first call for it and the same handle afterwards. Concurrent first
    /// calls create one producer.
    ///
    /// Fails with [`KafkaError::Closed`] after shutdown and with [`KafkaError::Publish`]
    /// when the producer cannot be created or initialized (a later call tries again).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the partition's cell stays empty, for the next (or a concurrent) call to fill.
    /// An initialization already running on the broker's runtime still finishes there, fencing
    /// older holders of the id, and its producer is then dropped.
    pub async fn for_partition(
        &self,
        partition: i32,
    ) -> Result<KafkaTransactionalPublisher, KafkaError> {
        let inner = &self.inner;
        let policy = inner.template.for_partition(partition);
        inner.state.ensure_open(policy.id())?;
        let cell = Arc::clone(lock(&inner.by_partition).entry(partition).or_default());
        cell.get_or_try_init(|| open_transactional(&inner.state, &policy))
            .await
            .cloned()
    }
}

/// Hands out one transactional publisher per source partition.
///
/// A handler names it in its slot (`Out(lanes): Out<impl PartitionLanes>`) and the policy
/// mounted there decides the publisher: [`KafkaPartitionedPublish`] makes it
/// [`TransactionalPartitions`]. What a lane publishes goes through the lane's own publisher,
/// so it shows in the broker's publish log, not in the slot's test record.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hand out per-partition transactional publishers",
    note = "mount `KafkaPublish::default().transactional_id(\"..\").per_partition()` on the \
            `Out<impl PartitionLanes>` slot"
)]
pub trait PartitionLanes: Send + Sync {
    /// The transactional publisher of one partition.
    type Publisher: TransactionalPublisher<Error = KafkaError>;

    /// The publisher of `partition`; see [`TransactionalPartitions::for_partition`].
    fn for_partition(
        &self,
        partition: i32,
    ) -> impl Future<Output = Result<Self::Publisher, KafkaError>> + Send;
}

impl PartitionLanes for TransactionalPartitions {
    type Publisher = KafkaTransactionalPublisher;

    fn for_partition(
        &self,
        partition: i32,
    ) -> impl Future<Output = Result<KafkaTransactionalPublisher, KafkaError>> + Send {
        TransactionalPartitions::for_partition(self, partition)
    }
}

// The slot a handler's `Out` parameter binds derefs to the lanes already; this impl is what
// lets the handler pass the slot itself to a function generic over `PartitionLanes`.
impl<M, L, EncodeCodec, Pipe, Body> PartitionLanes for Slot<M, L, EncodeCodec, Pipe, Body>
where
    L: PartitionLanes,
    EncodeCodec: Send + Sync,
    Pipe: OutPipeline<L>,
{
    type Publisher = L::Publisher;

    fn for_partition(
        &self,
        partition: i32,
    ) -> impl Future<Output = Result<L::Publisher, KafkaError>> + Send {
        (**self).for_partition(partition)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::TRANSACTION_TIMEOUT;
    use crate::KafkaPublish;

    #[test]
    fn the_transactional_policy_keeps_the_queue_timeout() {
        let policy = KafkaPublish::default()
            .queue_timeout(Duration::from_secs(2))
            .transactional_id("svc-1");
        assert_eq!(policy.id(), "svc-1");
        assert_eq!(policy.queue_timeout, Some(Duration::from_secs(2)));
        assert_eq!(policy.transaction_timeout, TRANSACTION_TIMEOUT);
        let lane = policy
            .transaction_timeout(Duration::from_secs(5))
            .for_partition(3);
        assert_eq!(lane.id(), "svc-1-p3");
        assert_eq!(lane.transaction_timeout, Duration::from_secs(5));
    }
}
