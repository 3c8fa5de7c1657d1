//! Produce: validation, idempotence checks, appends.
//!
//! Each partition's record set goes through the checks a Kafka leader makes, in Kafka's
//! order: the partition exists and is led here; the set is exactly one v2 batch; the
//! transaction (if any) allows the write; the batch fits `max.message.bytes`, has a valid CRC
//! and consistent header, and its records decode and carry acceptable timestamps (and keys on
//! compacted topics); then the producer's sequence. Only then is it appended.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use crate::client::records::compression;
use crate::client::records::{BATCH_HEADER_SIZE, Batch, BatchHeader, Codec, Record, RecordBatches};

use super::producers::SequenceCheck;
use super::server::Cx;
use super::state::State;
use super::topics::Topic;

/// The most a compressed batch may expand to while it is validated.
const MAX_DECOMPRESSED: usize = 128 << 20;

/// Bytes before a batch's magic byte: base offset, length, partition leader epoch.
const MAGIC_AT: usize = 16;

/// Where a batch's attributes are: after the magic byte and the CRC.
const ATTRIBUTES_AT: usize = MAGIC_AT + 5;

/// Bytes of a batch before its `length` field counts: base offset and the length itself.
const LOG_OVERHEAD: usize = 12;

/// `log.message.timestamp.after.max.ms` (Kafka 4's default: an hour).
const TIMESTAMP_AFTER_MAX_MS: i64 = 3_600_000;

/// Answers a Produce request; `None` for `acks=0`, which gets no response.
#[expect(
    clippy::unused_async,
    reason = "the dispatcher awaits every handler that may hold its connection"
)]
pub(crate) async fn handle(cx: &Cx<'_>, request: ProduceRequest) -> Option<ProduceResponse> {
    let acks = request.acks;
    let response = {
        let mut state = cx.cluster.state();
        append_all(cx, &mut state, request)
    };
    cx.cluster.changed.notify_waiters();
    (acks != 0).then_some(response)
}

fn append_all(cx: &Cx<'_>, state: &mut State, request: ProduceRequest) -> ProduceResponse {
    let now = wall_clock_ms();
    let valid_acks = matches!(request.acks, -1..=1);
    let mut leaders = Vec::new();
    let responses = request
        .topic_data
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str().to_owned();
            let partitions = topic
                .partition_data
                .into_iter()
                .map(|data| {
                    let outcome = if valid_acks {
                        append_one(cx, state, &name, data.index, data.records, now)
                    } else {
                        Err(Refusal::new(ResponseError::InvalidRequiredAcks))
                    };
                    match outcome {
                        Ok(appended) => PartitionProduceResponse::default()
                            .with_index(data.index)
                            .with_base_offset(appended.base_offset)
                            .with_log_append_time_ms(appended.log_append_time)
                            .with_log_start_offset(appended.log_start),
                        Err(refusal) => {
                            let mut response = refusal.response(data.index);
                            let redirect = (refusal.error == ResponseError::NotLeaderOrFollower
                                && cx.version >= 10)
                                .then(|| state.topics.partition(&name, data.index))
                                .flatten();
                            if let Some(p) = redirect {
                                response = response.with_current_leader(
                                    LeaderIdAndEpoch::default()
                                        .with_leader_id(BrokerId(p.leader))
                                        .with_leader_epoch(p.leader_epoch),
                                );
                                leaders.push(p.leader);
                            }
                            response
                        }
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions)
        })
        .collect();
    leaders.sort_unstable();
    leaders.dedup();
    // KIP-951: a client told to go elsewhere also learns where that is.
    let endpoints = leaders
        .into_iter()
        .map(|node| {
            let (host, port) = cx.cluster.advertised(cx.listener, node);
            NodeEndpoint::default()
                .with_node_id(BrokerId(node))
                .with_host(StrBytes::from_string(host))
                .with_port(i32::from(port))
        })
        .collect();
    ProduceResponse::default()
        .with_responses(responses)
        .with_node_endpoints(endpoints)
}

/// Where an accepted batch went.
struct Appended {
    base_offset: i64,
    /// -1, except for a retried batch: Kafka then reports the first append's timestamp.
    log_append_time: i64,
    log_start: i64,
}

