//! `ListOffsets`: earliest, latest, by timestamp, max timestamp.
//!
//! Answered like a Kafka leader without tiered storage: the earliest local offset is the log
//! start, and a timestamp lookup finds the first record (not batch) at or after the time,
//! provided it is below the reader's last fetchable offset.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::client::records::RecordBatches;

use super::log::PartitionLog;
use super::server::Cx;
use super::topics::Partition;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// The most a stored compressed batch may expand to while it is searched.
const MAX_DECOMPRESSED: usize = 128 << 20;

/// A found offset: the record's timestamp (-1 for positions), offset and leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    timestamp: i64,
    offset: i64,
    epoch: i32,
}

const NOT_FOUND: Found = Found {
    timestamp: -1,
    offset: -1,
    epoch: -1,
};

pub(crate) fn handle(cx: &Cx<'_>, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let read_committed = request.isolation_level == 1;
    let state = cx.cluster.state();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str().to_owned();
            let partitions = topic
                .partitions
                .into_iter()
                .map(|wanted| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(wanted.partition_index);
                    let outcome = match state.topics.partition(&name, wanted.partition_index) {
                        None => Err(ResponseError::UnknownTopicOrPartition),
                        Some(p) if p.leader != cx.node => Err(ResponseError::NotLeaderOrFollower),
                        Some(p) => lookup(
                            cx.version,
                            p,
                            wanted.current_leader_epoch,
                            wanted.timestamp,
                            read_committed,
                        ),
                    };
                    match outcome {
                        Ok(found) => response
                            .with_timestamp(found.timestamp)
                            .with_offset(found.offset)
                            .with_leader_epoch(found.epoch),
                        Err(error) => response
                            .with_error_code(error.code())
                            .with_timestamp(-1)
                            .with_offset(-1)
                            .with_leader_epoch(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

fn lookup(
    version: i16,
    partition: &Partition,
    current_leader_epoch: i32,
    timestamp: i64,
    read_committed: bool,
) -> Result<Found, ResponseError> {
    if current_leader_epoch >= 0 {
        if current_leader_epoch < partition.leader_epoch {
            return Err(ResponseError::FencedLeaderEpoch);
        }
        if current_leader_epoch > partition.leader_epoch {
            return Err(ResponseError::UnknownLeaderEpoch);
        }
    }
    let log = &partition.log;
    let epoch = partition.leader_epoch;
    let position = |offset| Found {
        timestamp: -1,
        offset,
        epoch,
    };
    let fetchable = log.visible_end(read_committed);
    let below_fetchable =
        |found: Option<Found>| Ok(found.filter(|f| f.offset < fetchable).unwrap_or(NOT_FOUND));
    match timestamp {
        LATEST => Ok(position(fetchable)),
        EARLIEST => Ok(position(log.log_start())),
        EARLIEST_LOCAL if version >= 8 => Ok(position(log.log_start())),
        // Nothing is tiered: Kafka answers -1 when remote storage is not enabled.
        LATEST_TIERED if version >= 9 => Ok(NOT_FOUND),
        MAX_TIMESTAMP if version >= 7 => below_fetchable(max_timestamp(log, epoch)),
        t if t < 0 => Err(ResponseError::UnsupportedVersion),
        t => below_fetchable(first_at_or_after(log, t, epoch)),
    }
}

/// The first record at or after `timestamp` (control records included, as Kafka's time index
/// holds every batch).
fn first_at_or_after(log: &PartitionLog, timestamp: i64, epoch: i32) -> Option<Found> {
    log.batches_from(log.log_start())
        .filter(|b| b.header.max_timestamp >= timestamp)
        .find_map(|stored| {
            records_of(&stored.bytes)
                .into_iter()
                .find(|(_, ts)| *ts >= timestamp)
                .map(|(offset, ts)| Found {
                    timestamp: ts,
                    offset,
                    epoch,
                })
        })
}

/// The first record holding the log's largest timestamp.
fn max_timestamp(log: &PartitionLog, epoch: i32) -> Option<Found> {
    let mut best: Option<&super::log::StoredBatch> = None;
    for batch in log.batches_from(log.log_start()) {
        if best.is_none_or(|b| batch.header.max_timestamp > b.header.max_timestamp) {
            best = Some(batch);
        }
    }
    let batch = best?;
    let max = batch.header.max_timestamp;
    records_of(&batch.bytes)
        .into_iter()
        .find(|(_, ts)| *ts == max)
        .or(Some((batch.last_offset(), max)))
        .map(|(offset, timestamp)| Found {
            timestamp,
            offset,
            epoch,
        })
}

/// Offsets and timestamps of a stored batch's records.
fn records_of(bytes: &bytes::Bytes) -> Vec<(i64, i64)> {
    RecordBatches::new(bytes.clone(), MAX_DECOMPRESSED)
        .filter_map(Result::ok)
        .filter_map(|batch| batch.records().ok())
        .flatten()
        .map(|r| (r.offset, r.timestamp))
        .collect()
}
