//! The exactly-once pipeline: consumed offsets and the records made from them, committed in
//! one transaction per window.
//!
//! A window is one transaction. The first publish when none is open begins it and starts the
//! window's task on the broker's runtime; every publish enrolls its source record (per
//! partition: the highest offset the window answers). After `commit_interval` the window
//! closes: only publishes answering records it already enrolled still join, the rest wait for
//! the next window. The task then waits until each enrolled partition's stored watermark (its
//! `Commit::Transactional` subscription's settled prefix) has reached the enrolled maximum,
//! puts every source's stored positions into the transaction with that consumer's group
//! metadata, and commits: output and consumed offsets become visible together.
//!
//! Invariants:
//! - A committed window never commits an offset whose output is not in it: offsets come from
//!   the settled prefix, and a record settles after its handler's publishes joined the window
//!   (or an earlier one).
//! - A failed window (a publish failed, the settle-wait timed out, the offsets or the commit
//!   were refused) aborts, and every partition it enrolled goes back to the last offset this
//!   pipeline committed for it, else to the lowest offset it enrolled or still has unsettled
//!   (handlers of one partition run side by side, so a later offset can enroll before an
//!   earlier one, or the earlier one not at all yet): the replay redoes every discarded
//!   output and skips no record.
//! - A reposition of an enrolled partition (a seek, a rebalance) voids the window: its
//!   deliveries can no longer settle, so it aborts at once, without seeking back (the consumer
//!   stays where the reposition put it), and forgets that partition's bookkeeping. Replayed
//!   deliveries wait for a fresh window.
//! - A delivery from before a reposition can no longer be answered: its publish is refused,
//!   so a record and its replay never both reach one window.
//! - No record of one window enters the next: a publish queues its record under a read gate
//!   and checks the window is still its own; the task takes the gate for writing when it ends
//!   the window.

use std::collections::HashMap;
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ruststream::{
    HeaderMap, Lend, OutgoingMessage, PairError, PublishPolicy, Publisher, Str,
    TransactionalPublisher as _,
};
use tokio::sync::{Notify, RwLock};
use tokio::time::Instant;

use super::{EOS_SOURCE_HEADER, EosGroup, SourceOffset, decode_shared_source};
use crate::client::consumer::OffsetToCommit;
use crate::connection::ConnectedKafkaBroker;
use crate::error::KafkaError;
use crate::produce::{KafkaOptions, Outgoing, delivered, producer_record};
use crate::publisher::KafkaPublish;
use crate::subscriber::partition::Partition;
use crate::transactional::{
    KafkaTransactionalPublish, KafkaTransactionalPublisher, open_transactional,
};

/// Kafka Streams' commit interval under exactly-once.
const WINDOW_INTERVAL: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The exactly-once pipeline policy. Its id is the transactional id of the pipeline's producer
/// and the id the feeding subscriptions name in `Commit::Transactional(id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct KafkaEosPublish {
    transactional: KafkaTransactionalPublish,
    commit_interval: Duration,
}

impl KafkaEosPublish {
    /// The pipeline `id`.
    pub fn new(id: impl Into<String>) -> Self {
        let transactional = KafkaPublish::default().transactional_id(id);
        Self {
            transactional,
            commit_interval: WINDOW_INTERVAL,
        }
    }

    /// How long a window admits new deliveries before it commits (default 100 ms).
    pub const fn commit_interval(mut self, interval: Duration) -> Self {
        self.commit_interval = interval;
        self
    }

    /// The deadline of the transaction calls and of a closing window's wait for its
    /// deliveries to settle (default 30 s).
    pub fn transaction_timeout(self, timeout: Duration) -> Self {
        let transactional = self.transactional.transaction_timeout(timeout);
        Self {
            transactional,
            ..self
        }
    }

    /// How long a publish may wait for room in the producer's local queue (as
    /// [`KafkaPublish::queue_timeout`]).
    pub fn queue_timeout(self, timeout: Duration) -> Self {
        let transactional = self.transactional.queue_timeout(timeout);
        Self {
            transactional,
            ..self
        }
    }

    /// The pipeline id.
    #[must_use]
    pub fn id(&self) -> &str {
        self.transactional.id()
    }
}

impl PublishPolicy<ConnectedKafkaBroker> for KafkaEosPublish {
    type Live = EosPipeline;

