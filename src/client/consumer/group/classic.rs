//! The classic group protocol: `JoinGroup` and `SyncGroup` to form a generation, the leader
//! computing the assignment with a client-side assignor, `Heartbeat` to stay in it, and
//! `LeaveGroup` on the way out.
//!
//! Error handling follows the Java client's coordinator:
//! - `REBALANCE_IN_PROGRESS` from a heartbeat: rejoin (eager assignors revoke everything
//!   first; cooperative ones keep their partitions and revoke only what the new plan moves).
//! - `UNKNOWN_MEMBER_ID`, `ILLEGAL_GENERATION`: the group went on without us; the partitions
//!   are lost (not revoked: a commit would be refused), and we rejoin, with a fresh member id
//!   after `UNKNOWN_MEMBER_ID`.
//! - `FENCED_INSTANCE_ID`: another consumer took our `group.instance.id`; fatal.
//! - Coordinator moves and loads: find the coordinator again and carry on.
//!
//! Heartbeats keep flowing while the caller handles a revocation, so that a slow commit does
//! not cost the membership. Static members (`group.instance.id`) do not leave the group on
//! close: a restart within `session.timeout.ms` gets the same partitions back without a
//! rebalance.
//!
//! A close never waits on the coordinator: it holds a `JoinGroup` (and a `SyncGroup`) until
//! the rebalance completes, up to the rebalance timeout, and the broker answers a connection's
//! requests one at a time, so a `LeaveGroup` behind the held join would wait as long and be
//! lost when the process exits. A close during a held join drops it, cuts the connection that
//! carries it and leaves on a fresh one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Request, StrBytes, VersionRange};

use crate::client::coordinator::CoordinatorKind;
use crate::client::error::{Error, Result};

use super::super::{GroupMember, Shared, TopicPartition};
use super::TopicMatcher;
use super::assignor::{self, Assignor, RebalanceProtocol};
use super::protocol;

/// `JoinGroup` from v5 (static membership) to v9 (`skip_assignment`, KIP-814).
const JOIN_VERSIONS: VersionRange = VersionRange { min: 5, max: 9 };
const SYNC_VERSIONS: VersionRange = VersionRange { min: 3, max: 5 };
const HEARTBEAT_VERSIONS: VersionRange = VersionRange { min: 3, max: 4 };
const LEAVE_VERSIONS: VersionRange = VersionRange { min: 3, max: 5 };

/// Runs the membership until the consumer closes.
pub(crate) async fn run(shared: Arc<Shared>, matcher: TopicMatcher) {
    let Some(group) = shared.config.group_id.clone() else {
        return;
    };
    let assignors: Vec<Arc<dyn Assignor>> = shared
        .config
        .assignment_strategy
        .iter()
        .filter_map(|name| assignor::by_name(name))
        .collect();
    let Some(first) = assignors.first() else {
        report(
            &shared,
            Error::Config(format!(
                "`partition.assignment.strategy`: no known assignor in {:?}",
                shared.config.assignment_strategy
            )),
        );
        return;
    };
    let protocol = first.protocol();
    let mut member = Classic {
        shared,
        matcher,
        group,
        assignors,
        protocol,
        member_id: String::new(),
        generation: -1,
        subscribed: Vec::new(),
        group_topics: BTreeMap::new(),
        leader: false,
        last_heartbeat_ok: Instant::now(),
        join_cut: false,
    };
    if let Err(e) = member.run().await {
        report(&member.shared, e);
    }
}

fn report(shared: &Shared, error: Error) {
    tracing::error!(error = %error, "group membership stopped");
    shared.lock().report(error);
    shared.poll_wake.notify_one();
}

/// Why the heartbeat loop ended.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Rejoin,
    /// The membership is gone: partitions lost.
    Lost,
    /// The caller stopped polling: leave, and rejoin once it polls again.
    PollTimeout,
    Close,
}

