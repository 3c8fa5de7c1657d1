//! Unit tests of the group coordinator, driving the handlers with built requests.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DescribeGroupsRequest,
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::super::server::Cx;
use super::super::{ClusterOptions, EmbeddedCluster, Listener, Shared};
use super::coordinator::coordinator_of;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn cluster(options: &ClusterOptions) -> EmbeddedCluster {
    EmbeddedCluster::new(ClusterOptions {
        nodes: 3,
        ..*options
    })
}

/// A request context on the coordinator of `group`, at `version`.
fn cx<'a>(shared: &'a Arc<Shared>, group: &str, version: i16) -> Cx<'a> {
    Cx {
        cluster: shared,
        node: coordinator_of(group, shared.options.nodes),
        version,
        listener: Listener::Memory,
        client_id: Some("test-client"),
    }
}

fn topic(shared: &Shared, name: &str, partitions: i32) -> Uuid {
    let mut state = shared.state();
    state
        .topics
        .create(name, partitions, shared.options.nodes)
        .id
}

fn join_request(group: &str, member: &str, protocols: &[&str]) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(2_000)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(
            protocols
                .iter()
                .map(|p| {
                    JoinGroupRequestProtocol::default()
                        .with_name(s(p))
                        .with_metadata(Bytes::from_static(b"meta"))
                })
                .collect(),
        )
}

/// Joins a dynamic member through the `MEMBER_ID_REQUIRED` round trip.
async fn join_new(shared: &Arc<Shared>, group: &str, protocols: &[&str]) -> JoinGroupResponse {
    let first = super::join(&cx(shared, group, 9), join_request(group, "", protocols)).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    assert!(first.member_id.starts_with("test-client-"));
    super::join(
        &cx(shared, group, 9),
        join_request(group, &first.member_id, protocols),
    )
    .await
}

fn sync_request(
    group: &str,
    join: &JoinGroupResponse,
    plan: &[(&str, &'static [u8])],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(join.generation_id)
        .with_member_id(join.member_id.clone())
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(join.protocol_name.clone())
        .with_assignments(
            plan.iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::from_static(a))
                })
                .collect(),
        )
}

fn heartbeat(shared: &Arc<Shared>, group: &str, join: &JoinGroupResponse) -> i16 {
    super::heartbeat(
        &cx(shared, group, 4),
        HeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id(join.generation_id)
            .with_member_id(join.member_id.clone()),
    )
    .error_code
}

#[test]
fn find_coordinator_answers_every_key_and_kind() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let v4 = super::find_coordinator(
        &cx(shared, "g", 4),
        FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![s("a"), s("b")]),
    );
    assert_eq!(v4.coordinators.len(), 2);
    assert_eq!(v4.coordinators[0].node_id.0, coordinator_of("a", 3));
    let v3 = super::find_coordinator(
        &cx(shared, "g", 3),
        FindCoordinatorRequest::default().with_key(s("g")),
    );
    assert_eq!(v3.node_id.0, coordinator_of("g", 3));
    assert!(v3.host.starts_with("embedded-"));
}