/// Why a partition's batch was refused.
struct Refusal {
    error: ResponseError,
    message: Option<String>,
    /// Records refused individually (index in the batch, reason).
    records: Vec<(i32, String)>,
    /// The log start reported with the error: Kafka reports it for refusals made while
    /// validating against the log, and -1 for those made before or for size and corruption.
    log_start: i64,
}

impl Refusal {
    fn new(error: ResponseError) -> Self {
        Refusal {
            error,
            message: None,
            records: Vec::new(),
            log_start: -1,
        }
    }

    fn with_message(error: ResponseError, message: String) -> Self {
        Refusal {
            error,
            message: Some(message),
            records: Vec::new(),
            log_start: -1,
        }
    }

    fn response(&self, index: i32) -> PartitionProduceResponse {
        PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(self.error.code())
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(self.log_start)
            .with_error_message(self.message.clone().map(StrBytes::from_string))
            .with_record_errors(
                self.records
                    .iter()
                    .map(|(index, message)| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(*index)
                            .with_batch_index_error_message(Some(StrBytes::from_string(
                                message.clone(),
                            )))
                    })
                    .collect(),
            )
    }
}

fn append_one(
    cx: &Cx<'_>,
    state: &mut State,
    topic_name: &str,
    index: i32,
    records: Option<Bytes>,
    now: i64,
) -> Result<Appended, Refusal> {
    let Some(topic) = state.topics.by_name.get(topic_name) else {
        return Err(Refusal::new(ResponseError::UnknownTopicOrPartition));
    };
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or_else(|| Refusal::new(ResponseError::UnknownTopicOrPartition))?;
    if partition.leader != cx.node {
        return Err(Refusal::new(ResponseError::NotLeaderOrFollower));
    }
    let bytes = single_batch(cx.version, &records.unwrap_or_default())?;
    let header = peek_header(&bytes)?;
    if header.is_transactional() {
        super::txn::admit_produce(
            cx.cluster,
            state,
            cx.version,
            header.producer_id,
            header.producer_epoch,
            topic_name,
            index,
        )
        .map_err(Refusal::new)?;
    }
    let topic = state
        .topics
        .by_name
        .get(topic_name)
        .ok_or_else(|| Refusal::new(ResponseError::UnknownTopicOrPartition))?;
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or_else(|| Refusal::new(ResponseError::UnknownTopicOrPartition))?;
    let log_start = partition.log.log_start();
    let with_log_start = |mut refusal: Refusal| {
        if !matches!(
            refusal.error,
            ResponseError::MessageTooLarge | ResponseError::CorruptMessage
        ) {
            refusal.log_start = log_start;
        }
        refusal
    };
    let header = validate(cx, topic_name, topic, &bytes, now).map_err(with_log_start)?;
    let topic_id = topic.id;
    let outcome =
        producer_check(state, topic_id, topic_name, index, &header).map_err(with_log_start)?;
    let partition = state
        .topics
        .partition_mut(topic_name, index)
        .ok_or_else(|| Refusal::new(ResponseError::UnknownTopicOrPartition))?;
    let (base_offset, log_append_time) = match outcome {
        SequenceCheck::Duplicate(original) => (original.first_offset, original.timestamp),
        SequenceCheck::Append => {
            let header = BatchHeader {
                partition_leader_epoch: partition.leader_epoch,
                ..header
            };
            let base = partition
                .log
                .append(header, &stamp_leader_epoch(&bytes, partition.leader_epoch));
            if let Some(keep) = cx.cluster.options.retention_records {
                partition.log.retain(keep);
            }
            (base, -1)
        }
    };
    let log_start = partition.log.log_start();
    if outcome == SequenceCheck::Append && header.producer_id >= 0 {
        state
            .producers
            .appended(topic_id, index, &header, base_offset);
    }
    if log_start > 0 {
        state.producers.evict_before(topic_id, index, log_start);
    }
    Ok(Appended {
        base_offset,
        log_append_time,
        log_start,
    })
}