    /// Pairs like the transactional policy: the producer is created and initialized, fencing
    /// older holders of the id.
    fn pair(
        self,
        connected: &ConnectedKafkaBroker,
    ) -> impl Future<Output = Result<EosPipeline, PairError>> + Send {
        let state = connected.shared_state();
        async move {
            let publisher = open_transactional(&state, &self.transactional)
                .await
                .map_err(PairError::new)?;
            let group = state.eos().group(self.id());
            Ok(EosPipeline::new(publisher, self.commit_interval, group))
        }
    }

    /// The channel names the topic the pipeline's transactions write to.
    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ruststream::asyncapi::Bindings {
        crate::bindings::channel(channel)
    }
}

/// (topic, partition) of a source.
type Key = (Str, i32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No transaction open: the next publish opens one.
    Idle,
    /// Admits every delivery.
    Open,
    /// Admits only the deliveries the window already enrolled; the task waits for them.
    Closing,
    /// Admits nothing; the task commits or aborts.
    Ending,
}

/// What a window answers of one partition.
struct Enrolled {
    max: i64,
    /// The source partition and its generation at enrollment (`None` when no registered
    /// source reads it: the window then fails naming the missing setup).
    part: Option<(Arc<Partition>, u64)>,
}

struct Window {
    phase: Phase,
    /// Moves on when a window ends, so a publish admitted into one never lands in the next.
    epoch: u64,
    enrolled: HashMap<Key, Enrolled>,
    /// A publish admitted into this window failed.
    failed: bool,
}

/// Whether a partition of `enrolled` was repositioned since it enrolled.
fn is_void(enrolled: &HashMap<Key, Enrolled>) -> bool {
    enrolled
        .values()
        .any(|e| e.part.as_ref().is_some_and(|(p, g)| !p.is_current(*g)))
}

/// Where an aborted window sends its partitions back to.
#[derive(Default)]
struct Book {
    /// The next offset of the last commit of this pipeline, per partition.
    committed: HashMap<Key, i64>,
    /// The lowest offset this pipeline enrolled, per partition.
    first: HashMap<Key, i64>,
}

struct Pipeline {
    publisher: KafkaTransactionalPublisher,
    interval: Duration,
    group: Arc<EosGroup>,
    window: Mutex<Window>,
    /// A window changed phase, or a publish into it failed.
    changed: Notify,
    /// Read while a publish queues its record; written while the task ends the window.
    gate: RwLock<()>,
    book: Mutex<Book>,
}

/// A live exactly-once pipeline: one transactional producer shared by every handler that
/// publishes through it, committing consumed offsets with the output, window by window.
/// Clones share it.
///
/// Its sources are the subscriptions opened with `Commit::Transactional(id)` of the same id
/// on the same connection. Mount it as a reply publisher with [`EosReplies`](crate::EosReplies)
/// (which relays each delivery's coordinates), or call [`publish`](Self::publish) with the
/// delivery's [`SourceOffset`].
#[derive(Clone)]
pub struct EosPipeline {
    inner: Arc<Pipeline>,
}

impl fmt::Debug for EosPipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EosPipeline")
            .field("id", &self.inner.publisher.id())
            .field("commit_interval", &self.inner.interval)
            .finish_non_exhaustive()
    }
}

impl EosPipeline {
    fn new(
        publisher: KafkaTransactionalPublisher,
        interval: Duration,
        group: Arc<EosGroup>,
    ) -> Self {
        Self {
            inner: Arc::new(Pipeline {
                publisher,
                interval,
                group,
                window: Mutex::new(Window {
                    phase: Phase::Idle,
                    epoch: 0,
                    enrolled: HashMap::new(),
                    failed: false,
                }),
                changed: Notify::new(),
                gate: RwLock::new(()),
                book: Mutex::new(Book::default()),
            }),
        }
    }

    /// The pipeline id (also its transactional id).
    #[must_use]
    pub fn id(&self) -> &str {
        self.inner.publisher.id()
    }

