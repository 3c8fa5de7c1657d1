//! The sender task: turns ready batches into Produce requests and settles their records.
//!
//! One task per producer owns the scheduling. It sends at most one batch per partition per
//! request, respects the per-connection in-flight limit, and keeps the idempotence invariants:
//! - a batch gets its base sequence when it is first sent and keeps it across retries, so the
//!   broker recognises a retry of a batch it already wrote (`DUPLICATE_SEQUENCE_NUMBER` or the
//!   original offsets) and writes nothing twice;
//! - after a failure, a partition sends nothing new until all of its in-flight batches have
//!   come back, then resends in sequence order, so the broker never sees a gap;
//! - when a sequence gap is unavoidable (a batch given up after being sent, or the broker lost
//!   our producer state), the epoch is bumped with `InitProducerId` once nothing is in flight,
//!   and sequences restart at zero. Batches whose outcome is unknown at that moment fail rather
//!   than risk a duplicate under the new epoch.
//!
//! A transactional producer adds (see `transaction/state.rs`): with the classic protocol a
//! partition's batches wait until `AddPartitionsToTxn` has registered the partition (one
//! request at a time, for every partition waiting); batches carry the transactional flag and
//! the Produce request the transactional id; once the open transaction has failed or is being
//! aborted, unsent batches fail instead of going out and failed ones are not retried; and
//! the epoch is never bumped here: the transaction's `abort` (or KIP-890's `EndTxn`) does it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    InitProducerIdRequest, ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::RecordMetadata;
use super::accumulator::{ClosedBatch, PartitionQueue, Pending, Shared, State, close_open};
use super::transaction::{Origin, Requests, TxnState, classify};
use crate::client::config::Acks;
use crate::client::error::{Error, Result};
use crate::client::net::{Connection, InFlight};
use crate::client::observe::{Event as Observed, Interest, Observers};
use crate::client::records::ProducerState;
use crate::client::unwind::unwound;

/// Produce versions with topic names (v13 moved to topic ids).
const PRODUCE_VERSIONS: VersionRange = VersionRange { min: 3, max: 12 };
const INIT_PRODUCER_ID_VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

enum Event {
    Produced {
        node: i32,
        batches: Vec<ClosedBatch>,
        result: Result<Option<ProduceResponse>>,
        /// Whether the request may have reached the broker (if not, a failure is harmless).
        reached_wire: bool,
    },
    ProducerId(Result<(i64, i16)>),
    Refreshed,
    /// An `AddPartitionsToTxn` came back.
    Registered {
        partitions: Vec<(Arc<str>, i32)>,
        result: Result<()>,
    },
}

struct Sender {
    shared: Arc<Shared>,
    tasks: JoinSet<Event>,
    node_in_flight: HashMap<i32, usize>,
    batches_in_flight: usize,
    init_in_flight: bool,
    init_backoff: crate::client::net::Backoff,
    init_retry_at: Option<Instant>,
    /// After a fatal error of an idempotent producer: when it starts over with a new
    /// producer id, and how long the next wait is.
    rebuild_at: Option<Instant>,
    rebuild_wait: Duration,
    refresh_in_flight: bool,
    refresh_topics: HashSet<Arc<str>>,
    last_refresh: Option<Instant>,
    /// Connections to the leaders, fetched before each planning round.
    conns: HashMap<i32, Arc<Connection>>,
    /// When a leader could not be dialled, the next time to try.
    dial_retry_at: Option<Instant>,
    /// The transactional id and the Produce versions of the protocol, for transactional
    /// producers (fixed at each planning round: `init` may change the protocol).
    txn_produce: Option<(StrBytes, VersionRange)>,
    /// When the queue is next reported to the observers that asked for statistics.
    statistics_at: Option<Instant>,
}

/// How often the queue is reported when an observer asks and `statistics.interval.ms` is 0.
const DEFAULT_STATISTICS_INTERVAL: Duration = Duration::from_secs(1);

/// The first wait before a failed idempotent producer starts over; it doubles with every
/// failure in a row, up to [`MAX_REBUILD_WAIT`].
const FIRST_REBUILD_WAIT: Duration = Duration::from_secs(1);
const MAX_REBUILD_WAIT: Duration = Duration::from_secs(30);

pub(super) async fn run(shared: Arc<Shared>) {
    let init_backoff = shared.client.retry_backoff();
    let mut sender = Sender {
        shared,
        tasks: JoinSet::new(),
        node_in_flight: HashMap::new(),
        batches_in_flight: 0,
        init_in_flight: false,
        init_backoff,
        init_retry_at: None,
        rebuild_at: None,
        rebuild_wait: FIRST_REBUILD_WAIT,
        refresh_in_flight: false,
        refresh_topics: HashSet::new(),
        last_refresh: None,
        conns: HashMap::new(),
        dial_retry_at: None,
        txn_produce: None,
        statistics_at: None,
    };
    sender.run().await;
}

impl Sender {
    fn idempotent(&self) -> bool {
        self.shared.config.enable_idempotence
    }

