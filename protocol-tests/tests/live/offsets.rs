//! Committed offsets: a group that nobody joins keeps what is committed into it.

use protocol_tests::{client, create_topic, unique_topic};
use ruststream_kafka::client::{
    CoordinatorKind, GroupMember, OffsetToCommit, Offsets, ResponseError,
};

fn offset(topic: &str, partition: i32, offset: i64, metadata: Option<&str>) -> OffsetToCommit {
    OffsetToCommit {
        topic: topic.to_owned(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: metadata.map(str::to_owned),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_committed_without_membership_are_fetched_back() {
    let client = client().await;
    let topic = unique_topic("offsets-commit");
    create_topic(&client, &topic, 3).await;
    let group = unique_topic("group");
    let offsets = Offsets::new(client.clone(), &group);
    let commit = [
        offset(&topic, 0, 42, Some("first")),
        offset(&topic, 1, 7, None),
    ];
    if let Err(e) = offsets.commit(None, &commit).await {
        panic!("commit: {e}");
    }
    let asked = [
        (topic.as_str(), 0),
        (topic.as_str(), 1),
        (topic.as_str(), 2),
    ];
    let fetched = match offsets.fetch(&asked, true).await {
        Ok(f) => f,
        Err(e) => panic!("fetch: {e}"),
    };
    let at = |p: i32| {
        fetched
            .iter()
            .find(|c| c.partition == p)
            .map(|c| (c.offset, c.metadata.clone()))
    };
    assert_eq!(at(0), Some((42, Some("first".to_owned()))));
    assert_eq!(at(1).map(|(o, _)| o), Some(7));
    assert_eq!(
        at(2).map(|(o, _)| o),
        Some(-1),
        "nothing committed for partition 2"
    );

    if let Err(e) = offsets.commit(None, &[offset(&topic, 0, 43, None)]).await {
        panic!("second commit: {e}");
    }
    let again = match offsets.fetch(&asked[..1], true).await {
        Ok(f) => f,
        Err(e) => panic!("fetch: {e}"),
    };
    assert_eq!(
        again.first().map(|c| c.offset),
        Some(43),
        "a later commit replaces the offset"
    );

    let stranger = GroupMember {
        generation: 5,
        member_id: "nobody".to_owned(),
        instance_id: None,
    };
    let refused = offsets.commit(Some(&stranger), &commit).await;
    assert!(
        matches!(
            refused
                .as_ref()
                .err()
                .and_then(ruststream_kafka::client::Error::code),
            Some(ResponseError::UnknownMemberId | ResponseError::IllegalGeneration)
        ),
        "a member the group does not know cannot commit: {refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinators_are_found_for_groups_and_transactional_ids() {
    let client = client().await;
    for kind in [CoordinatorKind::Group, CoordinatorKind::Transaction] {
        let node = match client.coordinator(kind, &unique_topic("coordinated")).await {
            Ok(n) => n,
            Err(e) => panic!("{kind:?}: {e}"),
        };
        assert!(
            client.with_metadata(|m| m.brokers.contains_key(&node)),
            "{kind:?} coordinator {node} is a known broker"
        );
    }
}