#[tokio::test]
async fn a_classic_group_forms_generations_and_rebalances_for_a_newcomer() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "classic-basic";
    let a = join_new(shared, group, &["range", "roundrobin"]).await;
    assert_eq!(a.error_code, 0);
    assert_eq!(a.generation_id, 1);
    assert_eq!(a.leader, a.member_id);
    assert_eq!(a.members.len(), 1);
    assert_eq!(a.protocol_name.as_deref(), Some("range"));
    let synced = super::sync(
        &cx(shared, group, 5),
        sync_request(group, &a, &[(a.member_id.as_str(), b"all")]),
    )
    .await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"all");
    assert_eq!(heartbeat(shared, group, &a), 0);

    // A second member prefers roundrobin: both support both; the vote is a tie broken by
    // the earliest member.
    let (b, a_heartbeat) = {
        let newcomer = join_new(shared, group, &["roundrobin", "range"]);
        let rejoin = async {
            // The first member hears of the rebalance at its next heartbeat, and rejoins.
            loop {
                let code = heartbeat(shared, group, &a);
                if code == ResponseError::RebalanceInProgress.code() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            super::join(
                &cx(shared, group, 9),
                join_request(group, &a.member_id, &["range", "roundrobin"]),
            )
            .await
        };
        tokio::join!(newcomer, rejoin)
    };
    assert_eq!(b.error_code, 0);
    assert_eq!(a_heartbeat.error_code, 0);
    assert_eq!(b.generation_id, 2);
    assert_eq!(a_heartbeat.generation_id, 2);
    // Only the leader gets the member list.
    assert_eq!(a_heartbeat.members.len(), 2);
    assert!(b.members.is_empty());
    assert_eq!(b.leader, a.member_id);
    // The old generation is gone.
    assert_eq!(
        heartbeat(shared, group, &a),
        ResponseError::IllegalGeneration.code()
    );

    // The follower waits for the leader's assignment.
    let follower_cx = cx(shared, group, 5);
    let follower = super::sync(&follower_cx, sync_request(group, &b, &[]));
    let leader = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        super::sync(
            &cx(shared, group, 5),
            sync_request(
                group,
                &a_heartbeat,
                &[(a.member_id.as_str(), b"A"), (b.member_id.as_str(), b"B")],
            ),
        )
        .await
    };
    let (from_follower, from_leader) = tokio::join!(follower, leader);
    assert_eq!(&from_follower.assignment[..], b"B");
    assert_eq!(&from_leader.assignment[..], b"A");

    let described = super::describe(
        &cx(shared, group, 5),
        DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]),
    );
    let unknown = super::describe(
        &cx(shared, "nope", 5),
        DescribeGroupsRequest::default().with_groups(vec![GroupId(s("nope"))]),
    );
    let g = &described.groups[0];
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_data.as_str(), "range");
    assert_eq!(g.members.len(), 2);
    assert_eq!(unknown.groups[0].group_state.as_str(), "Dead");

    // The follower leaves: the leader is asked to rejoin.
    let left = super::leave(
        &cx(shared, group, 5),
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_members(vec![
                MemberIdentity::default().with_member_id(b.member_id.clone()),
            ]),
    );
    assert_eq!(left.members[0].error_code, 0);
    assert_eq!(
        heartbeat(shared, group, &a_heartbeat),
        ResponseError::RebalanceInProgress.code()
    );
}

#[tokio::test]
async fn classic_joins_are_checked() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "classic-checks";
    let wrong_node = Cx {
        node: (coordinator_of(group, 3) + 1) % 3,
        ..cx(shared, group, 9)
    };
    let refused = super::join(&wrong_node, join_request(group, "", &["range"])).await;
    assert_eq!(refused.error_code, ResponseError::NotCoordinator.code());
    let short = join_request(group, "", &["range"]).with_session_timeout_ms(10);
    let refused = super::join(&cx(shared, group, 9), short).await;
    assert_eq!(
        refused.error_code,
        ResponseError::InvalidSessionTimeout.code()
    );
    let unknown = super::join(
        &cx(shared, group, 9),
        join_request(group, "ghost", &["range"]),
    )
    .await;
    assert_eq!(unknown.error_code, ResponseError::UnknownMemberId.code());

    let a = join_new(shared, group, &["range"]).await;
    assert_eq!(a.error_code, 0);
    let other = super::join(
        &cx(shared, group, 9),
        join_request(group, "", &["cooperative-sticky"]),
    )
    .await;
    assert_eq!(
        other.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    assert_eq!(
        super::heartbeat(
            &cx(shared, group, 4),
            HeartbeatRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_generation_id(1)
                .with_member_id(s("ghost")),
        )
        .error_code,
        ResponseError::UnknownMemberId.code()
    );
}

