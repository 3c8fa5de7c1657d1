//! The pump: the one task that polls a subscription's consumer without pause, applies its
//! rebalance events and the seeks sent to it, and moves fetched records into the queue.
//!
//! The invariant: every reposition of a partition (an assignment, a revocation, a loss, a
//! seek) goes through this task in order, so no record fetched before a reposition is queued
//! after it; and when the queue holds more than its limits the partitions pause, so memory
//! stays bounded while rebalance events still flow.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{mpsc, watch};

use crate::client::consumer::{Consumer, ConsumerEvent, StartAt, TopicPartition};
use crate::client::observe::Interest;
use crate::client::{Error as ClientError, ResponseError};
use crate::connection::BrokerState;
use crate::error::KafkaError;
use crate::position::KafkaPosition;
use crate::subscription::Commit;

use super::shared::{Command, Item, Life, SubCore, lock};

/// How often the sums of deliveries and settlements are told (see `Interest::DELIVERY_COUNTS`).
const COUNTS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

pub(super) async fn pump(
    mut consumer: Consumer,
    core: Weak<SubCore>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut closing: watch::Receiver<bool>,
    (state, life): (Arc<BrokerState>, Arc<Mutex<Life>>),
) {
    let mut held: Option<KafkaPosition> = None;
    let mut unknown_topic = false;
    // Deliveries and settlements are told as sums, once a second, where an observer counts
    // them (and by the core when it closes).
    let counting = state.observers().wants(Interest::DELIVERY_COUNTS);
    let mut tell = tokio::time::interval(COUNTS_INTERVAL);
    tell.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = closing.changed() => break,
            _ = tell.tick(), if counting => {
                let Some(core) = core.upgrade() else { break };
                core.tell_counts();
            }
            Some(command) = commands.recv() => {
                let Some(core) = core.upgrade() else { break };
                match command {
                    Command::Seek { to, done } => {
                        let outcome = seek(&core, &mut held, to).await;
                        let _ = done.send(outcome);
                    }
                }
            }
            event = consumer.poll() => {
                let Some(core) = core.upgrade() else { break };
                match event {
                    Ok(event) => on_event(&core, event, &mut held, &mut unknown_topic).await,
                    Err(_) => break,
                }
            }
        }
    }
    // The subscription's client is its own (as librdkafka's consumer handle): it ends its
    // KIP-714 telemetry with the consumer.
    let client = consumer.client().clone();
    if let Err(e) = consumer.close().await {
        tracing::warn!(error = %e, "closing a subscription's consumer failed");
    }
    client.push_final_metrics().await;
    let mut life = lock(&life);
    life.pump_exited = true;
    if life.counted {
        state.consumer_closed();
    }
}

async fn on_event(
    core: &SubCore,
    event: ConsumerEvent,
    held: &mut Option<KafkaPosition>,
    unknown_topic: &mut bool,
) {
    match event {
        ConsumerEvent::Records(records) => {
            let tp = TopicPartition {
                topic: Arc::clone(&records.topic),
                partition: records.partition,
            };
            let Some(part) = core.known_partition(&tp) else {
                return;
            };
            let generation = part.generation.load(Ordering::Acquire);
            let bytes: usize = records
                .records
                .iter()
                .map(|r| r.value.as_ref().map_or(0, bytes::Bytes::len) + 64)
                .sum();
            let mut queue = lock(&core.queue);
            queue.bytes += bytes;
            queue.records += records.records.len();
            queue.items.push_back(Item::Batch {
                part,
                generation,
                records,
                bytes,
            });
            if !queue.throttled && (queue.bytes > core.limits.0 || queue.records > core.limits.1) {
                queue.throttled = true;
                core.consumer.pause(&core.consumer.assignment());
            }
            drop(queue);
            crate::handover::tell(core.watch.as_ref(), |w| {
                w.queued(&tp, core.consumer.position(&tp));
            });
            if *unknown_topic {
                *unknown_topic = false;
                tracing::debug!(subscription = %core.name, "the subscribed topic is readable again");
            }
            core.wake.wake();
        }
        ConsumerEvent::Assigned(tps) => {
            core.reposition(&tps);
            if lock(&core.queue).throttled {
                core.consumer.pause(&tps);
            }
            if let Some(position) = held.take()
                && let Err(err) = seek_assigned(core, &position).await
            {
                let err = match err {
                    KafkaError::InvalidOptions(m) => KafkaError::InvalidOptions(format!(
                        "subscription {:?} could not be opened at its start position: {m}",
                        core.name
                    )),
                    other => other,
                };
                lock(&core.queue).items.push_back(Item::Error(err));
                core.wake.wake();
            }
        }
        ConsumerEvent::Revoked(revocation) => {
            core.reposition(&revocation.partitions);
            drop(revocation);
        }
        ConsumerEvent::Lost(tps) => core.reposition(&tps),
        ConsumerEvent::Error(err) => {
            if is_unknown_topic(&err) {
                if *unknown_topic {
                    tracing::debug!(subscription = %core.name, error = %err, "topic still unknown");
                } else {
                    *unknown_topic = true;
                    tracing::warn!(subscription = %core.name, error = %err, "a subscribed topic does not exist (yet)");
                }
                lock(&core.queue).last_error = Some(err.to_string());
                return;
            }
            let mut queue = lock(&core.queue);
            queue.last_error = Some(err.to_string());
            if is_fatal_join_error(&err) && !core.consumer.has_assignment() {
                queue.fatal = Some(match join_refusal(&err) {
                    Some(refusal) => format!("{refusal}: {err}"),
                    None => err.to_string(),
                });
            }
            queue.items.push_back(Item::Error(KafkaError::consume(err)));
            drop(queue);
            core.wake.wake();
        }
    }
}

