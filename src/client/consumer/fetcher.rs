//! The fetcher: one task per consumer keeping at most one Fetch in flight per broker, each in
//! that broker's fetch session, and queueing what comes back for the caller.
//!
//! A partition is fetched when it is assigned, not paused, its start is known, no fetch of
//! it is on the wire, it has fewer than `queued.min.messages` records waiting, and the
//! consumer's buffered bytes are under `queued.max.messages.kbytes`: the caller's pace
//! bounds memory. Responses are decoded (and decompressed) in the request's own task, so
//! brokers are read in parallel and the loop stays responsive.
//!
//! Errors follow the Java client: leader moves, fenced or unknown leader epochs and unknown
//! partitions refresh metadata and retry the partition after `fetch.error.backoff.ms`, from
//! the same offset (no gap, no re-read); an out-of-range offset restarts the partition per
//! `auto.offset.reset`; a failed request resets the broker's session. A leader move whose
//! answer names the new leader (KIP-951) is fetched from it at once, without the refresh
//! and the backoff.
//!
//! With `client.rack` set, a leader may name a replica in the consumer's rack to fetch from
//! (KIP-392, Fetch v11+): the partition is fetched from that replica until the metadata's
//! refresh interval passes or the replica answers anything but records; then from the leader
//! again, from the same position (a follower's out-of-range is not a reason to reset).
//!
//! Topics go by id (Fetch v13+, KIP-516) when the broker and the metadata have ids for all of
//! a request's topics, by name otherwise; an answer is matched by what the request used.
//!
//! No fault is silent and none loops forever: a request task that panics is reported and
//! handled as a failed request (its partitions are fetched again); a batch that cannot be
//! read is fetched [`CORRUPT_REFETCHES`] more times (corruption in transit heals), then
//! reported once and, per [`CorruptBatch`], held at or skipped past. Decompression draws on
//! one allowance per response (`receive.message.max.bytes`), not one per batch.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tokio::task::{Id, JoinError, JoinSet};
use uuid::Uuid;

use crate::client::cluster::{BrokerInfo, LeaderHint, NIL_TOPIC_ID, TopicId};
use crate::client::error::{Error, Result};
use crate::client::isolation::IsolationLevel;
use crate::client::observe::{Event as Observed, Interest};

use super::config::CorruptBatch;
use super::decode::{Budget, Corrupt, Decoded, decode_partition};
use super::fetch_session::{FetchPosition, FetchSession, SessionRequest, TopicIds};
use super::state::{Chunk, Part, State};
use super::validation::{self, Check};
use super::{Shared, StartAt, TopicPartition, positions};

/// Fetch versions with sessions (v7) and topic names (v13 moved to topic ids).
const FETCH_VERSIONS: VersionRange = VersionRange { min: 7, max: 12 };

/// Fetch versions with sessions, topics by id (v13) and the new leader's address on a leader
/// move (v16, KIP-951); v17 adds only a field of replicas.
const FETCH_VERSIONS_BY_ID: VersionRange = VersionRange { min: 7, max: 17 };

/// How many more times a batch that could not be read is fetched before it is reported.
pub const CORRUPT_REFETCHES: u32 = 2;

/// One partition of a request in flight.
#[derive(Debug, Clone)]
struct Want {
    tp: TopicPartition,
    /// The topic's id as the metadata had it (nil when unknown).
    topic_id: TopicId,
    /// Fetched from a replica the leader named (KIP-392), not from the leader.
    from_follower: bool,
    generation: u64,
    position: FetchPosition,
}

/// What came back for one partition.
#[derive(Debug)]
struct Outcome {
    error: Option<ResponseError>,
    /// The leader the broker named when it no longer leads the partition (KIP-951).
    leader: Option<(i32, i32)>,
    /// The replica the leader named to fetch from instead (KIP-392).
    preferred_replica: Option<i32>,
    decoded: Decoded,
    high_watermark: i64,
    bytes: usize,
}