#[tokio::test]
async fn a_member_that_stops_heartbeating_is_expired() {
    let c = cluster(&ClusterOptions {
        group_min_session_timeout: Duration::from_millis(10),
        ..ClusterOptions::default()
    });
    let shared = c.shared();
    let group = "classic-expiry";
    let first = super::join(&cx(shared, group, 9), join_request(group, "", &["range"])).await;
    let a = super::join(
        &cx(shared, group, 9),
        join_request(group, &first.member_id, &["range"]).with_session_timeout_ms(100),
    )
    .await;
    assert_eq!(a.error_code, 0);
    let synced = super::sync(&cx(shared, group, 5), sync_request(group, &a, &[])).await;
    assert_eq!(synced.error_code, 0);
    // No heartbeat: the timer task expires the member, with no request touching the group.
    tokio::time::sleep(Duration::from_millis(400)).await;
    {
        let mut state = shared.state();
        let g = state
            .groups
            .classic_mut(group)
            .map(|g| (g.member_ids(), g.generation()));
        assert_eq!(g, Some((Vec::new(), 2)));
    }
    assert_eq!(
        heartbeat(shared, group, &a),
        ResponseError::UnknownMemberId.code()
    );
}

#[tokio::test]
async fn a_static_member_rejoining_takes_its_place_without_a_rebalance() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "classic-static";
    let join_static = |member: &str| {
        join_request(group, member, &["range"]).with_group_instance_id(Some(s("instance-1")))
    };
    let a = super::join(&cx(shared, group, 9), join_static("")).await;
    assert_eq!(
        a.error_code, 0,
        "static members need no member id round trip"
    );
    assert!(a.member_id.starts_with("instance-1-"));
    let synced = super::sync(
        &cx(shared, group, 5),
        sync_request(group, &a, &[(a.member_id.as_str(), b"mine")])
            .with_group_instance_id(Some(s("instance-1"))),
    )
    .await;
    assert_eq!(&synced.assignment[..], b"mine");
    let again = super::join(&cx(shared, group, 9), join_static("")).await;
    assert_eq!(again.error_code, 0);
    assert_eq!(again.generation_id, a.generation_id, "no new generation");
    assert!(
        again.skip_assignment,
        "the returning leader keeps the assignment"
    );
    let synced = super::sync(
        &cx(shared, group, 5),
        sync_request(group, &again, &[]).with_group_instance_id(Some(s("instance-1"))),
    )
    .await;
    assert_eq!(&synced.assignment[..], b"mine");
    // The replaced consumer is fenced.
    let fenced = super::heartbeat(
        &cx(shared, group, 4),
        HeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id(a.generation_id)
            .with_member_id(a.member_id.clone())
            .with_group_instance_id(Some(s("instance-1"))),
    );
    assert_eq!(fenced.error_code, ResponseError::FencedInstanceId.code());
}

fn commit(
    group: &str,
    generation: i32,
    member: &str,
    topic: &str,
    offset: i64,
    metadata: &str,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1)
                        .with_committed_metadata(Some(s(metadata))),
                ]),
        ])
}

fn fetch_offset(shared: &Arc<Shared>, group: &str, topic: &str) -> (i64, String) {
    let response = super::offset_fetch(
        &cx(shared, group, 7),
        OffsetFetchRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_indexes(vec![0]),
            ]))
            .with_require_stable(true),
    );
    let p = &response.topics[0].partitions[0];
    (
        p.committed_offset,
        p.metadata.as_deref().unwrap_or_default().to_owned(),
    )
}