    /// Publishes `msg` into the open window on behalf of the consumed record `source`, and
    /// waits for its delivery report. Opens a window when none is open; waits while a closing
    /// window finishes when `source` is not part of it.
    ///
    /// Fails with [`KafkaError::Closed`] after shutdown and with [`KafkaError::Publish`] when
    /// the record is refused or not delivered (its window then aborts and replays), or when
    /// `source` was repositioned before this publish (its replay publishes instead).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped while it waits for a window it leaves nothing, but once `source` is
    /// enrolled the window waits for it to settle and then commits its offset, and a record already
    /// queued is still delivered into the window. After a drop, hand the delivery back with
    /// `nack(true)` instead of settling it (`ack` or `nack(false)`): the window then cannot settle,
    /// aborts and replays. Publishing again could put the record in twice.
    pub async fn publish(
        &self,
        source: &SourceOffset,
        msg: OutgoingMessage<'_>,
        options: Option<&KafkaOptions>,
    ) -> Result<(), KafkaError> {
        let (name, payload, headers) = msg.into_parts();
        self.publish_parts(source, name, payload, headers, options)
            .await
    }

    async fn publish_parts(
        &self,
        source: &SourceOffset,
        name: &str,
        payload: &[u8],
        headers: HeaderMap,
        options: Option<&KafkaOptions>,
    ) -> Result<(), KafkaError> {
        let p = &self.inner;
        p.publisher.state().ensure_open(name)?;
        let record = producer_record(name, payload, headers, options)?;
        let epoch = self.take_into_window(source).await?;
        let outcome = self.send(epoch, &record).await;
        if outcome.is_err() {
            let mut window = lock(&p.window);
            if window.epoch == epoch {
                window.failed = true;
                drop(window);
                p.changed.notify_waiters();
            }
        }
        outcome
    }

    /// Queues `record` in the window of `epoch`, if that window still takes records.
    async fn send(&self, epoch: u64, record: &Outgoing<'_>) -> Result<(), KafkaError> {
        let p = &self.inner;
        let queued = {
            let _gate = p.gate.read().await;
            if lock(&p.window).epoch != epoch {
                return Err(KafkaError::Publish(KafkaError::text(format!(
                    "exactly-once pipeline {}: the window this record was admitted into ended \
                     before the record was queued",
                    self.id()
                ))));
            }
            p.publisher.enqueue(record).await
        };
        delivered(queued).await
    }

    /// Admits `source` into a window and returns the window's epoch.
    async fn take_into_window(&self, source: &SourceOffset) -> Result<u64, KafkaError> {
        let p = &self.inner;
        let key: Key = (source.topic.clone(), source.partition);
        loop {
            let mut changed = pin!(p.changed.notified());
            changed.as_mut().enable();
            {
                let mut window = lock(&p.window);
                let part = match window.enrolled.get(&key) {
                    Some(Enrolled {
                        part: Some((part, _)),
                        ..
                    }) => Some(Arc::clone(part)),
                    _ => p
                        .group
                        .locate(&source.topic, source.partition)
                        .map(|(_, part)| part),
                };
                let generation = match &part {
                    Some(part) => Some(current_generation(part, source).ok_or_else(|| {
                        KafkaError::Publish(KafkaError::text(format!(
                            "exactly-once pipeline {}: {}[{}] offset {} was repositioned (a \
                             seek or a rebalance) before this reply was published; the \
                             record's replay publishes it",
                            self.id(),
                            source.topic,
                            source.partition,
                            source.offset
                        )))
                    })?),
                    None => None,
                };
                let void = is_void(&window.enrolled);
                match window.phase {
                    Phase::Idle => {
                        p.publisher.begin()?;
                        window.phase = Phase::Open;
                        window.failed = false;
                        crate::client::outlined::spawn_on(
                            p.publisher.state().runtime(),
                            run_window(Arc::clone(p)),
                        );
                        self.enroll(&mut window, key, source.offset, part, generation);
                        return Ok(window.epoch);
                    }
                    Phase::Open if !void => {
                        self.enroll(&mut window, key, source.offset, part, generation);
                        return Ok(window.epoch);
                    }
                    Phase::Closing
                        if !void
                            && window
                                .enrolled
                                .get(&key)
                                .is_some_and(|e| source.offset <= e.max) =>
                    {
                        return Ok(window.epoch);
                    }
                    _ => {}
                }
            }
            changed.await;
        }
    }

    fn enroll(
        &self,
        window: &mut Window,
        key: Key,
        offset: i64,
        part: Option<Arc<Partition>>,
        generation: Option<u64>,
    ) {
        lock(&self.inner.book)
            .first
            .entry(key.clone())
            .and_modify(|first| *first = (*first).min(offset))
            .or_insert(offset);
        let entry = window.enrolled.entry(key).or_insert_with(|| Enrolled {
            max: offset,
            part: part.zip(generation),
        });
        entry.max = entry.max.max(offset);
    }
}

