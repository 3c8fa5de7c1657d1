//! The group APIs' handlers: checks common to every group request, then the group's own
//! logic in [`super::classic`], [`super::consumer`] and [`super::offsets`].
#![allow(
    clippy::needless_pass_by_value,
    reason = "dispatch hands every handler its request by value"
)]

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::super::Shared;
use super::super::server::Cx;
use super::super::state::State;
use super::classic::{ClassicGroup, JoinArgs, Reply};
use super::consumer::{self, ConsumerGroup};
use super::fit;
use super::{
    Committer, Group, TIMER_NAP, arm_timer, coordinator, limits, next_deadline, offsets, tick,
};

/// `DescribeGroups`' `authorized_operations` of a group without an authorizer: `READ`,
/// `DELETE`, `DESCRIBE`, `DESCRIBE_CONFIGS` and `ALTER_CONFIGS`, as Kafka 4.1 reports them.
const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);
/// What Kafka reports as the client host of members; connections here have no peer address
/// worth naming.
const CLIENT_HOST: &str = "/127.0.0.1";

/// The common checks of a group request: a group id, sent to its coordinator.
fn check_group(cx: &Cx<'_>, group: &str) -> Result<(), ResponseError> {
    if group.is_empty() {
        return Err(ResponseError::InvalidGroupId);
    }
    if !coordinator::is_coordinator(cx, group) {
        return Err(ResponseError::NotCoordinator);
    }
    Ok(())
}

fn join_refused(code: ResponseError, member_id: &StrBytes) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code.code())
        .with_generation_id(-1)
        .with_member_id(member_id.clone())
}

/// The classic group `group` for a `JoinGroup`, created (or taken over from an empty KIP-848
/// group) when a new member may create it.
fn classic_for_join<'s>(
    state: &'s mut State,
    group: &str,
    new_member: bool,
) -> Result<&'s mut ClassicGroup, ResponseError> {
    let groups = &mut state.groups.by_id;
    match groups.get(group) {
        None if !new_member => return Err(ResponseError::UnknownMemberId),
        Some(Group::Consumer(g)) if !g.is_vacant() => {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        None | Some(Group::Consumer(_)) => {
            groups.insert(
                group.to_owned(),
                Group::Classic(Box::new(ClassicGroup::new(group))),
            );
        }
        Some(Group::Classic(_)) => {}
    }
    state
        .groups
        .classic_mut(group)
        .ok_or(ResponseError::UnknownMemberId)
}

/// `JoinGroup` v0-9.
pub(crate) async fn join(cx: &Cx<'_>, request: JoinGroupRequest) -> JoinGroupResponse {
    let answer = join_any(cx, request).await;
    fit::join(answer, cx.version)
}

async fn join_any(cx: &Cx<'_>, request: JoinGroupRequest) -> JoinGroupResponse {
    let group = request.group_id.to_string();
    if let Err(code) = check_group(cx, &group) {
        return join_refused(code, &request.member_id);
    }
    let limits = limits(cx.cluster);
    let session = Duration::from_millis(u64::try_from(request.session_timeout_ms).unwrap_or(0));
    if session < limits.min_session || session > limits.max_session {
        return join_refused(ResponseError::InvalidSessionTimeout, &request.member_id);
    }
    let args = JoinArgs::from_request(
        &request,
        cx.version,
        cx.client_id.unwrap_or_default(),
        CLIENT_HOST,
    );
    let reply = {
        let mut state = cx.cluster.state();
        let now = Instant::now();
        tick(&mut state, &group, now, limits);
        let reply = match classic_for_join(&mut state, &group, args.member_id.is_empty()) {
            Ok(g) => g.join(now, limits, args),
            Err(code) => Reply::Now(join_refused(code, &request.member_id)),
        };
        arm_timer(cx.cluster, &mut state, &group);
        reply
    };
    let gone = join_refused(ResponseError::UnknownMemberId, &request.member_id);
    settle(cx, &group, reply, ClassicGroup::take_join, gone).await
}

/// Tells waiting requests the group changed, then answers now or once the ticket's answer
/// is ready.
async fn settle<T>(
    cx: &Cx<'_>,
    group: &str,
    reply: Reply<T>,
    take: fn(&mut ClassicGroup, u64) -> Option<T>,
    gone: T,
) -> T {
    cx.cluster.changed.notify_waiters();
    match reply {
        Reply::Now(response) => response,
        Reply::Wait(ticket) => wait_for(cx, group, ticket, take, gone).await,
    }
}

/// Drops an answer nobody will pick up when its request goes away before it is ready.
struct Abandoned<'a, T> {
    cluster: &'a Arc<Shared>,
    group: &'a str,
    ticket: u64,
    take: fn(&mut ClassicGroup, u64) -> Option<T>,
}

impl<T> Drop for Abandoned<'_, T> {
    fn drop(&mut self) {
        let mut state = self.cluster.state();
        if let Some(g) = state.groups.classic_mut(self.group) {
            (self.take)(g, self.ticket);
        }
    }
}