#[test]
fn offsets_commit_without_membership_and_refuse_strangers() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "offsets";
    topic(shared, "t", 1);
    assert_eq!(fetch_offset(shared, group, "t"), (-1, String::new()));
    let ok = super::offset_commit(&cx(shared, group, 9), commit(group, -1, "", "t", 42, "m"));
    assert_eq!(ok.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetch_offset(shared, group, "t"), (42, "m".to_owned()));
    assert_eq!(shared.state().groups.committed(group, "t", 0), Some(42));
    let stranger = super::offset_commit(
        &cx(shared, group, 9),
        commit(group, 5, "nobody", "t", 1, ""),
    );
    assert_eq!(
        stranger.topics[0].partitions[0].error_code,
        ResponseError::UnknownMemberId.code()
    );
    let missing = super::offset_commit(&cx(shared, group, 9), commit(group, -1, "", "nope", 1, ""));
    assert_eq!(
        missing.topics[0].partitions[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let big = "x".repeat(5000);
    let large = super::offset_commit(&cx(shared, group, 9), commit(group, -1, "", "t", 1, &big));
    assert_eq!(
        large.topics[0].partitions[0].error_code,
        ResponseError::OffsetMetadataTooLarge.code()
    );
    let unknown_group =
        super::offset_commit(&cx(shared, "fresh", 9), commit("fresh", 3, "m", "t", 1, ""));
    assert_eq!(
        unknown_group.topics[0].partitions[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
}

fn beat(group: &str, member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_topic_partitions((epoch == 0).then(Vec::new))
}

fn owned(topic: Uuid, partitions: &[i32]) -> Vec<TopicPartitions> {
    vec![
        TopicPartitions::default()
            .with_topic_id(topic)
            .with_partitions(partitions.to_vec()),
    ]
}

fn assigned(response: &ConsumerGroupHeartbeatResponse) -> Option<Vec<i32>> {
    response.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

#[test]
fn kip848_members_reconcile_through_revocation() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "kip848";
    let t = topic(shared, "k", 4);
    let hb = |r| super::consumer_heartbeat(&cx(shared, group, 1), r);
    let subscribe = |r: ConsumerGroupHeartbeatRequest| {
        r.with_subscribed_topic_names(Some(vec![TopicName(s("k"))]))
    };
    let a = hb(subscribe(beat(group, "a", 0)));
    assert_eq!(a.error_code, 0, "{:?}", a.error_message);
    assert_eq!(a.member_epoch, 1);
    assert_eq!(assigned(&a), Some(vec![0, 1, 2, 3]));
    let b = hb(subscribe(beat(group, "b", 0)));
    assert_eq!(b.member_epoch, 2);
    assert_eq!(assigned(&b), Some(vec![]), "nothing is free yet");
    // a is asked to give two up, and stays at its epoch until it has.
    let a = hb(beat(group, "a", 1));
    assert_eq!(a.member_epoch, 1);
    let kept = assigned(&a).unwrap_or_default();
    assert_eq!(kept.len(), 2);
    let still = hb(beat(group, "a", 1).with_topic_partitions(Some(owned(t, &[0, 1, 2, 3]))));
    assert_eq!(still.member_epoch, 1);
    let b_waits = hb(beat(group, "b", 2));
    assert_eq!(assigned(&b_waits), None);
    let a = hb(beat(group, "a", 1).with_topic_partitions(Some(owned(t, &kept))));
    assert_eq!(a.member_epoch, 2);
    let b = hb(beat(group, "b", 2).with_topic_partitions(Some(owned(t, &[]))));
    let got = assigned(&b).unwrap_or_default();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|p| !kept.contains(p)));

    // Epoch checks.
    let fenced = hb(beat(group, "a", 7));
    assert_eq!(fenced.error_code, ResponseError::FencedMemberEpoch.code());
    let unknown = hb(beat(group, "zed", 3));
    assert_eq!(unknown.error_code, ResponseError::UnknownMemberId.code());
    let bad = hb(subscribe(beat(group, "c", 0)).with_server_assignor(Some(s("nope"))));
    assert_eq!(bad.error_code, ResponseError::UnsupportedAssignor.code());

    // Commits as a member need its current epoch.
    let stale = super::offset_commit(&cx(shared, group, 9), commit(group, 1, "b", "k", 1, ""));
    assert_eq!(
        stale.topics[0].partitions[0].error_code,
        ResponseError::StaleMemberEpoch.code()
    );
    let fine = super::offset_commit(&cx(shared, group, 9), commit(group, 2, "b", "k", 1, ""));
    assert_eq!(fine.topics[0].partitions[0].error_code, 0);

    // a leaves; b gets everything once it heartbeats.
    let left = hb(beat(group, "a", -1));
    assert_eq!(left.member_epoch, -1);
    let b = hb(beat(group, "b", 2).with_topic_partitions(Some(owned(t, &got))));
    assert_eq!(assigned(&b).map(|p| p.len()), Some(4));
}

#[test]
fn kip848_static_members_and_patterns() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "kip848-static";
    topic(shared, "pat-a", 2);
    let hb = |r| super::consumer_heartbeat(&cx(shared, group, 1), r);
    let join = |member: &str| {
        beat(group, member, 0)
            .with_instance_id(Some(s("i1")))
            .with_subscribed_topic_regex(Some(s("pat-.*")))
    };
    let first = hb(join("m1"));
    assert_eq!(assigned(&first).map(|p| p.len()), Some(2));
    let second = hb(join("m2"));
    assert_eq!(
        second.error_code,
        ResponseError::UnreleasedInstanceId.code()
    );
    // A topic the pattern covers joins the assignment.
    topic(shared, "pat-b", 3);
    let grown = hb(beat(group, "m1", first.member_epoch).with_instance_id(Some(s("i1"))));
    assert_eq!(assigned(&grown).map(|p| p.len()), Some(5));
    let left = hb(beat(group, "m1", -2).with_instance_id(Some(s("i1"))));
    assert_eq!(left.member_epoch, -2);
    let back = hb(join("m3"));
    assert_eq!(back.error_code, 0);
    assert_eq!(back.member_epoch, grown.member_epoch);
    assert_eq!(assigned(&back).map(|p| p.len()), Some(5));
}