/// The generation `source` was delivered in, if it is still outstanding there.
fn current_generation(part: &Partition, source: &SourceOffset) -> Option<u64> {
    let tracked = part.tracked.lock();
    let generation = tracked.generation();
    tracked
        .is_outstanding(generation, source.offset)
        .then_some(generation)
}

impl Publisher for EosPipeline {
    type Payload = Lend;
    type Error = KafkaError;
    type Options = KafkaOptions;

    /// Publishes a reply on behalf of the delivery named by its [`EOS_SOURCE_HEADER`] (put
    /// there by [`EosReplies`](crate::EosReplies)); the header is taken off the record. A
    /// missing or malformed header is [`KafkaError::InvalidOptions`]. Otherwise as
    /// [`EosPipeline::publish`].
    async fn publish(
        &self,
        msg: OutgoingMessage<'_, &[u8]>,
        options: Option<&KafkaOptions>,
    ) -> Result<(), KafkaError> {
        let Some(source) = msg
            .headers()
            .get_shared(EOS_SOURCE_HEADER)
            .and_then(decode_shared_source)
        else {
            return Err(KafkaError::InvalidOptions(format!(
                "exactly-once pipeline {}: the message carries no valid `{EOS_SOURCE_HEADER}` \
                 header, so it cannot say which consumed record it answers; consume with \
                 `Commit::Transactional(\"{}\")` and add the `EosReplies` transform to the reply \
                 publisher that uses this pipeline",
                self.id(),
                self.id()
            )));
        };
        // The producer record drops the source header, so the map moves over as it is.
        let (name, payload, headers) = msg.into_parts();
        self.publish_parts(&source, name, payload, headers, options)
            .await
    }
}

// --- the window task ---

/// Why a window did not commit.
enum Ended {
    /// A partition was repositioned: abort, no seek-back.
    Void,
    /// Anything else: abort and seek back.
    Failed(KafkaError),
}

async fn run_window(p: Arc<Pipeline>) {
    stay_open(&p).await;
    let failed = {
        let mut window = lock(&p.window);
        window.phase = Phase::Closing;
        window.failed
    };
    p.changed.notify_waiters();
    let settled = if failed {
        Err(publish_failed(&p))
    } else {
        settle(&p).await
    };
    let enrolled = {
        let _gate = p.gate.write().await;
        let mut window = lock(&p.window);
        window.phase = Phase::Ending;
        window.epoch += 1;
        std::mem::take(&mut window.enrolled)
    };
    let outcome = match settled {
        Ok(()) => commit(&p, &enrolled).await,
        Err(ended) => Err(ended),
    };
    let id = p.publisher.id();
    match outcome {
        Ok(()) => {
            tracing::debug!(pipeline = %id, partitions = enrolled.len(), "exactly-once window committed");
        }
        Err(Ended::Void) => {
            abort(&p).await;
            let mut book = lock(&p.book);
            for key in enrolled.keys() {
                book.committed.remove(key);
                book.first.remove(key);
            }
            drop(book);
            tracing::error!(
                pipeline = %id,
                "exactly-once window aborted: a partition it read was repositioned (a seek or a \
                 rebalance) while it was open; the deliveries from the new position go into \
                 the next window"
            );
        }
        Err(Ended::Failed(err)) => {
            abort(&p).await;
            seek_back(&p, &enrolled).await;
            tracing::error!(
                pipeline = %id,
                error = %err,
                "exactly-once window aborted; its partitions went back to their last \
                 committed offsets and replay"
            );
        }
    }
    {
        let mut window = lock(&p.window);
        window.phase = Phase::Idle;
        window.failed = false;
    }
    p.changed.notify_waiters();
}

/// Admits deliveries for the commit interval, or until a reposition voids the window.
async fn stay_open(p: &Pipeline) {
    let until = Instant::now() + p.interval;
    loop {
        let mut repositioned = pin!(p.group.repositioned.notified());
        repositioned.as_mut().enable();
        if is_void(&lock(&p.window).enrolled) {
            return;
        }
        if tokio::time::timeout_at(until, repositioned).await.is_err() {
            return;
        }
    }
}