    fn transactional(&self) -> bool {
        self.shared.config.transactional_id.is_some()
    }

    async fn run(&mut self) {
        loop {
            let closing = self.shared.closed.load(Ordering::Acquire);
            if closing {
                self.fail_everything(&Error::Closed("producer closed".into()));
                if self.tasks.is_empty() {
                    // the last sample: the observers' view of the queue does not stay stale
                    self.report_queue();
                    return;
                }
            }
            while let Some(joined) = self.tasks.try_join_next() {
                match joined {
                    Ok(event) => self.handle(event),
                    Err(e) => tracing::error!(error = %e, "producer request task failed"),
                }
            }
            self.maybe_rebuild();
            self.maybe_init_producer_id();
            self.connect_leaders().await;
            let (requests, mut next_wake) = self.plan(Instant::now(), closing);
            self.maybe_report_queue();
            for at in [
                self.dial_retry_at,
                self.init_retry_at,
                self.rebuild_at,
                self.statistics_at,
            ]
            .into_iter()
            .flatten()
            {
                next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
            }
            let sent_any = !requests.is_empty();
            for (node, batches) in requests {
                self.dispatch(node, batches);
            }
            self.maybe_refresh();
            if sent_any {
                // More may be sendable right away (the next batch of a partition).
                tokio::task::yield_now().await;
                continue;
            }
            let sleep = tokio::time::sleep_until(
                next_wake.unwrap_or_else(|| Instant::now() + Duration::from_hours(1)),
            );
            tokio::select! {
                () = self.shared.wake.notified() => {}
                () = sleep => {}
                Some(joined) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    match joined {
                        Ok(event) => self.handle(event),
                        Err(e) => tracing::error!(error = %e, "producer request task failed"),
                    }
                }
            }
        }
    }

    /// Reports the queue to the observers that ask for statistics, when its time has come.
    fn maybe_report_queue(&mut self) {
        let config = self.shared.client.config();
        if !config.observers.wants(Interest::STATISTICS) {
            return;
        }
        let now = Instant::now();
        if self.statistics_at.is_some_and(|at| now < at) {
            return;
        }
        let every = if config.statistics_interval.is_zero() {
            DEFAULT_STATISTICS_INTERVAL
        } else {
            config.statistics_interval
        };
        self.statistics_at = Some(now + every);
        self.report_queue();
    }

    fn report_queue(&self) {
        let config = self.shared.client.config();
        if !config.observers.wants(Interest::STATISTICS) {
            return;
        }
        let (records, bytes) = self.shared.queued();
        config.observers.emit(&Observed::ProducerQueue {
            client_id: &config.client_id,
            records,
            bytes,
            requests_in_flight: self.node_in_flight.values().sum(),
        });
    }

    /// An idempotent producer that failed starts over once its wait is up: a new producer
    /// id, sequences from zero. Every record it held failed with the fatal error, loudly, and
    /// sends were refused meanwhile; none is sent twice or out of order across the restart,
    /// because none is carried over.
    fn maybe_rebuild(&mut self) {
        let Some(at) = self.rebuild_at else {
            return;
        };
        if Instant::now() < at || self.batches_in_flight > 0 {
            return;
        }
        self.rebuild_at = None;
        let mut state = self.shared.lock();
        let Some(was) = state.fatal.take() else {
            return;
        };
        tracing::warn!(error = %was, "the idempotent producer starts over with a new producer id");
        state.producer_id = -1;
        state.producer_epoch = -1;
        state.bump_needed = false;
        self.restart_sequences(&mut state);
        drop(state);
        self.init_backoff.reset();
        self.init_retry_at = None;
    }

    fn maybe_init_producer_id(&mut self) {
        // A transactional producer's id comes from `init`, through its coordinator.
        if !self.idempotent() || self.transactional() || self.init_in_flight {
            return;
        }
        let (pid, epoch, bump) = {
            let s = self.shared.lock();
            (s.producer_id, s.producer_epoch, s.bump_needed)
        };
        if pid >= 0 && !bump {
            return;
        }
        if bump && self.batches_in_flight > 0 {
            return; // the bump waits until every outstanding answer is in
        }
        if self.init_retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        self.init_in_flight = true;
        let client = self.shared.client.clone();
        let timeout = self.shared.config.request_timeout;
        self.tasks.spawn(async move {
            let outcome = unwound("InitProducerId", async {
                let conn = client.any_connection().await?;
                let version =
                    conn.version_of::<InitProducerIdRequest>(INIT_PRODUCER_ID_VERSIONS)?;
                let mut request = InitProducerIdRequest::default()
                    .with_transactional_id(None) // the default is "", which brokers refuse
                    .with_transaction_timeout_ms(60_000);
                if pid >= 0 && version >= 3 {
                    request = request
                        .with_producer_id(ProducerId(pid))
                        .with_producer_epoch(epoch);
                } else {
                    request = request
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1);
                }
                let response = conn.send(&request, version, timeout).await?;
                Error::check(response.error_code, || "InitProducerId".to_owned())?;
                Ok((response.producer_id.0, response.producer_epoch))
            })
            .await;
            Event::ProducerId(outcome)
        });
    }

    /// Picks what to send now; returns the requests by leader and when to look again.
    fn plan(
        &mut self,
        now: Instant,
        closing: bool,
    ) -> (HashMap<i32, Vec<ClosedBatch>>, Option<Instant>) {
        let config = &self.shared.config;
        let idempotent = config.enable_idempotence;
        let per_connection = config.effective_in_flight();
        let mut next_wake: Option<Instant> = None;
        let mut wake_at = |t: Instant| next_wake = Some(next_wake.map_or(t, |w: Instant| w.min(t)));
        let mut requests: HashMap<i32, Vec<ClosedBatch>> = HashMap::new();
        let mut request_bytes: HashMap<i32, usize> = HashMap::new();
        let mut expired: Vec<ClosedBatch> = Vec::new();
        let mut guard = self.shared.lock();
        let state: &mut State = &mut guard;
        let flushing = state.flushing > 0 || closing;
        let producer_ready = !idempotent || (state.producer_id >= 0 && !state.bump_needed);
        let (pid, epoch) = (state.producer_id, state.producer_epoch);
        let mut gate = TxnGate::new(state.txn.as_ref());
        self.txn_produce = state.txn.as_ref().map(txn_produce);
        let mut topics: Vec<Arc<str>> = Vec::new();
        let mut released = Released::new(&self.shared.client.config().observers);
        for (topic, queues) in &mut state.topics {
            for (p, queue) in queues.partitions.iter_mut().enumerate() {
                let partition = p as i32;
                if let Some(at) = age(queue, topic, partition, now, flushing, config, &mut expired)
                {
                    wake_at(at);
                }
                if gate.holds(state.txn.as_ref(), queue, topic, partition, &mut released) {
                    continue;
                }
                if queue.ready.is_empty() || !producer_ready {
                    continue;
                }
                if queue.draining {
                    if queue.in_flight > 0 {
                        continue;
                    }
                    queue.draining = false;
                }
                if let Some(at) = queue.retry_at {
                    if now < at {
                        wake_at(at);
                        continue;
                    }
                    queue.retry_at = None;
                }
                if idempotent && queue.in_flight >= if queue.acked_in_epoch { 5 } else { 1 } {
                    continue;
                }
                let leader = self
                    .shared
                    .client
                    .with_metadata(|m| m.leader(topic, partition));
                let Some((node, _epoch)) = leader else {
                    topics.push(topic.clone());
                    continue;
                };
                let Some(conn) = self.conns.get(&node).filter(|c| !c.is_closed()) else {
                    // The connection broke after it was fetched: dial again right away (or
                    // when the dial backoff says), not at the next unrelated wake-up.
                    wake_at(self.dial_retry_at.unwrap_or(now));
                    continue;
                };
                if queue.in_flight > 0 && queue.in_flight_conn != conn.id() {
                    // Earlier batches are still out on another (broken) connection: their fate
                    // must be known before anything after them goes out.
                    continue;
                }
                let busy = self.node_in_flight.get(&node).copied().unwrap_or(0)
                    + requests.get(&node).map_or(0, |_| 1);
                if busy >= per_connection && !requests.contains_key(&node) {
                    continue;
                }
                // A request stays within message.max.bytes (librdkafka's meaning of it: the
                // largest protocol request), except that one batch always goes; what does not
                // fit goes in the next request, planned right after this one.
                let size = queue.ready.front().map_or(0, |b| {
                    b.encoded.as_ref().map_or(b.builder.size(), Bytes::len)
                });
                let planned = request_bytes.get(&node).copied().unwrap_or(0);
                if planned > 0 && planned + size > config.message_max_bytes {
                    continue;
                }
                let Some(mut batch) = queue.ready.pop_front() else {
                    continue;
                };
                *request_bytes.entry(node).or_default() += size;
                if let Err(e) = prepare(config, queue, &mut batch, pid, epoch) {
                    note_txn_failure(&mut state.txn, &e);
                    fail_batch(&mut released, batch, &e);
                    continue;
                }
                queue.in_flight += 1;
                queue.in_flight_conn = conn.id();
                requests.entry(node).or_default().push(batch);
            }
        }
        // KIP-890: the first Produce registers the partition, so the transaction exists at
        // the coordinator from now on.
        if let Some(txn) = state.txn.as_mut().filter(|_| !requests.is_empty()) {
            txn.started = true;
        }
        self.refresh_topics.extend(topics);
        let expired_sequenced = fail_expired(state, expired, &mut released);
        if idempotent && (expired_sequenced || gate.dropped_sequenced) {
            state.bump_needed = true;
        }
        self.shared.release(state, released.records, released.bytes);
        drop(guard);
        self.maybe_register(gate.to_register);
        (requests, next_wake)
    }

    /// Starts an `AddPartitionsToTxn` for the partitions waiting for one, unless one is in
    /// flight (the partitions it lacks go in the next).
    fn maybe_register(&mut self, partitions: Vec<(Arc<str>, i32)>) {
        if partitions.is_empty() {
            return;
        }
        let (id, producer) = {
            let mut state = self.shared.lock();
            let producer = super::transaction::ProducerIdentity {
                id: state.producer_id,
                epoch: state.producer_epoch,
            };
            let Some(txn) = &mut state.txn else {
                return;
            };
            if txn.registering {
                return;
            }
            txn.registering = true;
            (txn.id.clone(), producer)
        };
        let client = self.shared.client.clone();
        // The coordinator aborts the transaction after this long anyway.
        let deadline = Instant::now() + self.shared.config.transaction_timeout;
        self.tasks.spawn(async move {
            let requests = Requests {
                client: &client,
                transactional_id: &id,
                deadline,
            };
            let result = unwound(
                "AddPartitionsToTxn",
                requests.add_partitions(producer, &partitions),
            )
            .await;
            Event::Registered { partitions, result }
        });
    }

    fn on_registered(&mut self, partitions: Vec<(Arc<str>, i32)>, result: Result<()>) {
        let mut state = self.shared.lock();
        if let Some(txn) = &mut state.txn {
            txn.registering = false;
            match result {
                Ok(()) => {
                    txn.started = true;
                    txn.registered.extend(partitions);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "AddPartitionsToTxn failed");
                    let e = classify(
                        &txn.id,
                        Origin::Coordinator,
                        "adding partitions to the transaction",
                        e,
                    );
                    txn.failed(e);
                }
            }
        }
        self.shared.release(&mut state, 0, 0);
        drop(state);
        self.shared.wake.notify_one();
    }

    /// Dials (or reuses) the connection to every leader that has batches waiting.
    async fn connect_leaders(&mut self) {
        let now = Instant::now();
        if self.dial_retry_at.is_some_and(|at| now < at) {
            return;
        }
        self.dial_retry_at = None;
        let nodes: HashSet<i32> = {
            let state = self.shared.lock();
            let client = &self.shared.client;
            client.with_metadata(|m| {
                state
                    .topics
                    .iter()
                    .flat_map(|(topic, queues)| {
                        queues
                            .partitions
                            .iter()
                            .enumerate()
                            .filter(|(_, q)| !q.ready.is_empty() || q.open.is_some())
                            .filter_map(move |(p, _)| {
                                m.leader(topic, p as i32).map(|(node, _)| node)
                            })
                    })
                    .collect()
            })
        };
        for node in nodes {
            if self.conns.get(&node).is_some_and(|c| !c.is_closed()) {
                continue;
            }
            match self.shared.client.connection(node).await {
                Ok(conn) => {
                    self.conns.insert(node, conn);
                }
                Err(e) => {
                    tracing::debug!(node, error = %e, "cannot reach the leader");
                    self.conns.remove(&node);
                    let retry = now + self.shared.client.config().retry_backoff;
                    self.dial_retry_at = Some(self.dial_retry_at.map_or(retry, |at| at.min(retry)));
                    // The leader may have moved.
                    let topics: Vec<Arc<str>> = self.shared.lock().topics.keys().cloned().collect();
                    self.refresh_topics.extend(topics);
                }
            }
        }
    }

    /// Puts one Produce request on the wire now, on the connection the plan chose, so that
    /// requests leave in the order they were planned (sequence order within each partition);
    /// a task waits for the answer.
    fn dispatch(&mut self, node: i32, batches: Vec<ClosedBatch>) {
        *self.node_in_flight.entry(node).or_default() += 1;
        self.batches_in_flight += batches.len();
        let config = &self.shared.config;
        let started = match self.conns.get(&node) {
            Some(conn) => start_produce(
                conn,
                config.acks,
                config.request_timeout,
                &batches,
                self.txn_produce.as_ref(),
            ),
            None => Err(Error::Closed(format!("no connection to broker {node}"))),
        };
        let reached_wire = started.is_ok();
        self.tasks.spawn(async move {
            // The batches stay out here: a panic in the answer's handling still brings them
            // back, as a request whose outcome is unknown.
            let result = match started {
                Ok(Some(in_flight)) => unwound("a Produce answer", in_flight.response())
                    .await
                    .map(Some),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            Event::Produced {
                node,
                batches,
                result,
                reached_wire,
            }
        });
    }

    fn maybe_refresh(&mut self) {
        if self.refresh_in_flight || self.refresh_topics.is_empty() {
            return;
        }
        let now = Instant::now();
        let spacing = self.shared.client.config().retry_backoff;
        let delay = self.last_refresh.map_or(Duration::ZERO, |at| {
            (at + spacing).saturating_duration_since(now)
        });
        self.last_refresh = Some(now + delay);
        self.refresh_in_flight = true;
        let topics: Vec<String> = self.refresh_topics.drain().map(|t| t.to_string()).collect();
        let client = self.shared.client.clone();
        self.tasks.spawn(async move {
            tokio::time::sleep(delay).await;
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            if let Err(e) = unwound("a metadata refresh", client.refresh_metadata(&names)).await {
                tracing::debug!(error = %e, "metadata refresh failed");
            }
            Event::Refreshed
        });
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Refreshed => self.refresh_in_flight = false,
            Event::Registered { partitions, result } => self.on_registered(partitions, result),
            Event::ProducerId(outcome) => self.on_producer_id(outcome),
            Event::Produced {
                node,
                batches,
                result,
                reached_wire,
            } => {
                if let Some(n) = self.node_in_flight.get_mut(&node) {
                    *n = n.saturating_sub(1);
                }
                self.batches_in_flight = self.batches_in_flight.saturating_sub(batches.len());
                self.on_produced(node, batches, result, reached_wire);
            }
        }
    }

    fn on_producer_id(&mut self, outcome: Result<(i64, i16)>) {
        self.init_in_flight = false;
        let mut state = self.shared.lock();
        match outcome {
            Ok((pid, epoch)) => {
                self.init_backoff.reset();
                self.init_retry_at = None;
                self.rebuild_wait = FIRST_REBUILD_WAIT;
                let bumped = state.producer_id >= 0;
                tracing::debug!(producer_id = pid, epoch, bumped, "producer id assigned");
                state.producer_id = pid;
                state.producer_epoch = epoch;
                state.bump_needed = false;
                if bumped {
                    self.restart_sequences(&mut state);
                }
            }
            Err(e)
                if e.is_retriable()
                    || matches!(e.code(), Some(ResponseError::CoordinatorNotAvailable)) =>
            {
                tracing::debug!(error = %e, "InitProducerId failed; retrying");
                self.init_retry_at = Some(Instant::now() + self.init_backoff.next_delay());
            }
            Err(e) => {
                let wait = self.rebuild_wait;
                tracing::error!(error = %e, retry_in = ?wait,
                    "InitProducerId failed: every record held fails, sends are refused until the producer starts over");
                let fatal = Error::Fatal(format!("cannot get a producer id: {e}"));
                state.fatal = Some(fatal.clone());
                drop(state);
                let observers = &self.shared.client.config().observers;
                if observers.wants(Interest::PRODUCE) {
                    observers.emit(&Observed::ProducerFatal { error: &fatal });
                }
                self.fail_everything(&fatal);
                self.rebuild_at = Some(Instant::now() + wait);
                self.rebuild_wait = (wait * 2).min(MAX_REBUILD_WAIT);
                return;
            }
        }
        drop(state);
        self.shared.wake.notify_one();
    }

    /// After an epoch bump: every partition's sequences start again at zero; batches whose
    /// outcome is unknown fail instead of being sent again under the new epoch.
    fn restart_sequences(&self, state: &mut State) {
        let mut released = Released::new(&self.shared.client.config().observers);
        for queues in state.topics.values_mut() {
            for queue in &mut queues.partitions {
                queue.restart_sequence();
                let mut keep = std::collections::VecDeque::with_capacity(queue.ready.len());
                while let Some(mut b) = queue.ready.pop_front() {
                    if b.maybe_written {
                        let e = Error::Fatal(format!(
                            "delivery of {} records to {}-{} is unknown and cannot be retried safely after a producer epoch bump",
                            b.count(),
                            b.topic,
                            b.partition
                        ));
                        fail_batch(&mut released, b, &e);
                    } else {
                        b.sequence = None;
                        b.encoded = None;
                        keep.push_back(b);
                    }
                }
                queue.ready = keep;
            }
        }
        self.shared.release(state, released.records, released.bytes);
    }

    fn on_produced(
        &mut self,
        node: i32,
        batches: Vec<ClosedBatch>,
        result: Result<Option<ProduceResponse>>,
        reached_wire: bool,
    ) {
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(node, error = %e, "produce request failed");
                let shared = self.shared.clone();
                let mut state = shared.lock();
                // A request that never reached the wire was certainly not written: retry it
                // like any retriable failure, with nothing left unknown.
                let e = if reached_wire {
                    e
                } else {
                    Error::Timeout(format!("not sent: {e}"))
                };
                for b in batches {
                    self.retry_or_fail(&mut state, b, &e, reached_wire);
                }
                drop(state);
                self.shared.wake.notify_one();
                return;
            }
        };
        let mut answers: HashMap<(&str, i32), (i16, i64, i64)> = HashMap::new();
        if let Some(response) = &response {
            for t in &response.responses {
                for p in &t.partition_responses {
                    answers.insert(
                        (t.name.0.as_str(), p.index),
                        (p.error_code, p.base_offset, p.log_append_time_ms),
                    );
                }
            }
        }
        let shared = self.shared.clone();
        let mut state = shared.lock();
        let mut released = Released::new(&shared.client.config().observers);
        let mut retry = Vec::new();
        for b in batches {
            let answer = if response.is_none() {
                Some((0, -1, -1)) // acks=0: no answer is the answer
            } else {
                answers.get(&(b.topic.as_ref(), b.partition)).copied()
            };
            let Some((code, base_offset, append_time)) = answer else {
                retry.push((
                    b,
                    Error::protocol("produce response lacks a partition it was sent"),
                    true,
                ));
                continue;
            };
            match ResponseError::try_from_code(code) {
                None | Some(ResponseError::DuplicateSequenceNumber) => {
                    complete_batch(&mut state, &mut released, node, b, base_offset, append_time);
                }
                Some(code) => {
                    let e = Error::Broker {
                        code,
                        context: format!("producing to {}-{}", b.topic, b.partition),
                    };
                    retry.push((b, e, false));
                }
            }
        }
        for (b, e, unknown) in retry {
            self.retry_or_fail(&mut state, b, &e, unknown);
        }
        self.shared
            .release(&mut state, released.records, released.bytes);
        drop(state);
        self.shared.wake.notify_one();
    }

    fn retry_or_fail(
        &mut self,
        state: &mut State,
        mut batch: ClosedBatch,
        error: &Error,
        unknown_outcome: bool,
    ) {
        let config = &self.shared.config;
        let idempotent = config.enable_idempotence;
        if let Some(queue) = queue_of(state, &batch) {
            queue.in_flight = queue.in_flight.saturating_sub(1);
        }
        let code = error.code();
        let leadership = unknown_outcome
            || matches!(
                code,
                Some(
                    ResponseError::NotLeaderOrFollower
                        | ResponseError::LeaderNotAvailable
                        | ResponseError::UnknownTopicOrPartition
                        | ResponseError::FencedLeaderEpoch
                        | ResponseError::UnknownLeaderEpoch
                        | ResponseError::KafkaStorageError
                        | ResponseError::NotEnoughReplicas
                )
            );
        let sequence_trouble = idempotent
            && matches!(
                code,
                Some(ResponseError::OutOfOrderSequenceNumber | ResponseError::UnknownProducerId)
            );
        // Either an earlier batch of this partition failed too (and this one will follow it
        // in order), or the broker lost our state: then only a new epoch helps.
        let earlier_pending =
            queue_of(state, &batch).is_some_and(|q| q.draining || q.in_flight > 0);
        let transactional = state.txn.is_some();
        // A transaction that failed or is aborting retries nothing; a transactional producer
        // cannot bump its epoch in the middle of a transaction, so a real sequence gap fails
        // the batch (and with it the transaction).
        let doomed = state
            .txn
            .as_ref()
            .is_some_and(|t| t.drop_unsent().is_some());
        let retriable = !doomed
            && (error.is_retriable() || (sequence_trouble && (!transactional || earlier_pending)));
        let expired = !config.message_timeout.is_zero()
            && Instant::now() >= batch.created + config.message_timeout;
        if !retriable || batch.attempts >= config.retries || expired {
            if idempotent && batch.sequence.is_some() {
                state.bump_needed = true;
            }
            let mut released = Released::new(&self.shared.client.config().observers);
            let e = if expired && retriable {
                Error::Timeout(format!("Local: Message timed out after {error}"))
            } else {
                error.clone()
            };
            if retriable {
                // Retries that give up are an incident an operator must see (a failure the
                // caller gets is theirs to log).
                tracing::warn!(
                    topic = %batch.topic,
                    partition = batch.partition,
                    attempts = batch.attempts,
                    error = %e,
                    "a batch gave up retrying: its records fail"
                );
            }
            note_txn_failure(&mut state.txn, &e);
            fail_batch(&mut released, batch, &e);
            self.shared.release(state, released.records, released.bytes);
            return;
        }
        if sequence_trouble && !earlier_pending {
            state.bump_needed = true;
        }
        if leadership {
            self.refresh_topics.insert(batch.topic.clone());
        }
        batch.attempts += 1;
        batch.maybe_written |= unknown_outcome;
        self.shared.retries.fetch_add(1, Ordering::Relaxed);
        let delay = backoff_for(config_retry(&self.shared), batch.attempts);
        tracing::debug!(topic = %batch.topic, partition = batch.partition, attempt = batch.attempts,
            error = %error, ?delay, "batch sent again");
        let observers = &self.shared.client.config().observers;
        if observers.wants(Interest::PRODUCE) {
            observers.emit(&Observed::ProduceRetry {
                topic: &batch.topic,
                partition: batch.partition,
                records: batch.deliveries.len(),
                attempt: batch.attempts,
                error,
                delay,
            });
        }
        if let Some(queue) = queue_of(state, &batch) {
            queue.retry_at = Some(Instant::now() + delay);
            if idempotent {
                queue.draining = true;
            }
            let at = queue
                .ready
                .iter()
                .position(|b| b.order > batch.order)
                .unwrap_or(queue.ready.len());
            queue.ready.insert(at, batch);
        }
    }

    fn fail_everything(&mut self, error: &Error) {
        let mut state = self.shared.lock();
        let mut released = Released::new(&self.shared.client.config().observers);
        for (topic, queues) in &mut state.topics {
            for (p, queue) in queues.partitions.iter_mut().enumerate() {
                if let Some(open) = queue.open.take() {
                    released.fail_open(topic, p as i32, open.deliveries, error);
                }
                while let Some(b) = queue.ready.pop_front() {
                    fail_batch(&mut released, b, error);
                }
            }
        }
        self.shared
            .release(&mut state, released.records, released.bytes);
    }
}