/// The producer state's checks of an idempotent or transactional batch: its epoch and
/// sequence, and (after those, as Kafka orders them) that a producer with a transaction open
/// on the partition writes transactionally.
fn producer_check(
    state: &State,
    topic_id: uuid::Uuid,
    topic_name: &str,
    index: i32,
    header: &BatchHeader,
) -> Result<SequenceCheck, Refusal> {
    if header.producer_id < 0 {
        return Ok(SequenceCheck::Append);
    }
    let outcome = state
        .producers
        .check(topic_id, index, header)
        .map_err(|error| {
            Refusal::with_message(
                error,
                format!(
                    "producer {} epoch {} sequence {} refused on {topic_name}-{index}",
                    header.producer_id, header.producer_epoch, header.base_sequence
                ),
            )
        })?;
    let open = state
        .topics
        .partition(topic_name, index)
        .is_some_and(|p| p.log.has_open(header.producer_id));
    if outcome == SequenceCheck::Append && !header.is_transactional() && open {
        return Err(Refusal::with_message(
            ResponseError::InvalidTxnState,
            format!(
                "Expected transactional write from producer {} in partition {topic_name}-{index}",
                header.producer_id
            ),
        ));
    }
    Ok(outcome)
}

/// The record set of one partition must be exactly one v2 batch (produce v3 and later); a
/// trailing fragment too short to be a batch is ignored, as Kafka trims it.
fn single_batch(version: i16, records: &Bytes) -> Result<Bytes, Refusal> {
    let Some(length) = batch_length(records) else {
        return Err(Refusal::with_message(
            ResponseError::InvalidRecord,
            format!(
                "Produce requests with version {version} must have at least one record batch per partition"
            ),
        ));
    };
    let magic = records.get(MAGIC_AT).copied().unwrap_or_default();
    if magic != 2 {
        return Err(Refusal::with_message(
            ResponseError::InvalidRecord,
            format!(
                "Produce requests with version {version} are only allowed to contain record batches with magic version 2"
            ),
        ));
    }
    let attributes = records
        .get(ATTRIBUTES_AT..ATTRIBUTES_AT + 2)
        .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]));
    if version < 7 && Codec::from_attributes(attributes).ok() == Some(Codec::Zstd) {
        return Err(Refusal::with_message(
            ResponseError::UnsupportedCompressionType,
            format!(
                "Produce requests with version {version} are not allowed to use ZStandard compression"
            ),
        ));
    }
    let rest = records.slice(length..);
    if batch_length(&rest).is_some() {
        return Err(Refusal::with_message(
            ResponseError::InvalidRecord,
            format!(
                "Produce requests with version {version} are only allowed to contain exactly one record batch per partition"
            ),
        ));
    }
    Ok(records.slice(..length))
}

/// The size of the whole batch at the start of `data`, if all of it is there.
fn batch_length(data: &[u8]) -> Option<usize> {
    let field: [u8; 4] = data.get(8..LOG_OVERHEAD)?.try_into().ok()?;
    let length = usize::try_from(i32::from_be_bytes(field)).ok()?;
    let whole = LOG_OVERHEAD.checked_add(length)?;
    // Kafka reads anything shorter than a magic byte as no batch at all.
    (whole > MAGIC_AT && data.len() >= whole).then_some(whole)
}

/// The batch header, read without checking the CRC (the checks that come before it need the
/// producer fields).
fn peek_header(bytes: &Bytes) -> Result<BatchHeader, Refusal> {
    let mut batches = RecordBatches::new(bytes.clone(), MAX_DECOMPRESSED);
    match batches.next() {
        Some(Ok(batch)) => Ok(batch.header),
        // A CRC failure, a short header: Kafka finds these when it validates the batch.
        Some(Err(e)) => Err(Refusal::with_message(
            ResponseError::CorruptMessage,
            e.to_string(),
        )),
        None => Err(Refusal::new(ResponseError::CorruptMessage)),
    }
}