fn publish_failed(p: &Pipeline) -> Ended {
    Ended::Failed(KafkaError::Publish(KafkaError::text(format!(
        "exactly-once pipeline {}: a publish into the window failed",
        p.publisher.id()
    ))))
}

/// Waits until every enrolled partition's stored watermark reaches what the window answers.
async fn settle(p: &Pipeline) -> Result<(), Ended> {
    let deadline = Instant::now() + p.publisher.timeout();
    loop {
        let mut settled = pin!(p.group.settled.notified());
        settled.as_mut().enable();
        let mut repositioned = pin!(p.group.repositioned.notified());
        repositioned.as_mut().enable();
        let mut changed = pin!(p.changed.notified());
        changed.as_mut().enable();
        let pending = {
            let window = lock(&p.window);
            if window.failed {
                return Err(publish_failed(p));
            }
            if is_void(&window.enrolled) {
                return Err(Ended::Void);
            }
            let mut pending = None;
            for ((topic, partition), enrolled) in &window.enrolled {
                let Some((part, _)) = &enrolled.part else {
                    return Err(Ended::Failed(unregistered(p, topic, *partition)));
                };
                if part
                    .tracked
                    .lock()
                    .stored()
                    .is_none_or(|s| s < enrolled.max)
                {
                    pending = Some((topic.clone(), *partition, enrolled.max));
                    break;
                }
            }
            pending
        };
        let Some((topic, partition, max)) = pending else {
            return Ok(());
        };
        tokio::select! {
            () = settled => {}
            () = repositioned => {}
            () = changed => {}
            () = tokio::time::sleep_until(deadline) => {
                return Err(Ended::Failed(KafkaError::Publish(KafkaError::text(format!(
                    "exactly-once pipeline {}: {topic}[{partition}] did not settle up to offset \
                     {max} within {:?} (a handler hangs, a delivery was nacked, or its partition \
                     was revoked)",
                    p.publisher.id(),
                    p.publisher.timeout()
                )))));
            }
        }
    }
}

fn unregistered(p: &Pipeline, topic: &str, partition: i32) -> KafkaError {
    let id = p.publisher.id();
    KafkaError::InvalidOptions(format!(
        "exactly-once pipeline {id} published for {topic}[{partition}], which no subscription \
         with `Commit::Transactional(\"{id}\")` on this connection reads: the consumed offsets \
         cannot be committed with the output"
    ))
}

/// Puts every source's stored positions into the transaction and commits it.
async fn commit(p: &Pipeline, enrolled: &HashMap<Key, Enrolled>) -> Result<(), Ended> {
    let id = p.publisher.id();
    let mut batches = Vec::new();
    for source in p.group.live() {
        let positions = source.stored_positions();
        if positions.is_empty() {
            continue;
        }
        let group = source.group_metadata().ok_or_else(|| {
            Ended::Failed(KafkaError::Publish(KafkaError::text(format!(
                "exactly-once pipeline {id}: subscription {:?} has no consumer group, so its \
                 offsets cannot be committed in a transaction",
                source.name()
            ))))
        })?;
        batches.push((positions, group));
    }
    // Read after the positions: a reposition from here on leaves them consistent with the
    // output, which is already in the transaction.
    if is_void(enrolled) {
        return Err(Ended::Void);
    }
    let mut sent = Vec::new();
    for (positions, group) in batches {
        let offsets = positions
            .iter()
            .map(|(tp, next)| OffsetToCommit {
                topic: tp.topic.to_string(),
                partition: tp.partition,
                offset: *next,
                leader_epoch: -1,
                metadata: None,
            })
            .collect();
        p.publisher
            .send_offsets(offsets, group)
            .await
            .map_err(Ended::Failed)?;
        sent.extend(positions);
    }
    commit_to_the_end(p).await.map_err(Ended::Failed)?;
    let mut book = lock(&p.book);
    for (tp, next) in sent {
        book.committed
            .insert((Str::from(tp.topic.to_string()), tp.partition), next);
    }
    Ok(())
}

