//! Consumer groups: coordinators, the classic protocol, KIP-848, committed offsets.

use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse,
};

use super::server::Cx;

/// Every group the cluster knows, with its committed offsets.
#[derive(Debug, Default)]
pub(crate) struct Groups {}

pub(crate) fn find_coordinator(
    _cx: &Cx<'_>,
    _request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    FindCoordinatorResponse::default()
}

pub(crate) async fn join(_cx: &Cx<'_>, _request: JoinGroupRequest) -> JoinGroupResponse {
    JoinGroupResponse::default()
}

pub(crate) async fn sync(_cx: &Cx<'_>, _request: SyncGroupRequest) -> SyncGroupResponse {
    SyncGroupResponse::default()
}

pub(crate) fn heartbeat(_cx: &Cx<'_>, _request: HeartbeatRequest) -> HeartbeatResponse {
    HeartbeatResponse::default()
}

pub(crate) fn leave(_cx: &Cx<'_>, _request: LeaveGroupRequest) -> LeaveGroupResponse {
    LeaveGroupResponse::default()
}

pub(crate) fn describe(_cx: &Cx<'_>, _request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    DescribeGroupsResponse::default()
}

pub(crate) fn consumer_heartbeat(
    _cx: &Cx<'_>,
    _request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
}

pub(crate) fn offset_commit(_cx: &Cx<'_>, _request: OffsetCommitRequest) -> OffsetCommitResponse {
    OffsetCommitResponse::default()
}

pub(crate) fn offset_fetch(_cx: &Cx<'_>, _request: OffsetFetchRequest) -> OffsetFetchResponse {
    OffsetFetchResponse::default()
}