fn config_retry(shared: &Shared) -> (Duration, Duration) {
    let c = shared.client.config();
    (c.retry_backoff, c.retry_backoff_max)
}

fn backoff_for((initial, max): (Duration, Duration), attempts: u32) -> Duration {
    let factor = 1u32 << attempts.min(16);
    initial.saturating_mul(factor).min(max)
}

fn queue_of<'a>(
    state: &'a mut State,
    batch: &ClosedBatch,
) -> Option<&'a mut super::accumulator::PartitionQueue> {
    state
        .topics
        .get_mut(&batch.topic)
        .and_then(|q| q.partitions.get_mut(batch.partition as usize))
}

fn complete_batch(
    state: &mut State,
    released: &mut Released<'_>,
    node: i32,
    batch: ClosedBatch,
    base_offset: i64,
    append_time: i64,
) {
    if let Some(queue) = queue_of(state, &batch) {
        queue.in_flight = queue.in_flight.saturating_sub(1);
        queue.acked_in_epoch = true;
    }
    if released.observers.wants(Interest::PRODUCE) {
        released.observers.emit(&Observed::BatchWritten {
            node,
            topic: &batch.topic,
            partition: batch.partition,
            records: batch.deliveries.len(),
            bytes: batch.deliveries.iter().map(|d| d.bytes).sum(),
            base_offset,
            retries: batch.attempts,
            latency: batch.created.elapsed(),
        });
    }
    for (i, d) in batch.deliveries.into_iter().enumerate() {
        released.records += 1;
        released.bytes += d.bytes;
        let offset = if base_offset < 0 {
            -1
        } else {
            base_offset + i as i64
        };
        let _ = d.tx.send(Ok(RecordMetadata {
            topic: batch.topic.clone(),
            partition: batch.partition,
            offset,
            timestamp: if append_time >= 0 {
                append_time
            } else {
                d.timestamp
            },
        }));
    }
}

