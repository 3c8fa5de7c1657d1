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

mod alarm;
mod answer;
mod body;
mod producer_id;
mod request;
mod settle;
mod verdict;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::accumulator::{ClosedBatch, PartitionQueue, Shared, State};
use super::transaction::{Origin, Requests, classify};
use crate::client::cluster::{LeaderHint, NIL_TOPIC_ID, TopicId};
use crate::client::error::{Error, Result};
use crate::client::net::{Connection, InFlight};
use crate::client::observe::{Event as Observed, Interest};
use crate::client::unwind::{unwound, unwound_now};
use alarm::Alarm;
pub(super) use alarm::Bell;
use answer::{PartitionAnswer, ProduceAnswer};
use producer_id::FIRST_REBUILD_WAIT;
use request::{TxnGate, age, prepare, start_produce, txn_produce};
use settle::{
    Released, complete_batch, fail_batch, fail_expired, fail_recreated, note_txn_failure, queue_of,
};
use verdict::{Failure, Verdict, backoff_for, verdict};

enum Event {
    Produced {
        node: i32,
        batches: Vec<ClosedBatch>,
        result: Result<Option<ProduceAnswer>>,
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

/// One Produce request a planning round made: its leader, its batches and their bytes.
struct Planned {
    node: i32,
    bytes: usize,
    batches: Vec<ClosedBatch>,
}

/// How many emptied batch lists the sender keeps for its next requests.
const MAX_SPARE: usize = 16;

impl Planned {
    /// Adds `batch` to the request for `node` (at `at` in `requests`), or starts that request
    /// (with a list from `spare` if there is one).
    fn add(
        requests: &mut Vec<Planned>,
        spare: &mut Vec<Vec<ClosedBatch>>,
        at: Option<usize>,
        node: i32,
        size: usize,
        batch: ClosedBatch,
    ) {
        let index = at.unwrap_or_else(|| {
            requests.push(Planned {
                node,
                bytes: 0,
                // Most requests carry one batch (one partition per leader).
                batches: spare.pop().unwrap_or_else(|| Vec::with_capacity(1)),
            });
            requests.len() - 1
        });
        if let Some(request) = requests.get_mut(index) {
            request.bytes += size;
            request.batches.push(batch);
        }
    }
}

/// A Produce request on the wire whose answer the sender waits for itself (no task per
/// request): its leader, its batches and the wait.
struct Awaited {
    node: i32,
    batches: Vec<ClosedBatch>,
    answer: InFlight<ProduceRequest>,
}

struct Sender {
    shared: Arc<Shared>,
    tasks: JoinSet<Event>,
    /// The Produce requests in flight, oldest first.
    awaited: Vec<Awaited>,
    /// Emptied lists of batches, and the list of requests a round plans, kept so that a
    /// round allocates neither.
    spare: Vec<Vec<ClosedBatch>>,
    planned: Vec<Planned>,
    /// The fields of a one-batch Produce request, written here request after request.
    scratch: Vec<u8>,
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
    /// The leaders a round needs connections to (a buffer kept between rounds).
    leaders: Vec<i32>,
    /// Wakes the loop at its next deadline (a batch's linger above all) without tokio's
    /// millisecond of lateness.
    alarm: Alarm,
}

/// How often the queue is reported when an observer asks and `statistics.interval.ms` is 0.
const DEFAULT_STATISTICS_INTERVAL: Duration = Duration::from_secs(1);

pub(super) async fn run(shared: Arc<Shared>) {
    let init_backoff = shared.client.retry_backoff();
    let alarm = Alarm::new();
    if let Some(bell) = alarm.bell() {
        // Only this task sets it, once: a second set cannot happen.
        let _ = shared.bell.set(bell);
    }
    let mut sender = Sender {
        shared,
        tasks: JoinSet::new(),
        awaited: Vec::new(),
        spare: Vec::new(),
        scratch: Vec::new(),
        planned: Vec::new(),
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
        leaders: Vec::new(),
        alarm,
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
                if self.tasks.is_empty() && self.awaited.is_empty() {
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
            // The answers in already (polled with this task's waker: those still out wake it).
            while let Some(event) =
                std::future::poll_fn(|cx| Poll::Ready(next_answer(&mut self.awaited, cx))).await
            {
                self.handle(event);
            }
            self.expire_answers(Instant::now());
            self.maybe_rebuild();
            self.maybe_init_producer_id();
            self.connect_leaders().await;
            // What was asked of the alarm so far is in the queues this round reads (see
            // `alarm`'s invariants): forgotten before they are read.
            self.alarm.looked();
            let (requests, mut next_wake, more) = self.plan(Instant::now(), closing);
            self.maybe_report_queue();
            let sent_any = !requests.is_empty();
            let mut settled_now = false;
            let mut requests = requests;
            for Planned { node, batches, .. } in requests.drain(..) {
                settled_now |= self.dispatch(node, batches);
            }
            self.planned = requests;
            self.maybe_refresh();
            if sent_any && (more || settled_now) {
                // More may be sendable right away (the next batch of a partition, a request's
                // worth that did not fit, or what the batches settled as they went out let
                // go): planned again at once. The loop yields only when its cooperative
                // budget is spent, so that a sender that always has something to send leaves
                // the worker to the tasks beside it. It yielded on every send before: each
                // yield parked the worker once more and woke another thread, about a quarter
                // of the CPU of a sequential publish. And it planned again after every send
                // before, a round that found nothing in the common case of one batch per
                // partition.
                tokio::task::coop::consume_budget().await;
                continue;
            }
            // The oldest request's answer is due first (requests on one connection share a
            // timeout), the ones just sent included; the others are looked at whenever the
            // loop wakes.
            let answer_due = self.awaited.iter().map(|a| a.answer.deadline()).min();
            for at in [
                self.dial_retry_at,
                self.init_retry_at,
                self.rebuild_at,
                self.statistics_at,
                answer_due,
            ]
            .into_iter()
            .flatten()
            {
                next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
            }
            if closing && self.tasks.is_empty() && self.awaited.is_empty() {
                // The last answers came in this round: the loop's top ends it.
                continue;
            }
            let wake_at = next_wake.unwrap_or_else(|| Instant::now() + Duration::from_hours(1));
            tokio::select! {
                () = self.shared.wake.notified() => {}
                () = self.alarm.wait_until(wake_at) => {}
                Some(joined) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    match joined {
                        Ok(event) => self.handle(event),
                        Err(e) => tracing::error!(error = %e, "producer request task failed"),
                    }
                }
                Some(event) = std::future::poll_fn(|cx| match next_answer(&mut self.awaited, cx) {
                    Some(event) => Poll::Ready(Some(event)),
                    None => Poll::Pending,
                }), if !self.awaited.is_empty() => self.handle(event),
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

    /// Picks what to send now; returns the requests by leader and when to look again.
    fn plan(&mut self, now: Instant, closing: bool) -> (Vec<Planned>, Option<Instant>, bool) {
        let config = &self.shared.config;
        let idempotent = config.enable_idempotence;
        let per_connection = config.effective_in_flight();
        let mut next_wake: Option<Instant> = None;
        let mut wake_at = |t: Instant| next_wake = Some(next_wake.map_or(t, |w: Instant| w.min(t)));
        // A request per leader; leaders are few, so a list searched in place beats a map
        // (and allocates nothing in a round that sends nothing).
        let mut requests = std::mem::take(&mut self.planned);
        requests.clear();
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
        let mut recreated_sequenced = false;
        // A batch left that the next round may send at once: one behind a batch taken now,
        // or one that did not fit in its request.
        let mut more = false;
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
                if let Err(until) = may_send(queue, now, idempotent) {
                    until.into_iter().for_each(&mut wake_at);
                    continue;
                }
                // One lookup of the topic for both; the batches are failed outside the
                // metadata's lock.
                let (leader, topic_id) = self
                    .shared
                    .client
                    .with_metadata(|m| m.leader_and_topic_id(topic, partition));
                recreated_sequenced |= fail_recreated(topic_id, queue, topic, &mut released);
                let Some((node, _epoch)) = leader.filter(|_| !queue.ready.is_empty()) else {
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
                let planned_at = requests.iter().position(|r| r.node == node);
                let busy = self.node_in_flight.get(&node).copied().unwrap_or(0)
                    + usize::from(planned_at.is_some());
                if busy >= per_connection && planned_at.is_none() {
                    continue;
                }
                // A request stays within message.max.bytes (librdkafka's meaning of it: the
                // largest protocol request), except that one batch always goes; what does not
                // fit goes in the next request, planned right after this one.
                let size = queue.ready.front().map_or(0, |b| {
                    b.encoded.as_ref().map_or(b.builder.size(), Bytes::len)
                });
                let planned = planned_at.map_or(0, |i| requests[i].bytes);
                if planned > 0 && planned + size > config.message_max_bytes {
                    more = true;
                    continue;
                }
                let Some(mut batch) = queue.ready.pop_front() else {
                    continue;
                };
                if let Err(e) = prepare(config, queue, &mut batch, pid, epoch) {
                    note_txn_failure(&mut state.txn, &e);
                    fail_batch(&mut released, batch, &e);
                    continue;
                }
                queue.in_flight += 1;
                queue.in_flight_conn = conn.id();
                more |= !queue.ready.is_empty();
                Planned::add(
                    &mut requests,
                    &mut self.spare,
                    planned_at,
                    node,
                    size,
                    batch,
                );
            }
        }
        // KIP-890: the first Produce registers the partition, so the transaction exists at
        // the coordinator from now on.
        if let Some(txn) = state.txn.as_mut().filter(|_| !requests.is_empty()) {
            txn.started = true;
        }
        self.refresh_topics.extend(topics);
        let expired_sequenced = fail_expired(state, expired, &mut released);
        if idempotent && (expired_sequenced || gate.dropped_sequenced || recreated_sequenced) {
            state.bump_needed = true;
        }
        self.shared.release(state, released.records, released.bytes);
        drop(guard);
        released.tell(&self.shared.client.config().observers);
        self.maybe_register(gate.to_register);
        (requests, next_wake, more)
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
    }

    /// Dials (or reuses) the connection to every leader that has batches waiting.
    async fn connect_leaders(&mut self) {
        let now = Instant::now();
        if self.dial_retry_at.is_some_and(|at| now < at) {
            return;
        }
        self.dial_retry_at = None;
        // Kept from round to round, so that a round allocates nothing for it.
        let mut nodes = std::mem::take(&mut self.leaders);
        nodes.clear();
        {
            let state = self.shared.lock();
            let client = &self.shared.client;
            client.with_metadata(|m| {
                nodes.extend(state.topics.iter().flat_map(|(topic, queues)| {
                    queues
                        .partitions
                        .iter()
                        .enumerate()
                        .filter(|(_, q)| !q.ready.is_empty() || q.open.is_some())
                        .filter_map(move |(p, _)| m.leader(topic, p as i32).map(|(node, _)| node))
                }));
            });
        }
        nodes.sort_unstable();
        nodes.dedup();
        for &node in &nodes {
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
        self.leaders = nodes;
    }

    /// Fails the requests whose answers are overdue (each closes its connection, as a
    /// request's timeout does).
    fn expire_answers(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.awaited.len() {
            if self.awaited[i].answer.deadline() > now {
                i += 1;
                continue;
            }
            let Awaited {
                node,
                batches,
                answer,
            } = self.awaited.remove(i);
            let error = answer.expire();
            self.handle(Event::Produced {
                node,
                batches,
                result: Err(error),
                reached_wire: true,
            });
        }
    }

    /// Puts one Produce request on the wire now, on the connection the plan chose, so that
    /// requests leave in the order they were planned (sequence order within each partition);
    /// the loop itself waits for the answer.
    /// Sends a request of `batches` to `node`; `true` when they were settled at once (`acks=0`,
    /// or the request could not be started), which may have made room for more.
    fn dispatch(&mut self, node: i32, batches: Vec<ClosedBatch>) -> bool {
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
                &mut self.scratch,
            ),
            None => Err(Error::Closed(format!("no connection to broker {node}"))),
        };
        match started {
            Ok(Some(answer)) => {
                self.awaited.push(Awaited {
                    node,
                    batches,
                    answer,
                });
                return false;
            }
            // `acks=0`: written as far as anyone will know.
            Ok(None) => self.handle(Event::Produced {
                node,
                batches,
                result: Ok(None),
                reached_wire: true,
            }),
            Err(e) => self.handle(Event::Produced {
                node,
                batches,
                result: Err(e),
                reached_wire: false,
            }),
        }
        true
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

    /// Acts on what a request or a task brought. Only the loop calls this, and it plans after
    /// every event it handles (later in the same round, or in the next), so a handler wakes
    /// nobody: a wake of the sender by itself was a round that found nothing.
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

    fn on_produced(
        &mut self,
        node: i32,
        mut batches: Vec<ClosedBatch>,
        result: Result<Option<ProduceAnswer>>,
        reached_wire: bool,
    ) {
        let shared = self.shared.clone();
        let observers = &shared.client.config().observers;
        let mut released = Released::new(observers);
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(node, error = %e, "produce request failed");
                let mut state = shared.lock();
                // A request that never reached the wire was certainly not written: retry it
                // like any retriable failure, with nothing left unknown.
                let e = if reached_wire {
                    e
                } else {
                    Error::Timeout(format!("not sent: {e}"))
                };
                for b in batches.drain(..) {
                    self.retry_or_fail(&mut state, &mut released, b, &e, (reached_wire, false));
                }
                shared.release(&mut state, released.records, released.bytes);
                drop(state);
                self.keep_spare(batches);
                released.tell(observers);
                return;
            }
        };
        let answers = response.as_ref().map(|r| Answers::new(r, batches.len()));
        // KIP-951: the leaders the broker named for partitions it no longer leads, learnt
        // before the batches are retried, so that they go to the new leader at once.
        let moved = response
            .as_ref()
            .map(|r| self.learn_leaders(node, r, &batches))
            .unwrap_or_default();
        let mut state = shared.lock();
        let mut retry = Vec::new();
        for b in batches.drain(..) {
            // acks=0: no answer is the answer.
            let answer = answers.as_ref().map_or(Some((0, -1, -1)), |a| a.of(&b));
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
            let leader_moved = moved
                .iter()
                .any(|(t, p)| *p == b.partition && *t == b.topic);
            self.retry_or_fail(&mut state, &mut released, b, &e, (unknown, leader_moved));
        }
        shared.release(&mut state, released.records, released.bytes);
        drop(state);
        self.keep_spare(batches);
        released.tell(observers);
    }

    /// Keeps an emptied list of a request's batches for a later request (a few of them: as
    /// many as requests go out at once, at most).
    fn keep_spare(&mut self, mut batches: Vec<ClosedBatch>) {
        batches.clear();
        if self.spare.len() < MAX_SPARE && batches.capacity() > 0 {
            self.spare.push(batches);
        }
    }

    /// Learns the new leaders a Produce answer named for partitions it failed with
    /// `NOT_LEADER_OR_FOLLOWER` or `FENCED_LEADER_EPOCH` (KIP-951, Produce v10+), with the
    /// nodes it described; returns the partitions whose leader the cache now has from it.
    fn learn_leaders(
        &self,
        node: i32,
        response: &ProduceAnswer,
        batches: &[ClosedBatch],
    ) -> Vec<(Arc<str>, i32)> {
        let mut hints = Vec::new();
        for p in response.partitions() {
            let named = matches!(
                ResponseError::try_from_code(p.error_code),
                Some(ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch)
            ) && p.leader.0 >= 0;
            if !named {
                continue;
            }
            // The topic's name from the batch it answers (a v13 answer has ids only).
            let Some(b) = batches
                .iter()
                .find(|b| b.partition == p.index && answers_for(&p, b))
            else {
                continue;
            };
            hints.push(LeaderHint {
                topic: b.topic.clone(),
                topic_id: b.topic_id,
                partition: p.index,
                leader: p.leader.0,
                epoch: p.leader.1,
            });
        }
        if hints.is_empty() {
            return Vec::new();
        }
        let nodes = response.node_endpoints();
        let client = &self.shared.client;
        client.learn_leaders(&hints, &nodes);
        client.with_metadata(|m| {
            hints
                .into_iter()
                .filter(|h| m.leader(&h.topic, h.partition) == Some((h.leader, h.epoch)))
                .inspect(|h| {
                    tracing::debug!(from = node, topic = %h.topic, partition = h.partition,
                        leader = h.leader, epoch = h.epoch, "the broker named the new leader");
                })
                .map(|h| (h.topic, h.partition))
                .collect()
        })
    }

    /// Sends a failed batch again or fails it, as [`verdict`] decides; the caller releases
    /// what it settled. `leader_moved`: the answer named the partition's new leader, which the
    /// cache now has (KIP-951): the batch goes there at once, without a backoff or a refresh.
    fn retry_or_fail(
        &mut self,
        state: &mut State,
        released: &mut Released,
        mut batch: ClosedBatch,
        error: &Error,
        (unknown_outcome, leader_moved): (bool, bool),
    ) {
        let config = &self.shared.config;
        let idempotent = config.enable_idempotence;
        if let Some(queue) = queue_of(state, &batch) {
            queue.in_flight = queue.in_flight.saturating_sub(1);
        }
        let failure = Failure {
            error,
            unknown_outcome,
            idempotent,
            transactional: state.txn.is_some(),
            doomed: state
                .txn
                .as_ref()
                .is_some_and(|t| t.drop_unsent().is_some()),
            earlier_pending: queue_of(state, &batch).is_some_and(|q| q.draining || q.in_flight > 0),
            sequenced: batch.sequence.is_some(),
            attempts: batch.attempts,
            retries: config.retries,
            expired: !config.message_timeout.is_zero()
                && Instant::now() >= batch.created + config.message_timeout,
        };
        match verdict(&failure) {
            Verdict::Fail {
                error: e,
                bump,
                gave_up,
            } => {
                state.bump_needed |= bump;
                if gave_up {
                    // Retries that give up are an incident an operator must see (a failure
                    // the caller gets is theirs to log).
                    tracing::warn!(
                        topic = %batch.topic,
                        partition = batch.partition,
                        attempts = batch.attempts,
                        error = %e,
                        "a batch gave up retrying: its records fail"
                    );
                }
                note_txn_failure(&mut state.txn, &e);
                fail_batch(released, batch, &e);
            }
            Verdict::Retry { bump, refresh } => {
                state.bump_needed |= bump;
                if refresh && !leader_moved {
                    self.refresh_topics.insert(batch.topic.clone());
                }
                batch.attempts += 1;
                batch.maybe_written |= unknown_outcome;
                self.shared.retries.fetch_add(1, Ordering::Relaxed);
                let delay = if leader_moved {
                    Duration::ZERO
                } else {
                    backoff_for(config_retry(&self.shared), batch.attempts)
                };
                tracing::debug!(topic = %batch.topic, partition = batch.partition, attempt = batch.attempts,
                    error = %error, ?delay, "batch sent again");
                released.retried(&batch, error, delay);
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
        }
    }

    fn fail_everything(&mut self, error: &Error) {
        let observers = &self.shared.client.config().observers;
        let mut released = Released::new(observers);
        let mut state = self.shared.lock();
        for (topic, queues) in &mut state.topics {
            for (p, queue) in queues.partitions.iter_mut().enumerate() {
                if let Some(open) = queue.open.take() {
                    released.fail_open(topic, p as i32, open, error);
                }
                while let Some(b) = queue.ready.pop_front() {
                    fail_batch(&mut released, b, error);
                }
            }
        }
        self.shared
            .release(&mut state, released.records, released.bytes);
        drop(state);
        released.tell(observers);
    }
}

/// Each batch's answer in a Produce response: (error code, base offset, log append time).
///
/// A request of a few batches is searched in place; a map is built only for large ones (a
/// search per batch would be quadratic there). An answer to v13 gives topics by id and no
/// names.
struct Answers<'r> {
    response: &'r ProduceAnswer,
    by_id: bool,
    map: Option<HashMap<AnswerKey<'r>, (i16, i64, i64)>>,
}

/// A partition of a Produce answer: its topic's name (empty by id) or id (nil by name).
type AnswerKey<'r> = (&'r str, TopicId, i32);

