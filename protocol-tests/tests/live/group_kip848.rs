//! The KIP-848 consumer group protocol (`group.protocol=consumer`) against a real coordinator:
//! members joining and leaving while records flow, pattern subscriptions, commits as a member.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use protocol_tests::{client, create_topic, unique_topic};
use ruststream_kafka::client::{
    Client, Codec, Consumer, ConsumerConfig, ConsumerEvent, Error, GroupProtocol, OffsetReset,
    OffsetToCommit, ProducerRecord, ResponseError, Subscription, TopicPartition,
};
use tokio::sync::watch;

use super::consume::{collect, consumer};
use super::{bytes, codec_config, producer, send_all};

/// Whether the cluster runs KIP-848 groups. One that does not (Kafka 3.9 by default
/// advertises `ConsumerGroupHeartbeat` but answers `UNSUPPORTED_VERSION`) must refuse a
/// consumer-protocol member with a clear error naming `group.protocol`: that is checked here,
/// and the caller's scenario does not apply.
async fn kip848_or_refused(client: &Client) -> bool {
    let topic = unique_topic("kip848-probe");
    create_topic(client, &topic, 1).await;
    let c = subscribed(
        client,
        config(&unique_topic("probe")),
        Subscription::Topics(vec![topic]),
    );
    let mut c = c;
    let supported = match tokio::time::timeout(Duration::from_secs(30), c.poll()).await {
        Ok(Ok(ConsumerEvent::Assigned(_))) => true,
        Ok(Ok(ConsumerEvent::Error(e))) => {
            let text = e.to_string();
            assert!(text.contains("group.protocol"), "{text}");
            eprintln!("this cluster has no KIP-848 groups; refused as expected: {text}");
            false
        }
        other => panic!("neither an assignment nor a clear refusal: {other:?}"),
    };
    if let Err(e) = c.close().await {
        panic!("close: {e}");
    }
    supported
}

fn config(group: &str) -> ConsumerConfig {
    ConsumerConfig {
        group_protocol: GroupProtocol::Consumer,
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::for_group(group)
    }
}

fn subscribed(client: &Client, config: ConsumerConfig, subscription: Subscription) -> Consumer {
    let mut c = consumer(client, config);
    if let Err(e) = c.subscribe(subscription) {
        panic!("subscribe: {e}");
    }
    c
}

/// Produces keyed records `key-i`/`value-i` for `range`.
async fn produce(client: &Client, topic: &str, range: std::ops::Range<usize>) {
    let p = producer(client, codec_config(Codec::Lz4)).await;
    let records = range
        .map(|i| {
            ProducerRecord::new(topic, bytes(format!("value-{i}"))).key(bytes(format!("key-{i}")))
        })
        .collect();
    send_all(&p, records).await;
}

/// What the members of the rebalance test saw, in one order.
#[derive(Debug)]
enum Seen {
    Assigned(usize, TopicPartition),
    /// Given back (revoked, or held at close) with the position reached.
    Released(usize, TopicPartition, Option<i64>),
    Lost(usize, TopicPartition),
    /// The first record of a partition after it was assigned.
    First(usize, TopicPartition, i64),
}

#[derive(Debug, Default)]
struct Log {
    seen: Vec<Seen>,
    /// How often each (partition, offset) was handed out.
    received: HashMap<(i32, i64), u32>,
    /// Records handed out by member and partition since it was assigned.
    since_assigned: HashMap<(usize, TopicPartition), u64>,
    /// Each running member's assignment as it last looked.
    assignments: BTreeMap<usize, Vec<TopicPartition>>,
}

type Shared = Arc<Mutex<Log>>;

