//! Positions, seeking, `start_at` and `StartOffset` against the cluster (reference 4.F).

use crate::live;

use std::time::Duration;

use ruststream::{ConnectedBroker, Seekable, Seeker, StartAt, Subscriber};
use ruststream_kafka::{
    ConnectedKafkaBroker, KafkaError, KafkaPosition, KafkaSubscriber, StartOffset,
};

use live::{open, tracked as source};

/// Publishes `payloads` to `topic` in order.
async fn fill(connected: &ConnectedKafkaBroker, topic: &str, payloads: &[&str]) {
    let publisher = live::plain_publisher(connected);
    for p in payloads {
        live::send(&publisher, topic, p.as_bytes()).await;
    }
}

/// Reads, acks and returns `n` payloads.
async fn read(subscriber: &mut KafkaSubscriber, n: usize) -> Vec<String> {
    let mut stream = subscriber.stream();
    live::payloads(&mut stream, n, true)
        .await
        .into_iter()
        .map(|p| String::from_utf8(p).expect("utf-8"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_offset_applies_only_without_a_committed_offset() {
    live::logs();
    let topic = live::topic("start-offset", 1).await;
    let connected = live::connect(live::broker()).await;
    fill(&connected, &topic, &["old-0", "old-1"]).await;

    let mut latest = open(
        &connected,
        source(&topic, &live::unique("latest")).start(StartOffset::Latest),
    )
    .await;
    let mut committed = open(
        &connected,
        // Committed sets nothing: librdkafka's `latest` applies.
        source(&topic, &live::unique("committed")).start(StartOffset::Committed),
    )
    .await;
    let mut earliest = open(&connected, source(&topic, &live::unique("earliest"))).await;
    fill(&connected, &topic, &["new"]).await;
    assert_eq!(read(&mut latest, 1).await, ["new"]);
    assert_eq!(read(&mut committed, 1).await, ["new"]);
    assert_eq!(read(&mut earliest, 3).await, ["old-0", "old-1", "new"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_at_replays_ahead_of_what_the_group_committed() {
    live::logs();
    let topic = live::topic("start-at", 1).await;
    let group = live::unique("start-at");
    let connected = live::connect(live::broker()).await;
    fill(&connected, &topic, &["r0", "r1", "r2"]).await;
    {
        let mut first = open(&connected, source(&topic, &group)).await;
        assert_eq!(read(&mut first, 3).await, ["r0", "r1", "r2"]);
    }
    let mut from_start = connected
        .subscribe_with(StartAt::new(
            source(&topic, &group),
            KafkaPosition::earliest(),
        ))
        .await
        .expect("start_at(earliest)");
    assert_eq!(read(&mut from_start, 3).await, ["r0", "r1", "r2"]);
    drop(from_start);
    let mut from_one = connected
        .subscribe_with(StartAt::new(
            source(&topic, &group),
            KafkaPosition::offset(0, 1),
        ))
        .await
        .expect("start_at(offset(0, 1))");
    assert_eq!(read(&mut from_one, 2).await, ["r1", "r2"]);
    drop(from_one);
    let mut plain = open(&connected, source(&topic, &group)).await;
    fill(&connected, &topic, &["after"]).await;
    assert_eq!(read(&mut plain, 1).await, ["after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_position_no_partition_carries_fails_the_subscription() {
    live::logs();
    let topic = live::topic("start-at-bad", 1).await;
    let connected = live::connect(live::broker()).await;
    let err = connected
        .subscribe_with(StartAt::new(
            source(&topic, &live::unique("bad")),
            KafkaPosition::topic_offset(&topic, 7, 0),
        ))
        .await
        .expect_err("partition 7 does not exist");
    let text = err.to_string();
    assert!(matches!(err, KafkaError::InvalidOptions(_)), "{text}");
    assert!(text.contains("partition: 7"), "{text}");
    assert!(text.contains(&topic), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamp_past_the_log_starts_at_the_end() {
    live::logs();
    let topic = live::topic("start-future", 1).await;
    let connected = live::connect(live::broker()).await;
    fill(&connected, &topic, &["before"]).await;
    let mut subscriber = connected
        .subscribe_with(StartAt::new(
            source(&topic, &live::unique("future")),
            KafkaPosition::timestamp(live::now_millis() + 3_600_000),
        ))
        .await
        .expect("start_at(timestamp in an hour)");
    fill(&connected, &topic, &["after"]).await;
    assert_eq!(read(&mut subscriber, 1).await, ["after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_position_reaches_every_assigned_partition() {
    live::logs();
    let topic = live::topic("vocabulary", 2).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for (p, payload) in [(0, "a0"), (0, "a1"), (1, "b0"), (1, "b1")] {
        live::send_to(&publisher, &topic, p, payload.as_bytes()).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let middle = live::now_millis();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for (p, payload) in [(0, "a2"), (1, "b2")] {
        live::send_to(&publisher, &topic, p, payload.as_bytes()).await;
    }
    let mut subscriber = open(&connected, source(&topic, &live::unique("vocabulary"))).await;
    let seeker = subscriber.seeker();
    let mut stream = subscriber.stream();
    let sorted = |mut v: Vec<Vec<u8>>| {
        v.sort();
        v.into_iter()
            .map(|p| String::from_utf8(p).expect("utf-8"))
            .collect::<Vec<_>>()
    };
    let everything = ["a0", "a1", "a2", "b0", "b1", "b2"];
    assert_eq!(
        sorted(live::payloads(&mut stream, 6, true).await),
        everything
    );

    seeker
        .seek(KafkaPosition::earliest())
        .await
        .expect("earliest");
    assert_eq!(
        sorted(live::payloads(&mut stream, 6, true).await),
        everything
    );

    seeker
        .seek(KafkaPosition::timestamp(middle))
        .await
        .expect("timestamp");
    assert_eq!(
        sorted(live::payloads(&mut stream, 2, true).await),
        ["a2", "b2"]
    );

    seeker
        .seek(KafkaPosition::offset(1, 1))
        .await
        .expect("offset");
    assert_eq!(
        sorted(live::payloads(&mut stream, 2, true).await),
        ["b1", "b2"]
    );

    seeker
        .seek(KafkaPosition::earliest())
        .await
        .expect("earliest");
    seeker.seek(KafkaPosition::latest()).await.expect("latest");
    live::nothing_within(&mut stream, Duration::from_millis(500)).await;
    live::send_to(&publisher, &topic, 0, b"a3").await;
    assert_eq!(sorted(live::payloads(&mut stream, 1, true).await), ["a3"]);

    let err = seeker
        .seek(KafkaPosition::topic_offset(&topic, 7, 0))
        .await
        .expect_err("partition 7 is not assigned");
    let text = err.to_string();
    assert!(matches!(err, KafkaError::InvalidOptions(_)), "{text}");
    assert!(text.contains("partition: 7"), "{text}");
    assert!(text.contains(&format!("{topic}[0]")), "{text}");
    assert!(text.contains(&format!("{topic}[1]")), "{text}");
    // The refused seek moved nothing.
    live::nothing_within(&mut stream, Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeking_back_rewinds_what_tracked_commits_may_claim() {
    live::logs();
    let topic = live::topic("seek-watermark", 1).await;
    let group = live::unique("seek-watermark");
    let connected = live::connect(live::broker()).await;
    fill(&connected, &topic, &["r0", "r1", "r2"]).await;
    {
        let mut subscriber = open(&connected, source(&topic, &group)).await;
        let seeker = subscriber.seeker();
        let mut stream = subscriber.stream();
        assert_eq!(live::payloads(&mut stream, 2, true).await.len(), 2);
        seeker
            .seek(KafkaPosition::offset(0, 0))
            .await
            .expect("seek back");
        // Replayed, never settled.
        let r0 = live::next(&mut stream).await;
        let r1 = live::next(&mut stream).await;
        assert_eq!(
            (live::text(&r0), live::text(&r1)),
            ("r0".into(), "r1".into())
        );
    }
    let mut restarted = open(&connected, source(&topic, &group)).await;
    assert_eq!(read(&mut restarted, 1).await, ["r0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_moves_only_this_members_partitions() {
    live::logs();
    let topic = live::topic("seek-member", 2).await;
    let group = live::unique("seek-member");
    let connected = live::connect(live::broker()).await;
    let mut a = open(&connected, source(&topic, &group)).await;
    let mut b = open(&connected, source(&topic, &group)).await;
    let publisher = live::plain_publisher(&connected);
    live::send_to(&publisher, &topic, 0, b"p0").await;
    live::send_to(&publisher, &topic, 1, b"p1").await;
    let seek_a = a.seeker();
    let mut sa = a.stream();
    let mut sb = b.stream();
    let first_a = live::text(&live::next(&mut sa).await);
    let first_b = live::text(&live::next(&mut sb).await);
    let mut firsts = vec![first_a.clone(), first_b];
    firsts.sort();
    assert_eq!(firsts, ["p0", "p1"], "each member holds one partition");
    seek_a.seek(KafkaPosition::earliest()).await.expect("seek");
    assert_eq!(live::text(&live::next(&mut sa).await), first_a);
    live::nothing_within(&mut sb, Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_partitions_keeps_its_seek_for_the_first_assignment() {
    live::logs();
    let topic = live::topic("seek-held", 1).await;
    let group = live::unique("seek-held");
    let connected = live::connect(live::broker()).await;
    fill(&connected, &topic, &["r0", "r1", "r2", "r3"]).await;
    // The assignors give the one partition to the member whose id sorts first, and a classic
    // member id starts with the client id: the holder keeps it when the second member joins.
    // (Were the waiting member given it, the eager rebalance of the holder's leave would take
    // it back and hand it over again from the commit, seek forgotten, as in librdkafka.)
    let mut holder = open(
        &connected,
        source(&topic, &group).config("client.id", "a-holder"),
    )
    .await;
    assert_eq!(read(&mut holder, 1).await, ["r0"]);
    let mut waiting = open(
        &connected,
        source(&topic, &group).config("client.id", "z-waiting"),
    )
    .await;
    let seeker = waiting.seeker();
    seeker
        .seek(KafkaPosition::offset(0, 2))
        .await
        .expect("a member with nothing assigned keeps the position");
    drop(holder);
    assert_eq!(read(&mut waiting, 2).await, ["r2", "r3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_after_shutdown_is_closed() {
    live::logs();
    let topic = live::topic("seek-closed", 1).await;
    let connected = live::connect(live::broker()).await;
    let subscriber = open(&connected, source(&topic, &live::unique("closed"))).await;
    let seeker = subscriber.seeker();
    connected.shutdown().await.expect("shutdown");
    let err = seeker
        .seek(KafkaPosition::earliest())
        .await
        .expect_err("closed");
    assert!(
        matches!(err, KafkaError::Closed { topic: ref named } if *named == topic),
        "{err}"
    );
}
