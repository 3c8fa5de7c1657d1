//! Consumer groups: coordinators, the classic protocol, KIP-848, committed offsets.
//!
//! Each group id is either a classic group ([`classic`]) or a KIP-848 consumer group
//! ([`consumer`]); committed offsets ([`offsets`]) belong to the id whatever its protocol.
//! Group requests sent to a node that does not coordinate the group are answered
//! `NOT_COORDINATOR` ([`coordinator`]).
//!
//! Timers (session timeouts, rebalance timeouts, the initial rebalance delay) are kept as
//! deadlines in the groups and checked whenever a request touches the group. So that a group
//! nobody talks to still expires its members, a group with a deadline also gets one small
//! timer task on the current runtime (at most one per group at a time, ended once the group
//! has no deadline left or the cluster is dropped); it wakes at the next deadline, checks it,
//! and tells waiting requests through the cluster's `changed` notification. A `JoinGroup` or
//! `SyncGroup` that must wait for the rest of the group waits on that notification and on its
//! own next deadline, never holding the state lock; both use `tokio::time`, so tests may
//! pause the clock.

mod assignor;
mod classic;
mod consumer;
pub(crate) mod coordinator;
mod fit;
mod handlers;
mod offsets;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::time::Instant;

use self::classic::{ClassicGroup, Limits};
use self::consumer::ConsumerGroup;
pub(crate) use self::coordinator::find_coordinator;
pub(crate) use self::handlers::{
    consumer_heartbeat, describe, heartbeat, join, leave, list, offset_commit, offset_fetch, sync,
};
use super::Shared;
use super::state::State;

/// The longest a group's timer task sleeps before it looks again (deadlines may have moved
/// closer since it went to sleep).
const TIMER_NAP: Duration = Duration::from_millis(500);

/// Who commits offsets into a group: what an `OffsetCommit` or a `TxnOffsetCommit` says of its
/// sender.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Committer<'a> {
    /// The classic generation or the KIP-848 member epoch; negative from outside the group.
    pub(crate) generation: i32,
    pub(crate) member_id: &'a str,
    pub(crate) instance_id: Option<&'a str>,
    /// A `TxnOffsetCommit`: no member needed in a non-empty group, no rebalance check, any
    /// API version.
    pub(crate) transactional: bool,
    /// The API version of the request.
    pub(crate) version: i16,
}

/// A group id's membership, by protocol.
#[derive(Debug)]
enum Group {
    Classic(Box<ClassicGroup>),
    Consumer(ConsumerGroup),
}

/// Every group the cluster knows, with its committed offsets.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    by_id: HashMap<String, Group>,
    offsets: offsets::Store,
    /// The running timer task of each group that has one.
    timers: HashMap<String, tokio::task::JoinHandle<()>>,
}

impl Groups {
    /// KIP-447: whether a `TxnOffsetCommit` naming `member_id` / `instance` at `generation`
    /// (a member epoch for a consumer group) comes from the group's current member, as Kafka's
    /// `validateOffsetCommit` with `isTransactional` decides: an anonymous commit
    /// (generation -1, no member) is taken, a rebalance in progress does not refuse it, and a
    /// consumer group's stale epoch is `ILLEGAL_GENERATION`.
    pub(crate) fn validate_txn_commit(
        &mut self,
        group: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        let committer = Committer {
            generation,
            member_id,
            instance_id: instance,
            transactional: true,
            version: 0,
        };
        self.validate_commit(group, &committer)
    }

    /// Commits `offset` (the next offset to read) for `group` on `topic`/`partition`, as an
    /// `OffsetCommit` or a committed transaction does. The group need not have members.
    pub(crate) fn commit(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        leader_epoch: i32,
        metadata: Option<String>,
    ) {
        self.offsets.put(
            group,
            topic,
            partition,
            offsets::Committed {
                offset,
                leader_epoch,
                metadata: metadata.unwrap_or_default(),
            },
        );
    }

    /// Whether `group` is a classic group waiting for its members to rejoin.
    pub(crate) fn is_rebalancing(&self, group: &str) -> bool {
        matches!(
            self.by_id.get(group),
            Some(Group::Classic(g)) if g.phase == classic::Phase::PreparingRebalance
        )
    }

    /// The committed offset of `group` on `topic`/`partition`, if any.
    pub(crate) fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        self.offsets.get(group, topic, partition).map(|c| c.offset)
    }

    /// Whether `group` takes a commit from `committer`, as Kafka's `validateOffsetCommit`
    /// decides for `OffsetCommit` and (`transactional`) `TxnOffsetCommit`. A commit without
    /// membership into an unknown group creates it (a "simple" group).
    pub(crate) fn validate_commit(
        &mut self,
        group: &str,
        committer: &Committer<'_>,
    ) -> Result<(), ResponseError> {
        match self.by_id.get(group) {
            None if committer.generation < 0 => {
                self.by_id.insert(
                    group.to_owned(),
                    Group::Classic(Box::new(ClassicGroup::new(group))),
                );
                Ok(())
            }
            None if !committer.transactional && committer.version >= 9 => {
                Err(ResponseError::GroupIdNotFound)
            }
            None => Err(ResponseError::IllegalGeneration),
            Some(Group::Classic(g)) => g.validate_commit(committer),
            Some(Group::Consumer(g)) => g.validate_commit(committer),
        }
    }

    fn classic_mut(&mut self, group: &str) -> Option<&mut ClassicGroup> {
        match self.by_id.get_mut(group) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }
}