struct Classic {
    shared: Arc<Shared>,
    matcher: TopicMatcher,
    group: String,
    assignors: Vec<Arc<dyn Assignor>>,
    protocol: RebalanceProtocol,
    member_id: String,
    generation: i32,
    /// The topics this member subscribes to, sorted.
    subscribed: Vec<String>,
    /// As leader: partition counts of every member's topics when the plan was made (0 for
    /// topics that did not exist), to notice new topics and partitions.
    group_topics: BTreeMap<String, i32>,
    leader: bool,
    last_heartbeat_ok: Instant,
    /// A close dropped a held `JoinGroup` or `SyncGroup`: its connection must go before the
    /// `LeaveGroup`, which would queue behind it.
    join_cut: bool,
}

impl Classic {
    fn config(&self) -> &super::super::ConsumerConfig {
        &self.shared.config
    }

    fn instance_id(&self) -> Option<StrBytes> {
        self.config()
            .group_instance_id
            .clone()
            .map(StrBytes::from_string)
    }

    async fn run(&mut self) -> Result<()> {
        loop {
            if self.shared.is_closing() {
                self.leave().await;
                return Ok(());
            }
            self.subscribed = self.resolve_topics().await;
            self.shared.note_topics(&self.subscribed);
            self.prepare_join().await;
            let assignment = match self.join_and_sync().await {
                Ok(a) => a,
                Err(e) if self.shared.is_closing() => {
                    tracing::debug!(error = %e, "join interrupted by close");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let moved = self.apply(assignment).await;
            let next = if moved {
                Next::Rejoin
            } else {
                self.heartbeat_loop().await?
            };
            match next {
                Next::Rejoin => {}
                Next::Lost => self.reset_membership(),
                Next::PollTimeout => {
                    tracing::warn!(
                        group = %self.group,
                        "`max.poll.interval.ms` passed without a poll: leaving the group"
                    );
                    // The caller cannot hear a revocation: the partitions are lost (it
                    // learns so at its next poll), as the group is told right away.
                    self.send_leave().await;
                    self.reset_membership();
                    self.wait_for_poll().await;
                }
                Next::Close => {
                    self.leave().await;
                    return Ok(());
                }
            }
        }
    }

    /// Forgets the generation and gives up every partition as lost.
    fn reset_membership(&mut self) {
        self.generation = -1;
        self.shared.set_member(None);
        let owned = self.shared.owned_partitions();
        self.shared.lose_partitions(&owned);
    }

    async fn wait_for_poll(&self) {
        let mut closing = self.shared.closing.subscribe();
        while self.shared.since_last_poll() >= self.config().max_poll_interval {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = closing.wait_for(|c| *c) => return,
            }
        }
    }

    /// The subscribed topics now, retrying while the cluster cannot be asked.
    async fn resolve_topics(&self) -> Vec<String> {
        let mut backoff = self.shared.client.retry_backoff();
        loop {
            match self.matcher.topics(&self.shared.client).await {
                Ok(t) => return t,
                Err(e) if self.shared.is_closing() => {
                    tracing::debug!(error = %e, "closing");
                    return self.subscribed.clone();
                }
                Err(e) => {
                    tracing::debug!(error = %e, "resolving the subscription failed");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    }

    /// Before joining: eager assignors give everything up; cooperative ones only the
    /// partitions of topics no longer subscribed.
    async fn prepare_join(&mut self) {
        let owned = self.shared.owned_partitions();
        let revoke: Vec<TopicPartition> = match self.protocol {
            RebalanceProtocol::Eager => owned,
            RebalanceProtocol::Cooperative => owned
                .into_iter()
                .filter(|tp| {
                    self.subscribed
                        .binary_search_by(|t| (**t).cmp(&*tp.topic))
                        .is_err()
                })
                .collect(),
        };
        if !revoke.is_empty() {
            self.revoke_heartbeating(&revoke).await;
        }
    }

    async fn revoke_heartbeating(&mut self, partitions: &[TopicPartition]) {
        let limit = self.config().max_poll_interval;
        let shared = self.shared.clone();
        let revoke = shared.revoke_partitions(partitions, limit);
        tokio::pin!(revoke);
        let interval = self.config().heartbeat_interval;
        loop {
            tokio::select! {
                () = &mut revoke => return,
                () = tokio::time::sleep(interval) => {
                    if self.generation >= 0 {
                        // Errors here are handled by the join that follows.
                        let _ = self.heartbeat().await;
                    }
                }
            }
        }
    }

    async fn coordinator(&self) -> Result<i32> {
        self.shared
            .client
            .coordinator(CoordinatorKind::Group, &self.group)
            .await
    }

    fn forget_coordinator(&self) {
        self.shared
            .client
            .forget_coordinator(CoordinatorKind::Group, &self.group);
    }

    /// Sends `request` to the coordinator with `timeout`.
    async fn send<R: Request>(
        &self,
        ours: VersionRange,
        timeout: Duration,
        request: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        let node = self.coordinator().await?;
        let conn = self
            .shared
            .client
            .connection_on(node, self.shared.group_lane)
            .await?;
        let version = conn.version_of::<R>(ours)?;
        conn.send(&request(version), version, timeout).await
    }

    /// `held`'s answer, or `None` once the consumer closes (the caller cuts the connection).
    async fn unless_closing<T>(
        &self,
        held: impl std::future::Future<Output = Result<T>>,
    ) -> Result<Option<T>> {
        let mut closing = self.shared.closing.subscribe();
        tokio::select! {
            answer = held => answer.map(Some),
            _ = closing.wait_for(|c| *c) => Ok(None),
        }
    }

    /// Joins and syncs until a generation is formed; returns this member's assignment.
    async fn join_and_sync(&mut self) -> Result<Vec<(String, Vec<i32>)>> {
        let mut backoff = self.shared.client.retry_backoff();
        loop {
            if self.shared.is_closing() {
                return Err(Error::Closed("the consumer is closing".into()));
            }
            match self.join_once().await {
                Ok(Some(assignment)) => return Ok(assignment),
                Ok(None) => {}
                Err(e) => match self.classify(&e) {
                    Handling::Retry => {
                        tracing::debug!(group = %self.group, error = %e, "join failed; retrying");
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                    Handling::Fatal => return Err(e),
                },
            }
        }
    }

    /// One `JoinGroup` + `SyncGroup`. `Ok(None)`: join again now.
    async fn join_once(&mut self) -> Result<Option<Vec<(String, Vec<i32>)>>> {
        let owned = group_by_topic(&self.shared.owned_partitions());
        let mut protocols = Vec::with_capacity(self.assignors.len());
        for a in &self.assignors {
            let metadata = protocol::encode_subscription(
                &self.subscribed,
                &owned,
                self.generation,
                self.config().client_rack.as_deref(),
            )?;
            protocols.push(
                JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(a.name()))
                    .with_metadata(metadata),
            );
        }
        let config = self.config();
        let rebalance_timeout = config.max_poll_interval;
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_session_timeout_ms(millis(config.session_timeout))
            .with_rebalance_timeout_ms(millis(rebalance_timeout))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_group_instance_id(self.instance_id())
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(protocols)
            .with_reason(None);
        let timeout = rebalance_timeout + self.shared.client.socket_timeout();
        let join = self.send(JOIN_VERSIONS, timeout, |_| request);
        let Some(response) = self.unless_closing(join).await? else {
            self.join_cut = true;
            return Ok(None);
        };
        match ResponseError::try_from_code(response.error_code) {
            None => {}
            Some(ResponseError::MemberIdRequired) => {
                // KIP-394: the coordinator names us first, then we join with that id.
                self.member_id = response.member_id.to_string();
                return Ok(None);
            }
            Some(code) => return Err(self.group_error(code, "joining")),
        }
        self.generation = response.generation_id;
        self.member_id = response.member_id.to_string();
        self.leader = response.leader == response.member_id;
        let protocol_name = response.protocol_name.clone().unwrap_or_default();
        tracing::info!(
            group = %self.group,
            generation = self.generation,
            member = %self.member_id,
            leader = self.leader,
            protocol = %protocol_name,
            "joined"
        );
        let assignments = if self.leader && !response.skip_assignment {
            self.plan(&protocol_name, &response.members).await?
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_group_instance_id(self.instance_id())
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(Some(protocol_name))
            .with_assignments(assignments);
        let sync = self.send(SYNC_VERSIONS, timeout, |_| sync);
        let Some(response) = self.unless_closing(sync).await? else {
            self.join_cut = true;
            return Ok(None);
        };
        if let Some(code) = ResponseError::try_from_code(response.error_code) {
            return Err(self.group_error(code, "syncing"));
        }
        let assignment = protocol::decode_assignment(&response.assignment)?;
        Ok(Some(assignment))
    }

    /// As leader: the assignment of every member.
    async fn plan(
        &mut self,
        protocol_name: &StrBytes,
        members: &[kafka_protocol::messages::join_group_response::JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>> {
        let assignor = self
            .assignors
            .iter()
            .find(|a| a.name() == protocol_name.as_str())
            .cloned()
            .ok_or_else(|| {
                Error::protocol(format_args!(
                    "the coordinator chose assignor `{protocol_name}`, which we did not offer"
                ))
            })?;
        let mut subscriptions = Vec::with_capacity(members.len());
        for m in members {
            subscriptions.push(protocol::decode_subscription(
                m.member_id.as_str(),
                m.group_instance_id.as_ref().map(StrBytes::as_str),
                &m.metadata,
            )?);
        }
        let topics: BTreeSet<String> = subscriptions
            .iter()
            .flat_map(|s| s.topics.iter().cloned())
            .collect();
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        if let Err(e) = self.shared.client.refresh_metadata(&names).await {
            tracing::debug!(error = %e, "metadata for the assignment");
        }
        self.group_topics = self.partition_counts(&topics);
        let counts: BTreeMap<String, i32> = self
            .group_topics
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(t, n)| (t.clone(), *n))
            .collect();
        let plan = assignor.assign(&subscriptions, &counts);
        let mut out = Vec::with_capacity(plan.len());
        for (member, partitions) in plan {
            out.push(
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member))
                    .with_assignment(protocol::encode_assignment(&partitions)?),
            );
        }
        Ok(out)
    }

    fn partition_counts(&self, topics: &BTreeSet<String>) -> BTreeMap<String, i32> {
        self.shared.client.with_metadata(|m| {
            topics
                .iter()
                .map(|t| {
                    let count = m
                        .topics
                        .get(t)
                        .filter(|info| info.error.is_none())
                        .map_or(0, |info| i32::try_from(info.partitions.len()).unwrap_or(0));
                    (t.clone(), count)
                })
                .collect()
        })
    }

    /// Takes the new assignment into use. Returns whether partitions were revoked, in which
    /// case (cooperative) the group must rebalance again to hand them on.
    async fn apply(&mut self, assignment: Vec<(String, Vec<i32>)>) -> bool {
        self.shared.set_member(Some(GroupMember {
            generation: self.generation,
            member_id: self.member_id.clone(),
            instance_id: self.config().group_instance_id.clone(),
        }));
        let new: BTreeSet<TopicPartition> = assignment
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| TopicPartition::new(t, *p)))
            .collect();
        let owned: BTreeSet<TopicPartition> = self.shared.owned_partitions().into_iter().collect();
        let revoked: Vec<TopicPartition> = owned.difference(&new).cloned().collect();
        let added: Vec<TopicPartition> = new.difference(&owned).cloned().collect();
        tracing::info!(
            group = %self.group,
            generation = self.generation,
            assigned = ?added,
            revoked = ?revoked,
            "assignment"
        );
        if !revoked.is_empty() {
            self.revoke_heartbeating(&revoked).await;
        }
        self.shared.assign_partitions(&added);
        self.last_heartbeat_ok = Instant::now();
        !revoked.is_empty() && self.protocol == RebalanceProtocol::Cooperative
    }

    /// Heartbeats until something calls for a rejoin, the membership is lost, or the
    /// consumer closes.
    async fn heartbeat_loop(&mut self) -> Result<Next> {
        let mut closing = self.shared.closing.subscribe();
        let interval = self.config().heartbeat_interval;
        // Zero turns periodic refreshes off, as for the client's own refresh.
        let refresh_every =
            Some(self.shared.client.config().metadata_refresh_interval).filter(|d| !d.is_zero());
        let mut next_refresh = refresh_every.and_then(|d| Instant::now().checked_add(d));
        let shared = self.shared.clone();
        loop {
            let hinted = tokio::select! {
                () = tokio::time::sleep(interval) => false,
                _ = closing.wait_for(|c| *c) => return Ok(Next::Close),
                () = shared.act_now.notified() => true,
            };
            if hinted {
                next_refresh = Some(Instant::now());
            }
            if self.shared.since_last_poll() > self.config().max_poll_interval {
                return Ok(Next::PollTimeout);
            }
            match self.heartbeat().await {
                Ok(()) => self.last_heartbeat_ok = Instant::now(),
                Err(e) => match e.code() {
                    Some(ResponseError::RebalanceInProgress) => return Ok(Next::Rejoin),
                    Some(ResponseError::UnknownMemberId) => {
                        self.member_id.clear();
                        return Ok(Next::Lost);
                    }
                    Some(ResponseError::IllegalGeneration) => return Ok(Next::Lost),
                    Some(ResponseError::FencedInstanceId) => {
                        return Err(self.group_error(ResponseError::FencedInstanceId, "heartbeat"));
                    }
                    _ => {
                        tracing::debug!(group = %self.group, error = %e, "heartbeat failed");
                        if coordinator_trouble(&e) {
                            self.forget_coordinator();
                        }
                        if self.last_heartbeat_ok.elapsed() > self.config().session_timeout {
                            // The coordinator has surely expired us by now.
                            return Ok(Next::Lost);
                        }
                    }
                },
            }
            if self.topics_changed(&mut next_refresh, refresh_every).await {
                return Ok(Next::Rejoin);
            }
        }
    }

    /// Whether the subscription or (as leader) a group topic's partition count changed.
    async fn topics_changed(
        &mut self,
        next_refresh: &mut Option<Instant>,
        every: Option<Duration>,
    ) -> bool {
        let due = matches!(*next_refresh, Some(at) if Instant::now() >= at);
        // A group topic the last assignment found no partitions of (not created yet, or no
        // leader yet) is looked for at every heartbeat, not only at the periodic refresh
        // minutes away: a service started before its topic is created reads it within a
        // heartbeat of its creation. Only the leader assigns, so only it looks.
        let awaited = self.leader && self.group_topics.values().any(|n| *n <= 0);
        if !due && !awaited {
            return false;
        }
        if due {
            *next_refresh = every.and_then(|d| Instant::now().checked_add(d));
            let topics = self.resolve_topics().await;
            if topics != self.subscribed {
                tracing::info!(group = %self.group, ?topics, "subscription changed; rejoining");
                return true;
            }
        }
        if self.leader {
            let known: BTreeSet<String> = self.group_topics.keys().cloned().collect();
            let names: Vec<&str> = known.iter().map(String::as_str).collect();
            let _ = self.shared.client.refresh_metadata(&names).await;
            if self.partition_counts(&known) != self.group_topics {
                tracing::info!(group = %self.group, "partitions changed; rejoining");
                return true;
            }
        }
        false
    }

    async fn heartbeat(&self) -> Result<()> {
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_group_instance_id(self.instance_id());
        let timeout = self
            .shared
            .client
            .socket_timeout()
            .min(self.config().session_timeout);
        let response = self.send(HEARTBEAT_VERSIONS, timeout, |_| request).await?;
        Error::check(response.error_code, || {
            format!("heartbeat of group {}", self.group)
        })
    }

    /// Leaves the group (dynamic members only) after giving up the partitions. On close the
    /// caller no longer polls, and `Consumer::close` has committed already: the partitions
    /// just go.
    async fn leave(&mut self) {
        if std::mem::take(&mut self.join_cut) {
            // The next request on this lane dials a fresh connection.
            self.shared.client.release_lane(self.shared.group_lane);
        }
        let owned = self.shared.owned_partitions();
        if self.shared.is_closing() {
            self.shared.lock().remove(&owned);
        } else if self.generation >= 0 && !owned.is_empty() {
            self.revoke_heartbeating(&owned).await;
        }
        self.send_leave().await;
    }

    /// Tells the coordinator this dynamic member leaves, and forgets the membership.
    async fn send_leave(&mut self) {
        if self.config().group_instance_id.is_some() || self.member_id.is_empty() {
            return;
        }
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_members(vec![
                MemberIdentity::default()
                    .with_member_id(StrBytes::from_string(self.member_id.clone()))
                    .with_group_instance_id(None)
                    .with_reason(Some(StrBytes::from_static_str("the consumer is closing"))),
            ]);
        let timeout = self.shared.client.socket_timeout();
        match self.send(LEAVE_VERSIONS, timeout, |_| request).await {
            Ok(r) => {
                if let Err(e) = Error::check(r.error_code, || "leaving the group".into()) {
                    tracing::debug!(error = %e, "leave refused");
                }
            }
            Err(e) => tracing::debug!(error = %e, "leave failed"),
        }
        self.member_id.clear();
        self.generation = -1;
        self.shared.set_member(None);
    }

    /// The error for a group error code, and the state change it implies.
    fn group_error(&mut self, code: ResponseError, doing: &str) -> Error {
        match code {
            ResponseError::UnknownMemberId => self.member_id.clear(),
            ResponseError::IllegalGeneration => self.generation = -1,
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
                self.forget_coordinator();
            }
            _ => {}
        }
        let context = match code {
            ResponseError::InconsistentGroupProtocol => format!(
                "{doing} group {}: its members share no assignor (a member with eager \
                 assignors cannot join a group of cooperative ones, or the other way round); \
                 ours: {:?}",
                self.group,
                self.config().assignment_strategy
            ),
            ResponseError::FencedInstanceId => format!(
                "{doing} group {}: another consumer uses `group.instance.id` {:?}",
                self.group,
                self.config()
                    .group_instance_id
                    .as_deref()
                    .unwrap_or_default()
            ),
            _ => format!("{doing} group {}", self.group),
        };
        Error::Broker { code, context }
    }

    fn classify(&self, e: &Error) -> Handling {
        match e.code() {
            Some(
                ResponseError::InconsistentGroupProtocol
                | ResponseError::FencedInstanceId
                | ResponseError::GroupAuthorizationFailed
                | ResponseError::GroupMaxSizeReached
                | ResponseError::InvalidSessionTimeout
                | ResponseError::UnsupportedVersion
                | ResponseError::InvalidGroupId,
            ) => Handling::Fatal,
            _ if matches!(
                e,
                Error::Protocol(_) | Error::Config(_) | Error::Unsupported(_)
            ) =>
            {
                Handling::Fatal
            }
            _ => {
                if coordinator_trouble(e) {
                    self.forget_coordinator();
                }
                Handling::Retry
            }
        }
    }
}

enum Handling {
    Retry,
    Fatal,
}

fn coordinator_trouble(e: &Error) -> bool {
    matches!(e, Error::Io { .. } | Error::Timeout(_) | Error::Closed(_))
        || matches!(
            e.code(),
            Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable)
        )
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// `(topic, partitions)` pairs of sorted partitions.
fn group_by_topic(partitions: &[TopicPartition]) -> Vec<(String, Vec<i32>)> {
    let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        out.entry(tp.topic.to_string())
            .or_default()
            .push(tp.partition);
    }
    out.into_iter()
        .map(|(t, mut ps)| {
            ps.sort_unstable();
            (t, ps)
        })
        .collect()
}