/// The checks of Kafka's `analyzeAndValidateRecords` and `LogValidator`.
fn validate(
    cx: &Cx<'_>,
    topic_name: &str,
    topic: &Topic,
    bytes: &Bytes,
    now: i64,
) -> Result<BatchHeader, Refusal> {
    let max = topic
        .config("max.message.bytes")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(cx.cluster.options.message_max_bytes);
    if bytes.len() > max {
        return Err(Refusal::with_message(
            ResponseError::MessageTooLarge,
            format!(
                "The record batch size in the append to {topic_name} is {} bytes which exceeds the maximum configured value of {max}.",
                bytes.len()
            ),
        ));
    }
    let batch = match RecordBatches::new(bytes.clone(), MAX_DECOMPRESSED).next() {
        Some(Ok(batch)) => batch,
        Some(Err(e)) => {
            return Err(Refusal::with_message(
                ResponseError::CorruptMessage,
                e.to_string(),
            ));
        }
        None => return Err(Refusal::new(ResponseError::CorruptMessage)),
    };
    let h = batch.header;
    let invalid = |message: String| Refusal::with_message(ResponseError::InvalidRecord, message);
    if h.base_offset != 0 {
        return Err(invalid(format!(
            "The baseOffset of the record batch in the append to {topic_name} should be 0, but it is {}",
            h.base_offset
        )));
    }
    if h.last_offset_delta < 0 {
        return Err(invalid(format!(
            "Batch has an invalid offset range: [0, {}]",
            h.last_offset_delta
        )));
    }
    if h.record_count <= 0 {
        return Err(invalid(format!(
            "Invalid reported count for record batch: {}",
            h.record_count
        )));
    }
    if i64::from(h.last_offset_delta) + 1 != i64::from(h.record_count) {
        return Err(invalid(format!(
            "Inconsistent batch offset range [0, {}] and count of records {}",
            h.last_offset_delta, h.record_count
        )));
    }
    if h.is_control() {
        return Err(invalid(
            "Clients are not allowed to write control records".to_owned(),
        ));
    }
    if h.producer_id >= 0 && h.base_sequence < 0 {
        return Err(invalid(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            h.base_sequence, h.producer_id
        )));
    }
    let records = decode(&batch, bytes)?;
    check_records(topic_name, topic, &h, &records, now)?;
    Ok(h)
}

/// Per-record checks: keys on compacted topics, then `CreateTime` timestamps within
/// `message.timestamp.before.max.ms` / `after.max.ms` of now.
fn check_records(
    topic_name: &str,
    topic: &Topic,
    h: &BatchHeader,
    records: &[Record],
    now: i64,
) -> Result<(), Refusal> {
    let after_max = topic
        .config("message.timestamp.after.max.ms")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(TIMESTAMP_AFTER_MAX_MS);
    let before_max = topic
        .config("message.timestamp.before.max.ms")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(i64::MAX);
    let compacted = topic.is_compacted();
    let mut timestamps = Vec::new();
    let mut keyless = Vec::new();
    for (record, i) in records.iter().zip(0..) {
        if compacted && record.key.is_none() {
            keyless.push((
                i,
                format!("Compacted topic cannot accept message without key in topic partition {topic_name}."),
            ));
        }
        let ts = record.timestamp;
        if !h.is_log_append_time()
            && ts >= 0
            && (ts < now.saturating_sub(before_max) || ts > now.saturating_add(after_max))
        {
            timestamps.push((
                i,
                format!("Timestamp {ts} of message with offset {i} is out of range."),
            ));
        }
    }
    if !keyless.is_empty() {
        return Err(Refusal {
            error: ResponseError::InvalidRecord,
            message: Some("One or more records have been rejected".to_owned()),
            records: keyless,
            log_start: -1,
        });
    }
    if !timestamps.is_empty() {
        return Err(Refusal {
            error: ResponseError::InvalidTimestamp,
            message: Some(
                "One or more records have been rejected due to invalid timestamp".to_owned(),
            ),
            records: timestamps,
            log_start: -1,
        });
    }
    Ok(())
}