#[tokio::test]
async fn edge_answers_match_kafka() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "edges";
    topic(shared, "e", 2);
    // A partition the topic does not have.
    let mut request = commit(group, -1, "", "e", 0, "");
    request.topics[0].partitions[0].partition_index = 9;
    let refused = super::offset_commit(&cx(shared, group, 9), request);
    assert_eq!(
        refused.topics[0].partitions[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    // SyncGroup v5 without protocol type and name.
    let bare = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s("m"));
    let refused = super::sync(&cx(shared, group, 5), bare).await;
    assert_eq!(
        refused.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    // Leaving a group that does not exist: each member is unknown.
    let left = super::leave(
        &cx(shared, "no-group", 5),
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s("no-group")))
            .with_members(vec![MemberIdentity::default().with_member_id(s("m"))]),
    );
    assert_eq!(left.error_code, 0);
    assert_eq!(
        left.members[0].error_code,
        ResponseError::UnknownMemberId.code()
    );
    // A KIP-848 heartbeat naming an instance id the group does not know.
    let hb = |r| super::consumer_heartbeat(&cx(shared, group, 1), r);
    let joined = hb(beat(group, "m", 0).with_subscribed_topic_names(Some(vec![TopicName(s("e"))])));
    assert_eq!(joined.error_code, 0);
    let unknown = hb(beat(group, "m", joined.member_epoch).with_instance_id(Some(s("other"))));
    assert_eq!(unknown.error_code, ResponseError::UnknownMemberId.code());
    // Joining again with epoch 0 carries on.
    let again = hb(beat(group, "m", 0).with_subscribed_topic_names(Some(vec![TopicName(s("e"))])));
    assert_eq!(again.member_epoch, joined.member_epoch);
    assert_eq!(assigned(&again), assigned(&joined));
}

#[tokio::test]
async fn transactional_commits_are_checked_against_the_generation() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    let group = "txn-commits";
    let a = join_new(shared, group, &["range"]).await;
    let committer = |generation, member_id| super::Committer {
        generation,
        member_id,
        instance_id: None,
        transactional: true,
        version: 3,
    };
    let mut state = shared.state();
    // Completing the rebalance does not stop a transactional commit.
    assert_eq!(
        state
            .groups
            .validate_commit(group, &committer(a.generation_id, &a.member_id)),
        Ok(())
    );
    assert_eq!(
        state
            .groups
            .validate_commit(group, &committer(a.generation_id + 7, &a.member_id)),
        Err(ResponseError::IllegalGeneration)
    );
    // Without member fields (TxnOffsetCommit before v3) a non-empty group takes it.
    assert_eq!(
        state.groups.validate_commit(group, &committer(-1, "")),
        Ok(())
    );
    assert_eq!(
        state.groups.validate_commit("unknown", &committer(3, "m")),
        Err(ResponseError::IllegalGeneration)
    );
}

