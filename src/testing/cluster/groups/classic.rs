//! The classic group protocol's coordinator side: the state machine of one group
//! (`Empty`, `PreparingRebalance`, `CompletingRebalance`, `Stable`), as Kafka 4.1's
//! `GroupMetadataManager` runs it for classic groups.
//!
//! Everything here runs under the cluster's state lock and never waits. A `JoinGroup` or
//! `SyncGroup` that must wait for the rest of the group gets a ticket; the group files the
//! answer under that ticket once it is known, and the waiting request (outside the lock)
//! picks it up.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::Committer;

/// The state of a classic group, named as `DescribeGroups` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl Phase {
    pub(super) fn name(self) -> &'static str {
        match self {
            Phase::Empty => "Empty",
            Phase::PreparingRebalance => "PreparingRebalance",
            Phase::CompletingRebalance => "CompletingRebalance",
            Phase::Stable => "Stable",
        }
    }
}

/// An answer now, or a ticket to wait on.
#[derive(Debug)]
pub(super) enum Reply<T> {
    Now(T),
    Wait(u64),
}

/// What a `JoinGroup` carries that the group keeps.
#[derive(Debug, Clone)]
pub(super) struct JoinArgs {
    pub(super) member_id: String,
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocol_type: String,
    pub(super) protocols: Vec<(String, Bytes)>,
    /// Whether the member must learn its id before it may join (`JoinGroup` v4+, KIP-394).
    pub(super) require_known_member_id: bool,
}

impl JoinArgs {
    pub(super) fn from_request(
        request: &JoinGroupRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
    ) -> Self {
        JoinArgs {
            member_id: request.member_id.to_string(),
            instance_id: request.group_instance_id.as_ref().map(ToString::to_string),
            client_id: client_id.to_owned(),
            client_host: client_host.to_owned(),
            session_timeout: millis(request.session_timeout_ms),
            // v0 had no rebalance timeout: the session timeout bounds the rebalance, as in
            // Kafka.
            rebalance_timeout: millis(if version >= 1 {
                request.rebalance_timeout_ms
            } else {
                request.session_timeout_ms
            }),
            protocol_type: request.protocol_type.to_string(),
            protocols: request
                .protocols
                .iter()
                .map(|p| (p.name.to_string(), p.metadata.clone()))
                .collect(),
            require_known_member_id: version >= 4,
        }
    }
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[derive(Debug)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// The `JoinGroup` waiting for the rebalance to complete.
    join_ticket: Option<u64>,
    /// The `SyncGroup` waiting for the leader's assignment.
    sync_ticket: Option<u64>,
    last_heartbeat: Instant,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Takes what a new `JoinGroup` of this member says.
    fn update(&mut self, args: JoinArgs, now: Instant) {
        self.protocols = args.protocols;
        self.session_timeout = args.session_timeout;
        self.rebalance_timeout = args.rebalance_timeout;
        self.client_id = args.client_id;
        self.client_host = args.client_host;
        self.last_heartbeat = now;
    }

    fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}

/// One classic group.
#[derive(Debug)]
pub(super) struct ClassicGroup {
    id: String,
    pub(super) phase: Phase,
    generation: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    /// Members in the order they joined (a `Vec` keeps Kafka's insertion order).
    members: Vec<(String, Member)>,
    /// Member ids handed out with `MEMBER_ID_REQUIRED`, and when they lapse.
    pending: BTreeMap<String, Instant>,
    /// When the join phase ends whoever has not rejoined.
    rebalance_deadline: Option<Instant>,
    /// `group.initial.rebalance.delay.ms` of a group that was empty: when it ends, how far it
    /// may be extended, and whether a member arrived during the current delay.
    initial_delay: Option<(Instant, Instant, bool)>,
    /// Members that have not yet sent `SyncGroup` for this generation, and when they must have.
    pending_sync: BTreeSet<String>,
    sync_deadline: Option<Instant>,
    next_ticket: u64,
    join_results: HashMap<u64, JoinGroupResponse>,
    sync_results: HashMap<u64, SyncGroupResponse>,
}

/// The cluster-wide settings a classic group obeys.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) min_session: Duration,
    pub(super) max_session: Duration,
    pub(super) initial_delay: Duration,
    /// Whether a member's session lapses on the clock (`Shared::hold_sessions`).
    pub(super) sessions_lapse: bool,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn join_error(code: ResponseError, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code.code())
        .with_generation_id(-1)
        .with_member_id(text(member_id))
}