/// The records of a batch. A codec Kafka does not know or data it cannot decompress fails
/// as Kafka fails it (`UNKNOWN_SERVER_ERROR`); records that do not parse, fewer records than
/// the header counts or bytes after the last one are `INVALID_RECORD`.
fn decode(batch: &Batch, bytes: &Bytes) -> Result<Vec<Record>, Refusal> {
    let unknown =
        |message: String| Refusal::with_message(ResponseError::UnknownServerError, message);
    let invalid = |message: String| Refusal::with_message(ResponseError::InvalidRecord, message);
    let codec = batch.header.codec().map_err(|e| unknown(e.to_string()))?;
    let body = bytes.get(BATCH_HEADER_SIZE..).unwrap_or_default();
    let plain = if codec == Codec::None {
        Bytes::copy_from_slice(body)
    } else {
        Bytes::from(
            compression::decompress(codec, body, MAX_DECOMPRESSED)
                .map_err(|e| unknown(format!("Failed to decompress record stream: {e}")))?,
        )
    };
    let records = batch.records().map_err(|e| invalid(e.to_string()))?;
    if !ends_after(&plain, records.len()) {
        return Err(invalid(
            "Incorrect declared batch size, records still remaining in file".to_owned(),
        ));
    }
    Ok(records)
}

/// Whether `count` length-prefixed records fill `data` exactly.
fn ends_after(data: &[u8], count: usize) -> bool {
    let mut at = 0usize;
    for _ in 0..count {
        let Some((length, used)) = read_varint(data.get(at..).unwrap_or_default()) else {
            return false;
        };
        let Ok(length) = usize::try_from(length) else {
            return false;
        };
        at = at.saturating_add(used).saturating_add(length);
    }
    at == data.len()
}

/// A zigzag varint and the bytes it took.
fn read_varint(data: &[u8]) -> Option<(i64, usize)> {
    let mut value = 0u64;
    for (i, byte) in data.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let decoded = i64::try_from(value >> 1).ok()? ^ -i64::try_from(value & 1).ok()?;
            return Some((decoded, i + 1));
        }
    }
    None
}

/// The batch with the partition's leader epoch written in, as a leader stamps it (the CRC
/// does not cover that field).
fn stamp_leader_epoch(bytes: &Bytes, epoch: i32) -> Bytes {
    let mut out = bytes.to_vec();
    if let Some(field) = out.get_mut(LOG_OVERHEAD..MAGIC_AT) {
        field.copy_from_slice(&epoch.to_be_bytes());
    }
    Bytes::from(out)
}

fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::records::{BatchBuilder, ProducerState};

    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};

    use super::super::server::Cx;
    use super::super::{ClusterOptions, EmbeddedCluster, Listener};

    fn one_batch() -> Bytes {
        batch_of(ProducerState::NONE, 0)
    }

    fn batch_of(producer: ProducerState, timestamp: i64) -> Bytes {
        let mut builder = BatchBuilder::new(1024);
        builder.push(timestamp, Some(b"k"), Some(b"v"), &[]);
        builder.build(Codec::None, 0, producer).expect("builds")
    }

    fn idempotent(sequence: i32, transactional: bool) -> ProducerState {
        ProducerState {
            producer_id: 4,
            producer_epoch: 0,
            base_sequence: sequence,
            transactional,
        }
    }

    /// Produces `batch` to partition 0 of `topic` through node `node`; the partition's answer.
    fn produce(
        cluster: &EmbeddedCluster,
        node: i32,
        topic: &str,
        batch: Bytes,
    ) -> PartitionProduceResponse {
        let cx = Cx {
            cluster: cluster.shared(),
            node,
            version: 11,
            listener: Listener::Memory,
            client_id: None,
        };
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(batch)),
                    ]),
            ]);
        let mut state = cluster.shared().state();
        let response = append_all(&cx, &mut state, request);
        response.responses[0].partition_responses[0].clone()
    }

    fn cluster_with(topic: &str) -> (EmbeddedCluster, i32) {
        let cluster = EmbeddedCluster::new(ClusterOptions {
            nodes: 2,
            ..ClusterOptions::default()
        });
        let leader = {
            let mut state = cluster.shared().state();
            state.topics.create(topic, 1, 2).partitions[0].leader
        };
        (cluster, leader)
    }

    #[test]
    fn a_retry_is_answered_with_the_first_offsets_and_time() {
        let (cluster, leader) = cluster_with("t");
        let first = produce(&cluster, leader, "t", batch_of(idempotent(0, false), 1_000));
        let second = produce(&cluster, leader, "t", batch_of(idempotent(1, false), 2_000));
        let retry = produce(&cluster, leader, "t", batch_of(idempotent(0, false), 1_000));
        assert_eq!((first.error_code, first.base_offset), (0, 0));
        assert_eq!(second.base_offset, 1);
        assert_eq!((retry.error_code, retry.base_offset), (0, 0));
        assert_eq!(retry.log_append_time_ms, 1_000);
        let gap = produce(&cluster, leader, "t", batch_of(idempotent(5, false), 3_000));
        assert_eq!(
            gap.error_code,
            ResponseError::OutOfOrderSequenceNumber.code()
        );
        assert_eq!(gap.log_start_offset, 0);
    }

    #[test]
    fn a_plain_write_inside_an_open_transaction_is_refused() {
        let (cluster, leader) = cluster_with("t");
        {
            // Opened as an accepted transactional produce leaves it (the coordinator's checks
            // are the transaction module's).
            let bytes = batch_of(idempotent(0, true), 1_000);
            let header = peek_header(&bytes).ok().expect("valid");
            let mut state = cluster.shared().state();
            let partition = state.topics.partition_mut("t", 0).expect("created");
            partition.log.append(header, &bytes);
            assert!(partition.log.has_open(4));
        }
        let plain = produce(&cluster, leader, "t", batch_of(idempotent(1, false), 1_000));
        assert_eq!(plain.error_code, ResponseError::InvalidTxnState.code());
    }

    #[test]
    fn another_node_points_at_the_leader() {
        let (cluster, leader) = cluster_with("t");
        let refused = produce(&cluster, 1 - leader, "t", one_batch());
        assert_eq!(
            refused.error_code,
            ResponseError::NotLeaderOrFollower.code()
        );
        assert_eq!(refused.current_leader.leader_id, BrokerId(leader));
        assert_eq!(refused.log_start_offset, -1);
    }

    #[test]
    fn a_topics_max_message_bytes_bounds_its_batches() {
        let (cluster, leader) = cluster_with("t");
        {
            let mut state = cluster.shared().state();
            let topic = state.topics.by_name.get_mut("t").expect("created");
            topic
                .configs
                .insert("max.message.bytes".to_owned(), "20".to_owned());
        }
        let refused = produce(&cluster, leader, "t", one_batch());
        assert_eq!(refused.error_code, ResponseError::MessageTooLarge.code());
        assert_eq!(refused.log_start_offset, -1);
    }

    #[test]
    fn a_record_set_must_be_exactly_one_batch() {
        let batch = one_batch();
        assert!(single_batch(9, &batch).is_ok());
        let mut two = batch.to_vec();
        two.extend_from_slice(&batch);
        let refused = single_batch(9, &Bytes::from(two)).err().map(|r| r.error);
        assert_eq!(refused, Some(ResponseError::InvalidRecord));
        let mut fragment = batch.to_vec();
        fragment.extend_from_slice(&[0; 5]);
        assert!(single_batch(9, &Bytes::from(fragment)).is_ok());
        let empty = single_batch(9, &Bytes::new()).err().map(|r| r.error);
        assert_eq!(empty, Some(ResponseError::InvalidRecord));
        let mut old = batch.to_vec();
        old[MAGIC_AT] = 1;
        let old = single_batch(9, &Bytes::from(old)).err().map(|r| r.error);
        assert_eq!(old, Some(ResponseError::InvalidRecord));
    }

    #[test]
    fn a_flipped_bit_fails_the_crc() {
        let mut bytes = one_batch().to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let refused = peek_header(&Bytes::from(bytes)).err().map(|r| r.error);
        assert_eq!(refused, Some(ResponseError::CorruptMessage));
    }

    #[test]
    fn the_leader_epoch_is_stamped_outside_the_crc() {
        let stamped = stamp_leader_epoch(&one_batch(), 7);
        let header = peek_header(&stamped).ok().expect("still valid");
        assert_eq!(header.partition_leader_epoch, 7);
    }
}