fn limits(cluster: &Shared) -> Limits {
    Limits {
        min_session: cluster.options.group_min_session_timeout,
        max_session: cluster.options.group_max_session_timeout,
        initial_delay: cluster.options.group_initial_rebalance_delay,
        sessions_lapse: cluster.sessions_lapse(),
    }
}

/// Runs `group`'s timers up to `now`; returns whether anything changed.
fn tick(state: &mut State, group: &str, now: Instant, limits: Limits) -> bool {
    let State { groups, topics, .. } = state;
    match groups.by_id.get_mut(group) {
        Some(Group::Classic(g)) => g.tick(now, limits),
        Some(Group::Consumer(g)) => g.tick(now, topics, limits.sessions_lapse),
        None => false,
    }
}

/// One group as `ListGroups` lists it.
pub(crate) struct Listed {
    pub(crate) id: String,
    pub(crate) protocol_type: String,
    pub(crate) state: &'static str,
    /// `classic` or `consumer` (KIP-848), as `ListGroups` v5 types them.
    pub(crate) kind: &'static str,
}

impl Groups {
    /// Every group with a membership record, in id order.
    pub(crate) fn list(&self) -> Vec<Listed> {
        let mut listed: Vec<Listed> = self
            .by_id
            .iter()
            .map(|(id, group)| match group {
                Group::Classic(g) => Listed {
                    id: id.clone(),
                    protocol_type: g.protocol_type().to_owned(),
                    state: g.phase.name(),
                    kind: "classic",
                },
                Group::Consumer(g) => Listed {
                    id: id.clone(),
                    protocol_type: "consumer".to_owned(),
                    state: g.state_name(),
                    kind: "consumer",
                },
            })
            .collect();
        listed.sort_by(|a, b| a.id.cmp(&b.id));
        listed
    }
}

/// The members of `group` (classic: in join order), empty for an unknown group.
pub(crate) fn member_ids(state: &State, group: &str) -> Vec<String> {
    match state.groups.by_id.get(group) {
        Some(Group::Classic(g)) => g.member_ids(),
        Some(Group::Consumer(g)) => g.member_ids(),
        None => Vec::new(),
    }
}

/// Ends the session of `member` of `group` now, as its coordinator's timer would; returns
/// whether it was a member. The group's timers are re-armed for the rebalance that follows.
pub(crate) fn expire_session(cluster: &Arc<Shared>, group: &str, member: &str) -> bool {
    let expired = {
        let mut state = cluster.state();
        let State { groups, topics, .. } = &mut *state;
        let expired = match groups.by_id.get_mut(group) {
            Some(Group::Classic(g)) => g.expire(Instant::now(), limits(cluster), member),
            Some(Group::Consumer(g)) => g.expire(member, topics),
            None => false,
        };
        if expired {
            arm_timer(cluster, &mut state, group);
        }
        expired
    };
    if expired {
        cluster.changed.notify_waiters();
    }
    expired
}

fn next_deadline(state: &State, group: &str) -> Option<Instant> {
    match state.groups.by_id.get(group) {
        Some(Group::Classic(g)) => g.next_deadline(),
        Some(Group::Consumer(g)) => g.next_deadline(),
        None => None,
    }
}

/// Starts `group`'s timer task unless one runs or the group has nothing to time.
fn arm_timer(cluster: &Arc<Shared>, state: &mut State, group: &str) {
    if state
        .groups
        .timers
        .get(group)
        .is_some_and(|t| !t.is_finished())
    {
        return;
    }
    if next_deadline(state, group).is_none() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(cluster);
    let name = group.to_owned();
    let limits = limits(cluster);
    let task = runtime.spawn(async move {
        loop {
            let Some(shared) = weak.upgrade() else { return };
            let (changed, next) = {
                let mut state = shared.state();
                let changed = tick(&mut state, &name, Instant::now(), limits);
                (changed, next_deadline(&state, &name))
            };
            if changed {
                shared.changed.notify_waiters();
            }
            drop(shared);
            let Some(at) = next else { return };
            tokio::time::sleep_until(at.min(Instant::now() + TIMER_NAP)).await;
        }
    });
    // Forget the tasks that ended, so the map holds only running timers.
    state.groups.timers.retain(|_, t| !t.is_finished());
    state.groups.timers.insert(group.to_owned(), task);
}