/// `message` through the codec at `version`, as a client of that version sends or reads it.
fn through<M: Encodable + Decodable>(message: &M, version: i16) -> M {
    let mut buf = BytesMut::new();
    if let Err(e) = message.encode(&mut buf, version) {
        panic!("encoding at v{version}: {e}");
    }
    let mut bytes = buf.freeze();
    let decoded = M::decode(&mut bytes, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
    assert!(bytes.is_empty(), "v{version}: bytes left over");
    decoded
}

/// Every advertised version of the classic group APIs, as older clients speak them (librdkafka
/// 2.0 in kcat: `FindCoordinator` v2, `JoinGroup` v5, `SyncGroup` and `Heartbeat` v3,
/// `LeaveGroup` v1):
/// a member finds its coordinator, joins, syncs, heartbeats and leaves, each request and each
/// answer through the codec at its version.
#[tokio::test]
async fn the_classic_group_apis_answer_every_advertised_version() {
    let c = cluster(&ClusterOptions::default());
    let shared = c.shared();
    for join_v in 0..=9_i16 {
        let group = format!("old-client-{join_v}");
        let (find_v, sync_v, beat_v, leave_v) =
            (join_v.min(4), join_v.min(5), join_v.min(4), join_v.min(5));

        let find = if find_v >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![s(&group)])
        } else {
            FindCoordinatorRequest::default().with_key(s(&group))
        };
        let found = super::find_coordinator(&cx(shared, &group, find_v), through(&find, find_v));
        let found = through(&found, find_v);
        let (code, node) = if find_v >= 4 {
            (
                found.coordinators[0].error_code,
                found.coordinators[0].node_id.0,
            )
        } else {
            (found.error_code, found.node_id.0)
        };
        assert_eq!((code, node), (0, coordinator_of(&group, 3)), "v{find_v}");

        let mut join = join_request(&group, "", &["range"]);
        if join_v == 0 {
            join.rebalance_timeout_ms = -1;
        }
        let mut joined = super::join(&cx(shared, &group, join_v), through(&join, join_v)).await;
        if join_v >= 4 {
            assert_eq!(joined.error_code, ResponseError::MemberIdRequired.code());
            join.member_id = joined.member_id.clone();
            joined = super::join(&cx(shared, &group, join_v), through(&join, join_v)).await;
        }
        let joined = through(&joined, join_v);
        assert_eq!(joined.error_code, 0, "JoinGroup v{join_v}");
        assert_eq!(joined.leader, joined.member_id, "v{join_v}");
        assert_eq!(joined.members.len(), 1, "v{join_v}");
        assert_eq!(joined.protocol_name.as_deref(), Some("range"), "v{join_v}");

        let mut sync = sync_request(&group, &joined, &[(joined.member_id.as_str(), b"plan")]);
        if sync_v < 5 {
            sync.protocol_type = None;
            sync.protocol_name = None;
        }
        let synced = super::sync(&cx(shared, &group, sync_v), through(&sync, sync_v)).await;
        let synced = through(&synced, sync_v);
        assert_eq!(synced.error_code, 0, "SyncGroup v{sync_v}");
        assert_eq!(&synced.assignment[..], b"plan", "v{sync_v}");

        let beat = HeartbeatRequest::default()
            .with_group_id(GroupId(s(&group)))
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone());
        let beaten = super::heartbeat(&cx(shared, &group, beat_v), through(&beat, beat_v));
        assert_eq!(
            through(&beaten, beat_v).error_code,
            0,
            "Heartbeat v{beat_v}"
        );

        let leave = if leave_v >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(GroupId(s(&group)))
                .with_members(vec![
                    MemberIdentity::default().with_member_id(joined.member_id.clone()),
                ])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(GroupId(s(&group)))
                .with_member_id(joined.member_id.clone())
        };
        for want in [0, ResponseError::UnknownMemberId.code()] {
            let left = super::leave(&cx(shared, &group, leave_v), through(&leave, leave_v));
            let left = through(&left, leave_v);
            let code = if leave_v >= 3 {
                assert_eq!(left.error_code, 0);
                left.members[0].error_code
            } else {
                assert!(left.members.is_empty());
                left.error_code
            };
            assert_eq!(code, want, "LeaveGroup v{leave_v}");
        }
    }
}