fn lock(log: &Shared) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Polls until `stop`, logging what happens; gives the consumer back.
async fn member(
    me: usize,
    mut consumer: Consumer,
    log: Shared,
    mut stop: watch::Receiver<bool>,
) -> Consumer {
    let mut started: BTreeSet<TopicPartition> = BTreeSet::new();
    loop {
        if *stop.borrow() {
            break;
        }
        let event = tokio::select! {
            _ = stop.changed() => continue,
            e = tokio::time::timeout(Duration::from_millis(200), consumer.poll()) => e,
        };
        let mut log = lock(&log);
        match event {
            Err(_) => {}
            Ok(Err(e)) => panic!("member {me}: poll: {e}"),
            Ok(Ok(ConsumerEvent::Records(r))) => {
                let tp = TopicPartition::new(&r.topic, r.partition);
                if started.insert(tp.clone())
                    && let Some(first) = r.records.first()
                {
                    log.seen.push(Seen::First(me, tp.clone(), first.offset));
                }
                for rec in &r.records {
                    *log.received.entry((r.partition, rec.offset)).or_default() += 1;
                }
                *log.since_assigned.entry((me, tp)).or_default() += r.records.len() as u64;
            }
            Ok(Ok(ConsumerEvent::Assigned(tps))) => {
                for tp in tps {
                    started.remove(&tp);
                    log.since_assigned.insert((me, tp.clone()), 0);
                    log.seen.push(Seen::Assigned(me, tp));
                }
            }
            Ok(Ok(ConsumerEvent::Revoked(revocation))) => {
                for tp in &revocation.partitions {
                    log.seen
                        .push(Seen::Released(me, tp.clone(), consumer.position(tp)));
                }
                // Dropping it lets the rebalance go on (with its commit).
                drop(revocation);
            }
            Ok(Ok(ConsumerEvent::Lost(tps))) => {
                for tp in tps {
                    log.seen.push(Seen::Lost(me, tp));
                }
            }
            Ok(Ok(ConsumerEvent::Error(e))) => panic!("member {me}: {e}"),
        }
        log.assignments.insert(me, consumer.assignment());
    }
    consumer
}

/// Waits until `done` holds for the log, failing after `timeout`.
async fn until(log: &Shared, timeout: Duration, what: &str, done: impl Fn(&Log) -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if done(&lock(log)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {} records seen",
            lock(log).received.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)]