impl<'r> Answers<'r> {
    fn new(response: &'r ProduceAnswer, batches: usize) -> Self {
        let by_id = response.by_id();
        let map = (batches > 8).then(|| {
            response
                .partitions()
                .map(|p| {
                    let key = if by_id {
                        ("", p.topic_id, p.index)
                    } else {
                        (p.topic, NIL_TOPIC_ID, p.index)
                    };
                    (key, (p.error_code, p.base_offset, p.log_append_time))
                })
                .collect()
        });
        Answers {
            response,
            by_id,
            map,
        }
    }

    fn of(&self, b: &ClosedBatch) -> Option<(i16, i64, i64)> {
        match &self.map {
            None => self
                .response
                .partitions()
                .find(|p| p.index == b.partition && answers_for(p, b))
                .map(|p| (p.error_code, p.base_offset, p.log_append_time)),
            Some(map) if self.by_id => map.get(&("", b.topic_id, b.partition)).copied(),
            Some(map) => map
                .get(&(b.topic.as_ref(), NIL_TOPIC_ID, b.partition))
                .copied(),
        }
    }
}

/// Whether the partition answer `p` is for `b`'s topic: by id when both have one (a v13
/// answer names no topic), by name otherwise.
fn answers_for(p: &PartitionAnswer<'_>, b: &ClosedBatch) -> bool {
    if p.topic_id != NIL_TOPIC_ID && b.topic_id != NIL_TOPIC_ID {
        p.topic_id == b.topic_id
    } else {
        p.topic == b.topic.as_ref()
    }
}