/// Closes the open batch once it has lingered long enough (at once while flushing) and takes
/// out the batches that waited past `message.timeout.ms`; returns when to look again.
fn age(
    queue: &mut super::accumulator::PartitionQueue,
    topic: &Arc<str>,
    partition: i32,
    now: Instant,
    flushing: bool,
    config: &crate::client::config::ProducerConfig,
    expired: &mut Vec<ClosedBatch>,
) -> Option<Instant> {
    let mut wake: Option<Instant> = None;
    if let Some(open) = &queue.open {
        let due = open.created + config.linger;
        if flushing || now >= due {
            close_open(queue, topic, partition);
        } else {
            wake = Some(due);
        }
    }
    let timeout = config.message_timeout;
    if !timeout.is_zero() {
        while queue
            .ready
            .front()
            .is_some_and(|b| now >= b.created + timeout)
        {
            if let Some(b) = queue.ready.pop_front() {
                expired.push(b);
            }
        }
        if let Some(b) = queue.ready.front() {
            let at = b.created + timeout;
            wake = Some(wake.map_or(at, |w| w.min(at)));
        }
    }
    wake
}

/// Fixes the batch's sequence (first send, or first send in a new epoch) and encodes it.
fn prepare(
    config: &crate::client::config::ProducerConfig,
    queue: &mut super::accumulator::PartitionQueue,
    batch: &mut ClosedBatch,
    pid: i64,
    epoch: i16,
) -> Result<()> {
    let producer = if config.enable_idempotence {
        if batch.sequence.is_none() || batch.epoch != epoch {
            batch.sequence = Some(queue.next_sequence);
            queue.next_sequence = queue.next_sequence.wrapping_add(batch.count()) & i32::MAX;
            batch.encoded = None;
        }
        batch.epoch = epoch;
        ProducerState {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: batch.sequence.unwrap_or(-1),
            transactional: config.transactional_id.is_some(),
        }
    } else {
        ProducerState::NONE
    };
    if batch.encoded.is_none() {
        batch.encoded = Some(batch.builder.build(
            config.compression,
            config.compression_level,
            producer,
        )?);
    }
    Ok(())
}

