//! Consumer groups on the classic protocol: members coming and going while records flow,
//! cooperative rebalances, static membership, pattern subscriptions, mixed assignors.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use protocol_tests::{client, create_topic, unique_topic};
use ruststream_kafka::client::{
    Client, ClientConfig, Consumer, ConsumerConfig, ConsumerEvent, ConsumerHandle, LateTopicStart,
    OffsetReset, ProducerRecord, ResponseError, Subscription, TopicPartition,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{bytes, producer, send_all};

/// What one member saw.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// `(partition, offset, value)` of every record handed out.
    pub records: Vec<(i32, i64, String)>,
    /// Assignment changes, in order: `+p`, `-p` (revoked), `!p` (lost).
    pub changes: Vec<String>,
    /// The partitions owned now.
    pub owned: BTreeSet<TopicPartition>,
    /// Errors the consumer reported.
    pub errors: Vec<String>,
}

/// A member running in its own task.
pub(crate) struct Member {
    pub seen: Arc<Mutex<Seen>>,
    /// The member's consumer, to act on while it polls.
    pub handle: ConsumerHandle,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Member {
    /// Starts a consumer of `subscription` in `config`'s group.
    pub(crate) fn start(
        client: &Client,
        config: ConsumerConfig,
        subscription: Subscription,
    ) -> Self {
        let mut consumer = match Consumer::new(client.clone(), config) {
            Ok(c) => c,
            Err(e) => panic!("consumer: {e}"),
        };
        if let Err(e) = consumer.subscribe(subscription) {
            panic!("subscribe: {e}");
        }
        let handle = consumer.handle();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (stop, mut stopped) = watch::channel(false);
        let log = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = consumer.poll() => {
                        let event = match event {
                            Ok(e) => e,
                            Err(e) => panic!("poll: {e}"),
                        };
                        let mut seen = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        match event {
                            ConsumerEvent::Records(r) => {
                                for rec in r.records {
                                    let value = rec.value.map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default();
                                    seen.records.push((r.partition, rec.offset, value));
                                }
                            }
                            ConsumerEvent::Assigned(ps) => {
                                for tp in ps {
                                    seen.changes.push(format!("+{}", tp.partition));
                                    seen.owned.insert(tp);
                                }
                            }
                            ConsumerEvent::Revoked(r) => {
                                for tp in &r.partitions {
                                    seen.changes.push(format!("-{}", tp.partition));
                                    seen.owned.remove(tp);
                                }
                            }
                            ConsumerEvent::Lost(ps) => {
                                for tp in ps {
                                    seen.changes.push(format!("!{}", tp.partition));
                                    seen.owned.remove(&tp);
                                }
                            }
                            ConsumerEvent::Error(e) => seen.errors.push(e.to_string()),
                        }
                    }
                    _ = stopped.wait_for(|s| *s) => break,
                }
            }
            if let Err(e) = consumer.close().await {
                panic!("close: {e}");
            }
        });
        Member {
            seen,
            handle,
            stop,
            task,
        }
    }

    /// Closes the consumer (commit, leave) and waits for it.
    pub(crate) async fn stop(self) -> Arc<Mutex<Seen>> {
        self.stop.send_replace(true);
        if let Err(e) = self.task.await {
            panic!("member task: {e}");
        }
        self.seen
    }

    pub(crate) fn with<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// A client that looks at the cluster's topics every second (pattern subscriptions).
pub(crate) async fn quick_client() -> Client {
    protocol_tests::logs();
    let mut config = ClientConfig::new(&protocol_tests::bootstrap());
    config.metadata_refresh_interval = Duration::from_secs(1);
    match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("no Kafka broker ({e}); start one with `scripts/kafka up`"),
    }
}

/// A producer writing uncompressed records, for the few a group test needs.
async fn plain_producer(client: &Client) -> ruststream_kafka::client::Producer {
    producer(
        client,
        super::codec_config(ruststream_kafka::client::Codec::None),
    )
    .await
}

/// A group configuration with short timers, so rebalances take seconds.
pub(crate) fn group_config(group: &str, strategy: &str) -> ConsumerConfig {
    ConsumerConfig {
        assignment_strategy: vec![strategy.to_owned()],
        heartbeat_interval: Duration::from_millis(300),
        session_timeout: Duration::from_secs(10),
        auto_offset_reset: ruststream_kafka::client::OffsetReset::Earliest,
        auto_commit_interval: Duration::from_millis(500),
        ..ConsumerConfig::for_group(group)
    }
}