async fn members_join_and_leave_while_records_flow() {
    const PARTITIONS: i32 = 12;
    const RECORDS: usize = 30_000;
    let client = client().await;
    if !kip848_or_refused(&client).await {
        return;
    }
    let topic = unique_topic("kip848-rebalance");
    create_topic(&client, &topic, PARTITIONS).await;
    let group = unique_topic("kip848-group");
    let log: Shared = Arc::default();

    // Records keep coming for about half a minute, across the joins and the leave.
    let producing = {
        let client = client.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            for batch in 0..30 {
                produce(&client, &topic, batch * 1_000..(batch + 1) * 1_000).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    let mut stops = Vec::new();
    let mut members = Vec::new();
    for me in 0..3 {
        let (stop, stopped) = watch::channel(false);
        let c = subscribed(
            &client,
            config(&group),
            Subscription::Topics(vec![topic.clone()]),
        );
        members.push(tokio::spawn(member(me, c, log.clone(), stopped)));
        stops.push(stop);
        if me < 2 {
            until(&log, Duration::from_mins(2), "progress", |l| {
                l.received.len() >= (me + 1) * 6_000
            })
            .await;
        }
    }
    until(&log, Duration::from_mins(2), "progress", |l| {
        l.received.len() >= 18_000
    })
    .await;
    // The second member leaves: it is done with what it holds, and close commits it.
    stops[1].send_replace(true);
    let leaving = match members.remove(1).await {
        Ok(c) => c,
        Err(e) => panic!("member 1: {e}"),
    };
    {
        let mut l = lock(&log);
        for tp in leaving.assignment() {
            let position = leaving.position(&tp);
            l.seen.push(Seen::Released(1, tp, position));
        }
        l.assignments.remove(&1);
    }
    if let Err(e) = leaving.close().await {
        panic!("closing member 1: {e}");
    }
    if let Err(e) = producing.await {
        panic!("producing: {e}");
    }

    let all: BTreeSet<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    until(
        &log,
        Duration::from_mins(2),
        "every record and a settled assignment",
        |l| {
            let held: Vec<&TopicPartition> = l.assignments.values().flatten().collect();
            let distinct: BTreeSet<&TopicPartition> = held.iter().copied().collect();
            l.received.len() == RECORDS
                && held.len() == all.len()
                && distinct.len() == held.len()
                && distinct.into_iter().eq(all.iter())
        },
    )
    .await;
    for stop in &stops {
        stop.send_replace(true);
    }
    for m in members {
        match m.await {
            Ok(c) => {
                if let Err(e) = c.close().await {
                    panic!("close: {e}");
                }
            }
            Err(e) => panic!("member: {e}"),
        }
    }

    let l = lock(&log);
    // Every record at least once, each partition without a gap.
    let mut per_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (p, o) in l.received.keys() {
        per_partition.entry(*p).or_default().push(*o);
    }
    for (p, offsets) in &mut per_partition {
        offsets.sort_unstable();
        assert!(
            offsets.iter().enumerate().all(|(i, o)| *o == i as i64),
            "partition {p}: a gap"
        );
    }
    assert_eq!(l.received.len(), RECORDS);

    // A partition given back at position P is read by its next owner from P: what was
    // uncommitted at that moment is what may be read twice (nothing, with the commit on
    // revocation). Lost partitions may repeat whatever their owner read since it got them.
    let mut expected_start: HashMap<TopicPartition, (usize, Option<i64>)> = HashMap::new();
    let mut assigned_to: BTreeMap<usize, usize> = BTreeMap::new();
    // Who holds each partition: a second holder before the first gave it back is a breach.
    let mut holder: HashMap<TopicPartition, usize> = HashMap::new();
    let mut double_holds = 0;
    let mut uncommitted_at_release: u64 = 0;
    let mut lost_bound: u64 = 0;
    let (mut releases, mut handovers, mut losses) = (0, 0, 0);
    for seen in &l.seen {
        match seen {
            Seen::Assigned(me, tp) => {
                *assigned_to.entry(*me).or_default() += 1;
                if holder.insert(tp.clone(), *me).is_some_and(|h| h != *me) {
                    double_holds += 1;
                }
            }
            Seen::Released(me, tp, position) => {
                releases += 1;
                holder.remove(tp);
                expected_start.insert(tp.clone(), (*me, *position));
            }
            Seen::Lost(me, tp) => {
                losses += 1;
                holder.remove(tp);
                lost_bound += l
                    .since_assigned
                    .get(&(*me, tp.clone()))
                    .copied()
                    .unwrap_or(0);
                expected_start.insert(tp.clone(), (*me, None));
            }
            Seen::First(me, tp, first) => {
                match expected_start.remove(tp) {
                    // Never held before: from the start of the log.
                    None => assert_eq!(*first, 0, "{tp}: first reader {me} started late"),
                    Some((from, Some(position))) => {
                        handovers += 1;
                        assert!(
                            *first <= position,
                            "{tp}: member {me} started at {first}, after member {from} gave it \
                             back at {position}: a gap"
                        );
                        uncommitted_at_release += (position - first) as u64;
                    }
                    Some((_, None)) => {}
                }
            }
        }
    }
    let duplicates: u64 = l.received.values().map(|n| u64::from(n - 1)).sum();
    println!(
        "{} records, {duplicates} read twice; {releases} releases, {handovers} handovers, \
         {losses} losses; uncommitted at release {uncommitted_at_release}, lost bound {lost_bound}",
        l.received.len()
    );
    assert!(
        double_holds == 0 || losses > 0,
        "{double_holds} partitions were assigned while another member held them"
    );
    assert_eq!(
        uncommitted_at_release, 0,
        "a revoked partition restarted before its committed position"
    );
    assert!(
        duplicates <= uncommitted_at_release + lost_bound,
        "{duplicates} duplicates, more than the uncommitted records at revocations"
    );
    assert!(
        handovers >= 6,
        "too few handovers ({handovers}) to test anything"
    );
    assert_eq!(
        assigned_to.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2],
        "every member had partitions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_picks_up_a_topic_created_after_subscribing() {
    let client = client().await;
    if !kip848_or_refused(&client).await {
        return;
    }
    let prefix = unique_topic("kip848-pattern");
    let first = format!("{prefix}-a");
    create_topic(&client, &first, 2).await;
    produce(&client, &first, 0..100).await;
    let group = unique_topic("kip848-group");
    let mut c = subscribed(
        &client,
        config(&group),
        Subscription::Pattern(format!("{prefix}-.*")),
    );

    let mut by_topic: BTreeMap<String, usize> = BTreeMap::new();
    let mut created = false;
    let second = format!("{prefix}-b");
    let deadline = tokio::time::Instant::now() + Duration::from_mins(2);
    while by_topic.get(&second).copied().unwrap_or(0) < 100 {
        let event = match tokio::time::timeout_at(deadline, c.poll()).await {
            Err(elapsed) => panic!("{elapsed}: {by_topic:?}"),
            Ok(Err(e)) => panic!("poll: {e}"),
            Ok(Ok(e)) => e,
        };
        match event {
            ConsumerEvent::Records(r) => {
                *by_topic.entry(r.topic.to_string()).or_default() += r.records.len();
            }
            ConsumerEvent::Error(e) => panic!("consumer error: {e}"),
            _ => {}
        }
        if !created && by_topic.get(&first) == Some(&100) {
            created = true;
            create_topic(&client, &second, 3).await;
            produce(&client, &second, 0..100).await;
        }
    }
    assert_eq!(by_topic.get(&first), Some(&100));
    assert_eq!(by_topic.get(&second), Some(&100));
    let assigned: BTreeSet<String> = c
        .assignment()
        .iter()
        .map(|tp| tp.topic.to_string())
        .collect();
    assert_eq!(assigned, [first, second].into_iter().collect());
    if let Err(e) = c.close().await {
        panic!("close: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_as_a_member_are_fetched_back() {
    let client = client().await;
    if !kip848_or_refused(&client).await {
        return;
    }
    let topic = unique_topic("kip848-commit");
    create_topic(&client, &topic, 3).await;
    produce(&client, &topic, 0..300).await;
    let group = unique_topic("kip848-group");
    let mut c = subscribed(
        &client,
        ConsumerConfig {
            enable_auto_commit: false,
            ..config(&group)
        },
        Subscription::Topics(vec![topic.clone()]),
    );
    let got = collect(&mut c, 300, Duration::from_mins(1)).await;
    let member = c.member();
    assert!(
        member
            .as_ref()
            .is_some_and(|m| m.generation > 0 && !m.member_id.is_empty()),
        "member {member:?}"
    );
    if let Err(e) = c.commit().await {
        panic!("commit: {e}");
    }
    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    let committed = match c.committed(&tps).await {
        Ok(o) => o,
        Err(e) => panic!("committed: {e}"),
    };
    for tp in &tps {
        let read = got.get(&tp.partition).map_or(0, Vec::len) as i64;
        let offset = committed
            .iter()
            .find(|o| o.partition == tp.partition)
            .map(|o| o.offset);
        assert_eq!(offset, Some(read), "{tp}");
    }
    // Explicit offsets go through the member too.
    let explicit = OffsetToCommit {
        topic: topic.clone(),
        partition: 0,
        offset: 5,
        leader_epoch: -1,
        metadata: Some("kip848".into()),
    };
    if let Err(e) = c.commit_offsets(&[explicit]).await {
        panic!("commit_offsets: {e}");
    }
    let back = match c.committed(&tps[..1]).await {
        Ok(o) => o,
        Err(e) => panic!("committed: {e}"),
    };
    assert_eq!(
        back.first().map(|o| (o.offset, o.metadata.clone())),
        Some((5, Some("kip848".to_owned())))
    );
    if let Err(e) = c.close().await {
        panic!("close: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_server_assignor_is_reported() {
    let client = client().await;
    if !kip848_or_refused(&client).await {
        return;
    }
    let topic = unique_topic("kip848-assignor");
    create_topic(&client, &topic, 1).await;
    let group = unique_topic("kip848-group");
    let mut c = subscribed(
        &client,
        ConsumerConfig {
            group_remote_assignor: Some("no-such-assignor".into()),
            ..config(&group)
        },
        Subscription::Topics(vec![topic]),
    );
    let event = match tokio::time::timeout(Duration::from_secs(30), c.poll()).await {
        Err(elapsed) => panic!("no error reported ({elapsed})"),
        Ok(Err(e)) => panic!("poll: {e}"),
        Ok(Ok(e)) => e,
    };
    match event {
        ConsumerEvent::Error(Error::Broker { code, context }) => {
            assert_eq!(code, ResponseError::UnsupportedAssignor);
            assert!(context.contains("group.protocol=consumer"), "{context}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
    if let Err(e) = c.close().await {
        panic!("close: {e}");
    }
}

/// Polls `consumer` until an event `pick` accepts, failing after `timeout`.
async fn wait_event<T>(
    consumer: &mut Consumer,
    timeout: Duration,
    what: &str,
    mut pick: impl FnMut(ConsumerEvent) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, consumer.poll()).await {
            Err(elapsed) => panic!("{elapsed} waiting for {what}"),
            Ok(Err(e)) => panic!("poll: {e}"),
            Ok(Ok(event)) => {
                if let Some(found) = pick(event) {
                    return found;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_polling_leaves_and_rejoins_at_the_next_poll() {
    let client = client().await;
    if !kip848_or_refused(&client).await {
        return;
    }
    let topic = unique_topic("kip848-stale");
    create_topic(&client, &topic, 4).await;
    produce(&client, &topic, 0..40).await;
    let group = unique_topic("kip848-group");
    let subscription = Subscription::Topics(vec![topic.clone()]);
    let mut a = subscribed(
        &client,
        ConsumerConfig {
            max_poll_interval: Duration::from_secs(3),
            ..config(&group)
        },
        subscription.clone(),
    );
    collect(&mut a, 40, Duration::from_mins(1)).await;
    assert_eq!(a.assignment().len(), 4);

    // A second member polls all along and says what it holds.
    let (held_tx, held) = watch::channel(0usize);
    let (stop, mut stopped) = watch::channel(false);
    let b = subscribed(&client, config(&group), subscription);
    let b = tokio::spawn(async move {
        let mut b = b;
        while !*stopped.borrow() {
            tokio::select! {
                _ = stopped.changed() => {}
                e = tokio::time::timeout(Duration::from_millis(200), b.poll()) => {
                    if let Ok(Ok(ConsumerEvent::Revoked(r))) = e {
                        drop(r);
                    }
                    held_tx.send_replace(b.assignment().len());
                }
            }
        }
        b
    });

    // The first member stops polling: it leaves, and the other takes everything.
    let mut watching = held.clone();
    if tokio::time::timeout(Duration::from_secs(40), watching.wait_for(|n| *n == 4))
        .await
        .is_err()
    {
        panic!("the polling member never got every partition");
    }
    // At its next poll the first member hears it lost its partitions, then joins again and
    // gets a share.
    let lost = wait_event(&mut a, Duration::from_secs(10), "Lost", |e| match e {
        ConsumerEvent::Lost(tps) => Some(tps),
        ConsumerEvent::Error(e) => panic!("consumer error: {e}"),
        _ => None,
    })
    .await;
    assert!(!lost.is_empty());
    let again = wait_event(&mut a, Duration::from_secs(40), "Assigned", |e| match e {
        ConsumerEvent::Assigned(tps) => Some(tps),
        ConsumerEvent::Error(e) => panic!("consumer error: {e}"),
        _ => None,
    })
    .await;
    assert!(!again.is_empty());
    stop.send_replace(true);
    match b.await {
        Ok(b) => {
            if let Err(e) = b.close().await {
                panic!("close: {e}");
            }
        }
        Err(e) => panic!("member b: {e}"),
    }
    if let Err(e) = a.close().await {
        panic!("close: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_keeps_its_instance_id_to_itself_and_gets_it_back() {
    let client = client().await;
    if !kip848_or_refused(&client).await {
        return;
    }
    let topic = unique_topic("kip848-static");
    create_topic(&client, &topic, 3).await;
    let group = unique_topic("kip848-group");
    let instance = unique_topic("instance");
    let static_config = || ConsumerConfig {
        group_instance_id: Some(instance.clone()),
        ..config(&group)
    };
    let subscription = Subscription::Topics(vec![topic.clone()]);
    let assigned = |e: ConsumerEvent| match e {
        ConsumerEvent::Assigned(tps) => Some(tps),
        ConsumerEvent::Error(e) => panic!("consumer error: {e}"),
        _ => None,
    };
    let mut first = subscribed(&client, static_config(), subscription.clone());
    let got = wait_event(&mut first, Duration::from_secs(30), "Assigned", assigned).await;
    assert_eq!(got.len(), 3);

    // A second consumer with the same instance id is refused while the first holds it.
    let mut second = subscribed(&client, static_config(), subscription.clone());
    let refused = wait_event(
        &mut second,
        Duration::from_secs(30),
        "an error",
        |e| match e {
            ConsumerEvent::Error(e) => Some(e),
            _ => None,
        },
    )
    .await;
    assert_eq!(
        refused.code(),
        Some(ResponseError::UnreleasedInstanceId),
        "{refused}"
    );
    drop(second);

    // The first leaves as a static member (epoch -2): the instance comes back with its
    // partitions.
    if let Err(e) = first.close().await {
        panic!("close: {e}");
    }
    let mut third = subscribed(&client, static_config(), subscription);
    let got = wait_event(&mut third, Duration::from_secs(30), "Assigned", assigned).await;
    assert_eq!(got.len(), 3);
    assert!(
        third
            .member()
            .is_some_and(|m| m.instance_id.as_deref() == Some(&*instance))
    );
    if let Err(e) = third.close().await {
        panic!("close: {e}");
    }
}