/// Applies a seek: now on the assigned partitions, or held for the first assignment.
async fn seek(
    core: &SubCore,
    held: &mut Option<KafkaPosition>,
    to: KafkaPosition,
) -> Result<(), KafkaError> {
    if core.consumer.assignment().is_empty() {
        *held = Some(to);
        return Ok(());
    }
    seek_assigned(core, &to).await
}

async fn seek_assigned(core: &SubCore, to: &KafkaPosition) -> Result<(), KafkaError> {
    let assigned = core.consumer.assignment();
    let targets: Vec<(TopicPartition, StartAt)> = match to {
        KafkaPosition::Earliest => assigned
            .iter()
            .map(|tp| (tp.clone(), StartAt::Earliest))
            .collect(),
        KafkaPosition::Latest => assigned
            .iter()
            .map(|tp| (tp.clone(), StartAt::Latest))
            .collect(),
        KafkaPosition::Timestamp(t) => assigned
            .iter()
            .map(|tp| (tp.clone(), StartAt::Timestamp(*t)))
            .collect(),
        KafkaPosition::Offset {
            topic,
            partition,
            offset,
        } => assigned
            .iter()
            .filter(|tp| {
                tp.partition == *partition && topic.as_deref().is_none_or(|t| *t == *tp.topic)
            })
            .map(|tp| (tp.clone(), StartAt::Offset(*offset)))
            .collect(),
    };
    if targets.is_empty() {
        let listed = if assigned.is_empty() {
            "empty".to_owned()
        } else {
            assigned
                .iter()
                .map(|tp| format!("{}[{}]", tp.topic, tp.partition))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(KafkaError::InvalidOptions(format!(
            "position {to:?} names no partition assigned to subscription {:?}; assigned: {listed}",
            core.name
        )));
    }
    for (tp, start) in targets {
        // A seek commits nothing (F3, F6): the tracked state and the offset stored from the acks
        // before it are cleared first, so no commit carries the group past records the seek
        // replays, nor back to where it moved; the group's offset stays until a replayed record
        // is settled. Under `Commit::Auto` with the automatic store, the store follows the
        // hand-over as librdkafka's does and is left alone.
        core.reposition(std::slice::from_ref(&tp));
        if !(core.commit == Commit::Auto && core.auto_store) {
            core.consumer
                .clear_stored_offset(&tp)
                .map_err(KafkaError::consume)?;
        }
        core.consumer
            .seek(&tp, start)
            .await
            .map_err(KafkaError::consume)?;
    }
    core.wake.wake();
    if let Some(handover) = core.state.handover() {
        handover.recount();
    }
    Ok(())
}

/// Whether a consumer error ends the subscribe wait: a refusal retrying cannot fix.
fn is_fatal_join_error(err: &ClientError) -> bool {
    matches!(
        err.code(),
        Some(
            ResponseError::InconsistentGroupProtocol
                | ResponseError::InvalidGroupId
                | ResponseError::GroupAuthorizationFailed
                | ResponseError::TopicAuthorizationFailed
                | ResponseError::GroupMaxSizeReached
        )
    ) || err.to_string().contains("INCONSISTENT_GROUP_PROTOCOL")
}

/// The refusal a fatal join error stands for, in the words librdkafka uses for it, so the
/// subscribe error names it whatever the client's own text says (B10a: a protocol mismatch
/// must say `protocol`).
fn join_refusal(err: &ClientError) -> Option<&'static str> {
    match err.code()? {
        ResponseError::InconsistentGroupProtocol => Some("inconsistent group protocol"),
        ResponseError::InvalidGroupId => Some("invalid group id"),
        ResponseError::GroupAuthorizationFailed => Some("group authorization failed"),
        ResponseError::TopicAuthorizationFailed => Some("topic authorization failed"),
        ResponseError::GroupMaxSizeReached => Some("group max size reached"),
        _ => None,
    }
}

fn is_unknown_topic(err: &ClientError) -> bool {
    matches!(
        err.code(),
        Some(ResponseError::UnknownTopicOrPartition | ResponseError::UnknownTopicId)
    )
}
