//! The KIP-848 consumer group protocol (`group.protocol=consumer`): the member sends
//! `ConsumerGroupHeartbeat`s, the coordinator computes the assignment.
//!
//! The invariant: a partition is read by at most one member at a time, and it changes hands
//! at the offset committed when it was given back (with `enable.auto.commit`, where its last
//! owner's caller stopped). The coordinator gives a partition to a new owner
//! only once the previous owner has said, in a heartbeat, that it no longer holds it; so this
//! member reconciles an assignment by first revoking what left it (the caller hears
//! `Revoked`, stored offsets are committed) and telling the coordinator, and only then taking
//! what joined it. Whenever the member can no longer know what the coordinator thinks of it
//! (fenced, unknown, no heartbeat answered within the session timeout, or left after
//! `max.poll.interval.ms` without a poll), it drops everything at once as `Lost` and joins again
//! with epoch 0 and the same member id.
//!
//! Heartbeats carry only what changed since the last one the coordinator answered; after any
//! failure the next one carries everything again, since the coordinator may or may not have
//! seen the last.
//!
//! The pieces: [`member`] is the membership as a state machine with no I/O (it keeps the
//! invariant above), [`heartbeat`] what a heartbeat says and its sending, [`reconcile`] the
//! assignments and the move towards one, [`member_id`] the id the member chooses. This module
//! is the driver: one task that sends the heartbeats, runs the work the member asks for (a
//! revocation, a metadata refresh, a pattern match) and hands it the consumer's side.

mod heartbeat;
mod member;
mod member_id;
mod reconcile;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::coordinator::CoordinatorKind;
use crate::client::error::Error;

use super::super::{GroupMember, Shared, TopicPartition};
use super::TopicMatcher;
use heartbeat::{Beat, heartbeat};
use member::{Check, Flow, Host, Membership, Settings, Step, Work};
use reconcile::TopicId;

/// How often a pattern is matched again here when the coordinator cannot match it (v0) and
/// the periodic metadata refresh is off.
const PATTERN_REFRESH_DEFAULT: Duration = Duration::from_mins(5);

type Task<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Runs the membership until the consumer closes (then leaves the group) or the coordinator
/// refuses the member for good (then the caller hears the error).
pub(crate) async fn run(shared: Arc<Shared>, matcher: TopicMatcher) {
    let Some(group) = shared.config.group_id.clone() else {
        return;
    };
    let settings = settings(&shared, group);
    let member = Membership::new(settings, matcher, Instant::now());
    drive(shared, member).await;
}

fn settings(shared: &Shared, group: String) -> Settings {
    let config = &shared.config;
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let every = shared.client.config().metadata_refresh_interval;
    Settings {
        group,
        instance_id: non_empty(&config.group_instance_id),
        rack: non_empty(&config.client_rack),
        assignor: non_empty(&config.group_remote_assignor),
        heartbeat_interval: config.heartbeat_interval,
        session_timeout: config.session_timeout,
        max_poll: config.max_poll_interval,
        // A pattern matched here is matched again at each periodic metadata refresh, as
        // librdkafka does; a year is forever here, and keeps `Instant` arithmetic from
        // overflowing.
        pattern_every: if every.is_zero() {
            PATTERN_REFRESH_DEFAULT
        } else {
            every.min(Duration::from_hours(24 * 365))
        },
        backoff: shared.client.retry_backoff(),
    }
}