/// Fails the batches that waited past `message.timeout.ms`; says whether any had a sequence
/// number (then the partition's sequence has a gap).
fn fail_expired(state: &mut State, expired: Vec<ClosedBatch>, released: &mut Released<'_>) -> bool {
    let sequenced = expired.iter().any(|b| b.sequence.is_some());
    for b in expired {
        let e = Error::Timeout(format!(
            "Local: Message timed out ({} records for {}-{})",
            b.count(),
            b.topic,
            b.partition
        ));
        note_txn_failure(&mut state.txn, &e);
        fail_batch(released, b, &e);
    }
    sequenced
}

/// What a planning round of a transactional producer holds back: every queued batch when the
/// transaction is doomed (they fail), and partitions not yet registered with the coordinator
/// (classic protocol; they are collected for `AddPartitionsToTxn`).
struct TxnGate {
    drop_unsent: Option<Error>,
    dropped_sequenced: bool,
    to_register: Vec<(Arc<str>, i32)>,
}

impl TxnGate {
    fn new(txn: Option<&TxnState>) -> Self {
        TxnGate {
            drop_unsent: txn.and_then(TxnState::drop_unsent).map(Error::Transaction),
            dropped_sequenced: false,
            to_register: Vec::new(),
        }
    }

    /// Whether `queue` must not send now.
    fn holds(
        &mut self,
        txn: Option<&TxnState>,
        queue: &mut PartitionQueue,
        topic: &Arc<str>,
        partition: i32,
        released: &mut Released<'_>,
    ) -> bool {
        if let Some(e) = &self.drop_unsent {
            self.dropped_sequenced |= drop_queued(queue, topic, partition, e, released);
            return true;
        }
        match txn {
            Some(txn) if !txn.may_send(topic, partition) => {
                // Registered as soon as a record waits, so that the round trip overlaps the
                // linger.
                if queue.open.is_some() || !queue.ready.is_empty() {
                    self.to_register.push((topic.clone(), partition));
                }
                true
            }
            _ => false,
        }
    }
}