fn sync_error(code: ResponseError) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(code.code())
}

/// A fresh member id: the client id (or instance id) and a UUID, as Kafka makes them. The
/// UUID's leading bits count the members the cluster has created, so ids sort in join order:
/// assignors that deal partitions by sorted member id (range, roundrobin) then hand a topic's
/// first partitions to the member that joined first, which makes the routing a test harness
/// predicts ("the first subscription of a group owes the record") the routing that happens.
/// Kafka's random UUIDs leave that order to chance; nothing else depends on it.
fn new_member_id(prefix: &str) -> String {
    static CREATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let order = CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let uuid = uuid::Uuid::from_u64_pair(order, fastrand::u64(..));
    format!("{prefix}-{uuid}")
}

impl ClassicGroup {
    pub(super) fn new(id: &str) -> Self {
        ClassicGroup {
            id: id.to_owned(),
            phase: Phase::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: Vec::new(),
            pending: BTreeMap::new(),
            rebalance_deadline: None,
            initial_delay: None,
            pending_sync: BTreeSet::new(),
            sync_deadline: None,
            next_ticket: 1,
            join_results: HashMap::new(),
            sync_results: HashMap::new(),
        }
    }

    /// Whether the group has neither members nor members about to join: it only holds
    /// offsets, and another protocol may take the id over.
    pub(super) fn is_vacant(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty()
    }

    fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|(m, _)| m == id).map(|(_, m)| m)
    }

    fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members
            .iter_mut()
            .find(|(m, _)| m == id)
            .map(|(_, m)| m)
    }

    fn static_member(&self, instance: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance))
            .map(|(id, _)| id.as_str())
    }

    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Kafka's `validateMember`: a static member is known by its instance id, and a request
    /// naming the instance with another member id is from a fenced consumer.
    fn validate_member(
        &self,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<(), ResponseError> {
        match instance {
            Some(instance) => match self.static_member(instance) {
                None => Err(ResponseError::UnknownMemberId),
                Some(id) if id != member_id => Err(ResponseError::FencedInstanceId),
                Some(_) => Ok(()),
            },
            None if self.member(member_id).is_none() => Err(ResponseError::UnknownMemberId),
            None => Ok(()),
        }
    }

    /// Kafka's `supportsProtocols`: an empty group takes any non-empty protocol list; a
    /// non-empty one needs the same protocol type and a protocol every member supports.
    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .iter()
                    .all(|(_, m)| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// Kafka's vote: among the protocols every member supports, the one most members list
    /// first (ties go to the one the earliest member prefers).
    fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&str> = self
            .members
            .first()
            .map(|(_, first)| {
                first
                    .protocols
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .filter(|name| {
                        self.members
                            .iter()
                            .all(|(_, m)| m.protocols.iter().any(|(n, _)| n == name))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut votes: Vec<(&str, usize)> = Vec::new();
        for (_, m) in &self.members {
            let Some(vote) = m
                .protocols
                .iter()
                .map(|(n, _)| n.as_str())
                .find(|n| candidates.contains(n))
            else {
                continue;
            };
            match votes.iter_mut().find(|(n, _)| *n == vote) {
                Some((_, count)) => *count += 1,
                None => votes.push((vote, 1)),
            }
        }
        let best = votes.iter().map(|(_, c)| *c).max()?;
        votes
            .into_iter()
            .find(|(_, c)| *c == best)
            .map(|(n, _)| n.to_owned())
    }

    fn max_rebalance_timeout(&self) -> Duration {
        self.members
            .iter()
            .map(|(_, m)| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    /// `JoinGroup`. `now` is the request's arrival.
    pub(super) fn join(
        &mut self,
        now: Instant,
        limits: Limits,
        args: JoinArgs,
    ) -> Reply<JoinGroupResponse> {
        if !self.supports(&args.protocol_type, &args.protocols) {
            return Reply::Now(join_error(
                ResponseError::InconsistentGroupProtocol,
                &args.member_id,
            ));
        }
        if args.member_id.is_empty() {
            self.join_new(now, limits, args)
        } else {
            self.join_existing(now, limits, args)
        }
    }

    fn join_new(
        &mut self,
        now: Instant,
        limits: Limits,
        args: JoinArgs,
    ) -> Reply<JoinGroupResponse> {
        let prefix = args
            .instance_id
            .clone()
            .unwrap_or_else(|| args.client_id.clone());
        let new_id = new_member_id(&prefix);
        if let Some(instance) = args.instance_id.clone() {
            if let Some(old_id) = self.static_member(&instance).map(str::to_owned) {
                return self.replace_static(now, limits, &old_id, &new_id, args);
            }
            return self.add_member(now, limits, new_id, args);
        }
        if args.require_known_member_id {
            // KIP-394: the member learns its id first and joins with it; until then it only
            // holds the group's completion back for one session timeout.
            self.pending
                .insert(new_id.clone(), now + args.session_timeout);
            return Reply::Now(join_error(ResponseError::MemberIdRequired, &new_id));
        }
        self.add_member(now, limits, new_id, args)
    }

    fn join_existing(
        &mut self,
        now: Instant,
        limits: Limits,
        args: JoinArgs,
    ) -> Reply<JoinGroupResponse> {
        if self.pending.contains_key(&args.member_id) {
            if args.instance_id.is_some() {
                return Reply::Now(join_error(ResponseError::UnknownMemberId, &args.member_id));
            }
            self.pending.remove(&args.member_id);
            let id = args.member_id.clone();
            return self.add_member(now, limits, id, args);
        }
        if let Err(code) = self.validate_member(&args.member_id, args.instance_id.as_deref()) {
            return Reply::Now(join_error(code, &args.member_id));
        }
        let id = args.member_id.clone();
        let (is_leader, same) = match self.member(&id) {
            Some(m) => (
                self.leader.as_deref() == Some(&id),
                m.same_protocols(&args.protocols),
            ),
            None => return Reply::Now(join_error(ResponseError::UnknownMemberId, &id)),
        };
        match self.phase {
            Phase::PreparingRebalance => self.update_member(now, limits, &id, args),
            Phase::CompletingRebalance if same => Reply::Now(self.generation_reply(&id, is_leader)),
            Phase::Stable if same && !is_leader => Reply::Now(self.generation_reply(&id, false)),
            Phase::CompletingRebalance | Phase::Stable => {
                self.update_member(now, limits, &id, args)
            }
            Phase::Empty => Reply::Now(join_error(ResponseError::UnknownMemberId, &id)),
        }
    }

    /// The current generation's `JoinGroup` answer for `member`.
    fn generation_reply(&self, member: &str, with_members: bool) -> JoinGroupResponse {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if with_members {
            self.members
                .iter()
                .map(|(id, m)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(text(id))
                        .with_group_instance_id(m.instance_id.as_deref().map(text))
                        .with_metadata(m.metadata(&protocol))
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinGroupResponse::default()
            .with_generation_id(self.generation)
            .with_protocol_type(self.protocol_type.as_deref().map(text))
            .with_protocol_name(self.protocol_name.as_deref().map(text))
            .with_leader(text(self.leader.as_deref().unwrap_or_default()))
            .with_member_id(text(member))
            .with_members(members)
    }

    fn add_member(
        &mut self,
        now: Instant,
        limits: Limits,
        id: String,
        args: JoinArgs,
    ) -> Reply<JoinGroupResponse> {
        if self.members.is_empty() {
            self.protocol_type = Some(args.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        if let Some((_, _, arrived)) = &mut self.initial_delay {
            *arrived = true;
        }
        let ticket = self.ticket();
        self.members.push((
            id,
            Member {
                instance_id: args.instance_id,
                client_id: args.client_id,
                client_host: args.client_host,
                session_timeout: args.session_timeout,
                rebalance_timeout: args.rebalance_timeout,
                protocols: args.protocols,
                assignment: Bytes::new(),
                join_ticket: Some(ticket),
                sync_ticket: None,
                last_heartbeat: now,
            },
        ));
        self.rebalance_or_complete(now, limits);
        Reply::Wait(ticket)
    }

    fn update_member(
        &mut self,
        now: Instant,
        limits: Limits,
        id: &str,
        args: JoinArgs,
    ) -> Reply<JoinGroupResponse> {
        let ticket = self.ticket();
        let Some(member) = self.member_mut(id) else {
            return Reply::Now(join_error(ResponseError::UnknownMemberId, id));
        };
        member.update(args, now);
        let superseded = member.join_ticket.replace(ticket);
        if let Some(old) = superseded {
            self.join_results
                .insert(old, join_error(ResponseError::RebalanceInProgress, id));
        }
        self.rebalance_or_complete(now, limits);
        Reply::Wait(ticket)
    }

    /// A known instance id joins with a new member id: the new member takes the old one's
    /// place (and assignment); the old consumer is fenced.
    fn replace_static(
        &mut self,
        now: Instant,
        limits: Limits,
        old_id: &str,
        new_id: &str,
        args: JoinArgs,
    ) -> Reply<JoinGroupResponse> {
        let Some(index) = self.members.iter().position(|(id, _)| id == old_id) else {
            return Reply::Now(join_error(ResponseError::UnknownMemberId, ""));
        };
        let ticket = self.ticket();
        {
            let (id, member) = &mut self.members[index];
            for old in [member.join_ticket.take(), member.sync_ticket.take()]
                .into_iter()
                .flatten()
            {
                // The fenced consumer's waiting request hears so.
                self.join_results
                    .insert(old, join_error(ResponseError::FencedInstanceId, old_id));
                self.sync_results
                    .insert(old, sync_error(ResponseError::FencedInstanceId));
            }
            new_id.clone_into(id);
            member.update(args, now);
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.to_owned());
        }
        if self.pending_sync.remove(old_id) {
            self.pending_sync.insert(new_id.to_owned());
        }
        match self.phase {
            Phase::Stable if self.select_protocol() == self.protocol_name => {
                // The protocol the group agreed on stays: no rebalance, even when the
                // member's metadata changed (Kafka only compares the selected protocol). A
                // returning leader is told it leads but that the assignment stands (KIP-814).
                let is_leader = self.leader.as_deref() == Some(new_id);
                let reply = self
                    .generation_reply(new_id, is_leader)
                    .with_skip_assignment(is_leader);
                Reply::Now(reply)
            }
            Phase::Stable | Phase::CompletingRebalance => {
                self.members[index].1.join_ticket = Some(ticket);
                self.prepare_rebalance(now, limits);
                self.maybe_complete_join(now, limits);
                Reply::Wait(ticket)
            }
            Phase::PreparingRebalance | Phase::Empty => {
                self.members[index].1.join_ticket = Some(ticket);
                self.maybe_complete_join(now, limits);
                Reply::Wait(ticket)
            }
        }
    }

    fn rebalance_or_complete(&mut self, now: Instant, limits: Limits) {
        if self.phase != Phase::PreparingRebalance {
            self.prepare_rebalance(now, limits);
        }
        self.maybe_complete_join(now, limits);
    }

    /// Starts a rebalance: members must rejoin within the longest rebalance timeout.
    fn prepare_rebalance(&mut self, now: Instant, limits: Limits) {
        if self.phase == Phase::CompletingRebalance {
            // The leader's assignment for this generation will not come: those waiting for
            // it rejoin.
            for (_, m) in &mut self.members {
                m.assignment = Bytes::new();
                if let Some(ticket) = m.sync_ticket.take() {
                    self.sync_results
                        .insert(ticket, sync_error(ResponseError::RebalanceInProgress));
                }
            }
        }
        self.pending_sync.clear();
        self.sync_deadline = None;
        let timeout = self.max_rebalance_timeout();
        if self.phase == Phase::Empty {
            let delay = limits.initial_delay.min(timeout);
            self.initial_delay = Some((now + delay, now + timeout, false));
        }
        self.rebalance_deadline = Some(now + timeout);
        self.phase = Phase::PreparingRebalance;
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.iter().all(|(_, m)| m.join_ticket.is_some())
    }

    /// Ends the join phase when everyone is in, or time is up.
    fn maybe_complete_join(&mut self, now: Instant, limits: Limits) -> bool {
        if self.phase != Phase::PreparingRebalance {
            return false;
        }
        if let Some((until, limit, arrived)) = self.initial_delay {
            if now < until {
                return false;
            }
            if arrived && until < limit {
                let next = (now + limits.initial_delay).min(limit);
                self.initial_delay = Some((next, limit, false));
                return false;
            }
            self.initial_delay = None;
            self.complete_join(now);
            return true;
        }
        if self.all_joined() || self.rebalance_deadline.is_some_and(|d| now >= d) {
            self.complete_join(now);
            return true;
        }
        false
    }

    /// Forms the next generation from the members that rejoined.
    fn complete_join(&mut self, now: Instant) {
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.join_ticket.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.remove(&id);
        }
        self.rebalance_deadline = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.protocol_name = None;
            self.leader = None;
            return;
        }
        if self
            .leader
            .as_ref()
            .is_none_or(|l| self.member(l).is_none())
        {
            self.leader = self.members.first().map(|(id, _)| id.clone());
        }
        self.protocol_name = self.select_protocol();
        self.phase = Phase::CompletingRebalance;
        let leader = self.leader.clone().unwrap_or_default();
        let mut replies = Vec::new();
        for (id, _) in &self.members {
            replies.push((id.clone(), self.generation_reply(id, *id == leader)));
        }
        for (id, reply) in replies {
            if let Some(m) = self.member_mut(&id)
                && let Some(ticket) = m.join_ticket.take()
            {
                m.last_heartbeat = now;
                self.join_results.insert(ticket, reply);
            }
        }
        self.pending_sync = self.members.iter().map(|(id, _)| id.clone()).collect();
        self.sync_deadline = Some(now + self.max_rebalance_timeout());
    }

    /// Takes a member out; whatever it waits for is answered `UNKNOWN_MEMBER_ID`.
    fn remove(&mut self, id: &str) {
        let Some(index) = self.members.iter().position(|(m, _)| m == id) else {
            return;
        };
        let (_, member) = self.members.remove(index);
        if let Some(ticket) = member.join_ticket {
            self.join_results
                .insert(ticket, join_error(ResponseError::UnknownMemberId, id));
        }
        if let Some(ticket) = member.sync_ticket {
            self.sync_results
                .insert(ticket, sync_error(ResponseError::UnknownMemberId));
        }
        self.pending_sync.remove(id);
        if self.leader.as_deref() == Some(id) {
            self.leader = self.members.first().map(|(m, _)| m.clone());
        }
    }

    /// A member left or expired: the group rebalances without it.
    fn remove_and_rebalance(&mut self, now: Instant, limits: Limits, id: &str) {
        self.remove(id);
        match self.phase {
            Phase::Empty => {}
            Phase::PreparingRebalance => {
                self.maybe_complete_join(now, limits);
            }
            Phase::CompletingRebalance | Phase::Stable => {
                self.prepare_rebalance(now, limits);
                self.maybe_complete_join(now, limits);
            }
        }
    }

    /// The answer filed under a `JoinGroup` ticket, if it is ready.
    pub(super) fn take_join(&mut self, ticket: u64) -> Option<JoinGroupResponse> {
        self.join_results.remove(&ticket)
    }

    /// The answer filed under a `SyncGroup` ticket, if it is ready.
    pub(super) fn take_sync(&mut self, ticket: u64) -> Option<SyncGroupResponse> {
        self.sync_results.remove(&ticket)
    }

    /// `SyncGroup`.
    pub(super) fn sync(
        &mut self,
        now: Instant,
        request: &SyncGroupRequest,
    ) -> Reply<SyncGroupResponse> {
        let id = request.member_id.as_str();
        let instance = request.group_instance_id.as_deref();
        if let Err(code) = self.validate_member(id, instance) {
            return Reply::Now(sync_error(code));
        }
        if request.generation_id != self.generation {
            return Reply::Now(sync_error(ResponseError::IllegalGeneration));
        }
        if request
            .protocol_type
            .as_deref()
            .is_some_and(|t| self.protocol_type.as_deref() != Some(t))
            || request
                .protocol_name
                .as_deref()
                .is_some_and(|n| self.protocol_name.as_deref() != Some(n))
        {
            return Reply::Now(sync_error(ResponseError::InconsistentGroupProtocol));
        }
        match self.phase {
            Phase::Empty => Reply::Now(sync_error(ResponseError::UnknownMemberId)),
            Phase::PreparingRebalance => Reply::Now(sync_error(ResponseError::RebalanceInProgress)),
            Phase::Stable => {
                self.pending_sync.remove(id);
                let assignment = match self.member_mut(id) {
                    Some(m) => {
                        m.last_heartbeat = now;
                        m.assignment.clone()
                    }
                    None => return Reply::Now(sync_error(ResponseError::UnknownMemberId)),
                };
                Reply::Now(self.sync_reply(assignment))
            }
            Phase::CompletingRebalance => {
                let ticket = self.ticket();
                match self.member_mut(id) {
                    Some(m) => {
                        m.last_heartbeat = now;
                        if let Some(old) = m.sync_ticket.replace(ticket) {
                            self.sync_results
                                .insert(old, sync_error(ResponseError::RebalanceInProgress));
                        }
                    }
                    None => return Reply::Now(sync_error(ResponseError::UnknownMemberId)),
                }
                self.pending_sync.remove(id);
                if self.leader.as_deref() == Some(id) {
                    let plan: HashMap<&str, &Bytes> = request
                        .assignments
                        .iter()
                        .map(|a| (a.member_id.as_str(), &a.assignment))
                        .collect();
                    for (member, m) in &mut self.members {
                        // Members the leader left out get an empty assignment.
                        m.assignment = plan
                            .get(member.as_str())
                            .map(|b| (*b).clone())
                            .unwrap_or_default();
                    }
                    self.phase = Phase::Stable;
                    let mut replies = Vec::new();
                    for (_, m) in &mut self.members {
                        if let Some(t) = m.sync_ticket.take() {
                            replies.push((t, m.assignment.clone()));
                        }
                    }
                    for (t, assignment) in replies {
                        let reply = self.sync_reply(assignment);
                        self.sync_results.insert(t, reply);
                    }
                }
                Reply::Wait(ticket)
            }
        }
    }

    fn sync_reply(&self, assignment: Bytes) -> SyncGroupResponse {
        SyncGroupResponse::default()
            .with_protocol_type(self.protocol_type.as_deref().map(text))
            .with_protocol_name(self.protocol_name.as_deref().map(text))
            .with_assignment(assignment)
    }

    /// Heartbeat: keeps the member alive; says when a rebalance wants it to rejoin.
    pub(super) fn heartbeat(&mut self, now: Instant, request: &HeartbeatRequest) -> Outcome {
        let id = request.member_id.as_str();
        self.validate_member(id, request.group_instance_id.as_deref())?;
        if request.generation_id != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        let phase = self.phase;
        if phase == Phase::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        if let Some(m) = self.member_mut(id) {
            m.last_heartbeat = now;
        }
        if phase == Phase::PreparingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// `LeaveGroup` (v3+: a batch of members, by member id or instance id).
    pub(super) fn leave(
        &mut self,
        now: Instant,
        limits: Limits,
        request: &LeaveGroupRequest,
    ) -> Vec<MemberResponse> {
        let mut out = Vec::new();
        let mut removed = Vec::new();
        for identity in &request.members {
            let member_id = identity.member_id.as_str();
            let code = match identity.group_instance_id.as_deref() {
                None => {
                    if self.pending.remove(member_id).is_some() {
                        None
                    } else if self.member(member_id).is_none() {
                        Some(ResponseError::UnknownMemberId)
                    } else {
                        removed.push(member_id.to_owned());
                        None
                    }
                }
                Some(instance) => match self.static_member(instance) {
                    None => Some(ResponseError::UnknownMemberId),
                    Some(existing) if !member_id.is_empty() && existing != member_id => {
                        Some(ResponseError::FencedInstanceId)
                    }
                    Some(existing) => {
                        removed.push(existing.to_owned());
                        None
                    }
                },
            };
            out.push(
                MemberResponse::default()
                    .with_member_id(identity.member_id.clone())
                    .with_group_instance_id(identity.group_instance_id.clone())
                    .with_error_code(code.map_or(0, |c| c.code())),
            );
        }
        for id in removed {
            self.remove_and_rebalance(now, limits, &id);
        }
        self.maybe_complete_join(now, limits);
        out
    }

    /// Expires members whose session ran out, pending member ids nobody used, members that
    /// never synced, and ends join phases whose time is up. Returns whether anything changed.
    pub(super) fn tick(&mut self, now: Instant, limits: Limits) -> bool {
        let mut changed = false;
        let lapsed: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in lapsed {
            self.pending.remove(&id);
            changed = true;
        }
        // Members waiting on a JoinGroup or SyncGroup are kept alive by it, as in Kafka.
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| {
                limits.sessions_lapse
                    && m.join_ticket.is_none()
                    && m.sync_ticket.is_none()
                    && m.last_heartbeat + m.session_timeout <= now
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            tracing::debug!(group = %self.id, member = %id, "session expired");
            self.remove_and_rebalance(now, limits, &id);
            changed = true;
        }
        if self.sync_deadline.is_some_and(|d| d <= now) {
            self.sync_deadline = None;
            let missing: Vec<String> = std::mem::take(&mut self.pending_sync).into_iter().collect();
            if !missing.is_empty()
                && matches!(self.phase, Phase::CompletingRebalance | Phase::Stable)
            {
                for id in &missing {
                    self.remove(id);
                }
                self.prepare_rebalance(now, limits);
                changed = true;
            }
        }
        changed |= self.maybe_complete_join(now, limits);
        changed
    }

    /// The next moment [`tick`](Self::tick) may change something.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let sessions = self
            .members
            .iter()
            .filter(|(_, m)| m.join_ticket.is_none() && m.sync_ticket.is_none())
            .map(|(_, m)| m.last_heartbeat + m.session_timeout);
        let delay = self.initial_delay.map(|(until, _, _)| until);
        sessions
            .chain(self.pending.values().copied())
            .chain(self.rebalance_deadline)
            .chain(self.sync_deadline)
            .chain(delay)
            .min()
    }

    /// Offset commit checks of Kafka's `ClassicGroup.validateOffsetCommit`.
    pub(super) fn validate_commit(&self, committer: &Committer<'_>) -> Result<(), ResponseError> {
        let generation = committer.generation;
        if generation < 0 && self.phase == Phase::Empty {
            return Ok(());
        }
        if generation >= 0 || !committer.member_id.is_empty() || committer.instance_id.is_some() {
            self.validate_member(committer.member_id, committer.instance_id)?;
            if generation != self.generation {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if !committer.transactional && self.phase != Phase::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        if !committer.transactional && self.phase == Phase::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// `DescribeGroups`: full member data once `Stable`, names only before.
    /// `ListGroups`' protocol type: what the members joined with, empty before anyone did.
    pub(super) fn protocol_type(&self) -> &str {
        self.protocol_type.as_deref().unwrap_or_default()
    }

    pub(super) fn describe(&self) -> DescribedGroup {
        let stable = self.phase == Phase::Stable;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = self
            .members
            .iter()
            .map(|(id, m)| {
                let member = DescribedGroupMember::default()
                    .with_member_id(text(id))
                    .with_group_instance_id(m.instance_id.as_deref().map(text))
                    .with_client_id(text(&m.client_id))
                    .with_client_host(text(&m.client_host));
                if stable {
                    member
                        .with_member_metadata(m.metadata(&protocol))
                        .with_member_assignment(m.assignment.clone())
                } else {
                    member
                }
            })
            .collect();
        DescribedGroup::default()
            .with_group_id(GroupId(text(&self.id)))
            .with_group_state(StrBytes::from_static_str(self.phase.name()))
            .with_protocol_type(text(self.protocol_type.as_deref().unwrap_or_default()))
            .with_protocol_data(if stable {
                text(&protocol)
            } else {
                StrBytes::default()
            })
            .with_members(members)
    }

    #[cfg(test)]
    pub(super) fn generation(&self) -> i32 {
        self.generation
    }

    pub(super) fn member_ids(&self) -> Vec<String> {
        self.members.iter().map(|(id, _)| id.clone()).collect()
    }

    /// Ends `id`'s session now, as if its heartbeats had stopped: the member leaves and the
    /// group rebalances. Returns whether it was a member.
    pub(super) fn expire(&mut self, now: Instant, limits: Limits, id: &str) -> bool {
        if !self.members.iter().any(|(known, _)| known == id) {
            return false;
        }
        self.remove_and_rebalance(now, limits, id);
        true
    }
}

/// A group-level outcome: success or one error code.
pub(super) type Outcome = Result<(), ResponseError>;