/// A response: its top-level error, its session id, each partition's outcome, and the nodes
/// it described (KIP-951).
type Fetched = (
    Option<ResponseError>,
    i32,
    Vec<(TopicPartition, Outcome)>,
    Vec<BrokerInfo>,
);

/// A finished request.
#[derive(Debug)]
struct Answer {
    node: i32,
    wants: Vec<Want>,
    result: Result<Fetched>,
    /// The request's task died (panicked) instead of answering.
    died: bool,
}

/// The requests on the wire, each remembered by its task so that one that panics still
/// comes back as an answer: a failed request for its broker and partitions.
#[derive(Default)]
struct InFlight {
    tasks: JoinSet<Answer>,
    asked: HashMap<Id, (i32, Vec<Want>)>,
}

impl InFlight {
    fn spawn<F>(&mut self, node: i32, wants: Vec<Want>, request: F)
    where
        F: Future<Output = Answer> + Send + 'static,
    {
        let id = self.tasks.spawn(request).id();
        self.asked.insert(id, (node, wants));
    }

    fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The next finished request; `None` when none is on the wire.
    ///
    /// Cancel safety: cancel safe (a task's result stays in the set until taken).
    async fn next(&mut self) -> Option<Answer> {
        let joined = self.tasks.join_next_with_id().await?;
        Some(self.settle(joined))
    }

    fn settle(&mut self, joined: std::result::Result<(Id, Answer), JoinError>) -> Answer {
        match joined {
            Ok((id, answer)) => {
                self.asked.remove(&id);
                answer
            }
            Err(e) => {
                let (node, wants) = self.asked.remove(&e.id()).unwrap_or_default();
                tracing::error!(node, error = %e, "a fetch task failed; fetching its partitions again");
                Answer {
                    node,
                    wants,
                    result: Err(Error::Closed(format!("fetch task for broker {node}: {e}"))),
                    died: true,
                }
            }
        }
    }
}

/// Runs until the consumer closes.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut fetcher = Fetcher {
        sessions: HashMap::new(),
        preferred: HashMap::new(),
        busy: HashSet::new(),
        node_backoff: HashMap::new(),
        last_refresh: None,
    };
    let mut in_flight = InFlight::default();
    let mut closing = shared.closing.subscribe();
    loop {
        if shared.is_closing() {
            return;
        }
        let wake_at = fetcher.dispatch(&shared, &mut in_flight);
        let sleep = tokio::time::sleep_until(wake_at.map_or_else(
            || tokio::time::Instant::now() + Duration::from_secs(1),
            tokio::time::Instant::from_std,
        ));
        tokio::select! {
            () = shared.fetch_wake.notified() => {}
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                fetcher.absorb(&shared, answer);
            }
            () = sleep => {}
            _ = closing.changed() => {}
        }
    }
}

struct Fetcher {
    sessions: HashMap<i32, FetchSession>,
    /// The replica each partition is fetched from instead of its leader, and until when
    /// (KIP-392).
    preferred: HashMap<TopicPartition, (i32, Instant)>,
    /// Brokers with a fetch on the wire.
    busy: HashSet<i32>,
    node_backoff: HashMap<i32, Instant>,
    last_refresh: Option<Instant>,
}