/// The transactional id and the Produce versions of the transaction protocol.
fn txn_produce(txn: &TxnState) -> (StrBytes, VersionRange) {
    (txn.wire_id.clone(), txn.protocol.produce_versions())
}

/// Records a batch's failure as the open transaction's (the first one dooms it).
fn note_txn_failure(txn: &mut Option<TxnState>, error: &Error) {
    if let Some(txn) = txn {
        let e = classify(&txn.id, Origin::Produce, "producing", error.clone());
        txn.failed(e);
    }
}

/// Fails the open batch and every batch waiting in `queue` (those in flight come back on
/// their own); says whether any of them had a sequence number, which leaves a gap.
fn drop_queued(
    queue: &mut PartitionQueue,
    topic: &str,
    partition: i32,
    error: &Error,
    released: &mut Released<'_>,
) -> bool {
    let mut sequenced = false;
    if let Some(open) = queue.open.take() {
        released.fail_open(topic, partition, open.deliveries, error);
    }
    while let Some(b) = queue.ready.pop_front() {
        sequenced |= b.sequence.is_some();
        fail_batch(released, b, error);
    }
    sequenced
}

/// What a round of the sender settled: the records and bytes that leave the queue's limits,
/// and the observers that hear of each batch given up.
struct Released<'o> {
    records: usize,
    bytes: usize,
    observers: &'o Observers,
}

