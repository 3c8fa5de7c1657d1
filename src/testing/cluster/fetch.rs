//! Fetch: reads with long polling, isolation levels and fetch sessions.
//!
//! A request is handled in three steps, as Kafka's fetch manager does: the session context is
//! settled first (a full fetch names every partition; an incremental one updates the cached
//! session and bumps its epoch), then the partitions are read until `min_bytes` are ready,
//! an error shows up or `max_wait_ms` runs out, and last the response is built (an
//! incremental response leaves out partitions with nothing new).

use std::collections::HashMap;
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::server::Cx;
use super::state::State;

/// `max.incremental.fetch.session.cache.slots`: sessions each broker keeps.
const SESSION_SLOTS: usize = 1000;

/// The epoch of a full fetch that opens a session.
const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that closes the session or wants none.
const FINAL_EPOCH: i32 = -1;

/// One partition of a fetch: where to read and how much.
#[derive(Debug, Clone)]
struct Wanted {
    topic: String,
    partition: i32,
    fetch_offset: i64,
    current_leader_epoch: i32,
    max_bytes: i32,
}

/// A partition a session holds, with what its last response told the client.
#[derive(Debug, Clone)]
struct Cached {
    wanted: Wanted,
    high_watermark: i64,
    log_start: i64,
}

/// One fetch session of one broker.
#[derive(Debug)]
struct Session {
    /// The epoch the next request must carry.
    epoch: i32,
    partitions: Vec<Cached>,
    last_used: u64,
}

/// The fetch sessions of every broker of the cluster, at most [`SESSION_SLOTS`] per broker;
/// when one is full the least recently used session makes room.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_id: HashMap<(i32, i32), Session>,
    uses: u64,
}

impl Sessions {
    fn touch(&mut self) -> u64 {
        self.uses += 1;
        self.uses
    }

    fn open(&mut self, node: i32, partitions: Vec<Cached>) -> i32 {
        let on_node = self.by_id.keys().filter(|(n, _)| *n == node).count();
        if on_node >= SESSION_SLOTS {
            let oldest = self
                .by_id
                .iter()
                .filter(|((n, _), _)| *n == node)
                .min_by_key(|(_, s)| s.last_used)
                .map(|(key, _)| *key);
            if let Some(key) = oldest {
                self.by_id.remove(&key);
            }
        }
        let id = loop {
            let id = fastrand::i32(1..);
            if !self.by_id.contains_key(&(node, id)) {
                break id;
            }
        };
        let last_used = self.touch();
        self.by_id.insert(
            (node, id),
            Session {
                epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                last_used,
            },
        );
        id
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// How the response relates to a session.
#[derive(Debug, Clone, Copy)]
enum Context {
    /// A full fetch; `open` when it should start a session.
    Full { open: bool },
    /// An incremental fetch of session `id`.
    Incremental { id: i32 },
}

/// What reading one partition gave.
struct Read {
    data: PartitionData,
    bytes: usize,
}

/// Answers a Fetch request, long-polling until `min_bytes` are ready or `max_wait_ms` passes.
pub(crate) async fn handle(cx: &Cx<'_>, request: FetchRequest) -> FetchResponse {
    let read_committed = request.isolation_level == 1;
    let (context, wanted) = match settle_session(cx, &request) {
        Ok(settled) => settled,
        Err(error) => {
            return FetchResponse::default()
                .with_error_code(error.code())
                .with_session_id(0);
        }
    };
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + max_wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let max_bytes = usize::try_from(request.max_bytes).unwrap_or(0);
    let reads = loop {
        // Registered before reading, so an append between the read and the wait still wakes
        // this request.
        let mut notified = pin!(cx.cluster.changed.notified());
        notified.as_mut().enable();
        let reads = {
            let state = cx.cluster.state();
            read_all(cx, &state, &wanted, max_bytes, read_committed)
        };
        let readable: usize = reads.iter().map(|r| r.bytes).sum();
        let failed = reads.iter().any(|r| r.data.error_code != 0);
        if wanted.is_empty()
            || readable >= min_bytes
            || failed
            || tokio::time::Instant::now() >= deadline
        {
            break reads;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            // Out of time: one last read, so nothing appended meanwhile is missed.
            let state = cx.cluster.state();
            break read_all(cx, &state, &wanted, max_bytes, read_committed);
        }
    };
    let mut state = cx.cluster.state();
    respond(cx, &mut state, context, &wanted, reads)
}

/// Works out which partitions this request reads, opening, updating or closing its session.
fn settle_session(
    cx: &Cx<'_>,
    request: &FetchRequest,
) -> Result<(Context, Vec<Wanted>), ResponseError> {
    let listed: Vec<Wanted> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|p| wanted(topic.topic.0.as_str(), p))
        })
        .collect();
    let mut state = cx.cluster.state();
    let sessions = &mut state.fetch_sessions;
    let epoch = request.session_epoch;
    if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
        if request.session_id != 0 {
            sessions.by_id.remove(&(cx.node, request.session_id));
        }
        return Ok((
            Context::Full {
                open: epoch == INITIAL_EPOCH,
            },
            listed,
        ));
    }
    let last_used = sessions.touch();
    let Some(session) = sessions.by_id.get_mut(&(cx.node, request.session_id)) else {
        return Err(ResponseError::FetchSessionIdNotFound);
    };
    if session.epoch != epoch {
        return Err(ResponseError::InvalidFetchSessionEpoch);
    }
    for w in listed {
        match session
            .partitions
            .iter_mut()
            .find(|c| c.wanted.topic == w.topic && c.wanted.partition == w.partition)
        {
            Some(cached) => cached.wanted = w,
            None => session.partitions.push(Cached {
                wanted: w,
                high_watermark: -1,
                log_start: -1,
            }),
        }
    }
    for forgotten in &request.forgotten_topics_data {
        let topic = forgotten.topic.0.as_str();
        session.partitions.retain(|c| {
            !(c.wanted.topic == topic && forgotten.partitions.contains(&c.wanted.partition))
        });
    }
    session.epoch = next_epoch(session.epoch);
    session.last_used = last_used;
    let wanted = session
        .partitions
        .iter()
        .map(|c| c.wanted.clone())
        .collect();
    Ok((
        Context::Incremental {
            id: request.session_id,
        },
        wanted,
    ))
}