impl Fetcher {
    /// Starts what can start; returns when something waiting on time becomes possible.
    fn dispatch(&mut self, shared: &Arc<Shared>, in_flight: &mut InFlight) -> Option<Instant> {
        let now = Instant::now();
        let config = &shared.config;
        let mut wake_at: Option<Instant> = None;
        let mut by_node: HashMap<i32, Vec<Want>> = HashMap::new();
        let mut to_resolve = Vec::new();
        let mut to_validate = Vec::new();
        let mut no_leader: HashSet<Arc<str>> = HashSet::new();
        let mut recreated = Vec::new();
        {
            let mut state = shared.lock();
            let full = state.buffered >= config.queued_max_bytes;
            for (tp, part) in &mut state.parts {
                if let Some(until) = part.backoff_until {
                    if until > now {
                        wake_at = Some(wake_at.map_or(until, |w| w.min(until)));
                        continue;
                    }
                    part.backoff_until = None;
                }
                if part.paused
                    || part.revoking
                    || part.in_flight
                    || part.validating
                    || part.held.is_some()
                {
                    continue;
                }
                let Some(offset) = part.fetch_offset else {
                    if !part.resolving {
                        part.resolving = true;
                        to_resolve.push((tp.clone(), part.generation, part.start));
                    }
                    continue;
                };
                let queued: usize = part.queue.iter().map(|c| c.records.len()).sum();
                if full || queued >= config.queued_min_messages {
                    continue;
                }
                let Some(((leader, epoch), topic_id)) = leader_and_id(shared, tp) else {
                    no_leader.insert(tp.topic.clone());
                    continue;
                };
                if !part.in_topic(topic_id) {
                    recreated.push((tp.clone(), topic_id));
                    continue;
                }
                if let Some(check) = check_needed(tp, part, leader, epoch, offset) {
                    to_validate.push(check);
                    continue;
                }
                let node = self.source(shared, tp, leader, now);
                if self.busy.contains(&node) {
                    continue;
                }
                if let Some(&until) = self.node_backoff.get(&node)
                    && until > now
                {
                    wake_at = Some(wake_at.map_or(until, |w| w.min(until)));
                    continue;
                }
                by_node.entry(node).or_default().push(Want {
                    tp: tp.clone(),
                    topic_id,
                    from_follower: node != leader,
                    generation: part.generation,
                    position: FetchPosition {
                        offset,
                        leader_epoch: epoch,
                        max_bytes: config.max_partition_fetch_bytes,
                    },
                });
            }
            for wants in by_node.values() {
                for w in wants {
                    if let Some(part) = state.parts.get_mut(&w.tp) {
                        part.in_flight = true;
                    }
                }
            }
            for (tp, id) in &recreated {
                state.topic_recreated(tp, *id);
                wake_at = Some(now);
            }
        }
        if !to_resolve.is_empty() {
            crate::client::outlined::spawn(positions::resolve(shared.clone(), to_resolve));
        }
        if !to_validate.is_empty() {
            crate::client::outlined::spawn(validation::validate(shared.clone(), to_validate));
        }
        if !no_leader.is_empty() {
            self.refresh(shared, no_leader.into_iter().collect());
            let retry = now + shared.client.config().retry_backoff;
            wake_at = Some(wake_at.map_or(retry, |w| w.min(retry)));
        }
        for (node, wants) in by_node {
            self.send(shared, in_flight, node, wants);
        }
        wake_at
    }

    /// The broker to fetch `tp` from: the replica its leader named (KIP-392) while that holds
    /// and the metadata knows the replica's address, its leader otherwise.
    fn source(&mut self, shared: &Shared, tp: &TopicPartition, leader: i32, now: Instant) -> i32 {
        match self.preferred.get(tp) {
            Some(&(node, until))
                if until > now
                    && shared
                        .client
                        .with_metadata(|m| m.brokers.contains_key(&node)) =>
            {
                node
            }
            Some(_) => {
                self.preferred.remove(tp);
                leader
            }
            None => leader,
        }
    }

    /// Puts one Fetch for `wants` on the wire to `node`, in its session.
    fn send(
        &mut self,
        shared: &Arc<Shared>,
        in_flight: &mut InFlight,
        node: i32,
        mut wants: Vec<Want>,
    ) {
        // A rotating start gives every partition its turn at the front, where a batch
        // larger than the partition limit is still returned whole.
        if wants.len() > 1 {
            let turn = fastrand::usize(..wants.len());
            wants.rotate_left(turn);
        }
        let keyed: Vec<_> = wants
            .iter()
            .map(|w| ((w.tp.topic.clone(), w.tp.partition), w.position))
            .collect();
        let ids: TopicIds = wants
            .iter()
            .map(|w| (w.tp.topic.clone(), w.topic_id))
            .collect();
        let request = self.sessions.entry(node).or_default().request(&keyed, &ids);
        {
            let mut stats = shared.stats.lock().unwrap_or_else(PoisonError::into_inner);
            if request.epoch == 0 {
                stats.full += 1;
            } else {
                stats.incremental += 1;
            }
        }
        self.busy.insert(node);
        in_flight.spawn(
            node,
            wants.clone(),
            fetch(shared.clone(), node, request, wants),
        );
    }

