//! Opening subscriptions against the cluster (reference 4.B): what is refused and how, when
//! `subscribe` returns, members that are not read yet, partition readers, topic sets and
//! patterns, topics that appear later, re-entrant streams and native batches.

use crate::live;

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use futures::StreamExt;
use ruststream::{BatchSubscriber, IncomingMessage, Subscribe, Subscriber, SubscriptionSource};
use ruststream_kafka::client::Admin;
use ruststream_kafka::{
    Commit, ConnectedKafkaBroker, KafkaBroker, KafkaError, KafkaPartitions, KafkaSubscriber,
    KafkaTopic, KafkaTopics, StartOffset,
};

use live::{open, tracked as source};

/// A broker with no default group.
async fn groupless() -> ConnectedKafkaBroker {
    live::connect(KafkaBroker::new([live::url()])).await
}

fn invalid(result: Result<KafkaSubscriber, KafkaError>, what: &str) -> String {
    match result {
        Err(KafkaError::InvalidOptions(m)) => m,
        Err(other) => panic!("{what}: expected InvalidOptions, got {other}"),
        Ok(_) => panic!("{what}: expected InvalidOptions, the subscription opened"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_refuse_what_cannot_be_opened() {
    live::logs();
    let connected = groupless().await;
    let m = invalid(connected.subscribe("orders").await, "bare name, no group");
    for part in ["no consumer group", "default_group", "consumer group"] {
        assert!(m.contains(part), "{m}");
    }
    invalid(
        KafkaTopic::new("").subscribe(&connected).await,
        "empty topic",
    );
    let m = invalid(
        KafkaTopic::new("^orders.*").subscribe(&connected).await,
        "pattern topic",
    );
    assert!(m.contains("KafkaTopics::pattern"), "{m}");

    invalid(
        KafkaTopics::new(Vec::<String>::new())
            .group("g")
            .subscribe(&connected)
            .await,
        "empty set",
    );
    invalid(
        KafkaTopics::new(["a", ""])
            .group("g")
            .subscribe(&connected)
            .await,
        "empty entry",
    );
    invalid(
        KafkaTopics::new(["^a"])
            .group("g")
            .subscribe(&connected)
            .await,
        "literal with ^",
    );
    let m = invalid(
        KafkaTopics::pattern("orders.*")
            .group("g")
            .subscribe(&connected)
            .await,
        "unanchored pattern",
    );
    assert!(m.contains('^'), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_readers_names_and_mode_clashes_are_refused() {
    live::logs();
    let connected = groupless().await;
    invalid(
        KafkaPartitions::new("t", Vec::<i32>::new())
            .start(StartOffset::Earliest)
            .subscribe(&connected)
            .await,
        "no partitions",
    );
    invalid(
        KafkaPartitions::new("t", [0])
            .group("g")
            .commit(Commit::Transactional("eos".into()))
            .subscribe(&connected)
            .await,
        "transactional partitions",
    );
    invalid(
        KafkaPartitions::new("t", [0])
            .start(StartOffset::Earliest)
            .commit(Commit::Tracked)
            .subscribe(&connected)
            .await,
        "tracked without a group",
    );
    invalid(
        KafkaPartitions::new("t", [0]).subscribe(&connected).await,
        "committed start without a group",
    );

    for bad in ["conformance refused topic", "ordérs", &"x".repeat(250)] {
        match KafkaTopic::new(bad).group("g").subscribe(&connected).await {
            Err(KafkaError::Subscribe(_)) => {}
            Err(other) => panic!("{bad:?}: expected Subscribe, got {other}"),
            Ok(_) => panic!("{bad:?} opened"),
        }
    }

    let m = invalid(
        KafkaTopic::new("t")
            .group("g")
            .commit(Commit::Tracked)
            .config("enable.auto.commit", "true")
            .subscribe(&connected)
            .await,
        "mode clash",
    );
    assert!(
        m.contains("enable.auto.commit") && m.contains("Commit::Tracked"),
        "{m}"
    );
    let m = invalid(
        KafkaTopic::new("t")
            .group("g")
            .commit(Commit::Transactional("p".into()))
            .config("Enable.Auto.Offset.Store", "false")
            .subscribe(&connected)
            .await,
        "mode clash, transactional",
    );
    assert!(m.contains("Commit::Transactional"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_commit_accepts_the_passthrough_the_other_modes_own() {
    live::logs();
    let topic = live::topic("passthrough", 1).await;
    let connected = live::connect(live::broker()).await;
    let mut subscriber = KafkaTopic::new(&topic)
        .group(live::unique("passthrough"))
        .config("enable.auto.offset.store", "true")
        .subscribe(&connected)
        .await
        .expect("Auto accepts it");
    live::send(&live::plain_publisher(&connected), &topic, b"x").await;
    let mut stream = subscriber.stream();
    assert_eq!(live::text(&live::next(&mut stream).await), "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latest_group_reads_everything_published_after_subscribe_returns() {
    live::logs();
    let topic = live::topic("latest-start", 3).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    live::send(&publisher, &topic, b"before").await;
    let mut subscriber = open(
        &connected,
        source(&topic, &live::unique("latest")).start(StartOffset::Latest),
    )
    .await;
    for p in 0..3 {
        live::send_to(&publisher, &topic, p, format!("after-{p}").as_bytes()).await;
    }
    let mut stream = subscriber.stream();
    let mut got: Vec<String> = Vec::new();
    for _ in 0..3 {
        got.push(live::text(&live::next(&mut stream).await));
    }
    got.sort();
    assert_eq!(got, ["after-0", "after-1", "after-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_that_does_not_come_in_time_fails_the_subscription() {
    live::logs();
    fails_within_a_millisecond(&live::topic("assign-timeout", 1).await).await;
}

/// A topic nobody created yet: the subscription still waits for its group's first
/// assignment (an empty one), as the reference does, so a 1 ms bound fails it as surely as on
/// a topic that exists. It failed only when the topic already existed, which made a startup
/// test pass or fail by which test created the topic first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_that_does_not_come_in_time_fails_the_subscription_of_a_missing_topic() {
    live::logs();
    fails_within_a_millisecond(&live::unique("assign-timeout-missing")).await;
}

/// A group subscription to `topic` under an `assignment_timeout` of 1 ms fails, saying why.
async fn fails_within_a_millisecond(topic: &str) {
    let connected =
        live::connect(KafkaBroker::new([live::url()]).assignment_timeout(Duration::from_millis(1)))
            .await;
    let err = source(topic, &live::unique("timeout"))
        .subscribe(&connected)
        .await
        .expect_err("1 ms is too short");
    let text = err.to_string();
    assert!(matches!(err, KafkaError::Subscribe(_)), "{text}");
    assert!(text.contains("was not assigned its partitions"), "{text}");
}

/// A group subscription to a topic that does not exist yet opens once the group assigned it
/// nothing, and reads the topic once it is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_to_a_missing_topic_opens_and_reads_it_once_created() {
    live::logs();
    let topic = live::unique("missing-then-created");
    let connected = live::connect(live::broker()).await;
    let mut subscriber = open(
        &connected,
        source(&topic, &live::unique("missing")).start(StartOffset::Earliest),
    )
    .await;
    live::create_topic(&topic, 1).await;
    live::send(&live::plain_publisher(&connected), &topic, b"first").await;
    let mut stream = Box::pin(subscriber.stream());
    assert_eq!(live::text(&live::next(&mut stream).await), "first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_opened_back_to_back_both_stay_in_the_group() {
    live::logs();
    let topic = live::topic("back-to-back", 2).await;
    let group = live::unique("back-to-back");
    let connected = live::connect(live::broker()).await;
    let latest = |g: &str| source(&topic, g).start(StartOffset::Latest);
    let mut a = open(&connected, latest(&group)).await;
    let mut b = open(&connected, latest(&group)).await;
    // Neither stream is polled for a while: both must stay members.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let publisher = live::plain_publisher(&connected);
    for i in 0..6 {
        live::send_to(&publisher, &topic, i % 2, format!("r{i}").as_bytes()).await;
    }
    let mut merged = futures::stream::select(a.stream(), b.stream());
    let mut got: Vec<String> = live::payloads(&mut merged, 6, true)
        .await
        .into_iter()
        .map(|p| String::from_utf8(p).expect("utf-8"))
        .collect();
    got.sort();
    assert_eq!(got, ["r0", "r1", "r2", "r3", "r4", "r5"]);
    live::nothing_within(&mut merged, live::QUIET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_dropped_before_its_stream_started_leaves_the_group() {
    live::logs();
    let topic = live::topic("drop-leaves", 1).await;
    let group = live::unique("drop-leaves");
    let connected = live::connect(live::broker()).await;
    // A long session: a member that did not leave would hold the next join for 30 s.
    let slow = |g: &str| {
        source(&topic, g)
            .config("session.timeout.ms", "30000")
            .config("heartbeat.interval.ms", "1000")
    };
    drop(open(&connected, slow(&group)).await);
    let started = Instant::now();
    let _next = open(&connected, slow(&group)).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the next member waited {:?}",
        started.elapsed()
    );
    let described = Admin::new(live::admin_client().await)
        .describe_group(&group)
        .await
        .expect("describe");
    assert_eq!(described.members.len(), 1, "{described:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_partitions_read_without_joining() {
    live::logs();
    let topic = live::topic("partitions", 3).await;
    let group = live::unique("partitions");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for p in 0..3 {
        live::send_to(&publisher, &topic, p, format!("old-{p}").as_bytes()).await;
    }
    let mut latest = KafkaPartitions::new(&topic, [1])
        .start(StartOffset::Latest)
        .subscribe(&connected)
        .await
        .expect("latest reader");
    let mut earliest = KafkaPartitions::new(&topic, [0, 2])
        .start(StartOffset::Earliest)
        .subscribe(&connected)
        .await
        .expect("earliest reader");
    // A group member on the same topic takes nothing away from the readers.
    let mut member = open(&connected, source(&topic, &live::unique("member"))).await;
    for p in 0..3 {
        live::send_to(&publisher, &topic, p, format!("new-{p}").as_bytes()).await;
    }
    let mut s = latest.stream();
    assert_eq!(live::text(&live::next(&mut s).await), "new-1");
    live::nothing_within(&mut s, Duration::from_millis(500)).await;
    let mut s = earliest.stream();
    let mut got: Vec<String> = live::payloads(&mut s, 4, true)
        .await
        .into_iter()
        .map(|p| String::from_utf8(p).expect("utf-8"))
        .collect();
    got.sort();
    assert_eq!(got, ["new-0", "new-2", "old-0", "old-2"]);
    let mut s = member.stream();
    assert_eq!(live::payloads(&mut s, 6, true).await.len(), 6);

    // With a group: commits into it and resumes from it, never joining it.
    {
        let mut reader = KafkaPartitions::new(&topic, [0])
            .group(&group)
            .start(StartOffset::Earliest)
            .commit(Commit::Tracked)
            .subscribe(&connected)
            .await
            .expect("grouped reader");
        let mut s = reader.stream();
        let first = live::next(&mut s).await;
        assert_eq!(live::text(&first), "old-0");
        first.ack().await.expect("ack");
    }
    let described = Admin::new(live::admin_client().await)
        .describe_group(&group)
        .await
        .expect("describe");
    assert!(described.members.is_empty(), "{described:?}");
    let mut resumed = KafkaPartitions::new(&topic, [0])
        .group(&group)
        .subscribe(&connected)
        .await
        .expect("resumes from the group");
    let mut s = resumed.stream();
    assert_eq!(live::text(&live::next(&mut s).await), "new-0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_sets_and_patterns_read_every_topic_they_name() {
    live::logs();
    let prefix = live::unique("set");
    let (orders, refunds) = (format!("{prefix}.orders"), format!("{prefix}.refunds"));
    live::create_topic(&orders, 1).await;
    live::create_topic(&refunds, 1).await;
    let connected = live::connect(live::broker()).await;
    let mut list = KafkaTopics::new([orders.clone(), refunds.clone()])
        .group(live::unique("list"))
        .start(StartOffset::Earliest)
        .subscribe(&connected)
        .await
        .expect("list");
    assert_eq!(list.topic(), format!("{orders},{refunds}"));
    let mut pattern = KafkaTopics::pattern(format!("^{}\\..*", regex_escape(&prefix)))
        .group(live::unique("pattern"))
        .start(StartOffset::Earliest)
        .config("topic.metadata.refresh.interval.ms", "1000")
        .subscribe(&connected)
        .await
        .expect("pattern");
    let publisher = live::plain_publisher(&connected);
    live::send(&publisher, &orders, b"o").await;
    live::send(&publisher, &refunds, b"r").await;
    let topics_of = |mut v: Vec<(String, String)>| {
        v.sort();
        v
    };
    let read = async |s: &mut KafkaSubscriber, n: usize| {
        let mut stream = s.stream();
        let mut out = Vec::new();
        for _ in 0..n {
            let m = live::next(&mut stream).await;
            out.push((m.topic().to_owned(), live::text(&m)));
            m.ack().await.expect("ack");
        }
        topics_of(out)
    };
    let expected = vec![
        (orders.clone(), "o".to_owned()),
        (refunds.clone(), "r".to_owned()),
    ];
    assert_eq!(read(&mut list, 2).await, expected);
    assert_eq!(read(&mut pattern, 2).await, expected);

    // A topic created later that matches joins the pattern at the next metadata refresh.
    let late = format!("{prefix}.late");
    live::create_topic(&late, 1).await;
    live::send(&publisher, &late, b"l").await;
    let mut stream = pattern.stream();
    let m = live::next(&mut stream).await;
    assert_eq!((m.topic(), live::text(&m).as_str()), (late.as_str(), "l"));
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_that_appears_later_is_read_without_stream_errors() {
    live::logs();
    let topic = live::unique("late-topic");
    let connected = live::connect(live::broker()).await;
    let started = Instant::now();
    let mut subscriber = live::quick(
        KafkaTopic::new(&topic)
            .group(live::unique("late"))
            .start(StartOffset::Earliest)
            .config("topic.metadata.refresh.interval.ms", "1000"),
    )
    .subscribe(&connected)
    .await
    .expect("a missing topic is not an error");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "subscribe waited"
    );
    let mut stream = subscriber.stream();
    live::nothing_within(&mut stream, Duration::from_secs(2)).await;
    live::create_topic(&topic, 1).await;
    live::send(&live::plain_publisher(&connected), &topic, b"late").await;
    assert_eq!(live::text(&live::next(&mut stream).await), "late");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_the_stream_keeps_buffered_deliveries() {
    live::logs();
    let topic = live::topic("reenter", 1).await;
    let connected = live::connect(live::broker()).await;
    let mut subscriber = open(&connected, source(&topic, &live::unique("reenter"))).await;
    let publisher = live::plain_publisher(&connected);
    // A poll cancelled while nothing is there, then a fresh stream.
    {
        let mut stream = subscriber.stream();
        assert!(
            tokio::time::timeout(Duration::from_millis(200), stream.next())
                .await
                .is_err()
        );
    }
    live::send(&publisher, &topic, b"a").await;
    {
        let mut stream = subscriber.stream();
        assert_eq!(live::text(&live::next(&mut stream).await), "a");
    }
    // Two fetched together, read through two streams: the second waits in the subscription.
    live::send(&publisher, &topic, b"b").await;
    live::send(&publisher, &topic, b"c").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut got = Vec::new();
    for _ in 0..2 {
        let mut stream = subscriber.stream();
        got.push(live::text(&live::next(&mut stream).await));
    }
    assert_eq!(got, ["b", "c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_bounded_ordered_and_settle_per_element() {
    live::logs();
    let topic = live::topic("batches", 1).await;
    let group = live::unique("batches");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for i in 0..5 {
        live::send(&publisher, &topic, format!("b{i}").as_bytes()).await;
    }
    {
        let mut subscriber = open(&connected, source(&topic, &group)).await;
        let mut batches = subscriber.batches(NonZeroUsize::new(2).expect("2"));
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        while seen.len() < 5 {
            let batch = tokio::time::timeout(live::WAIT, batches.next())
                .await
                .expect("a batch in time")
                .expect("never ends")
                .expect("no error");
            assert!(!batch.is_empty() && batch.len() <= 2, "{}", batch.len());
            sizes.push(batch.len());
            for m in batch {
                seen.push(live::text(&m));
                // b1 stays unsettled; everything else is acked.
                if live::text(&m) != "b1" {
                    m.ack().await.expect("ack");
                }
            }
        }
        assert_eq!(seen, ["b0", "b1", "b2", "b3", "b4"]);
    }
    let mut restarted = open(&connected, source(&topic, &group)).await;
    let mut stream = restarted.stream();
    assert_eq!(live::text(&live::next(&mut stream).await), "b1");
}