/// Writes `count` keyed records `v{i}` in bursts, over about `spread`.
pub(crate) async fn produce_spread(client: Client, topic: String, count: usize, spread: Duration) {
    let p = producer(
        &client,
        super::codec_config(ruststream_kafka::client::Codec::Lz4),
    )
    .await;
    let bursts = 50;
    let per = count.div_ceil(bursts);
    for b in 0..bursts {
        let records: Vec<ProducerRecord> = (b * per..((b + 1) * per).min(count))
            .map(|i| {
                ProducerRecord::new(&topic, bytes(format!("v{i}"))).key(bytes(format!("k{i}")))
            })
            .collect();
        send_all(&p, records).await;
        tokio::time::sleep(spread / u32::try_from(bursts).unwrap_or(1)).await;
    }
}

/// Waits until the members together saw `count` distinct values.
pub(crate) async fn wait_for_distinct(
    members: &[&Arc<Mutex<Seen>>],
    count: usize,
    timeout: Duration,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let distinct = distinct_values(members).len();
        if distinct >= count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {distinct} of {count} records consumed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn distinct_values(members: &[&Arc<Mutex<Seen>>]) -> BTreeSet<String> {
    members
        .iter()
        .flat_map(|m| {
            m.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .records
                .iter()
                .map(|r| r.2.clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every record consumed exactly once, in offset order per member and partition; returns the
/// number of records seen more than once.
pub(crate) fn check_no_loss(members: &[&Arc<Mutex<Seen>>], count: usize) -> usize {
    let mut total = 0;
    for m in members {
        let seen = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        total += seen.records.len();
        assert!(seen.errors.is_empty(), "consumer errors: {:?}", seen.errors);
        // Within one ownership of a partition, offsets only go up.
        let mut last: BTreeMap<i32, i64> = BTreeMap::new();
        for (p, o, _) in &seen.records {
            if let Some(prev) = last.insert(*p, *o) {
                assert!(
                    *o > prev,
                    "partition {p}: offset {o} after {prev} in one member"
                );
            }
        }
    }
    let distinct = distinct_values(members);
    assert_eq!(distinct.len(), count, "records lost");
    total - count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_share_twelve_partitions_while_members_come_and_go() {
    for strategy in ["range", "roundrobin", "cooperative-sticky"] {
        let client = client().await;
        let topic = unique_topic("group-churn");
        create_topic(&client, &topic, 12).await;
        let group = unique_topic("churn");
        let count = 100_000;
        let writer = tokio::spawn(produce_spread(
            client.clone(),
            topic.clone(),
            count,
            Duration::from_secs(8),
        ));
        let sub = || Subscription::Topics(vec![topic.clone()]);
        let a = Member::start(&client, group_config(&group, strategy), sub());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let b = Member::start(&client, group_config(&group, strategy), sub());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let c = Member::start(&client, group_config(&group, strategy), sub());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let b = b.stop().await;
        if let Err(e) = writer.await {
            panic!("writer: {e}");
        }
        wait_for_distinct(&[&a.seen, &b, &c.seen], count, Duration::from_mins(2)).await;
        // The two left own the twelve partitions between them, once.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let owned_a = a.with(|s| s.owned.clone());
            let owned_c = c.with(|s| s.owned.clone());
            if owned_a.len() + owned_c.len() == 12 && owned_a.is_disjoint(&owned_c) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{strategy}: final assignment {owned_a:?} / {owned_c:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let a = a.stop().await;
        let c = c.stop().await;
        // Commit on revoke and on close: a partition changing hands is read on from exactly
        // where the previous owner stopped.
        let duplicates = check_no_loss(&[&a, &b, &c], count);
        println!("{strategy}: {duplicates} duplicates");
        assert_eq!(duplicates, 0, "{strategy}: records re-read after a revoke");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_members_keep_reading_what_they_keep() {
    let client = client().await;
    let topic = unique_topic("group-coop");
    create_topic(&client, &topic, 12).await;
    let group = unique_topic("coop");
    let sub = || Subscription::Topics(vec![topic.clone()]);
    let config = || group_config(&group, "cooperative-sticky");
    let a = Member::start(&client, config(), sub());
    let b = Member::start(&client, config(), sub());
    wait_until(Duration::from_secs(30), || {
        a.with(|s| s.owned.len()) == 6 && b.with(|s| s.owned.len()) == 6
    })
    .await;
    let before_a = a.with(|s| s.owned.clone());
    let before_b = b.with(|s| s.owned.clone());
    let changes_a = a.with(|s| s.changes.len());
    let changes_b = b.with(|s| s.changes.len());
    let c = Member::start(&client, config(), sub());
    wait_until(Duration::from_secs(30), || c.with(|s| s.owned.len()) == 4).await;
    // Each of the first two gave up exactly two partitions and nothing else moved.
    for (m, before, from) in [(&a, &before_a, changes_a), (&b, &before_b, changes_b)] {
        let changes = m.with(|s| s.changes[from..].to_vec());
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(changes.iter().all(|c| c.starts_with('-')), "{changes:?}");
        assert!(m.with(|s| s.owned.is_subset(before)));
    }
    for m in [a, b, c] {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarting_in_time_gets_its_partitions_back_without_a_rebalance() {
    let client = client().await;
    let topic = unique_topic("group-static");
    create_topic(&client, &topic, 4).await;
    let group = unique_topic("static");
    let sub = || Subscription::Topics(vec![topic.clone()]);
    let config = |instance: &str| ConsumerConfig {
        group_instance_id: Some(instance.to_owned()),
        session_timeout: Duration::from_secs(30),
        ..group_config(&group, "range")
    };
    let a = Member::start(&client, config("a"), sub());
    let b = Member::start(&client, config("b"), sub());
    wait_until(Duration::from_secs(30), || {
        a.with(|s| s.owned.len()) == 2 && b.with(|s| s.owned.len()) == 2
    })
    .await;
    let owned_b = b.with(|s| s.owned.clone());
    let changes_a = a.with(|s| s.changes.clone());
    // Close without leaving (static members stay in the group), then come back.
    b.stop().await;
    let b = Member::start(&client, config("b"), sub());
    wait_until(Duration::from_secs(20), || b.with(|s| s.owned.len()) == 2).await;
    assert_eq!(b.with(|s| s.owned.clone()), owned_b);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        a.with(|s| s.changes.clone()),
        changes_a,
        "member a saw a rebalance"
    );
    for m in [a, b] {
        m.stop().await;
    }
}

/// A member closed while the coordinator holds its `JoinGroup` (the rebalance waits for a
/// static member that died without leaving) does not wait for the rebalance: its close returns
/// at once, well inside the 60 s socket timeout it used to run into, and it leaves on a fresh
/// connection, so the group forms without it once the dead member's session ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_closed_during_a_held_join_leaves_without_waiting_for_the_rebalance() {
    let client = client().await;
    let topic = unique_topic("group-held-join");
    create_topic(&client, &topic, 2).await;
    let group = unique_topic("held-join");
    let sub = || Subscription::Topics(vec![topic.clone()]);
    let dead = Member::start(
        &client,
        ConsumerConfig {
            group_instance_id: Some("dead".to_owned()),
            session_timeout: Duration::from_secs(20),
            ..group_config(&group, "range")
        },
        sub(),
    );
    wait_until(Duration::from_secs(30), || {
        dead.with(|s| s.owned.len()) == 2
    })
    .await;
    // Static: it stays in the group until its session ends, and every join waits for it.
    dead.stop().await;
    let died = tokio::time::Instant::now();

    let closed = Member::start(&client, group_config(&group, "range"), sub());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        closed.with(|s| s.owned.is_empty()),
        "the join was not held: {:?}",
        closed.with(|s| s.changes.clone())
    );
    let closing = tokio::time::Instant::now();
    let seen = closed.stop().await;
    let took = closing.elapsed();
    eprintln!("closed during the held join in {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "the close waited {took:?} for the held join"
    );
    assert!(
        died.elapsed() < Duration::from_secs(15),
        "the dead member's session may have ended: the join was not held throughout"
    );
    let changes = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .changes
        .clone();
    assert!(changes.is_empty(), "the closed member got {changes:?}");

    // The survivor gets everything when the dead member expires; the closed one is gone
    // (were it still listed, the group would wait for it too, up to its own session).
    let survivor = Member::start(&client, group_config(&group, "range"), sub());
    wait_until(Duration::from_secs(40), || {
        survivor.with(|s| s.owned.len()) == 2
    })
    .await;
    eprintln!(
        "the survivor owns both partitions {:?} after the death",
        died.elapsed()
    );
    survivor.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_subscription_takes_in_new_topics() {
    let client = quick_client().await;
    let prefix = unique_topic("pattern");
    let first = format!("{prefix}-a");
    create_topic(&client, &first, 2).await;
    let group = unique_topic("pattern-group");
    let m = Member::start(
        &client,
        group_config(&group, "range"),
        Subscription::Pattern(format!("^{prefix}-.*")),
    );
    wait_until(Duration::from_secs(30), || m.with(|s| s.owned.len()) == 2).await;
    let second = format!("{prefix}-b");
    create_topic(&client, &second, 3).await;
    wait_until(Duration::from_secs(30), || {
        m.with(|s| s.owned.len()) == 3 + 2
    })
    .await;
    let p = plain_producer(&client).await;
    send_all(
        &p,
        vec![ProducerRecord::new(&second, bytes("new".to_owned()))],
    )
    .await;
    wait_until(Duration::from_secs(30), || {
        m.with(|s| s.records.iter().any(|r| r.2 == "new"))
    })
    .await;
    m.stop().await;
}

/// With the periodic refresh five minutes away, only the hint can bring the new topic in
/// within the test; its records written before the member took it up are read because late
/// topics start at their first record, while the topic present at the start honours `latest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hint_takes_in_a_new_topic_at_once_and_a_late_topic_is_read_from_its_start() {
    let client = client().await;
    let prefix = unique_topic("late");
    let first = format!("{prefix}-a");
    create_topic(&client, &first, 1).await;
    let p = plain_producer(&client).await;
    send_all(
        &p,
        vec![ProducerRecord::new(&first, bytes("before".to_owned()))],
    )
    .await;
    let group = unique_topic("late-group");
    let m = Member::start(
        &client,
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Latest,
            late_topic_start: LateTopicStart::Earliest,
            ..group_config(&group, "range")
        },
        Subscription::Pattern(format!("^{prefix}-.*")),
    );
    wait_until(Duration::from_secs(30), || m.with(|s| s.owned.len()) == 1).await;
    let second = format!("{prefix}-b");
    create_topic(&client, &second, 2).await;
    let early: Vec<ProducerRecord> = (0..4)
        .map(|i| ProducerRecord::new(&second, bytes(format!("early-{i}"))).partition(i % 2))
        .collect();
    send_all(&p, early).await;
    // The new topic may take a moment to show in the metadata every broker answers.
    for _ in 0..40 {
        m.handle.check_membership_now();
        if m.with(|s| s.owned.len()) == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        m.with(|s| s.owned.len()),
        3,
        "{:?}",
        m.with(|s| s.changes.clone())
    );
    send_all(
        &p,
        vec![ProducerRecord::new(&first, bytes("after".to_owned()))],
    )
    .await;
    wait_until(Duration::from_secs(30), || m.with(|s| s.records.len()) == 5).await;
    let mut values: Vec<String> = m.with(|s| s.records.iter().map(|r| r.2.clone()).collect());
    values.sort();
    assert_eq!(
        values,
        ["after", "early-0", "early-1", "early-2", "early-3"],
        "the first topic started at its end, the late one at its start"
    );
    m.stop().await;
}

/// A member that joined before its literal topic existed owns nothing; once the topic is
/// created the leader takes it up within a few heartbeats, with the periodic refresh (and a
/// pattern's re-match) five minutes away, and reads what is written to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribed_topic_created_after_the_join_is_taken_up_within_heartbeats() {
    let client = client().await;
    // The member's own look at the topic must not create it (librdkafka's consumer default).
    let member_client = {
        let mut config = ClientConfig::new(&protocol_tests::bootstrap());
        config.allow_auto_create_topics = false;
        match Client::connect(config).await {
            Ok(c) => c,
            Err(e) => panic!("no Kafka broker ({e}); start one with `scripts/kafka up`"),
        }
    };
    let topic = unique_topic("absent");
    let group = unique_topic("absent-group");
    let m = Member::start(
        &member_client,
        group_config(&group, "range"),
        Subscription::Topics(vec![topic.clone()]),
    );
    wait_until(Duration::from_secs(30), || m.handle.member().is_some()).await;
    assert!(
        m.with(|s| s.owned.is_empty()),
        "nothing to own before the topic exists"
    );
    create_topic(&client, &topic, 2).await;
    wait_until(Duration::from_secs(15), || m.with(|s| s.owned.len()) == 2).await;
    let p = plain_producer(&client).await;
    send_all(
        &p,
        vec![ProducerRecord::new(&topic, bytes("first".to_owned())).partition(1)],
    )
    .await;
    wait_until(Duration::from_secs(30), || m.with(|s| s.records.len()) == 1).await;
    assert_eq!(m.with(|s| s.records[0].clone()), (1, 0, "first".to_owned()));
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_and_cooperative_members_cannot_share_a_group() {
    let client = client().await;
    let topic = unique_topic("group-mixed");
    create_topic(&client, &topic, 2).await;
    let group = unique_topic("mixed");
    let sub = || Subscription::Topics(vec![topic.clone()]);
    let a = Member::start(&client, group_config(&group, "range"), sub());
    wait_until(Duration::from_secs(30), || a.with(|s| s.owned.len()) == 2).await;
    let b = Member::start(&client, group_config(&group, "cooperative-sticky"), sub());
    wait_until(Duration::from_secs(30), || !b.with(|s| s.errors.is_empty())).await;
    let error = b.with(|s| s.errors[0].clone());
    assert!(
        error.contains(&format!("{:?}", ResponseError::InconsistentGroupProtocol))
            || error.to_lowercase().contains("inconsistent"),
        "{error}"
    );
    assert!(error.contains("cooperative"), "{error}");
    for m in [a, b] {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_go_through_the_member_and_read_back() {
    let client = client().await;
    let topic = unique_topic("group-commit");
    create_topic(&client, &topic, 3).await;
    let group = unique_topic("commit");
    produce_spread(client.clone(), topic.clone(), 300, Duration::ZERO).await;
    let mut consumer = match Consumer::new(
        client.clone(),
        ConsumerConfig {
            enable_auto_commit: false,
            ..group_config(&group, "range")
        },
    ) {
        Ok(c) => c,
        Err(e) => panic!("consumer: {e}"),
    };
    if let Err(e) = consumer.subscribe(Subscription::Topics(vec![topic.clone()])) {
        panic!("subscribe: {e}");
    }
    let mut got = 0;
    while got < 300 {
        match tokio::time::timeout(Duration::from_secs(30), consumer.poll()).await {
            Ok(Ok(ConsumerEvent::Records(r))) => got += r.records.len(),
            Ok(Ok(ConsumerEvent::Error(e))) => panic!("consumer error: {e}"),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("poll: {e}"),
            Err(elapsed) => panic!("timed out at {got} ({elapsed})"),
        }
    }
    assert!(consumer.member().is_some_and(|m| m.generation >= 1));
    if let Err(e) = consumer.commit().await {
        panic!("commit: {e}");
    }
    let partitions: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    let committed = match consumer.committed(&partitions).await {
        Ok(c) => c,
        Err(e) => panic!("committed: {e}"),
    };
    let total: i64 = committed.iter().map(|c| c.offset).sum();
    assert_eq!(total, 300);
    for tp in &partitions {
        let c = committed
            .iter()
            .find(|c| c.partition == tp.partition)
            .map(|c| c.offset);
        assert_eq!(c, consumer.position(tp));
    }
    if let Err(e) = consumer.close().await {
        panic!("close: {e}");
    }
}

/// Waits until `cond` holds.
pub(crate) async fn wait_until(timeout: Duration, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met in {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_polling_leaves_and_rejoins_at_the_next_poll() {
    let client = client().await;
    let topic = unique_topic("group-poll-timeout");
    create_topic(&client, &topic, 4).await;
    let group = unique_topic("poll-timeout");
    let sub = || Subscription::Topics(vec![topic.clone()]);
    let mut a = match Consumer::new(
        client.clone(),
        ConsumerConfig {
            max_poll_interval: Duration::from_secs(2),
            ..group_config(&group, "range")
        },
    ) {
        Ok(c) => c,
        Err(e) => panic!("consumer: {e}"),
    };
    if let Err(e) = a.subscribe(sub()) {
        panic!("subscribe: {e}");
    }
    match tokio::time::timeout(Duration::from_secs(30), a.poll()).await {
        Ok(Ok(ConsumerEvent::Assigned(ps))) => assert_eq!(ps.len(), 4),
        other => panic!("expected the assignment, got {other:?}"),
    }
    // No poll for longer than max.poll.interval.ms: the member leaves.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        a.member().is_none(),
        "still a member after the poll timeout"
    );
    let b = Member::start(&client, group_config(&group, "range"), sub());
    wait_until(Duration::from_secs(30), || b.with(|s| s.owned.len()) == 4).await;
    // Back to polling: the caller hears the partitions were lost, then gets a share again.
    match tokio::time::timeout(Duration::from_secs(30), a.poll()).await {
        Ok(Ok(ConsumerEvent::Lost(ps))) => assert_eq!(ps.len(), 4),
        other => panic!("expected the partitions lost, got {other:?}"),
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match tokio::time::timeout_at(deadline, a.poll()).await {
            Ok(Ok(ConsumerEvent::Assigned(ps))) => {
                assert_eq!(ps.len(), 2);
                break;
            }
            Ok(Ok(ConsumerEvent::Error(e))) => panic!("consumer error: {e}"),
            Ok(Ok(_)) => {}
            other => panic!("expected a new assignment, got {other:?}"),
        }
    }
    if let Err(e) = a.close().await {
        panic!("close: {e}");
    }
    b.stop().await;
}