    /// Applies a finished request to the consumer's state.
    fn absorb(&mut self, shared: &Arc<Shared>, answer: Answer) {
        let Answer {
            node,
            wants,
            result,
            died,
        } = answer;
        self.busy.remove(&node);
        let session = self.sessions.entry(node).or_default();
        let now = Instant::now();
        let backoff = shared.config.fetch_error_backoff;
        let mut refresh: HashSet<Arc<str>> = HashSet::new();
        let mut state = shared.lock();
        for w in &wants {
            if let Some(part) = state.parts.get_mut(&w.tp) {
                part.in_flight = false;
            }
        }
        match result {
            Err(e) => {
                session.reset();
                shared
                    .stats
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .failed += 1;
                if died {
                    // The consumer hears of it; its partitions are fetched again after the
                    // backoff, from where they were.
                    state.report(e.clone());
                }
                tracing::debug!(node, error = %e, "fetch failed");
                // A replica the leader named that cannot be reached: its partitions go back
                // to their leaders (another broker: no backoff for them).
                for w in wants.iter().filter(|w| w.from_follower) {
                    self.preferred.remove(&w.tp);
                }
                self.node_backoff.insert(node, now + backoff);
                refresh.extend(wants.iter().map(|w| w.tp.topic.clone()));
            }
            Ok((top_error, session_id, outcomes, nodes)) => {
                session.answered(top_error, session_id);
                let moved = learn_leaders(shared, &wants, &outcomes, &nodes);
                if matches!(
                    top_error,
                    Some(
                        ResponseError::FetchSessionIdNotFound
                            | ResponseError::InvalidFetchSessionEpoch
                    )
                ) {
                    shared
                        .stats
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .session_errors += 1;
                }
                if let Some(code) = top_error
                    && !matches!(
                        code,
                        ResponseError::FetchSessionIdNotFound
                            | ResponseError::InvalidFetchSessionEpoch
                    )
                {
                    tracing::debug!(node, error = %code, "fetch refused");
                    self.node_backoff.insert(node, now + backoff);
                }
                for (tp, outcome) in outcomes {
                    let Some(want) = wants.iter().find(|w| w.tp == tp) else {
                        continue;
                    };
                    let Some(part) = state.parts.get(&tp) else {
                        continue;
                    };
                    if part.generation != want.generation
                        || part.fetch_offset != Some(want.position.offset)
                    {
                        continue;
                    }
                    if self.follow(shared, node, want, &outcome, now) {
                        continue;
                    }
                    let policy = shared.config.corrupt_batches;
                    // A partition whose new leader the answer named goes there at once.
                    let retry_at = if moved.contains(&tp) {
                        now
                    } else {
                        now + backoff
                    };
                    if let Some(topic) = apply(&mut state, &tp, want, outcome, retry_at, policy)
                        && !moved.contains(&tp)
                    {
                        refresh.insert(topic);
                    }
                }
            }
        }
        let report = !state.events.is_empty() || state.buffered > 0;
        drop(state);
        if report {
            shared.poll_wake.notify_one();
        }
        if !refresh.is_empty() {
            self.refresh(shared, refresh.into_iter().collect());
        }
    }