fn wanted(topic: &str, p: &FetchPartition) -> Wanted {
    Wanted {
        topic: topic.to_owned(),
        partition: p.partition,
        fetch_offset: p.fetch_offset,
        current_leader_epoch: p.current_leader_epoch,
        max_bytes: p.partition_max_bytes,
    }
}

/// Reads every wanted partition within the response's byte budget: each partition gets at
/// most its own limit and what is left of the total, except that the first partition with
/// data gets its first batch whole (KIP-74), so a consumer always makes progress.
fn read_all(
    cx: &Cx<'_>,
    state: &State,
    wanted: &[Wanted],
    max_bytes: usize,
    read_committed: bool,
) -> Vec<Read> {
    let mut left = max_bytes;
    let mut first = true;
    wanted
        .iter()
        .map(|w| {
            let limit = usize::try_from(w.max_bytes).unwrap_or(0).min(left);
            let read = read_one(cx, state, w, limit, first, read_committed);
            if read.bytes > 0 {
                first = false;
            }
            left = left.saturating_sub(read.bytes);
            read
        })
        .collect()
}

fn read_one(
    cx: &Cx<'_>,
    state: &State,
    w: &Wanted,
    limit: usize,
    min_one: bool,
    read_committed: bool,
) -> Read {
    let refused = |error: ResponseError| Read {
        data: PartitionData::default()
            .with_partition_index(w.partition)
            .with_error_code(error.code())
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_aborted_transactions(None)
            .with_records(Some(Bytes::new())),
        bytes: 0,
    };
    let Some(partition) = state.topics.partition(&w.topic, w.partition) else {
        // Kafka answers a partition missing from its metadata before reading anything, with
        // an empty (not null) list of aborted transactions.
        let mut unknown = refused(ResponseError::UnknownTopicOrPartition);
        unknown.data.aborted_transactions = Some(Vec::new());
        return unknown;
    };
    if partition.leader != cx.node {
        return refused(ResponseError::NotLeaderOrFollower);
    }
    if w.current_leader_epoch >= 0 {
        if w.current_leader_epoch < partition.leader_epoch {
            return refused(ResponseError::FencedLeaderEpoch);
        }
        if w.current_leader_epoch > partition.leader_epoch {
            return refused(ResponseError::UnknownLeaderEpoch);
        }
    }
    let log = &partition.log;
    if w.fetch_offset < log.log_start() || w.fetch_offset > log.high_watermark() {
        return refused(ResponseError::OffsetOutOfRange);
    }
    let read = log.read_limited(w.fetch_offset, limit, read_committed, min_one);
    let aborted = read_committed.then(|| {
        read.aborted
            .iter()
            .map(|a| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(a.producer_id))
                    .with_first_offset(a.first_offset)
            })
            .collect()
    });
    let bytes = read.records.len();
    let mut records = read.records;
    if !records.is_empty() && cx.cluster.faults.corrupts(&w.topic, w.partition) {
        let mut flipped = bytes::BytesMut::from(&records[..]);
        let last = flipped.len() - 1;
        flipped[last] ^= 0x01;
        records = flipped.freeze();
    }
    Read {
        data: PartitionData::default()
            .with_partition_index(w.partition)
            .with_high_watermark(log.high_watermark())
            .with_last_stable_offset(log.last_stable_offset())
            .with_log_start_offset(log.log_start())
            .with_aborted_transactions(aborted)
            .with_records(Some(records)),
        bytes,
    }
}

