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

use super::server::Cx;
use super::topics::Partition;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

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
                            // The field is v4+: a value in an older answer cannot be encoded.
                            .with_leader_epoch(if cx.version >= 4 { found.epoch } else { -1 }),
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
    let found = |(offset, timestamp)| Found {
        timestamp,
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
        MAX_TIMESTAMP if version >= 7 => below_fetchable(log.max_timestamp().map(found)),
        t if t < 0 => Err(ResponseError::UnsupportedVersion),
        t => below_fetchable(log.offset_for_timestamp(t).map(found)),
    }
}