    /// Applies KIP-392 to one partition's outcome: a replica the leader named is fetched from
    /// next (the answer carries no records then); a replica's error sends the partition back
    /// to its leader at once, at the same position. Says whether the outcome is settled so.
    fn follow(
        &mut self,
        shared: &Shared,
        node: i32,
        want: &Want,
        outcome: &Outcome,
        now: Instant,
    ) -> bool {
        if want.from_follower && outcome.error.is_some() {
            tracing::debug!(partition = %want.tp, replica = node, error = ?outcome.error,
                "the preferred replica refused the fetch; back to the leader");
            self.preferred.remove(&want.tp);
            return true;
        }
        match outcome.preferred_replica {
            Some(replica) if replica != node && outcome.error.is_none() => {
                let until = now + shared.client.config().metadata_refresh_interval;
                tracing::debug!(partition = %want.tp, replica, "fetching from the replica the leader named");
                self.preferred.insert(want.tp.clone(), (replica, until));
                outcome.decoded.records.is_empty()
            }
            _ => false,
        }
    }

    /// Refreshes the metadata of `topics` in the background, at most once per retry backoff.
    fn refresh(&mut self, shared: &Arc<Shared>, topics: Vec<Arc<str>>) {
        let now = Instant::now();
        let every = shared.client.config().retry_backoff;
        if self
            .last_refresh
            .is_some_and(|t| now.duration_since(t) < every)
        {
            return;
        }
        self.last_refresh = Some(now);
        let shared = shared.clone();
        crate::client::outlined::spawn(async move {
            let names: Vec<&str> = topics.iter().map(|t| &**t).collect();
            if let Err(e) = shared.client.refresh_metadata(&names).await {
                tracing::debug!(error = %e, "metadata refresh for the fetcher failed");
            }
            shared.fetch_wake.notify_one();
        });
    }
}

/// The leader of `tp` and its epoch, with the topic's id (nil when unknown).
fn leader_and_id(shared: &Shared, tp: &TopicPartition) -> Option<((i32, i32), TopicId)> {
    shared.client.with_metadata(|m| {
        m.leader(&tp.topic, tp.partition)
            .map(|l| (l, m.topic_id(&tp.topic).unwrap_or(NIL_TOPIC_ID)))
    })
}

/// Applies one partition's outcome; returns its topic when its leader must be looked up.
fn apply(
    state: &mut State,
    tp: &TopicPartition,
    want: &Want,
    outcome: Outcome,
    retry_at: Instant,
    policy: CorruptBatch,
) -> Option<Arc<str>> {
    match (outcome.error, outcome.decoded) {
        (None, decoded) => {
            let Decoded {
                records,
                next_offset,
                corrupt,
                last_epoch,
            } = decoded;
            let at = next_offset;
            if corrupt.is_none() || !records.is_empty() || next_offset > want.position.offset {
                state.push(
                    tp,
                    Chunk {
                        generation: want.generation,
                        records,
                        next_offset,
                        leader_epoch: want.position.leader_epoch,
                        batch_epoch: last_epoch,
                        high_watermark: outcome.high_watermark,
                        bytes: outcome.bytes,
                    },
                );
            }
            if let Some(corrupt) = corrupt {
                unreadable(
                    state,
                    tp,
                    want,
                    at,
                    &corrupt,
                    outcome.high_watermark,
                    retry_at,
                    policy,
                );
            } else if let Some(part) = state.parts.get_mut(tp) {
                part.corrupt = None;
            }
        }
        (Some(ResponseError::OffsetOutOfRange), _) => {
            tracing::info!(partition = %tp, offset = want.position.offset,
                "offset out of range; applying auto.offset.reset");
            state.restart(tp, StartAt::Reset);
        }
        (Some(code), _) => {
            if let Some(part) = state.parts.get_mut(tp) {
                part.backoff_until = Some(retry_at);
            }
            if leader_trouble(code) {
                return Some(tp.topic.clone());
            }
            state.report(Error::Broker {
                code,
                context: format!("fetching {tp} at {}", want.position.offset),
            });
        }
    }
    None
}