/// Waits until the classic group files the answer under `ticket`, running the group's
/// timers meanwhile; `gone` answers if the group disappears.
async fn wait_for<T>(
    cx: &Cx<'_>,
    group: &str,
    ticket: u64,
    take: fn(&mut ClassicGroup, u64) -> Option<T>,
    gone: T,
) -> T {
    let _abandoned = Abandoned {
        cluster: cx.cluster,
        group,
        ticket,
        take,
    };
    let limits = limits(cx.cluster);
    loop {
        let notified = cx.cluster.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (changed, next) = {
            let mut state = cx.cluster.state();
            let now = Instant::now();
            let changed = tick(&mut state, group, now, limits);
            let Some(g) = state.groups.classic_mut(group) else {
                return gone;
            };
            if let Some(answer) = take(g, ticket) {
                drop(state);
                if changed {
                    cx.cluster.changed.notify_waiters();
                }
                return answer;
            }
            (changed, next_deadline(&state, group))
        };
        if changed {
            cx.cluster.changed.notify_waiters();
        }
        let nap = Instant::now() + TIMER_NAP;
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(next.map_or(nap, |at| at.min(nap))) => {}
        }
    }
}

/// `SyncGroup` v0-5.
pub(crate) async fn sync(cx: &Cx<'_>, request: SyncGroupRequest) -> SyncGroupResponse {
    if cx.version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none()) {
        // From v5 both are mandatory; Kafka refuses before the coordinator sees the request.
        return SyncGroupResponse::default()
            .with_error_code(ResponseError::InconsistentGroupProtocol.code());
    }
    let group = request.group_id.to_string();
    if let Err(code) = check_group(cx, &group) {
        return SyncGroupResponse::default().with_error_code(code.code());
    }
    let limits = limits(cx.cluster);
    let reply = {
        let mut state = cx.cluster.state();
        let now = Instant::now();
        tick(&mut state, &group, now, limits);
        let reply = match state.groups.classic_mut(&group) {
            Some(g) => g.sync(now, &request),
            None => Reply::Now(
                SyncGroupResponse::default().with_error_code(ResponseError::UnknownMemberId.code()),
            ),
        };
        arm_timer(cx.cluster, &mut state, &group);
        reply
    };
    let gone = SyncGroupResponse::default().with_error_code(ResponseError::UnknownMemberId.code());
    settle(cx, &group, reply, ClassicGroup::take_sync, gone).await
}

/// Heartbeat v0-4.
pub(crate) fn heartbeat(cx: &Cx<'_>, request: HeartbeatRequest) -> HeartbeatResponse {
    let group = request.group_id.to_string();
    let outcome = check_group(cx, &group).and_then(|()| {
        let limits = limits(cx.cluster);
        let mut state = cx.cluster.state();
        let now = Instant::now();
        let changed = tick(&mut state, &group, now, limits);
        let outcome = match state.groups.classic_mut(&group) {
            Some(g) => g.heartbeat(now, &request),
            None => Err(ResponseError::UnknownMemberId),
        };
        arm_timer(cx.cluster, &mut state, &group);
        drop(state);
        if changed {
            cx.cluster.changed.notify_waiters();
        }
        outcome
    });
    HeartbeatResponse::default().with_error_code(outcome.err().map_or(0, |c| c.code()))
}

/// `LeaveGroup` v0-5: one member (v0-2) or a batch of members (v3+).
pub(crate) fn leave(cx: &Cx<'_>, mut request: LeaveGroupRequest) -> LeaveGroupResponse {
    if cx.version < 3 {
        request.members = vec![MemberIdentity::default().with_member_id(request.member_id.clone())];
    }
    let answer = leave_members(cx, request);
    fit::leave(answer, cx.version)
}

fn leave_members(cx: &Cx<'_>, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let group = request.group_id.to_string();
    if let Err(code) = check_group(cx, &group) {
        return LeaveGroupResponse::default().with_error_code(code.code());
    }
    let limits = limits(cx.cluster);
    let members: Option<Vec<MemberResponse>> = {
        let mut state = cx.cluster.state();
        let now = Instant::now();
        tick(&mut state, &group, now, limits);
        let members = state
            .groups
            .classic_mut(&group)
            .map(|g| g.leave(now, limits, &request));
        arm_timer(cx.cluster, &mut state, &group);
        members
    };
    cx.cluster.changed.notify_waiters();
    // A group that does not exist knows none of the members.
    let members = members.unwrap_or_else(|| {
        request
            .members
            .iter()
            .map(|m| {
                MemberResponse::default()
                    .with_member_id(m.member_id.clone())
                    .with_group_instance_id(m.group_instance_id.clone())
                    .with_error_code(ResponseError::UnknownMemberId.code())
            })
            .collect()
    });
    LeaveGroupResponse::default().with_members(members)
}

