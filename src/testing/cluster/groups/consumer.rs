//! KIP-848 consumer groups: the coordinator computes the assignment and members reconcile
//! towards it through `ConsumerGroupHeartbeat`, as Kafka 4.1's `GroupMetadataManager` and
//! `CurrentAssignmentBuilder` do.
//!
//! The group epoch goes up whenever membership, a subscription or the subscribed topics'
//! partitions change; the target assignment is then recomputed at that epoch. Each member
//! moves towards its target one step per heartbeat: it first revokes what it must give up
//! (staying at its epoch, `UNREVOKED_PARTITIONS`), and only once its heartbeat no longer
//! reports those partitions does it advance to the target epoch and get new partitions, and
//! then only those no other member still holds (`UNRELEASED_PARTITIONS` until they are free).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;
use uuid::Uuid;

use super::super::topics::Topics;
use super::Committer;
use super::assignor::{self, Assignment, Subscriber};

/// `group.consumer.session.timeout.ms` (Kafka's default).
pub(super) const SESSION_TIMEOUT: Duration = Duration::from_secs(45);
/// The epoch with which a member leaves.
const LEAVE_EPOCH: i32 = -1;
/// The epoch with which a static member leaves but keeps its place for a session timeout.
const LEAVE_STATIC_EPOCH: i32 = -2;

/// Where a member stands in its reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
}

#[derive(Debug, Clone)]
struct Member {
    instance_id: Option<String>,
    epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    assigned: Assignment,
    pending_revocation: Assignment,
    rebalance_timeout: Duration,
    topic_names: Vec<String>,
    regex: Option<String>,
    server_assignor: Option<String>,
    session_deadline: Instant,
    /// When a member asked to revoke must have done so.
    revocation_deadline: Option<Instant>,
}

/// One KIP-848 group.
#[derive(Debug, Default)]
pub(super) struct ConsumerGroup {
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    target: BTreeMap<String, Assignment>,
    /// The subscribed topics that exist: name to (id, partition count).
    subscribed: BTreeMap<String, (Uuid, i32)>,
}

/// What a heartbeat needs besides the request.
pub(super) struct Beat<'a> {
    pub(super) group: &'a str,
    pub(super) now: Instant,
    pub(super) version: i16,
    pub(super) topics: &'a Topics,
    pub(super) interval: Duration,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A heartbeat error with Kafka's message.
pub(super) fn refusal(code: ResponseError, message: String) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// The checks Kafka makes before it looks at the group
/// (`throwIfConsumerGroupHeartbeatRequestIsInvalid`).
pub(super) fn validate(
    request: &ConsumerGroupHeartbeatRequest,
    version: i16,
) -> Result<(), (ResponseError, String)> {
    let invalid = |m: &str| Err((ResponseError::InvalidRequest, m.to_owned()));
    if request.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if version >= 1 && request.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if request.instance_id.as_deref().is_some_and(str::is_empty) {
        return invalid("InstanceId can't be empty.");
    }
    if request.rack_id.as_deref().is_some_and(str::is_empty) {
        return invalid("RackId can't be empty.");
    }
    match request.member_epoch {
        0 => {
            if request.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if request
                .topic_partitions
                .as_ref()
                .is_none_or(|t| !t.is_empty())
            {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            let names = request.subscribed_topic_names.is_some();
            let regex = version >= 1 && request.subscribed_topic_regex.is_some();
            if !names && !regex {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when \
                     (re-)joining.",
                );
            }
        }
        LEAVE_STATIC_EPOCH if request.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        epoch if epoch < LEAVE_STATIC_EPOCH => {
            return invalid(&format!("MemberEpoch is invalid: {epoch}"));
        }
        _ => {}
    }
    if version >= 1
        && let Some(regex) = request.subscribed_topic_regex.as_deref()
        && !regex.is_empty()
        && regex::Regex::new(regex).is_err()
    {
        return Err((
            ResponseError::InvalidRegularExpression,
            format!("SubscribedTopicRegex `{regex}` is not a valid regular expression."),
        ));
    }
    if let Some(assignor) = request.server_assignor.as_deref()
        && !assignor::NAMES.contains(&assignor)
    {
        return Err((
            ResponseError::UnsupportedAssignor,
            format!(
                "ServerAssignor {assignor} is not supported. Supported assignors: {}.",
                assignor::NAMES.join(", ")
            ),
        ));
    }
    Ok(())
}

