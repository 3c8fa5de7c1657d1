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

impl Groups {
    /// Commits `offset` (the next offset to read) for `group` on `topic`/`partition`, as an
    /// OffsetCommit or a committed transaction does. The group need not have members.
    pub(crate) fn commit(
        &mut self,
        _group: &str,
        _topic: &str,
        _partition: i32,
        _offset: i64,
        _leader_epoch: i32,
        _metadata: Option<String>,
    ) {
    }

    /// The committed offset of `group` on `topic`/`partition`, if any.
    pub(crate) fn committed(&self, _group: &str, _topic: &str, _partition: i32) -> Option<i64> {
        None
    }
}

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