/// Waits for `task`, or forever when there is none.
async fn next<T>(task: &mut Option<Task<T>>) -> T {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

/// The membership's one task: at most one heartbeat and one piece of work under way.
async fn drive(shared: Arc<Shared>, mut member: Membership) {
    let mut closing = shared.closing.subscribe();
    let mut beat: Option<Task<crate::client::error::Result<Beat>>> = None;
    let mut step: Option<Task<Step>> = None;
    loop {
        if shared.is_closing() {
            drop((beat, step));
            leave(&shared, &mut member, "the consumer closes").await;
            return;
        }
        let now = Instant::now();
        match member.check(now, &*shared) {
            Check::Active => {}
            Check::Idle(wait) => {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = closing.changed() => {}
                }
                continue;
            }
            Check::Leave => {
                beat = None;
                step = None;
                tracing::warn!(
                    group = %member.group(),
                    "no poll within max.poll.interval.ms: leaving the group until the next poll"
                );
                leave(
                    &shared,
                    &mut member,
                    "max.poll.interval.ms passed without a poll",
                )
                .await;
                member.stale();
                continue;
            }
            Check::Reset => {
                beat = None;
                step = None;
            }
        }
        if step.is_none() {
            step = member
                .next_step(now, &*shared)
                .map(|work| start(&shared, &member, work));
        }
        if beat.is_none() && member.beat_due(now) {
            let (sent, wanted) = member.start_beat();
            beat = Some(Box::pin(heartbeat(
                shared.client.clone(),
                member.matcher().clone(),
                sent,
                wanted,
            )));
        }
        let wake = member.wake_at(now, beat.is_none(), step.is_none(), &*shared);
        tokio::select! {
            result = next(&mut beat) => {
                beat = None;
                match member.on_beat(result, Instant::now(), &*shared) {
                    Flow::Go => {}
                    Flow::Reset => step = None,
                    Flow::Stop => return,
                }
            }
            done = next(&mut step) => {
                step = None;
                member.on_step(done, Instant::now(), &*shared);
            }
            () = tokio::time::sleep_until(wake) => {}
            _ = closing.changed() => {}
            () = shared.act_now.notified() => member.act_now(Instant::now()),
        }
    }
}

/// The task that does `work`.
fn start(shared: &Arc<Shared>, member: &Membership, work: Work) -> Task<Step> {
    match work {
        Work::Revoke {
            partitions,
            revoked,
        } => {
            let shared = shared.clone();
            let limit = member.max_poll();
            Box::pin(async move {
                shared.revoke_partitions(&partitions, limit).await;
                Step::Revoked(revoked)
            })
        }
        Work::Refresh => {
            let client = shared.client.clone();
            Box::pin(async move { Step::Refreshed(client.refresh_all_metadata().await) })
        }
        Work::Match => {
            let client = shared.client.clone();
            let matcher = member.matcher().clone();
            Box::pin(async move { Step::Matched(matcher.topics(&client).await) })
        }
    }
}

/// Leaves the group (best effort: the coordinator expires the member anyway) and drops what
/// the member held.
async fn leave(shared: &Shared, member: &mut Membership, why: &str) {
    if let Some((member_id, instance_id)) = member.leaving() {
        let group = member.group();
        match heartbeat::leave(&shared.client, group, member_id, instance_id).await {
            Ok(r) if r.error_code == 0 => {
                tracing::info!(group, member_id, why, "left the group");
            }
            Ok(r) => tracing::debug!(group, code = r.error_code, why, "leaving refused"),
            Err(e) => tracing::debug!(group, error = %e, why, "leaving failed"),
        }
    }
    member.left(shared);
}

/// The member's hold on the consumer.
impl Host for Shared {
    fn since_last_poll(&self) -> Duration {
        Shared::since_last_poll(self)
    }

    fn wake_poll(&self) {
        self.poll_wake.notify_one();
    }

    fn assign(&self, partitions: &[TopicPartition]) {
        self.assign_partitions(partitions);
    }

    fn reconciled(&self) {
        self.assigned_once.send_replace(true);
    }

    fn lose_everything(&self) {
        self.lose_partitions(&self.owned_partitions());
    }

    fn set_member(&self, member: Option<GroupMember>) {
        Shared::set_member(self, member);
    }

    fn note_topics(&self, names: &[String]) {
        Shared::note_topics(self, names);
    }

    fn forget_coordinator(&self) {
        if let Some(group) = &self.config.group_id {
            self.client
                .forget_coordinator(CoordinatorKind::Group, group);
        }
    }

    fn report(&self, error: Error) {
        self.lock().report(error);
        self.poll_wake.notify_one();
    }

    fn names_of(&self, ids: &[TopicId]) -> Vec<(TopicId, Arc<str>)> {
        self.client.with_metadata(|m| {
            m.topics
                .values()
                .filter(|t| ids.contains(&t.id))
                .map(|t| (t.id, t.name.clone()))
                .collect()
        })
    }
}