/// Whether `queue`'s own state lets its next batch go now: not while earlier batches drain
/// after a failure, not before its retry backoff has passed (the instant it passes is given
/// back, to wake then), and with idempotence not past the in-flight limit (one request until a
/// batch was acknowledged in this epoch, then five).
fn may_send(
    queue: &mut PartitionQueue,
    now: Instant,
    idempotent: bool,
) -> std::result::Result<(), Option<Instant>> {
    if queue.draining {
        if queue.in_flight > 0 {
            return Err(None);
        }
        queue.draining = false;
    }
    if let Some(at) = queue.retry_at {
        if now < at {
            return Err(Some(at));
        }
        queue.retry_at = None;
    }
    if idempotent && queue.in_flight >= if queue.acked_in_epoch { 5 } else { 1 } {
        return Err(None);
    }
    Ok(())
}

/// The oldest request in `awaited` whose answer has come, taken out as the event it makes;
/// `cx` is woken when one of those still out is answered. The answer is decoded here: a panic
/// in that is the request's failure (its batches come back as of unknown outcome), not the
/// sender's end.
fn next_answer(awaited: &mut Vec<Awaited>, cx: &mut Context<'_>) -> Option<Event> {
    let mut answered = None;
    for (i, waiting) in awaited.iter_mut().enumerate() {
        let polled = unwound_now("a Produce answer", || {
            Ok(waiting
                .answer
                .poll_body(cx)
                .map(|body| body.and_then(|(body, version)| ProduceAnswer::read(body, version))))
        });
        match polled {
            Ok(Poll::Pending) => {}
            Ok(Poll::Ready(result)) => {
                answered = Some((i, result));
                break;
            }
            Err(e) => {
                answered = Some((i, Err(e)));
                break;
            }
        }
    }
    let (i, result) = answered?;
    let Awaited { node, batches, .. } = awaited.remove(i);
    Some(Event::Produced {
        node,
        batches,
        result: result.map(Some),
        reached_wire: true,
    })
}

fn config_retry(shared: &Shared) -> (Duration, Duration) {
    let c = shared.client.config();
    (c.retry_backoff, c.retry_backoff_max)
}