fn owned_of(request: &ConsumerGroupHeartbeatRequest) -> Option<Assignment> {
    request.topic_partitions.as_ref().map(|tps| {
        let mut out = Assignment::new();
        for tp in tps {
            if !tp.partitions.is_empty() {
                out.entry(tp.topic_id)
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        out
    })
}

fn is_subset(owned: Option<&Assignment>, of: &Assignment) -> bool {
    owned.is_some_and(|owned| {
        owned
            .iter()
            .all(|(t, ps)| of.get(t).is_some_and(|have| ps.is_subset(have)))
    })
}

fn wire(assignment: &Assignment) -> WireAssignment {
    WireAssignment::default().with_topic_partitions(
        assignment
            .iter()
            .map(|(t, ps)| {
                TopicPartitions::default()
                    .with_topic_id(*t)
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

impl ConsumerGroup {
    /// Whether the group has no members: it only holds offsets, and a classic member may
    /// take the id over.
    pub(super) fn is_vacant(&self) -> bool {
        self.members.is_empty()
    }

    fn static_member(&self, instance: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance))
            .map(|(id, _)| id.as_str())
    }

    /// The epoch of the member holding `topic`/`partition` (assigned or being revoked),
    /// other than `except`.
    fn held_by_other(&self, except: &str, topic: Uuid, partition: i32) -> bool {
        self.members.iter().any(|(id, m)| {
            id != except
                && [&m.assigned, &m.pending_revocation]
                    .iter()
                    .any(|a| a.get(&topic).is_some_and(|ps| ps.contains(&partition)))
        })
    }

    /// `ConsumerGroupHeartbeat`, after [`validate`]. A leave (epoch -1 or -2) too.
    pub(super) fn heartbeat(
        &mut self,
        beat: &Beat<'_>,
        request: &ConsumerGroupHeartbeatRequest,
    ) -> ConsumerGroupHeartbeatResponse {
        match self.heartbeat_inner(beat, request) {
            Ok(r) => r,
            Err((code, message)) => refusal(code, message),
        }
    }

    fn heartbeat_inner(
        &mut self,
        beat: &Beat<'_>,
        request: &ConsumerGroupHeartbeatRequest,
    ) -> Result<ConsumerGroupHeartbeatResponse, (ResponseError, String)> {
        let epoch = request.member_epoch;
        let instance = request.instance_id.as_deref();
        let mut member_id = request.member_id.to_string();
        if epoch == LEAVE_EPOCH || epoch == LEAVE_STATIC_EPOCH {
            return self.leave(beat, &member_id, instance, epoch);
        }
        let owned = owned_of(request);
        let mut bump = false;
        if epoch == 0 {
            if member_id.is_empty() {
                // v0: the coordinator names the member.
                member_id = Uuid::from_u64_pair(fastrand::u64(..), fastrand::u64(..)).to_string();
            }
            let member = self.join(beat, &member_id, instance)?;
            bump |= member;
        } else {
            self.check_known(beat, &member_id, instance, epoch, owned.as_ref())?;
        }
        let Some(member) = self.members.get_mut(&member_id) else {
            return Err((
                ResponseError::UnknownMemberId,
                format!("Member {member_id} is unknown."),
            ));
        };
        member.session_deadline = beat.now + SESSION_TIMEOUT;
        if request.rebalance_timeout_ms >= 0 {
            member.rebalance_timeout =
                Duration::from_millis(u64::try_from(request.rebalance_timeout_ms).unwrap_or(0));
        }
        if let Some(names) = &request.subscribed_topic_names {
            let names: Vec<String> = names.iter().map(|n| n.0.to_string()).collect();
            if names != member.topic_names {
                member.topic_names = names;
                bump = true;
            }
        }
        if beat.version >= 1
            && let Some(regex) = request.subscribed_topic_regex.as_deref()
        {
            let regex = Some(regex.to_owned()).filter(|r| !r.is_empty());
            if regex != member.regex {
                member.regex = regex;
                bump = true;
            }
        }
        if let Some(assignor) = request.server_assignor.as_deref() {
            member.server_assignor = Some(assignor.to_owned());
        }
        bump |= self.refresh_subscriptions(beat.topics);
        if bump {
            self.group_epoch += 1;
        }
        self.update_target();
        let before = self.members.get(&member_id).map(|m| m.assigned.clone());
        self.reconcile(&member_id, owned.as_ref(), beat.now);
        let Some(member) = self.members.get(&member_id) else {
            return Err((
                ResponseError::UnknownMemberId,
                format!("Member {member_id} is unknown."),
            ));
        };
        let full = epoch == 0
            || (request.rebalance_timeout_ms != -1
                && (request.subscribed_topic_names.is_some()
                    || request.subscribed_topic_regex.is_some())
                && request.topic_partitions.is_some());
        let changed = before.as_ref() != Some(&member.assigned);
        Ok(ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(text(&member_id)))
            .with_member_epoch(member.epoch)
            .with_heartbeat_interval_ms(
                i32::try_from(beat.interval.as_millis()).unwrap_or(i32::MAX),
            )
            .with_assignment((full || changed).then(|| wire(&member.assigned))))
    }

    /// A heartbeat of a member already in the group: its instance id and epoch must match
    /// what the group knows (Kafka's `throwIfMemberEpochIsInvalid` and instance checks).
    fn check_known(
        &self,
        beat: &Beat<'_>,
        member_id: &str,
        instance: Option<&str>,
        epoch: i32,
        owned: Option<&Assignment>,
    ) -> Result<(), (ResponseError, String)> {
        if let Some(instance) = instance {
            // A static member is known by its instance id first.
            match self.static_member(instance) {
                None => {
                    return Err((
                        ResponseError::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    ));
                }
                Some(holder) if holder != member_id => {
                    return Err((
                        ResponseError::FencedInstanceId,
                        format!("Static member {member_id} was fenced by member {holder}."),
                    ));
                }
                Some(_) => {}
            }
        }
        let Some(member) = self.members.get(member_id) else {
            return Err((
                ResponseError::UnknownMemberId,
                format!(
                    "Member {member_id} is not a member of group {}.",
                    beat.group
                ),
            ));
        };
        if member.instance_id.as_deref() != instance {
            return Err((
                ResponseError::FencedInstanceId,
                format!("Static member {member_id} was fenced by a newer member."),
            ));
        }
        if epoch > member.epoch
            || (epoch < member.epoch
                && (epoch != member.previous_epoch || !is_subset(owned, &member.assigned)))
        {
            return Err((
                ResponseError::FencedMemberEpoch,
                format!(
                    "The consumer group member has a {} member epoch ({epoch}) than the one \
                     known by the group coordinator ({}). The member must abandon all its \
                     partitions and rejoin.",
                    if epoch > member.epoch {
                        "greater"
                    } else {
                        "smaller"
                    },
                    member.epoch
                ),
            ));
        }
        Ok(())
    }

    /// A member joins (epoch 0). Returns whether the group epoch must go up.
    fn join(
        &mut self,
        beat: &Beat<'_>,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<bool, (ResponseError, String)> {
        let fresh = Member {
            instance_id: instance.map(str::to_owned),
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            rebalance_timeout: Duration::ZERO,
            topic_names: Vec::new(),
            regex: None,
            server_assignor: None,
            session_deadline: beat.now + SESSION_TIMEOUT,
            revocation_deadline: None,
        };
        if let Some(instance) = instance
            && let Some(holder) = self.static_member(instance).map(str::to_owned)
        {
            let Some(old) = self.members.get(&holder) else {
                return Ok(false);
            };
            if old.epoch != LEAVE_STATIC_EPOCH && holder != member_id {
                return Err((
                    ResponseError::UnreleasedInstanceId,
                    format!(
                        "Static member {member_id} with instance id {instance} cannot join the \
                         group because the instance id is owned by {holder} member."
                    ),
                ));
            }
            if old.epoch == LEAVE_STATIC_EPOCH {
                // The instance comes back: the new member id takes its place, epoch and
                // partitions, without a rebalance.
                let mut back = old.clone();
                back.epoch = back.previous_epoch;
                self.members.remove(&holder);
                if let Some(target) = self.target.remove(&holder) {
                    self.target.insert(member_id.to_owned(), target);
                }
                self.members.insert(member_id.to_owned(), back);
                return Ok(false);
            }
        }
        if self.members.contains_key(member_id) {
            // A known member joining again carries on as it was (Kafka keeps its epoch and
            // assignment and answers with the whole assignment).
            return Ok(false);
        }
        self.members.insert(member_id.to_owned(), fresh);
        Ok(true)
    }

    fn leave(
        &mut self,
        beat: &Beat<'_>,
        member_id: &str,
        instance: Option<&str>,
        epoch: i32,
    ) -> Result<ConsumerGroupHeartbeatResponse, (ResponseError, String)> {
        let id = match instance {
            Some(instance) => match self.static_member(instance) {
                None => {
                    return Err((
                        ResponseError::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    ));
                }
                Some(holder) if holder != member_id => {
                    return Err((
                        ResponseError::FencedInstanceId,
                        format!("Static member {member_id} was fenced by member {holder}."),
                    ));
                }
                Some(holder) => holder.to_owned(),
            },
            None if self.members.contains_key(member_id) => member_id.to_owned(),
            None => {
                return Err((
                    ResponseError::UnknownMemberId,
                    format!(
                        "Member {member_id} is not a member of group {}.",
                        beat.group
                    ),
                ));
            }
        };
        if epoch == LEAVE_STATIC_EPOCH {
            if let Some(m) = self.members.get_mut(&id) {
                // Kept, partitions and all, until the instance returns or the session ends.
                m.previous_epoch = m.epoch;
                m.epoch = LEAVE_STATIC_EPOCH;
                m.session_deadline = beat.now + SESSION_TIMEOUT;
                m.revocation_deadline = None;
            }
        } else {
            self.fence(&id, beat.topics);
        }
        Ok(ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(text(member_id)))
            .with_member_epoch(epoch))
    }

    /// The member ids, in no promised order.
    /// The group's state as `ListGroups` names it (Kafka's `ConsumerGroupState`): `Empty`
    /// without members, `Assigning` while the target assignment lags the group epoch,
    /// `Reconciling` while a member has not reached it, `Stable` after.
    pub(super) fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.group_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    pub(super) fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// Fences `id` now, as the coordinator does when its session times out. Returns whether
    /// it was a member.
    pub(super) fn expire(&mut self, id: &str, topics: &Topics) -> bool {
        let known = self.members.contains_key(id);
        self.fence(id, topics);
        known
    }

    /// Removes a member; its partitions are free at once and the group rebalances.
    fn fence(&mut self, id: &str, topics: &Topics) {
        if self.members.remove(id).is_some() {
            self.target.remove(id);
            self.refresh_subscriptions(topics);
            self.group_epoch += 1;
        }
    }

    /// Recomputes which subscribed topics exist with how many partitions; returns whether
    /// that changed (a topic created or grown that a subscription or pattern covers).
    pub(super) fn refresh_subscriptions(&mut self, topics: &Topics) -> bool {
        let mut names: BTreeSet<&str> = BTreeSet::new();
        let patterns: Vec<regex::Regex> = self
            .members
            .values()
            .filter_map(|m| m.regex.as_deref())
            .filter_map(|r| regex::Regex::new(&format!("^(?:{r})$")).ok())
            .collect();
        for m in self.members.values() {
            names.extend(m.topic_names.iter().map(String::as_str));
        }
        let mut now: BTreeMap<String, (Uuid, i32)> = BTreeMap::new();
        for (name, topic) in &topics.by_name {
            if names.contains(name.as_str()) || patterns.iter().any(|p| p.is_match(name)) {
                let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
                now.insert(name.clone(), (topic.id, count));
            }
        }
        if now == self.subscribed {
            return false;
        }
        self.subscribed = now;
        true
    }

    /// The topics (by id) `member` subscribes to, among those that exist.
    fn topics_of(&self, member: &Member) -> BTreeSet<Uuid> {
        let pattern = member
            .regex
            .as_deref()
            .and_then(|r| regex::Regex::new(&format!("^(?:{r})$")).ok());
        self.subscribed
            .iter()
            .filter(|(name, _)| {
                member.topic_names.iter().any(|n| n == *name)
                    || pattern.as_ref().is_some_and(|p| p.is_match(name))
            })
            .map(|(_, (id, _))| *id)
            .collect()
    }

    /// Kafka picks the server assignor most members ask for, `uniform` when none asks.
    fn assignor(&self) -> &str {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor.as_deref() {
                *votes.entry(a).or_default() += 1;
            }
        }
        let best = votes.values().copied().max().unwrap_or(0);
        votes
            .into_iter()
            .find(|(_, n)| *n == best && best > 0)
            .map_or(assignor::NAMES[0], |(a, _)| a)
    }

    /// Computes the target assignment of the current group epoch, once.
    fn update_target(&mut self) {
        if self.assignment_epoch >= self.group_epoch {
            return;
        }
        let partitions: BTreeMap<Uuid, i32> = self.subscribed.values().copied().collect();
        let subscribers: Vec<Subscriber<'_>> = self
            .members
            .iter()
            .map(|(id, m)| Subscriber {
                id,
                topics: self.topics_of(m),
                current: self.target.get(id),
            })
            .collect();
        let target = assignor::assign(self.assignor(), &subscribers, &partitions);
        self.target = target;
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves `id` one step towards its target (Kafka's `CurrentAssignmentBuilder`), given the
    /// partitions its heartbeat says it owns.
    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: Instant) {
        let Some(member) = self.members.get(id) else {
            return;
        };
        let still_owns_revoked = |pending: &Assignment| match owned {
            None => true,
            Some(owned) => pending
                .iter()
                .any(|(t, ps)| owned.get(t).is_some_and(|o| !o.is_disjoint(ps))),
        };
        let next_epoch = match member.state {
            MemberState::Stable if member.epoch == self.assignment_epoch => return,
            MemberState::Stable | MemberState::UnreleasedPartitions => member.epoch,
            MemberState::UnrevokedPartitions => {
                if still_owns_revoked(&member.pending_revocation) {
                    return;
                }
                (member.epoch + 1).min(self.assignment_epoch)
            }
        };
        let current = member.assigned.clone();
        let target = self.target.get(id).cloned().unwrap_or_default();
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        let mut add = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<Uuid> = current.keys().chain(target.keys()).copied().collect();
        for t in topics {
            let empty = BTreeSet::new();
            let have = current.get(&t).unwrap_or(&empty);
            let want = target.get(&t).unwrap_or(&empty);
            let kept: BTreeSet<i32> = have.intersection(want).copied().collect();
            let revoked: BTreeSet<i32> = have.difference(want).copied().collect();
            let mut added: BTreeSet<i32> = BTreeSet::new();
            for p in want.difference(have) {
                if self.held_by_other(id, t, *p) {
                    unreleased = true;
                } else {
                    added.insert(*p);
                }
            }
            for (map, set) in [(&mut keep, kept), (&mut revoke, revoked), (&mut add, added)] {
                if !set.is_empty() {
                    map.insert(t, set);
                }
            }
        }
        let target_epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(id) else {
            return;
        };
        let set_epoch = |m: &mut Member, e: i32| {
            if m.epoch != e {
                m.previous_epoch = m.epoch;
                m.epoch = e;
            }
        };
        if !revoke.is_empty() && still_owns_revoked(&revoke) {
            set_epoch(member, next_epoch);
            member.state = MemberState::UnrevokedPartitions;
            member.assigned = keep;
            member.pending_revocation = revoke;
            if member.revocation_deadline.is_none() {
                member.revocation_deadline = Some(now + member.rebalance_timeout);
            }
            return;
        }
        for (t, ps) in add {
            keep.entry(t).or_default().extend(ps);
        }
        set_epoch(member, target_epoch);
        member.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        member.assigned = keep;
        member.pending_revocation = Assignment::new();
        member.revocation_deadline = None;
    }

    /// Fences members whose session (where sessions lapse) or revocation time ran out.
    /// Returns whether any went.
    pub(super) fn tick(&mut self, now: Instant, topics: &Topics, sessions_lapse: bool) -> bool {
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| {
                (sessions_lapse && m.session_deadline <= now)
                    || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            tracing::debug!(member = %id, "consumer group member fenced by the coordinator's timers");
            self.fence(id, topics);
        }
        !expired.is_empty()
    }

    /// The next moment [`tick`](Self::tick) may fence someone.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| std::iter::once(m.session_deadline).chain(m.revocation_deadline))
            .min()
    }

    /// Offset commit checks of Kafka's `ConsumerGroup.validateOffsetCommit`.
    pub(super) fn validate_commit(&self, committer: &Committer<'_>) -> Result<(), ResponseError> {
        if committer.generation < 0 && self.members.is_empty() {
            return Ok(());
        }
        let member = self
            .members
            .get(committer.member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if !committer.transactional && committer.version < 9 {
            return Err(ResponseError::UnsupportedVersion);
        }
        if committer.generation != member.epoch {
            // A transaction's commit hears of it as a classic member would.
            if committer.transactional {
                return Err(ResponseError::IllegalGeneration);
            }
            return Err(ResponseError::StaleMemberEpoch);
        }
        Ok(())
    }
}