/// `DescribeGroups` v0-5. A group that does not exist, or is not a classic group, is `Dead`
/// (v6 would say `GROUP_ID_NOT_FOUND`).
pub(crate) fn describe(cx: &Cx<'_>, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let limits = limits(cx.cluster);
    let operations = if request.include_authorized_operations {
        GROUP_OPERATIONS
    } else {
        i32::MIN
    };
    let mut described = Vec::with_capacity(request.groups.len());
    for id in &request.groups {
        let group = id.as_str();
        let entry = if let Err(code) = check_group(cx, group) {
            DescribedGroup::default()
                .with_group_id(id.clone())
                .with_error_code(code.code())
        } else {
            {
                let mut state = cx.cluster.state();
                tick(&mut state, group, Instant::now(), limits);
                match state.groups.classic_mut(group) {
                    Some(g) => g.describe(),
                    None => DescribedGroup::default()
                        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
                        .with_group_state(StrBytes::from_static_str("Dead")),
                }
            }
        };
        described.push(entry.with_authorized_operations(operations));
    }
    DescribeGroupsResponse::default().with_groups(described)
}

/// `ListGroups` v0-5: the groups this node coordinates, filtered by state (v4+) and type
/// (v5+), both case-insensitive as in Kafka.
pub(crate) fn list(cx: &Cx<'_>, request: ListGroupsRequest) -> ListGroupsResponse {
    let matches = |filter: &[StrBytes], value: &str| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| f.as_str().eq_ignore_ascii_case(value))
    };
    let listed = cx.cluster.state().groups.list();
    let groups = listed
        .into_iter()
        .filter(|g| coordinator::is_coordinator(cx, &g.id))
        .filter(|g| matches(&request.states_filter, g.state))
        .filter(|g| matches(&request.types_filter, g.kind))
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(g.id)))
                .with_protocol_type(StrBytes::from_string(g.protocol_type))
                .with_group_state(StrBytes::from_static_str(g.state))
                .with_group_type(StrBytes::from_static_str(g.kind))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

/// `ConsumerGroupHeartbeat` v0-1 (KIP-848).
pub(crate) fn consumer_heartbeat(
    cx: &Cx<'_>,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let group = request.group_id.to_string();
    if !group.is_empty() && !coordinator::is_coordinator(cx, &group) {
        return consumer::refusal(
            ResponseError::NotCoordinator,
            format!("This is not the coordinator of group {group}."),
        );
    }
    if let Err((code, message)) = consumer::validate(&request, cx.version) {
        return consumer::refusal(code, message);
    }
    let limits = limits(cx.cluster);
    let response = {
        let mut state = cx.cluster.state();
        let now = Instant::now();
        tick(&mut state, &group, now, limits);
        let State { groups, topics, .. } = &mut *state;
        let joining = request.member_epoch == 0;
        let classic = match groups.by_id.get(&group) {
            Some(Group::Classic(g)) => Some(g.is_vacant()),
            _ => None,
        };
        let missing = !groups.by_id.contains_key(&group);
        let response = if classic == Some(false) {
            consumer::refusal(
                ResponseError::GroupIdNotFound,
                format!("Group {group} is not a consumer group."),
            )
        } else {
            {
                if joining && (missing || classic == Some(true)) {
                    // A new group, or one that only holds offsets, becomes a consumer group.
                    groups
                        .by_id
                        .insert(group.clone(), Group::Consumer(ConsumerGroup::default()));
                }
                match groups.by_id.get_mut(&group) {
                    Some(Group::Consumer(g)) => {
                        let beat = consumer::Beat {
                            group: &group,
                            now,
                            version: cx.version,
                            topics,
                            interval: cx.cluster.options.consumer_heartbeat_interval,
                        };
                        g.heartbeat(&beat, &request)
                    }
                    // Kafka words it differently for a leave.
                    _ if request.member_epoch < 0 => consumer::refusal(
                        ResponseError::GroupIdNotFound,
                        format!("Group {group} not found."),
                    ),
                    _ => consumer::refusal(
                        ResponseError::GroupIdNotFound,
                        format!("Consumer group {group} not found."),
                    ),
                }
            }
        };
        arm_timer(cx.cluster, &mut state, &group);
        response
    };
    cx.cluster.changed.notify_waiters();
    response
}

/// `OffsetCommit` v2-9.
pub(crate) fn offset_commit(cx: &Cx<'_>, request: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = request.group_id.to_string();
    let mut state = cx.cluster.state();
    let group_error = if let Err(code) = check_group(cx, &group) {
        Some(code)
    } else {
        tick(&mut state, &group, Instant::now(), limits(cx.cluster));
        let committer = Committer {
            generation: request.generation_id_or_member_epoch,
            member_id: request.member_id.as_str(),
            instance_id: request.group_instance_id.as_deref(),
            transactional: false,
            version: cx.version,
        };
        state.groups.validate_commit(&group, &committer).err()
    };
    offsets::commit(&mut state, &request, group_error)
}

/// `OffsetFetch` v1-7.
pub(crate) fn offset_fetch(cx: &Cx<'_>, request: OffsetFetchRequest) -> OffsetFetchResponse {
    let group = request.group_id.to_string();
    if let Err(code) = check_group(cx, &group) {
        return offsets::fetch_error(&request, code);
    }
    let state = cx.cluster.state();
    offsets::fetch(&state, &request, cx.version)
}
