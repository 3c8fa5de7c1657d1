//! Finding where a partition starts: the group's committed offset, else (with
//! `remember_starts`) the start this member was given when it held the partition before, else
//! `auto.offset.reset`; or a seek's target (earliest, latest, a timestamp) through
//! `ListOffsets`. A start is never stored for commit: the group's offsets move only when the
//! caller stores what it settled.

use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::error::ResponseError;

use crate::client::admin::{Admin, OffsetSpec};
use crate::client::error::{Error, Result};
use crate::client::isolation::IsolationLevel;
use crate::client::unwind::unwound;

use super::{LateTopicStart, OffsetReset, Shared, StartAt, TopicPartition};

/// The offset `start` means for `tp` now.
pub(crate) async fn resolve_one(
    shared: &Shared,
    tp: &TopicPartition,
    start: StartAt,
) -> Result<i64> {
    let start = match start {
        StartAt::Committed => {
            let committed = committed(shared, std::slice::from_ref(tp)).await?;
            match committed.first() {
                Some(&offset) if offset >= 0 => return Ok(offset),
                _ => StartAt::Reset,
            }
        }
        other => other,
    };
    from_log(shared, tp, start).await
}

/// Committed offsets of `partitions` (-1 where none), in order.
async fn committed(shared: &Shared, partitions: &[TopicPartition]) -> Result<Vec<i64>> {
    let Some(group) = &shared.offsets else {
        return Ok(vec![-1; partitions.len()]);
    };
    let wanted: Vec<(&str, i32)> = partitions
        .iter()
        .map(|tp| (&*tp.topic, tp.partition))
        .collect();
    let stable = shared.config.isolation == IsolationLevel::ReadCommitted;
    let found = group.fetch(&wanted, stable).await?;
    Ok(partitions
        .iter()
        .map(|tp| {
            found
                .iter()
                .find(|c| *c.topic == *tp.topic && c.partition == tp.partition)
                .map_or(-1, |c| c.offset)
        })
        .collect())
}

/// The offset of a start that does not depend on the group.
async fn from_log(shared: &Shared, tp: &TopicPartition, start: StartAt) -> Result<i64> {
    let spec = match start {
        StartAt::Offset(o) if o >= 0 => return Ok(o),
        StartAt::Earliest => OffsetSpec::Earliest,
        StartAt::Latest => OffsetSpec::Latest,
        StartAt::Timestamp(t) => OffsetSpec::Timestamp(t),
        StartAt::Committed | StartAt::Offset(_) | StartAt::Reset => {
            match shared.config.auto_offset_reset {
                OffsetReset::Earliest => OffsetSpec::Earliest,
                OffsetReset::Latest => OffsetSpec::Latest,
                OffsetReset::Error => {
                    return Err(Error::Broker {
                        code: ResponseError::OffsetOutOfRange,
                        context: format!(
                            "{tp}: no valid offset to read from and `auto.offset.reset` is \
                             `error`"
                        ),
                    });
                }
            }
        }
    };
    let admin = Admin::new(shared.client.clone());
    let (offset, _) = admin
        .list_offset(&tp.topic, tp.partition, spec, shared.config.isolation)
        .await?;
    if offset >= 0 {
        return Ok(offset);
    }
    // No record that late: the end.
    let (end, _) = admin
        .list_offset(
            &tp.topic,
            tp.partition,
            OffsetSpec::Latest,
            shared.config.isolation,
        )
        .await?;
    Ok(end)
}

/// Resolves the starts of `pending` (partition, generation, start) and records them; a
/// failure is retried after `fetch.error.backoff.ms`, except `auto.offset.reset=error`, which
/// is reported and stops the partition until a seek.
pub(crate) async fn resolve(shared: Arc<Shared>, pending: Vec<(TopicPartition, u64, StartAt)>) {
    let from_group: Vec<TopicPartition> = pending
        .iter()
        .filter(|(_, _, s)| *s == StartAt::Committed)
        .map(|(tp, _, _)| tp.clone())
        .collect();
    let committed = if from_group.is_empty() {
        Ok(Vec::new())
    } else {
        // Unwound: a panic must not leave the partitions "resolving" forever.
        unwound(
            "fetching committed offsets",
            committed(&shared, &from_group),
        )
        .await
    };
    let committed = match committed {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "fetching committed offsets failed; retrying");
            retry_later(&shared, &pending);
            return;
        }
    };
    let remember = shared.config.remember_starts;
    for (tp, generation, start) in pending {
        let given = if remember {
            shared.lock().given_start(&tp)
        } else {
            None
        };
        let in_group = from_group.contains(&tp);
        let start = match (from_group.iter().position(|t| *t == tp), given) {
            (Some(i), _) if committed.get(i).is_some_and(|&o| o >= 0) => {
                StartAt::Offset(committed[i])
            }
            // Nothing committed, so nothing was settled past the start this member was given
            // when it held the partition before: resume there, not at a reset that moved on.
            (Some(_), Some(offset)) => StartAt::Offset(offset),
            (Some(_), None)
                if shared.config.late_topic_start == LateTopicStart::Earliest
                    && shared.is_late_topic(&tp.topic) =>
            {
                StartAt::Earliest
            }
            (Some(_), None) => StartAt::Reset,
            (None, _) => start,
        };
        match unwound("finding a start offset", from_log(&shared, &tp, start)).await {
            Ok(offset) => {
                let mut state = shared.lock();
                state.resolved(&tp, generation, offset);
                // Remembered, never stored: a start commits nothing until a record is settled.
                if remember && in_group {
                    state.remember_start(&tp, offset);
                }
            }
            Err(e) if e.code() == Some(ResponseError::OffsetOutOfRange) => {
                shared.lock().report(e);
                shared.poll_wake.notify_one();
            }
            Err(e) => {
                tracing::debug!(partition = %tp, error = %e, "finding the start failed; retrying");
                retry_later(&shared, &[(tp, generation, start)]);
            }
        }
    }
    shared.fetch_wake.notify_one();
}

fn retry_later(shared: &Shared, pending: &[(TopicPartition, u64, StartAt)]) {
    let mut state = shared.lock();
    let until = Instant::now() + shared.config.fetch_error_backoff;
    for (tp, generation, _) in pending {
        if let Some(part) = state.parts.get_mut(tp)
            && part.generation == *generation
        {
            part.resolving = false;
            part.backoff_until = Some(until);
        }
    }
    drop(state);
    shared.fetch_wake.notify_one();
}