/// Whether `part`'s position must be checked before it is fetched from `leader` at `epoch`
/// (KIP-320: the epoch went up since the last batch fetched); marks it as being checked.
fn check_needed(
    tp: &TopicPartition,
    part: &mut Part,
    leader: i32,
    epoch: i32,
    offset: i64,
) -> Option<Check> {
    if epoch < 0 {
        return None;
    }
    if part.validated_epoch < 0 || part.fetched_epoch < 0 {
        // Nothing fetched under an older epoch: nothing to check.
        part.validated_epoch = part.validated_epoch.max(epoch);
        return None;
    }
    if epoch <= part.validated_epoch {
        return None;
    }
    part.validating = true;
    Some(Check {
        tp: tp.clone(),
        generation: part.generation,
        leader,
        current_epoch: epoch,
        fetched_epoch: part.fetched_epoch,
        offset,
    })
}

/// A batch at `at` could not be read: fetched again a few times, then reported once and
/// held at or skipped past, per `policy`.
#[allow(
    clippy::too_many_arguments,
    reason = "one outcome's parts, taken apart by the caller"
)]
fn unreadable(
    state: &mut State,
    tp: &TopicPartition,
    want: &Want,
    at: i64,
    corrupt: &Corrupt,
    high_watermark: i64,
    retry_at: Instant,
    policy: CorruptBatch,
) {
    let Some(part) = state.parts.get_mut(tp) else {
        return;
    };
    let attempts = match part.corrupt {
        Some((offset, n)) if offset == at => n + 1,
        _ => 1,
    };
    if attempts <= CORRUPT_REFETCHES {
        tracing::debug!(partition = %tp, offset = at, error = %corrupt.error,
            "a fetched batch could not be read; fetching it again");
        part.corrupt = Some((at, attempts));
        part.backoff_until = Some(retry_at);
        return;
    }
    part.corrupt = None;
    // Never past what the broker says the partition holds, whatever the header claims.
    let skip_to = corrupt
        .skip_to
        .map(|to| to.min(high_watermark.max(at + 1)))
        .filter(|&to| to > at);
    if let (CorruptBatch::Skip, Some(to)) = (policy, skip_to) {
        tracing::error!(partition = %tp, offset = at, skipped_to = to, error = %corrupt.error,
                "a batch could not be read {attempts} times; skipping past it");
        state.report(Error::InvalidRecord(format!(
            "{tp}: the batch at offset {at} could not be read ({}); offsets {at}..{to} \
                 skipped",
            corrupt.error
        )));
        state.push(
            tp,
            Chunk {
                generation: want.generation,
                records: Vec::new(),
                next_offset: to,
                leader_epoch: want.position.leader_epoch,
                batch_epoch: None,
                high_watermark,
                bytes: 0,
            },
        );
    } else {
        tracing::error!(partition = %tp, offset = at, error = %corrupt.error,
                "a batch could not be read {attempts} times; the partition stops here until a seek");
        part.held = Some(at);
        state.report(Error::InvalidRecord(format!(
            "{tp}: the batch at offset {at} could not be read ({}); the partition is held \
                 there until it is sought elsewhere or reassigned",
            corrupt.error
        )));
    }
}

/// Errors after which the partition's leader must be looked up again.
fn leader_trouble(code: ResponseError) -> bool {
    matches!(
        code,
        ResponseError::NotLeaderOrFollower
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::LeaderNotAvailable
            | ResponseError::ReplicaNotAvailable
            | ResponseError::KafkaStorageError
            | ResponseError::OffsetNotAvailable
            | ResponseError::NotCoordinator
            | ResponseError::UnknownTopicId
            | ResponseError::InconsistentTopicId
    )
}

/// Sends one Fetch to `node` and decodes the answer.
async fn fetch(
    shared: Arc<Shared>,
    node: i32,
    session: SessionRequest,
    wants: Vec<Want>,
) -> Answer {
    let result = fetch_and_decode(&shared, node, session, &wants).await;
    Answer {
        node,
        wants,
        result,
        died: false,
    }
}