impl<'o> Released<'o> {
    fn new(observers: &'o Observers) -> Self {
        Released {
            records: 0,
            bytes: 0,
            observers,
        }
    }

    /// Fails the records of a batch still open (never sent).
    fn fail_open(&mut self, topic: &str, partition: i32, deliveries: Vec<Pending>, error: &Error) {
        self.report_failed(topic, partition, deliveries.len(), error);
        for d in deliveries {
            self.records += 1;
            self.bytes += d.bytes;
            let _ = d.tx.send(Err(error.clone()));
        }
    }

    fn report_failed(&self, topic: &str, partition: i32, records: usize, error: &Error) {
        if self.observers.wants(Interest::PRODUCE) {
            self.observers.emit(&Observed::BatchFailed {
                topic,
                partition,
                records,
                error,
            });
        }
    }
}

fn fail_batch(released: &mut Released<'_>, batch: ClosedBatch, error: &Error) {
    released.report_failed(&batch.topic, batch.partition, batch.deliveries.len(), error);
    for d in batch.deliveries {
        released.records += 1;
        released.bytes += d.bytes;
        let _ = d.tx.send(Err(error.clone()));
    }
}

fn start_produce(
    conn: &Connection,
    acks: Acks,
    timeout: Duration,
    batches: &[ClosedBatch],
    transactional: Option<&(StrBytes, VersionRange)>,
) -> Result<Option<InFlight<ProduceRequest>>> {
    let versions = transactional.map_or(PRODUCE_VERSIONS, |(_, v)| PRODUCE_VERSIONS.intersect(v));
    let version = conn.version_of::<ProduceRequest>(versions)?;
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for b in batches {
        let data = PartitionProduceData::default()
            .with_index(b.partition)
            .with_records(Some(b.encoded.clone().unwrap_or_else(Bytes::new)));
        match topics
            .iter_mut()
            .find(|t| t.name.0.as_str() == b.topic.as_ref())
        {
            Some(t) => t.partition_data.push(data),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(b.topic.to_string())))
                    .with_partition_data(vec![data]),
            ),
        }
    }
    let request = ProduceRequest::default()
        .with_transactional_id(transactional.map(|(id, _)| TransactionalId(id.clone())))
        .with_acks(acks.wire())
        .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
        .with_topic_data(topics);
    if acks == Acks::None {
        conn.start_without_response(&request, version)?;
        return Ok(None);
    }
    // The broker answers by `timeout` at the latest; allow for the network on top.
    let wait = timeout + Duration::from_secs(5).min(timeout.max(Duration::from_millis(100)));
    conn.start(&request, version, wait).map(Some)
}
