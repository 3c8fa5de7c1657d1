//! Log truncation detection after a leader change (KIP-320), as librdkafka and the Java
//! client do it.
//!
//! When the leader epoch of a partition the consumer reads goes up, the new leader's log may
//! have diverged from the old one's (an unclean election elects a replica that missed the
//! last writes; new records then take the lost offsets). Before it fetches again, the
//! consumer asks the new leader (`OffsetForLeaderEpoch`) where the epoch of the last batch it
//! fetched ends in its log. An end below the next offset to fetch means the log was
//! truncated there: the partition restarts at that end (never later than the next offset to
//! hand out, so nothing still buffered below it is skipped), or, with
//! `auto.offset.reset=error`, stops with an error. No epoch at or below ours restarts it by
//! `auto.offset.reset`. Either way the consumer never silently skips the records written
//! after the divergence, nor re-reads old ones as if they were new.

use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId, OffsetForLeaderEpochRequest, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::client::error::{Error, Result};
use crate::client::unwind::unwound;

use super::{OffsetReset, Shared, StartAt, TopicPartition};

/// v2 carries the current leader epoch (fencing a stale leader); v4 is flexible.
const VERSIONS: VersionRange = VersionRange { min: 2, max: 4 };

/// One partition to check against its new leader.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub tp: TopicPartition,
    pub generation: u64,
    pub leader: i32,
    /// The leader epoch the metadata now gives.
    pub current_epoch: i32,
    /// The leader epoch of the last batch fetched.
    pub fetched_epoch: i32,
    /// The next offset to fetch.
    pub offset: i64,
}

/// Checks each partition and applies what it finds.
pub(crate) async fn validate(shared: Arc<Shared>, checks: Vec<Check>) {
    for check in checks {
        let found = unwound("OffsetForLeaderEpoch", end_of_epoch(&shared, &check)).await;
        let stale = matches!(
            found.as_ref().err().and_then(Error::code),
            Some(
                ResponseError::FencedLeaderEpoch
                    | ResponseError::NotLeaderOrFollower
                    | ResponseError::UnknownTopicOrPartition
            )
        );
        apply(&shared, &check, found);
        if stale {
            // Asked the wrong leader, or with an epoch it has moved past: look again.
            let _ = shared.client.refresh_metadata(&[&*check.tp.topic]).await;
        }
    }
    shared.fetch_wake.notify_one();
}

/// Where `check.fetched_epoch` ends in the leader's log: (the epoch found, its end offset).
async fn end_of_epoch(shared: &Shared, check: &Check) -> Result<(i32, i64)> {
    let conn = shared
        .client
        .connection_on(check.leader, shared.fetch_lane)
        .await?;
    let version = conn.version_of::<OffsetForLeaderEpochRequest>(VERSIONS)?;
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(TopicName(StrBytes::from_string(check.tp.topic.to_string())))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(check.tp.partition)
                        .with_current_leader_epoch(check.current_epoch)
                        .with_leader_epoch(check.fetched_epoch),
                ]),
        ]);
    let response = conn
        .send(&request, version, shared.client.socket_timeout())
        .await?;
    let answer = response
        .topics
        .iter()
        .filter(|t| t.topic.0.as_str() == &*check.tp.topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition == check.tp.partition)
        .ok_or_else(|| Error::protocol("OffsetForLeaderEpoch answer lacks the partition"))?;
    if let Some(code) = ResponseError::try_from_code(answer.error_code) {
        return Err(Error::Broker {
            code,
            context: format!("OffsetForLeaderEpoch of {}", check.tp),
        });
    }
    Ok((answer.leader_epoch, answer.end_offset))
}

fn apply(shared: &Shared, check: &Check, found: Result<(i32, i64)>) {
    let tp = &check.tp;
    let mut state = shared.lock();
    let Some(part) = state.parts.get_mut(tp) else {
        return;
    };
    if part.generation != check.generation {
        // A seek or reassignment came in between and cleared the check.
        return;
    }
    part.validating = false;
    let position = part.position.unwrap_or(check.offset);
    match found {
        Ok((epoch, end)) if end >= 0 && epoch >= 0 => {
            part.validated_epoch = check.current_epoch;
            if end >= check.offset {
                return;
            }
            if shared.config.auto_offset_reset == OffsetReset::Error {
                tracing::warn!(partition = %tp, offset = check.offset, end, epoch,
                    "log truncation detected; `auto.offset.reset` is `error`");
                state.restart(tp, StartAt::Reset);
                state.report(Error::Broker {
                    code: ResponseError::OffsetOutOfRange,
                    context: format!(
                        "{tp}: log truncation detected at offset {}: the leader's log ends at \
                         {end} for epoch {epoch}, and `auto.offset.reset` is `error`",
                        check.offset
                    ),
                });
                return;
            }
            let restart = end.min(position);
            tracing::warn!(partition = %tp, offset = check.offset, end, epoch, restart,
                "log truncation detected after a leader change; reading on from the new leader's log end");
            state.restart(tp, StartAt::Offset(restart));
        }
        Ok((epoch, end)) => {
            tracing::warn!(partition = %tp, offset = check.offset, end, epoch,
                fetched_epoch = check.fetched_epoch,
                "the new leader has no epoch at or before the last one fetched; applying auto.offset.reset");
            state.restart(tp, StartAt::Reset);
        }
        Err(Error::Unsupported(why)) => {
            // A broker without the API cannot be asked; read on as before KIP-320.
            tracing::debug!(partition = %tp, why, "no OffsetForLeaderEpoch: position not validated");
            part.validated_epoch = check.current_epoch;
        }
        Err(e) => {
            tracing::debug!(partition = %tp, error = %e, "validating the position failed; retrying");
            part.backoff_until = Some(Instant::now() + shared.config.fetch_error_backoff);
        }
    }
}