/// Commits the window's transaction, and commits again while a commit fails undecided (a
/// timeout, a lost coordinator: it may have committed). Aborting it instead and replaying
/// would write the window's output twice whenever the first commit had landed.
async fn commit_to_the_end(p: &Pipeline) -> Result<(), KafkaError> {
    let mut delay = RETRY_FIRST;
    loop {
        let err = match p.publisher.commit().await {
            Ok(()) => return Ok(()),
            Err(err) => err,
        };
        if matches!(err, KafkaError::Closed { .. }) || !p.publisher.commit_undecided() {
            return Err(err);
        }
        tracing::warn!(
            pipeline = %p.publisher.id(),
            error = %err,
            retry_in = ?delay,
            "committing an exactly-once window did not finish; committing again"
        );
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RETRY_MAX);
    }
}

/// Aborts the window's transaction, and aborts again while an abort fails undecided (a
/// timeout, a lost connection: the producer is still inside the transaction), so that the
/// next window can begin: given up on, the pipeline would refuse every publish from then on.
/// A producer that failed for good (fenced, fatal) is initialized again, which aborts what
/// the coordinator holds open; the pipeline stops only when the broker shuts down.
async fn abort(p: &Pipeline) {
    let mut delay = RETRY_FIRST;
    loop {
        let err = match p.publisher.abort().await {
            Ok(()) => return,
            Err(err) => err,
        };
        if matches!(err, KafkaError::Closed { .. }) {
            return;
        }
        if p.publisher.failed_for_good() {
            tracing::error!(
                pipeline = %p.publisher.id(),
                error = %err,
                "the exactly-once pipeline's producer failed for good; initializing it again \
                 (a new epoch: the open transaction is aborted)"
            );
            reinit(p).await;
            return;
        }
        if !p.publisher.unfinished() {
            tracing::error!(
                pipeline = %p.publisher.id(),
                error = %err,
                "aborting an exactly-once window failed; the coordinator aborts the transaction \
                 after `transaction.timeout.ms`"
            );
            return;
        }
        tracing::warn!(
            pipeline = %p.publisher.id(),
            error = %err,
            retry_in = ?delay,
            "aborting an exactly-once window did not finish; aborting again"
        );
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RETRY_MAX);
    }
}

/// Initializes the failed producer again until it works or the broker shuts down.
async fn reinit(p: &Pipeline) {
    let mut delay = RETRY_FIRST;
    loop {
        match p.publisher.reinit().await {
            Ok(()) => {
                tracing::warn!(
                    pipeline = %p.publisher.id(),
                    "the exactly-once pipeline's producer is initialized again"
                );
                return;
            }
            Err(KafkaError::Closed { .. }) => return,
            Err(err) => {
                tracing::warn!(
                    pipeline = %p.publisher.id(),
                    error = %err,
                    retry_in = ?delay,
                    "initializing the exactly-once pipeline's producer again failed"
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    }
}

/// The first pause before an unfinished commit or abort, or a failed re-initialization, is
/// tried again; it doubles each time.
const RETRY_FIRST: Duration = Duration::from_millis(200);
/// The longest pause between attempts.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Sends every enrolled partition back to the last offset this pipeline committed for it,
/// else to the lowest offset it enrolled or has delivered and not settled.
async fn seek_back(p: &Pipeline, enrolled: &HashMap<Key, Enrolled>) {
    let targets: Vec<(&Key, i64)> = {
        let book = lock(&p.book);
        enrolled
            .iter()
            .filter_map(|(key, window)| {
                if let Some(committed) = book.committed.get(key) {
                    return Some((key, *committed));
                }
                // A delivery whose handler has not published yet is not enrolled; seeking
                // past it would skip it (its late publish is refused after the seek).
                let unsettled = window.part.as_ref().and_then(|(part, generation)| {
                    part.tracked.lock().lowest_outstanding(*generation)
                });
                let target = match (book.first.get(key).copied(), unsettled) {
                    (Some(first), Some(unsettled)) => first.min(unsettled),
                    (first, unsettled) => first.or(unsettled)?,
                };
                Some((key, target))
            })
            .collect()
    };
    for ((topic, partition), offset) in targets {
        let Some((source, _)) = p.group.locate(topic, *partition) else {
            continue;
        };
        let to = crate::KafkaPosition::topic_offset(topic.to_string(), *partition, offset);
        if let Err(err) = source.seek(to).await {
            // A partition revoked meanwhile cannot move; its next owner starts from the
            // group's committed offset anyway.
            tracing::debug!(
                pipeline = %p.publisher.id(),
                topic = %topic,
                partition,
                error = %err,
                "seeking back after an aborted exactly-once window failed"
            );
        }
    }
}