async fn fetch_and_decode(
    shared: &Shared,
    node: i32,
    session: SessionRequest,
    wants: &[Want],
) -> Result<Fetched> {
    let config = &shared.config;
    let conn = shared.client.connection_on(node, shared.fetch_lane).await?;
    let versions = if session.topic_ids.is_some() {
        FETCH_VERSIONS_BY_ID
    } else {
        FETCH_VERSIONS
    };
    let version = conn.version_of::<FetchRequest>(versions)?;
    let request = fetch_request(config, &session, version);
    let response = conn
        .send(
            &request,
            version,
            shared.client.socket_timeout() + config.fetch_wait_max,
        )
        .await?;
    let top_error = ResponseError::try_from_code(response.error_code);
    let mut budget = Budget::new(shared.client.config().max_response_size);
    let mut outcomes = Vec::new();
    let nodes = endpoints(&response);
    for topic in response.responses {
        let id = *topic.topic_id.as_bytes();
        for p in topic.partitions {
            let Some(want) = wants.iter().find(|w| {
                w.tp.partition == p.partition_index
                    && if version >= 13 {
                        w.topic_id == id
                    } else {
                        *w.tp.topic == *topic.topic.0.as_str()
                    }
            }) else {
                // Not ours (a session partition we no longer want): ignore.
                continue;
            };
            let error = ResponseError::try_from_code(p.error_code);
            let data: Bytes = p.records.unwrap_or_default();
            let raw = data.len();
            let decoded = if error.is_none() {
                decode_partition(
                    data,
                    p.aborted_transactions,
                    want.position.offset,
                    config.isolation,
                    &mut budget,
                    config.check_crcs,
                )
            } else {
                Decoded::default()
            };
            let observers = &shared.client.config().observers;
            if observers.wants(Interest::FETCH) {
                let end = match config.isolation {
                    IsolationLevel::ReadCommitted if p.last_stable_offset >= 0 => {
                        p.last_stable_offset
                    }
                    _ => p.high_watermark,
                };
                observers.emit(&Observed::Fetched {
                    node,
                    topic: &want.tp.topic,
                    partition: want.tp.partition,
                    records: decoded.records.len(),
                    bytes: raw,
                    high_watermark: p.high_watermark,
                    lag: (error.is_none() && end >= 0)
                        .then(|| end.saturating_sub(decoded.next_offset).max(0)),
                    error_code: p.error_code,
                });
            }
            let payload: usize = decoded
                .records
                .iter()
                .map(|r| {
                    r.key.as_ref().map_or(0, Bytes::len)
                        + r.value.as_ref().map_or(0, Bytes::len)
                        + 64
                })
                .sum();
            let leader = (p.current_leader.leader_id.0 >= 0)
                .then_some((p.current_leader.leader_id.0, p.current_leader.leader_epoch));
            let preferred_replica =
                (p.preferred_read_replica.0 >= 0).then_some(p.preferred_read_replica.0);
            outcomes.push((
                want.tp.clone(),
                Outcome {
                    error,
                    leader,
                    preferred_replica,
                    decoded,
                    high_watermark: p.high_watermark,
                    bytes: raw.max(payload),
                },
            ));
        }
    }
    Ok((top_error, response.session_id, outcomes, nodes))
}

/// The nodes a Fetch answer described (v16+, KIP-951).
fn endpoints(response: &FetchResponse) -> Vec<BrokerInfo> {
    response
        .node_endpoints
        .iter()
        .map(|n| BrokerInfo::described(n.node_id.0, &n.host, n.port, n.rack.as_deref()))
        .collect()
}

/// Learns the leaders a Fetch answer named for partitions it failed with
/// `NOT_LEADER_OR_FOLLOWER` or `FENCED_LEADER_EPOCH` (KIP-951); returns the partitions whose
/// leader the cache now has from it.
fn learn_leaders(
    shared: &Shared,
    wants: &[Want],
    outcomes: &[(TopicPartition, Outcome)],
    nodes: &[BrokerInfo],
) -> Vec<TopicPartition> {
    let hints: Vec<LeaderHint> = outcomes
        .iter()
        .filter(|(_, o)| {
            matches!(
                o.error,
                Some(ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch)
            )
        })
        .filter_map(|(tp, o)| {
            let (leader, epoch) = o.leader?;
            let want = wants.iter().find(|w| w.tp == *tp)?;
            Some(LeaderHint {
                topic: tp.topic.clone(),
                topic_id: want.topic_id,
                partition: tp.partition,
                leader,
                epoch,
            })
        })
        .collect();
    if hints.is_empty() {
        return Vec::new();
    }
    shared.client.learn_leaders(&hints, nodes);
    shared.client.with_metadata(|m| {
        hints
            .into_iter()
            .filter(|h| m.leader(&h.topic, h.partition) == Some((h.leader, h.epoch)))
            .map(|h| TopicPartition::new(&*h.topic, h.partition))
            .collect()
    })
}

