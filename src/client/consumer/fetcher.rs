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
//! `auto.offset.reset`; a failed request resets the broker's session.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tokio::task::JoinSet;

use crate::client::error::{Error, Result};
use crate::client::reader::IsolationLevel;

use super::decode::{Decoded, decode_partition};
use super::fetch_session::{FetchPosition, FetchSession, SessionRequest};
use super::state::{Chunk, State};
use super::{Shared, StartAt, TopicPartition, positions};

/// Fetch versions with sessions (v7) and topic names (v13 moved to topic ids).
const FETCH_VERSIONS: VersionRange = VersionRange { min: 7, max: 12 };

/// One partition of a request in flight.
#[derive(Debug, Clone)]
struct Want {
    tp: TopicPartition,
    generation: u64,
    position: FetchPosition,
}

/// What came back for one partition.
#[derive(Debug)]
struct Outcome {
    error: Option<ResponseError>,
    decoded: Result<Decoded>,
    high_watermark: i64,
    bytes: usize,
}

/// A response: its top-level error, its session id, and each partition's outcome.
type Fetched = (Option<ResponseError>, i32, Vec<(TopicPartition, Outcome)>);

/// A finished request.
#[derive(Debug)]
struct Answer {
    node: i32,
    wants: Vec<Want>,
    result: Result<Fetched>,
}

/// Runs until the consumer closes.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut fetcher = Fetcher {
        sessions: HashMap::new(),
        busy: HashSet::new(),
        node_backoff: HashMap::new(),
        last_refresh: None,
    };
    let mut in_flight: JoinSet<Answer> = JoinSet::new();
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
            Some(Ok(answer)) = in_flight.join_next(), if !in_flight.is_empty() => {
                fetcher.absorb(&shared, answer);
            }
            () = sleep => {}
            _ = closing.changed() => {}
        }
    }
}

struct Fetcher {
    sessions: HashMap<i32, FetchSession>,
    /// Brokers with a fetch on the wire.
    busy: HashSet<i32>,
    node_backoff: HashMap<i32, Instant>,
    last_refresh: Option<Instant>,
}

impl Fetcher {
    /// Starts what can start; returns when something waiting on time becomes possible.
    fn dispatch(
        &mut self,
        shared: &Arc<Shared>,
        in_flight: &mut JoinSet<Answer>,
    ) -> Option<Instant> {
        let now = Instant::now();
        let config = &shared.config;
        let mut wake_at: Option<Instant> = None;
        let mut by_node: HashMap<i32, Vec<Want>> = HashMap::new();
        let mut to_resolve = Vec::new();
        let mut no_leader: HashSet<Arc<str>> = HashSet::new();
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
                if part.paused || part.revoking || part.in_flight {
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
                let Some((leader, epoch)) = shared
                    .client
                    .with_metadata(|m| m.leader(&tp.topic, tp.partition))
                else {
                    no_leader.insert(tp.topic.clone());
                    continue;
                };
                if self.busy.contains(&leader) {
                    continue;
                }
                if let Some(&until) = self.node_backoff.get(&leader)
                    && until > now
                {
                    wake_at = Some(wake_at.map_or(until, |w| w.min(until)));
                    continue;
                }
                by_node.entry(leader).or_default().push(Want {
                    tp: tp.clone(),
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
        }
        if !to_resolve.is_empty() {
            tokio::spawn(positions::resolve(shared.clone(), to_resolve));
        }
        if !no_leader.is_empty() {
            self.refresh(shared, no_leader.into_iter().collect());
            let retry = now + shared.client.config().retry_backoff;
            wake_at = Some(wake_at.map_or(retry, |w| w.min(retry)));
        }
        for (node, mut wants) in by_node {
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
            let request = self.sessions.entry(node).or_default().request(&keyed);
            {
                let mut stats = shared.stats.lock().unwrap_or_else(PoisonError::into_inner);
                if request.epoch == 0 {
                    stats.full += 1;
                } else {
                    stats.incremental += 1;
                }
            }
            self.busy.insert(node);
            in_flight.spawn(fetch(shared.clone(), node, request, wants));
        }
        wake_at
    }

    /// Applies a finished request to the consumer's state.
    fn absorb(&mut self, shared: &Arc<Shared>, answer: Answer) {
        let Answer {
            node,
            wants,
            result,
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
                tracing::debug!(node, error = %e, "fetch failed");
                self.node_backoff.insert(node, now + backoff);
                refresh.extend(wants.iter().map(|w| w.tp.topic.clone()));
            }
            Ok((top_error, session_id, outcomes)) => {
                session.answered(top_error, session_id);
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
                    if let Some(topic) = apply(&mut state, &tp, want, outcome, now + backoff) {
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
        tokio::spawn(async move {
            let names: Vec<&str> = topics.iter().map(|t| &**t).collect();
            if let Err(e) = shared.client.refresh_metadata(&names).await {
                tracing::debug!(error = %e, "metadata refresh for the fetcher failed");
            }
            shared.fetch_wake.notify_one();
        });
    }
}

/// Applies one partition's outcome; returns its topic when its leader must be looked up.
fn apply(
    state: &mut State,
    tp: &TopicPartition,
    want: &Want,
    outcome: Outcome,
    retry_at: Instant,
) -> Option<Arc<str>> {
    match (outcome.error, outcome.decoded) {
        (None, Ok(decoded)) => {
            let chunk = Chunk {
                generation: want.generation,
                records: decoded.records,
                next_offset: decoded.next_offset,
                leader_epoch: want.position.leader_epoch,
                high_watermark: outcome.high_watermark,
                bytes: outcome.bytes,
            };
            state.push(tp, chunk);
        }
        (None, Err(e)) => {
            // A batch we cannot read: stop here rather than skip it.
            state.report(Error::InvalidRecord(format!(
                "{tp} at offset {}: {e}",
                want.position.offset
            )));
            if let Some(part) = state.parts.get_mut(tp) {
                part.backoff_until = Some(retry_at);
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
    let version = conn.version_of::<FetchRequest>(FETCH_VERSIONS)?;
    let request = fetch_request(config, &session);
    let response = conn
        .send(
            &request,
            version,
            shared.client.socket_timeout() + config.fetch_wait_max,
        )
        .await?;
    let top_error = ResponseError::try_from_code(response.error_code);
    let max_decompressed = shared.client.config().max_response_size;
    let mut outcomes = Vec::new();
    for topic in response.responses {
        for p in topic.partitions {
            let Some(want) = wants.iter().find(|w| {
                *w.tp.topic == *topic.topic.0.as_str() && w.tp.partition == p.partition_index
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
                    max_decompressed,
                    config.check_crcs,
                )
            } else {
                Ok(Decoded::default())
            };
            let payload: usize = decoded.as_ref().map_or(0, |d| {
                d.records
                    .iter()
                    .map(|r| {
                        r.key.as_ref().map_or(0, Bytes::len)
                            + r.value.as_ref().map_or(0, Bytes::len)
                            + 64
                    })
                    .sum()
            });
            outcomes.push((
                want.tp.clone(),
                Outcome {
                    error,
                    decoded,
                    high_watermark: p.high_watermark,
                    bytes: raw.max(payload),
                },
            ));
        }
    }
    Ok((top_error, response.session_id, outcomes))
}

/// The Fetch request for `session`'s partitions.
fn fetch_request(config: &super::ConsumerConfig, session: &SessionRequest) -> FetchRequest {
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