/// Builds the response: every partition of a full fetch (opening a session when asked and
/// there is room), and of an incremental one only those with records, an error, or a new
/// high watermark or log start; partitions that returned records move to the end of the
/// session, so the next responses start with the others.
fn respond(
    cx: &Cx<'_>,
    state: &mut State,
    context: Context,
    wanted: &[Wanted],
    reads: Vec<Read>,
) -> FetchResponse {
    let (session_id, included) = match context {
        Context::Full { open } => {
            let session_id = if open {
                let cached = wanted
                    .iter()
                    .zip(&reads)
                    .map(|(w, r)| Cached {
                        wanted: w.clone(),
                        high_watermark: r.data.high_watermark,
                        log_start: r.data.log_start_offset,
                    })
                    .collect();
                state.fetch_sessions.open(cx.node, cached)
            } else {
                0
            };
            (session_id, wanted.iter().zip(reads).collect::<Vec<_>>())
        }
        Context::Incremental { id } => {
            let session = state.fetch_sessions.by_id.get_mut(&(cx.node, id));
            let mut included = Vec::new();
            let mut moved = Vec::new();
            match session {
                None => included = wanted.iter().zip(reads).collect(),
                Some(session) => {
                    for (w, read) in wanted.iter().zip(reads) {
                        let Some(cached) = session.partitions.iter_mut().find(|c| {
                            c.wanted.topic == w.topic && c.wanted.partition == w.partition
                        }) else {
                            continue;
                        };
                        let data = &read.data;
                        let mut respond = read.bytes > 0 || data.error_code != 0;
                        if cached.high_watermark != data.high_watermark {
                            respond = true;
                            cached.high_watermark = data.high_watermark;
                        }
                        if cached.log_start != data.log_start_offset {
                            respond = true;
                            cached.log_start = data.log_start_offset;
                        }
                        if data.error_code != 0 {
                            // Forget what the client was told, so the partition is sent
                            // again once it recovers.
                            cached.high_watermark = -1;
                        }
                        if read.bytes > 0 {
                            moved.push((w.topic.clone(), w.partition));
                        }
                        if respond {
                            included.push((w, read));
                        }
                    }
                    for (topic, partition) in moved {
                        if let Some(at) = session.partitions.iter().position(|c| {
                            c.wanted.topic == topic && c.wanted.partition == partition
                        }) {
                            let cached = session.partitions.remove(at);
                            session.partitions.push(cached);
                        }
                    }
                }
            }
            (id, included)
        }
    };
    FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(group_by_topic(included))
}

/// Partitions of the same topic, consecutive in the response as Kafka writes them.
fn group_by_topic(partitions: Vec<(&Wanted, Read)>) -> Vec<FetchableTopicResponse> {
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for (w, read) in partitions {
        match topics.last_mut() {
            Some(last) if last.topic.0.as_str() == w.topic => last.partitions.push(read.data),
            _ => topics.push(
                FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(w.topic.clone())))
                    .with_partitions(vec![read.data]),
            ),
        }
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(topic: &str) -> Cached {
        Cached {
            wanted: Wanted {
                topic: topic.to_owned(),
                partition: 0,
                fetch_offset: 0,
                current_leader_epoch: -1,
                max_bytes: 1,
            },
            high_watermark: 0,
            log_start: 0,
        }
    }

    #[test]
    fn a_full_cache_drops_the_least_recently_used_session() {
        let mut sessions = Sessions::default();
        let first = sessions.open(0, vec![cached("a")]);
        for _ in 1..SESSION_SLOTS {
            sessions.open(0, vec![cached("b")]);
        }
        // Another node's sessions do not count.
        sessions.open(1, vec![cached("c")]);
        assert!(sessions.by_id.contains_key(&(0, first)));
        sessions.open(0, vec![cached("d")]);
        assert!(!sessions.by_id.contains_key(&(0, first)));
        assert_eq!(sessions.by_id.len(), SESSION_SLOTS + 1);
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(-1), -1);
    }
}