/// The Fetch request for `session`'s partitions at `version`: topics by id from v13.
fn fetch_request(
    config: &super::ConsumerConfig,
    session: &SessionRequest,
    version: i16,
) -> FetchRequest {
    let ids = session.topic_ids.as_ref().filter(|_| version >= 13);
    let id_of = |topic: &Arc<str>| {
        Uuid::from_bytes(
            ids.and_then(|ids| ids.get(topic))
                .copied()
                .unwrap_or(NIL_TOPIC_ID),
        )
    };
    let mut topics: Vec<FetchTopic> = Vec::new();
    for ((topic, partition), position) in &session.partitions {
        let p = FetchPartition::default()
            .with_partition(*partition)
            .with_current_leader_epoch(position.leader_epoch)
            .with_fetch_offset(position.offset)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(position.max_bytes);
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == &**topic => t.partitions.push(p),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_topic_id(id_of(topic))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let mut forgotten: Vec<ForgottenTopic> = Vec::new();
    for (topic, partition) in &session.forgotten {
        match forgotten
            .iter_mut()
            .find(|t| t.topic.0.as_str() == &**topic)
        {
            Some(t) => t.partitions.push(*partition),
            None => forgotten.push(
                ForgottenTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_topic_id(id_of(topic))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(i32::try_from(config.fetch_wait_max.as_millis()).unwrap_or(i32::MAX))
        .with_min_bytes(config.fetch_min_bytes)
        .with_max_bytes(config.fetch_max_bytes)
        .with_isolation_level(match config.isolation {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        })
        .with_session_id(session.session_id)
        .with_session_epoch(session.epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
        .with_rack_id(StrBytes::from_string(
            config.client_rack.clone().unwrap_or_default(),
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(partition: i32) -> Want {
        Want {
            tp: TopicPartition::new("t", partition),
            topic_id: NIL_TOPIC_ID,
            from_follower: false,
            generation: 3,
            position: FetchPosition {
                offset: 10,
                leader_epoch: -1,
                max_bytes: 1,
            },
        }
    }

    #[tokio::test]
    async fn a_request_task_that_panics_comes_back_as_a_failed_answer() {
        let mut in_flight = InFlight::default();
        in_flight.spawn(2, vec![want(0), want(1)], async {
            panic!("decoding went wrong");
        });
        let answer = tokio::time::timeout(Duration::from_secs(10), in_flight.next())
            .await
            .expect("the task ends")
            .expect("one was in flight");
        assert!(answer.died);
        assert_eq!(answer.node, 2);
        let partitions: Vec<i32> = answer.wants.iter().map(|w| w.tp.partition).collect();
        assert_eq!(partitions, [0, 1]);
        assert!(matches!(&answer.result, Err(Error::Closed(m)) if m.contains("panicked")));
        assert!(in_flight.is_empty() && in_flight.asked.is_empty());
    }

    #[tokio::test]
    async fn a_finished_request_is_forgotten() {
        let mut in_flight = InFlight::default();
        in_flight.spawn(1, vec![want(0)], async {
            Answer {
                node: 1,
                wants: vec![want(0)],
                result: Ok((None, 0, Vec::new(), Vec::new())),
                died: false,
            }
        });
        let answer = in_flight.next().await.expect("one was in flight");
        assert!(!answer.died && answer.result.is_ok());
        assert!(in_flight.asked.is_empty());
        assert!(in_flight.next().await.is_none());
    }
}
