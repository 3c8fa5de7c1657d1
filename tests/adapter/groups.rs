//! Consumer groups and rebalances against the cluster (reference 4.G): one delivery per
//! group, hand-over at the committed offset, cooperative rebalances, and the strategy the group
//! settles on.

use crate::live;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use ruststream::{IncomingMessage, Subscribe, Subscriber, SubscriptionSource};
use ruststream_kafka::client::Admin;
use ruststream_kafka::{Assignment, KafkaError, KafkaSubscriber};

use live::{open, tracked as source};

/// Reads everything `subscribers` get until `total` deliveries arrived, acking each; returns
/// the payloads per subscriber.
async fn drain(subscribers: &mut [KafkaSubscriber], total: usize) -> Vec<Vec<String>> {
    let count = subscribers.len();
    let mut streams: Vec<_> = subscribers
        .iter_mut()
        .enumerate()
        .map(|(i, s)| s.stream().map(move |item| (i, item)).boxed())
        .collect();
    let mut merged = futures::stream::select_all(streams.drain(..));
    let mut out = vec![Vec::new(); count];
    let mut seen = 0;
    while seen < total {
        let (i, item) = tokio::time::timeout(live::WAIT, merged.next())
            .await
            .expect("deliveries in time")
            .expect("streams never end");
        let message = item.expect("no stream error");
        out[i].push(live::text(&message));
        message.ack().await.expect("ack");
        seen += 1;
    }
    // Nothing more for anyone.
    if let Ok(Some((i, item))) = tokio::time::timeout(live::QUIET, merged.next()).await {
        panic!(
            "subscriber {i} got one more delivery: {:?}",
            item.map(|m| live::text(&m))
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_gets_one_copy_shared_by_its_members() {
    live::logs();
    let topic = live::topic("groups-copies", 2).await;
    let connected = live::connect(live::broker()).await;
    let shared = live::unique("shared");
    let mut members = vec![
        open(&connected, source(&topic, &shared)).await,
        open(&connected, source(&topic, &shared)).await,
    ];
    let mut other = vec![open(&connected, source(&topic, &live::unique("other"))).await];
    let publisher = live::plain_publisher(&connected);
    let sent = live::numbered("r", 10);
    for (i, payload) in sent.iter().enumerate() {
        live::send_to(
            &publisher,
            &topic,
            i32::try_from(i % 2).expect("small"),
            payload,
        )
        .await;
    }
    let per_member = drain(&mut members, 10).await;
    assert!(
        per_member.iter().all(|got| got.len() == 5),
        "each member reads its own partition: {per_member:?}"
    );
    let mut all: Vec<String> = per_member.concat();
    all.sort();
    let mut expected: Vec<String> = sent
        .iter()
        .map(|p| String::from_utf8(p.clone()).expect("utf-8"))
        .collect();
    expected.sort();
    assert_eq!(all, expected, "the group saw every record once");
    let mut copy = drain(&mut other, 10).await.concat();
    copy.sort();
    assert_eq!(copy, expected, "the other group has its own copy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_names_of_one_service_compete_in_the_default_group() {
    live::logs();
    let topic = live::topic("groups-default", 2).await;
    let connected = live::connect(live::broker().config("auto.offset.reset", "earliest")).await;
    let mut members = vec![
        connected.subscribe(&topic).await.expect("first"),
        connected.subscribe(&topic).await.expect("second"),
    ];
    let publisher = live::plain_publisher(&connected);
    for i in 0..6 {
        live::send_to(&publisher, &topic, i % 2, format!("d{i}").as_bytes()).await;
    }
    let per_member = drain(&mut members, 6).await;
    assert_eq!(per_member.iter().map(Vec::len).sum::<usize>(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaving_member_hands_its_partition_over_at_the_committed_offset() {
    live::logs();
    let topic = live::topic("groups-handover", 1).await;
    let group = live::unique("handover");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for p in ["r0", "r1", "r2"] {
        live::send(&publisher, &topic, p.as_bytes()).await;
    }
    let mut first = open(&connected, source(&topic, &group)).await;
    {
        let mut stream = first.stream();
        let r0 = live::next(&mut stream).await;
        let r1 = live::next(&mut stream).await;
        assert_eq!(live::text(&r1), "r1");
        r0.ack().await.expect("ack");
        drop(r1);
    }
    let mut second = open(&connected, source(&topic, &group)).await;
    drop(first);
    let mut stream = second.stream();
    let payloads = live::payloads(&mut stream, 2, true).await;
    assert_eq!(payloads, [b"r1".to_vec(), b"r2".to_vec()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_rebalance_leaves_kept_partitions_alone() {
    live::logs();
    let topic = live::topic("groups-coop", 2).await;
    let group = live::unique("coop");
    let connected = live::connect(live::broker()).await;
    let coop = |g: &str| source(&topic, g).assignment(Assignment::CooperativeSticky);
    let mut a = open(&connected, coop(&group)).await;
    let publisher = live::plain_publisher(&connected);
    live::send_to(&publisher, &topic, 0, b"p0").await;
    live::send_to(&publisher, &topic, 1, b"p1").await;
    let mut sa = a.stream();
    // Held unsettled: under an eager rebalance the kept partition would be fetched again
    // from its committed offset, and these would come back.
    let held = [live::next(&mut sa).await, live::next(&mut sa).await];
    let mut b = open(&connected, coop(&group)).await;
    let mut sb = b.stream();
    let moved = live::next(&mut sb).await;
    let kept: Vec<String> = held
        .iter()
        .filter(|m| m.partition() != moved.partition())
        .map(live::text)
        .collect();
    assert_eq!(kept.len(), 1, "b took one of a's two partitions");
    live::nothing_within(&mut sa, Duration::from_secs(1)).await;
    let description = Admin::new(live::admin_client().await)
        .describe_group(&group)
        .await
        .expect("describe");
    assert_eq!(description.protocol, "cooperative-sticky");
    assert_eq!(description.members.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_settles_on_the_strategy_the_descriptor_names() {
    live::logs();
    let topic = live::topic("groups-strategy", 2).await;
    let connected = live::connect(live::broker()).await;
    let admin = Admin::new(live::admin_client().await);
    let mut strategies = BTreeMap::new();
    for (assignment, name) in [
        (Assignment::Range, "range"),
        (Assignment::RoundRobin, "roundrobin"),
        (Assignment::CooperativeSticky, "cooperative-sticky"),
    ] {
        let group = live::unique(name);
        let _member = open(&connected, source(&topic, &group).assignment(assignment)).await;
        let described = admin.describe_group(&group).await.expect("describe");
        strategies.insert(name, described.protocol);
    }
    for (name, settled) in strategies {
        assert_eq!(name, settled);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixing_eager_and_cooperative_members_fails_the_later_subscription() {
    live::logs();
    let topic = live::topic("groups-mix", 1).await;
    let group = live::unique("mix");
    let connected = live::connect(live::broker()).await;
    let _eager = open(
        &connected,
        source(&topic, &group).assignment(Assignment::Range),
    )
    .await;
    let err = source(&topic, &group)
        .assignment(Assignment::CooperativeSticky)
        .subscribe(&connected)
        .await
        .expect_err("no protocol in common");
    let text = err.to_string();
    assert!(matches!(err, KafkaError::Subscribe(_)), "{text}");
    assert!(text.contains("protocol"), "{text}");
    assert!(text.contains(&group), "{text}");
}
