//! Failover on a 3-node cluster (`scripts/kafka up --nodes 3`): brokers are killed and
//! restarted while an idempotent producer writes and a group member reads; every acknowledged
//! record is read back exactly once, nothing is written twice, and the reader sees no gap. A
//! transaction whose coordinator dies while it commits ends whole.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use protocol_tests::{
    client, create_topic, kafka_script, observed_client, read_all, start_node, unique_topic,
};
use ruststream_kafka::client::{
    Admin, Client, Consumer, ConsumerConfig, ConsumerEvent, CoordinatorKind, DeliveryFuture, Error,
    Event, Interest, IsolationLevel, Observer, Observers, OffsetReset, OffsetSpec, Producer,
    ProducerConfig, ProducerRecord, Subscription, TransactionalProducer,
};

/// Counts what the producer's observer heard.
#[derive(Default)]
struct Tally {
    written: AtomicUsize,
    failed: AtomicUsize,
    retries: AtomicUsize,
    fatal: AtomicUsize,
}

impl Observer for Tally {
    fn interest(&self) -> Interest {
        Interest::PRODUCE
    }

    fn on_event(&self, event: &Event<'_>) {
        match *event {
            Event::BatchWritten { records, .. } => {
                self.written.fetch_add(records, Ordering::Relaxed);
            }
            Event::BatchFailed { records, .. } => {
                self.failed.fetch_add(records, Ordering::Relaxed);
            }
            Event::ProduceRetry { .. } => {
                self.retries.fetch_add(1, Ordering::Relaxed);
            }
            Event::ProducerFatal { .. } => {
                self.fatal.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

impl Tally {
    fn get(&self) -> (usize, usize, usize, usize) {
        (
            self.written.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
            self.fatal.load(Ordering::Relaxed),
        )
    }
}

/// The tests of this file stop brokers: one at a time, or the cluster loses its quorum.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_and_restarting_the_leader_loses_and_duplicates_nothing() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let tally = Arc::new(Tally::default());
    let client = observed_client(Observers::new().with(tally.clone())).await;
    all_three_brokers(&client).await;
    let topic = unique_topic("failover");
    create_topic(&client, &topic, 3).await;
    let leader = match client.leader_of(&topic, 0).await {
        Ok((node, _)) => node,
        Err(e) => panic!("{e}"),
    };
    let config = ProducerConfig {
        enable_idempotence: true,
        linger: Duration::from_millis(5),
        ..ProducerConfig::default()
    };
    let producer = match Producer::new(client.clone(), config) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let total = 60_000usize;
    let mut deliveries = Vec::with_capacity(total);
    let mut kill = None;
    for i in 0..total {
        if i == total / 3 {
            eprintln!("killing node {leader}, the leader of {topic}-0");
            // In the background, so that records keep flowing while the broker dies.
            let node = leader.to_string();
            kill = Some(tokio::task::spawn_blocking(move || {
                kafka_script(&["kill", &node])
            }));
        }
        if i == 2 * total / 3 {
            if let Some(kill) = kill.take() {
                drop(kill.await);
            }
            let moved = new_leader(&client, &topic, leader).await;
            eprintln!("leader of {topic}-0 after the kill: {moved:?}");
            assert!(
                moved.is_some_and(|n| n != leader),
                "leadership must move off the killed node"
            );
            eprintln!("restarting node {leader}");
            let restart = tokio::task::spawn_blocking(move || start_node(&leader.to_string()));
            if let Err(e) = restart.await {
                panic!("restart: {e}");
            }
        }
        let record = ProducerRecord::new(topic.clone(), Bytes::from(format!("{i}")))
            .partition((i % 3) as i32);
        match producer.send(record).await {
            Ok(d) => deliveries.push((i, d)),
            Err(e) => panic!("send {i}: {e}"),
        }
        if i % 100 == 0 {
            // Keep a steady stream, so that batches are in flight when the broker dies.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let mut acknowledged = HashSet::new();
    let mut failed = 0;
    for (i, d) in deliveries {
        match d.await {
            Ok(_) => {
                acknowledged.insert(i as i64);
            }
            Err(e) => {
                failed += 1;
                eprintln!("record {i} failed: {e}");
            }
        }
    }
    let retries = producer.retries();
    eprintln!(
        "acknowledged {}, failed {failed}, retries {retries}",
        acknowledged.len()
    );
    // The observer heard every acknowledged record in a written batch and every retry.
    let (written, failed_heard, retries_heard, fatal) = tally.get();
    eprintln!("observer: written {written}, failed {failed_heard}, retries {retries_heard}");
    assert_eq!(written, acknowledged.len(), "records in written batches");
    assert_eq!(failed_heard, failed, "records in failed batches");
    assert_eq!(retries_heard as u64, retries, "retry events");
    assert_eq!(fatal, 0, "no fatal error");
    let read = read_all(&client, &topic, 3).await;
    let mut seen = HashSet::new();
    for (partition, records) in read.iter().enumerate() {
        let mut last = -1;
        for r in records {
            let n: i64 = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
                .parse()
                .unwrap_or(-1);
            assert!(seen.insert(n), "record {n} written twice");
            assert!(n > last, "partition {partition}: {n} after {last}");
            last = n;
        }
    }
    for n in &acknowledged {
        assert!(seen.contains(n), "acknowledged record {n} is missing");
    }
    assert!(
        failed == 0,
        "{failed} records failed although the cluster kept a quorum"
    );
}

/// Waits until the cluster lists 3 brokers: a broker restarted by the test before takes a
/// moment to register again. Fails after a minute (the 3-node cluster is missing).
///
/// First it undoes what a test that failed half-way may have left: a stopped node is sent
/// `SIGCONT` and a killed one is started again, so that one failure does not fail every test
/// after it.
async fn all_three_brokers(client: &Client) {
    if let Err(e) = tokio::task::spawn_blocking(heal_nodes).await {
        panic!("healing the nodes: {e}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        let _ = client.refresh_metadata(&[]).await;
        let brokers = client.with_metadata(|m| m.brokers.len());
        if brokers == 3 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{brokers} brokers: these tests need the 3-node cluster (scripts/kafka up --nodes 3)"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits (up to a minute) until partition 0 of `topic` has a leader other than `old`: the
/// controller fences a dead broker only after its session timeout.
async fn new_leader(client: &Client, topic: &str, old: i32) -> Option<i32> {
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        let _ = client.refresh_metadata(&[topic]).await;
        let now = client
            .with_metadata(|m| m.leader(topic, 0))
            .map(|(node, _)| node);
        if now.is_some_and(|n| n != old) || tokio::time::Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The only replica of a partition stops answering (SIGSTOP) while batches are in flight to
/// it; they time out with their outcome unknown and expire, so the producer bumps its epoch
/// (`InitProducerId`) before it sends again. Records after the broker resumes are delivered, and nothing is
/// written twice (the expired records may or may not be in the log, but at most once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_batches_bump_the_epoch_and_nothing_is_written_twice() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let tally = Arc::new(Tally::default());
    let client = observed_client(Observers::new().with(tally.clone())).await;
    all_three_brokers(&client).await;
    let topic = unique_topic("epoch-bump");
    let admin = ruststream_kafka::client::Admin::new(client.clone());
    let spec = ruststream_kafka::client::NewTopic::new(&topic, 1, 1);
    if let Err(e) = admin.create_topics(&[spec], Duration::from_secs(30)).await {
        panic!("{e}");
    }
    let leader = match client.leader_of(&topic, 0).await {
        Ok((node, _)) => node,
        Err(e) => panic!("{e}"),
    };
    let config = ProducerConfig {
        enable_idempotence: true,
        request_timeout: Duration::from_secs(1),
        message_timeout: Duration::from_secs(5),
        ..ProducerConfig::default()
    };
    let producer = match Producer::new(client.clone(), config) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let before = send_range(&producer, &topic, 0..1000).await;
    assert_eq!(before, 0, "records before the pause are delivered");
    let first = producer.producer_id();
    let pid = kafka_script(&["pid", &leader.to_string()])
        .trim()
        .to_owned();
    signal(&pid, "-STOP");
    let expired = send_range(&producer, &topic, 1000..2000).await;
    signal(&pid, "-CONT");
    let after = send_range(&producer, &topic, 2000..3000).await;
    let now = producer.producer_id();
    eprintln!(
        "expired {expired}, producer (id, epoch) {first:?} -> {now:?}, retries {}",
        producer.retries()
    );
    let (written, failed_heard, retries_heard, _) = tally.get();
    eprintln!("observer: written {written}, failed {failed_heard}, retries {retries_heard}");
    assert_eq!(written, 2000 - before - after, "records in written batches");
    assert_eq!(
        failed_heard,
        expired + before + after,
        "records in failed batches"
    );
    assert_eq!(retries_heard as u64, producer.retries(), "retry events");
    assert_eq!(after, 0, "records after the broker resumed are delivered");
    assert_eq!(
        expired, 1000,
        "with the only replica silent, every record sent meanwhile expires"
    );
    // Kafka gives a non-transactional producer a new id (epoch 0) where a transactional one
    // would get epoch + 1: either way the sequences start afresh.
    assert_ne!(
        now, first,
        "the producer took a new id or epoch after the expired batches"
    );
    let read = read_all(&client, &topic, 1).await;
    let mut seen = HashSet::new();
    for r in &read[0] {
        let n: i64 = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
            .parse()
            .unwrap_or(-1);
        assert!(seen.insert(n), "record {n} written twice");
    }
    for n in (0..1000).chain(2000..3000) {
        assert!(seen.contains(&n), "acknowledged record {n} is missing");
    }
}

/// Sends records `range` and waits for them; returns how many failed.
async fn send_range(producer: &Producer, topic: &str, range: std::ops::Range<usize>) -> usize {
    let mut deliveries = Vec::new();
    for i in range {
        deliveries.push(send(producer, topic, i).await);
    }
    let mut failed = 0;
    for d in deliveries {
        if d.await.is_err() {
            failed += 1;
        }
    }
    failed
}

/// Resumes every node of the 3-node cluster that is stopped and starts every one that is not
/// running (a no-op on a healthy cluster).
fn heal_nodes() {
    for node in ["1", "2", "3"] {
        let pid = std::process::Command::new("bash")
            .arg(protocol_tests::repo_root().join("scripts/kafka"))
            .args(["pid", node])
            .output();
        match pid {
            Ok(o) if o.status.success() => {
                let pid = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                drop(Resume(pid));
            }
            // not running (or no cluster at all, which the broker count then reports)
            Ok(_) => {
                eprintln!("node {node} is not running: starting it");
                let _ = start_node(node);
            }
            Err(e) => panic!("running scripts/kafka: {e}"),
        }
    }
}

/// Sends `SIGCONT` to a stopped broker's pid when dropped, panic or not.
struct Resume(String);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0])
            .status();
    }
}

fn signal(pid: &str, signal: &str) {
    match std::process::Command::new("kill")
        .args([signal, pid])
        .status()
    {
        Ok(s) if s.success() => {}
        other => panic!("kill {signal} {pid}: {other:?}"),
    }
}

async fn send(producer: &Producer, topic: &str, i: usize) -> DeliveryFuture {
    match producer
        .send(ProducerRecord::new(topic, Bytes::from(format!("{i}"))))
        .await
    {
        Ok(d) => d,
        Err(e) => panic!("send {i}: {e}"),
    }
}

/// A group member reads on while the broker coordinating its group, and then the leader of a
/// partition it reads, are killed and restarted: every record is read, with no gap and no
/// re-read in any partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_reads_on_when_its_coordinator_and_a_leader_die() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let client = client().await;
    all_three_brokers(&client).await;
    let topic = unique_topic("group-failover");
    create_topic(&client, &topic, 6).await;
    let group = unique_topic("failover-group");
    let coordinator = match client.coordinator(CoordinatorKind::Group, &group).await {
        Ok(n) => n,
        Err(e) => panic!("{e}"),
    };
    let mut consumer = match Consumer::new(
        client.clone(),
        ConsumerConfig {
            heartbeat_interval: Duration::from_millis(500),
            session_timeout: Duration::from_secs(20),
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::for_group(&group)
        },
    ) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    if let Err(e) = consumer.subscribe(Subscription::Topics(vec![topic.clone()])) {
        panic!("{e}");
    }
    let total = 30_000usize;
    let writer = tokio::spawn(write_steadily(client.clone(), topic.clone(), total));
    let faults = {
        let client = client.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            eprintln!("killing node {coordinator}, the group coordinator");
            restart_after_kill(coordinator).await;
            let leader = match client.leader_of(&topic, 0).await {
                Ok((node, _)) => node,
                Err(e) => panic!("{e}"),
            };
            tokio::time::sleep(Duration::from_secs(2)).await;
            eprintln!("killing node {leader}, the leader of {topic}-0");
            restart_after_kill(leader).await;
        })
    };
    let mut by_partition: Vec<Vec<i64>> = vec![Vec::new(); 6];
    let mut values = HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_mins(4);
    while values.len() < total {
        match tokio::time::timeout_at(deadline, consumer.poll()).await {
            Err(elapsed) => panic!("read {} of {total} records ({elapsed})", values.len()),
            Ok(Err(e)) => panic!("poll: {e}"),
            Ok(Ok(ConsumerEvent::Records(r))) => {
                for rec in r.records {
                    by_partition[r.partition as usize].push(rec.offset);
                    values.insert(rec.value);
                }
            }
            Ok(Ok(ConsumerEvent::Error(e))) => panic!("consumer error: {e}"),
            Ok(Ok(event)) => eprintln!("{event:?}"),
        }
    }
    if let Err(e) = faults.await {
        panic!("faults: {e}");
    }
    match writer.await {
        Ok(0) => {}
        Ok(n) => panic!("{n} records failed although the cluster kept a quorum"),
        Err(e) => panic!("writer: {e}"),
    }
    for (p, offsets) in by_partition.iter().enumerate() {
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, &expected, "partition {p}: a gap or a re-read");
    }
    if let Err(e) = consumer.close().await {
        panic!("close: {e}");
    }
}

/// Kills node `node`, waits a little, and starts it again.
async fn restart_after_kill(node: i32) {
    let id = node.to_string();
    let killed = tokio::task::spawn_blocking(move || kafka_script(&["kill", &id]));
    if let Err(e) = killed.await {
        panic!("kill: {e}");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let id = node.to_string();
    let started = tokio::task::spawn_blocking(move || start_node(&id));
    if let Err(e) = started.await {
        panic!("start: {e}");
    }
}

/// Writes `total` records idempotently over about 15 s; returns how many failed.
async fn write_steadily(client: Client, topic: String, total: usize) -> usize {
    let producer = match Producer::new(
        client,
        ProducerConfig {
            enable_idempotence: true,
            linger: Duration::from_millis(5),
            ..ProducerConfig::default()
        },
    ) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let mut deliveries = Vec::with_capacity(total);
    for i in 0..total {
        deliveries.push(send(&producer, &topic, i).await);
        // The faults happen while records flow.
        if i % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut failed = 0;
    for d in deliveries {
        if d.await.is_err() {
            failed += 1;
        }
    }
    failed
}

/// The broker coordinating a transaction is killed while the transaction commits: once while
/// the commit flushes its records, once while its `EndTxn` waits at the (frozen) coordinator.
/// Each time the transaction ends whole, committed or aborted, never in part, and the producer
/// goes on with the next one on the new coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_transaction_coordinator_during_commit_never_commits_half() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let client = client().await;
    assert_eq!(
        client.with_metadata(|m| m.brokers.len()),
        3,
        "needs 3 nodes"
    );
    for end_txn_in_flight in [false, true] {
        commit_while_the_coordinator_dies(&client, end_txn_in_flight).await;
    }
}

async fn commit_while_the_coordinator_dies(client: &Client, end_txn_in_flight: bool) {
    // The first round restarted a node: until it has registered again the metadata lists two
    // brokers, and a topic created then has two replicas, which one death leaves under
    // `min.insync.replicas` (CI once spun five undecided commits on NOT_ENOUGH_REPLICAS so).
    all_three_brokers(client).await;
    let topic = unique_topic("txn-failover");
    create_topic(client, &topic, 6).await;
    let id = unique_topic("txn-failover");
    let producer = initialized(client, &id).await;
    // The markers need 2 of 3 in sync once a node dies (see `wait_until_fully_replicated`).
    wait_until_fully_replicated(
        client,
        &[&topic, "__transaction_state"],
        Duration::from_mins(2),
    )
    .await;
    let coordinator = match client.coordinator(CoordinatorKind::Transaction, &id).await {
        Ok(n) => n,
        Err(e) => panic!("{e}"),
    };
    let total = if end_txn_in_flight { 600 } else { 20_000 };
    if let Err(e) = producer.begin() {
        panic!("begin: {e}");
    }
    let mut deliveries = Vec::with_capacity(total);
    for i in 0..total {
        let record = ProducerRecord::new(topic.clone(), Bytes::from(format!("{i}")))
            .partition((i % 6) as i32);
        match producer.send(record).await {
            Ok(d) => deliveries.push(d),
            Err(e) => panic!("send {i}: {e}"),
        }
    }
    let node = coordinator.to_string();
    let started = std::time::Instant::now();
    let committed = if end_txn_in_flight {
        // Everything is written; the coordinator freezes, gets the EndTxn, and dies.
        for d in deliveries {
            if let Err(e) = d.await {
                panic!("delivery: {e}");
            }
        }
        let pid = kafka_script(&["pid", &node]).trim().to_owned();
        signal(&pid, "-STOP");
        let commit = {
            let producer = producer.clone();
            tokio::spawn(async move { commit_through_faults(&producer).await })
        };
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if let Err(e) = tokio::task::spawn_blocking(move || kafka_script(&["kill", &node])).await {
            panic!("kill: {e}");
        }
        match commit.await {
            Ok(c) => c,
            Err(e) => panic!("commit task: {e}"),
        }
    } else {
        // The kill lands while the commit flushes the records.
        let kill = tokio::task::spawn_blocking(move || kafka_script(&["kill", &node]));
        let committed = commit_through_faults(&producer).await;
        if let Err(e) = kill.await {
            panic!("kill: {e}");
        }
        committed
    };
    eprintln!(
        "{:?}, coordinator {coordinator} killed with the EndTxn in flight: {end_txn_in_flight}; committed: {committed} after {:?}",
        producer.protocol(),
        started.elapsed()
    );
    let node = coordinator.to_string();
    if let Err(e) = tokio::task::spawn_blocking(move || start_node(&node)).await {
        panic!("start: {e}");
    }
    let values = committed_values(client, &topic).await;
    if committed {
        assert_eq!(values.len(), total, "a committed transaction is whole");
        assert!((0..total).all(|i| values.contains(&format!("{i}"))));
    } else {
        assert!(values.is_empty(), "an aborted transaction leaves nothing");
    }
    // The producer goes on.
    if let Err(e) = producer.begin() {
        panic!("begin: {e}");
    }
    for i in 0..100 {
        let record = ProducerRecord::new(topic.clone(), Bytes::from(format!("after-{i}")));
        if let Err(e) = producer.send(record).await {
            panic!("send: {e}");
        }
    }
    if let Err(e) = producer.commit().await {
        panic!("commit after the failover: {e}");
    }
    let after = committed_values(client, &topic).await;
    assert_eq!(after.len(), values.len() + 100);
}

/// Commits, repeating the commit while its outcome is undecided (the coordinator is gone) and
/// aborting when the transaction cannot commit; says whether it committed.
async fn commit_through_faults(producer: &TransactionalProducer) -> bool {
    let mut attempts = 0;
    loop {
        match producer.commit().await {
            Ok(()) => return true,
            Err(Error::Transaction(e)) if !e.is_fatal() => {
                eprintln!("the transaction cannot commit ({e}); aborting");
                let mut aborts = 0;
                while let Err(e) = producer.abort().await {
                    aborts += 1;
                    assert!(aborts < 5, "abort: {e}");
                    eprintln!("abort again after: {e}");
                }
                return false;
            }
            Err(Error::Transaction(e)) => panic!("commit: {e}"),
            Err(e) => {
                attempts += 1;
                assert!(attempts < 5, "commit: {e}");
                eprintln!("commit undecided ({e}); committing again");
            }
        }
    }
}

/// Every value `read_committed` readers see in `topic`'s 6 partitions, once no transaction is
/// pending any more (a coordinator that died may leave markers to its successor: until they are
/// written, the last stable offset holds back).
async fn committed_values(client: &Client, topic: &str) -> HashSet<String> {
    let admin = Admin::new(client.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_mins(2);
    for p in 0..6 {
        loop {
            let stable = admin
                .list_offset(topic, p, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
                .await;
            let end = admin
                .list_offset(
                    topic,
                    p,
                    OffsetSpec::Latest,
                    IsolationLevel::ReadUncommitted,
                )
                .await;
            match (stable, end) {
                (Ok((s, _)), Ok((e, _))) if s == e => break,
                other => assert!(
                    tokio::time::Instant::now() < deadline,
                    "{topic}-{p} still has a pending transaction: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    let mut values = HashSet::new();
    for r in read_all(client, topic, 6).await.iter().flatten() {
        let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        assert!(values.insert(v.clone()), "{v} read twice");
    }
    values
}

/// Partition 0 of `topic` as the cluster describes it now.
async fn partition_now(
    client: &Client,
    topic: &str,
) -> Option<ruststream_kafka::client::PartitionInfo> {
    let _ = client.refresh_metadata(&[topic]).await;
    client.with_metadata(|m| {
        m.topics
            .get(topic)
            .and_then(|t| t.partitions.first().cloned())
    })
}

/// A transactional producer of `id` (5 ms linger), initialized.
async fn initialized(client: &Client, id: &str) -> TransactionalProducer {
    let producer = match TransactionalProducer::new(
        client.clone(),
        ProducerConfig {
            linger: Duration::from_millis(5),
            ..ProducerConfig::transactional(id)
        },
    ) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    if let Err(e) = producer.init().await {
        panic!("init: {e}");
    }
    producer
}

/// Waits up to `limit` until every partition of each of `topics` has a leader and three
/// replicas, all in sync. A test that then takes one node of three leaves two in sync, enough for
/// `min.insync.replicas` 2: without the wait, a node an earlier fault restarted may still be
/// catching up, and a transaction's markers then cannot be written until the killed node is
/// back, which the test only does once the commit has an outcome.
async fn wait_until_fully_replicated(client: &Client, topics: &[&str], limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let _ = client.refresh_metadata(topics).await;
        let lagging: Vec<String> = client.with_metadata(|m| {
            topics
                .iter()
                .flat_map(|topic| match m.topics.get(*topic) {
                    Some(info) if !info.partitions.is_empty() => info
                        .partitions
                        .iter()
                        .filter(|p| {
                            p.leader < 0 || p.replicas.len() < 3 || p.isr.len() < p.replicas.len()
                        })
                        .map(|p| {
                            format!(
                                "{topic}-{} isr {:?} of {:?}",
                                p.partition, p.isr, p.replicas
                            )
                        })
                        .collect::<Vec<_>>(),
                    _ => vec![format!("{topic}: no partitions known")],
                })
                .collect()
        });
        if lagging.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not fully replicated within {limit:?}: {lagging:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits up to `limit` for partition 0 of `topic` to satisfy `done`.
async fn wait_for_partition(
    client: &Client,
    topic: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(&ruststream_kafka::client::PartitionInfo) -> bool,
) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let now = partition_now(client, topic).await;
        if now.as_ref().is_some_and(&done) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic}-0: {what} did not happen in {limit:?}; now {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Writes `values` to partition 0 with `acks=all`; every one must be acknowledged.
async fn write_all(client: &Client, topic: &str, values: &[String]) {
    let producer = match Producer::new(client.clone(), ProducerConfig::default()) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let mut deliveries = Vec::new();
    for v in values {
        let record = ProducerRecord::new(topic.to_owned(), Bytes::from(v.clone())).partition(0);
        match producer.send(record).await {
            Ok(d) => deliveries.push(d),
            Err(e) => panic!("send {v}: {e}"),
        }
    }
    for (v, d) in values.iter().zip(deliveries) {
        if let Err(e) = tokio::time::timeout(Duration::from_mins(1), d)
            .await
            .unwrap_or_else(|_| panic!("{v}: no answer in a minute"))
        {
            panic!("{v}: {e}");
        }
    }
    let _ = producer.close(Duration::from_secs(10)).await;
}

/// Reads from `consumer` until a record with `last` comes, keeping (offset, value) of each.
async fn read_until(consumer: &mut Consumer, seen: &mut Vec<(i64, String)>, last: &str) {
    let waited = tokio::time::timeout(Duration::from_mins(2), async {
        while !seen.iter().any(|(_, v)| v == last) {
            match consumer.poll().await {
                Ok(ConsumerEvent::Records(r)) => {
                    for record in r.records {
                        let value =
                            String::from_utf8_lossy(record.value.as_deref().unwrap_or_default())
                                .into_owned();
                        seen.push((record.offset, value));
                    }
                }
                Ok(other) => eprintln!("consumer: {other:?}"),
                Err(e) => panic!("poll: {e}"),
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "{last} was not read; read so far: {seen:?}");
}

fn named(prefix: &str, range: std::ops::Range<i64>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

/// KIP-320: an unclean election makes a replica that missed the last writes the leader; new
/// records then take the lost offsets. A consumer that had read the lost records must notice
/// the truncation (`OffsetForLeaderEpoch`) and read on from where the new leader's log diverged:
/// every new record is read, none is skipped because its offset was already passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_detects_the_log_truncation_of_an_unclean_election() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let client = client().await;
    all_three_brokers(&client).await;
    let topic = one_partition_topic(
        &client,
        "unclean",
        2,
        &[
            ("unclean.leader.election.enable", "true"),
            ("min.insync.replicas", "1"),
        ],
    )
    .await;
    let first = partition_now(&client, &topic).await.expect("described");
    let old_leader = first.leader;
    let follower = first
        .replicas
        .iter()
        .copied()
        .find(|&r| r != old_leader)
        .expect("two replicas");
    eprintln!(
        "{topic}-0: leader {old_leader}, follower {follower}, epoch {}",
        first.leader_epoch
    );

    write_all(&client, &topic, &named("old", 0..10)).await;
    let mut consumer = match Consumer::new(
        client.clone(),
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    ) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let tp = ruststream_kafka::client::TopicPartition::new(&topic, 0);
    if let Err(e) = consumer.assign(&[(tp.clone(), ruststream_kafka::client::StartAt::Earliest)]) {
        panic!("assign: {e}");
    }
    let mut seen = Vec::new();
    read_until(&mut consumer, &mut seen, "old-9").await;

    // The follower dies; once it is out of the ISR, five more records reach the leader only.
    let id = follower.to_string();
    drop(tokio::task::spawn_blocking(move || kafka_script(&["kill", &id])).await);
    wait_for_partition(
        &client,
        &topic,
        Duration::from_mins(1),
        "the ISR shrinking",
        |p| p.isr == [old_leader],
    )
    .await;
    write_all(&client, &topic, &named("lost", 10..15)).await;
    read_until(&mut consumer, &mut seen, "lost-14").await;

    // The leader dies too, and the follower comes back: the only replica left, elected
    // uncleanly, its log ending at 10.
    let id = old_leader.to_string();
    drop(tokio::task::spawn_blocking(move || kafka_script(&["kill", &id])).await);
    let id = follower.to_string();
    if let Err(e) = tokio::task::spawn_blocking(move || start_node(&id)).await {
        panic!("start {follower}: {e}");
    }
    wait_for_partition(
        &client,
        &topic,
        Duration::from_mins(2),
        "the unclean election",
        |p| p.leader == follower,
    )
    .await;
    let elected = partition_now(&client, &topic).await.expect("described");
    eprintln!(
        "{topic}-0: leader {} at epoch {}",
        elected.leader, elected.leader_epoch
    );
    write_all(&client, &topic, &named("new", 10..20)).await;
    read_until(&mut consumer, &mut seen, "new-19").await;

    // Back to three nodes for the tests after this one; the old leader truncates and follows.
    let id = old_leader.to_string();
    if let Err(e) = tokio::task::spawn_blocking(move || start_node(&id)).await {
        panic!("start {old_leader}: {e}");
    }
    all_three_brokers(&client).await;
    let _ = consumer.close().await;

    // Nothing re-read from the start (an out-of-range reset would), nothing skipped (a fetch
    // from the old position would): the new records follow from the divergence on.
    let mut expected: Vec<(i64, String)> = Vec::new();
    expected.extend((0..10).map(|i| (i, format!("old-{i}"))));
    expected.extend((10..15).map(|i| (i, format!("lost-{i}"))));
    expected.extend((10..20).map(|i| (i, format!("new-{i}"))));
    assert_eq!(
        seen, expected,
        "what the reader read across the unclean election"
    );
}

/// A stalled connection: the leader's route through the fault proxy turns into a blackhole
/// (connections stay open, nothing answers, nothing is reset) and the leader itself stops
/// (SIGSTOP), so the controller moves leadership while no socket anywhere closes. The only way
/// out for a write and a read in flight to it is the client's request timeout: the connection
/// is closed, its requests fail, and they are retried at the new leader. The record is written
/// once and read, all while the old leader's route is still a blackhole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_leader_times_out_and_the_write_and_the_read_move_to_the_new_leader() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let client = client().await;
    all_three_brokers(&client).await;
    let topic = one_partition_topic(&client, "blackhole", 3, &[("min.insync.replicas", "2")]).await;

    // Every connection of `through` goes through the proxy: the brokers advertise the proxy's
    // addresses on their CHAOS listener.
    let (proxy, bootstrap) = chaos_proxy_in_front().await;
    let (through, producer, mut consumer) = behind_the_proxy(&bootstrap, &topic).await;
    let before = named("before", 0..5);
    for v in &before {
        deliver(&producer, &topic, v, Duration::from_secs(30)).await;
    }
    let mut seen = Vec::new();
    read_until(&mut consumer, &mut seen, "before-4").await;

    let leader = match through.leader_of(&topic, 0).await {
        Ok((node, _)) => node,
        Err(e) => panic!("{e}"),
    };
    let route = proxy
        .iter()
        .find(|r| r.name() == format!("b{leader}"))
        .unwrap_or_else(|| panic!("no proxy route for node {leader}"))
        .clone();
    eprintln!(
        "{topic}-0: leader {leader}; its route {} turns into a blackhole",
        route.status()
    );
    route.set_mode(chaos_proxy::fault::Mode::Blackhole);
    let closed_before = route.client_closed();
    let pid = kafka_script(&["pid", &leader.to_string()])
        .trim()
        .to_owned();
    signal(&pid, "-STOP");
    // A panic below must not leave the node stopped for the tests after this one.
    let resume = Resume(pid.clone());
    let started = tokio::time::Instant::now();

    // A write and a read are now in flight to the silent leader.
    let during = match producer
        .send(ProducerRecord::new(topic.clone(), Bytes::from_static(b"during")).partition(0))
        .await
    {
        Ok(d) => d,
        Err(e) => panic!("send: {e}"),
    };
    let delivered = tokio::time::timeout(Duration::from_mins(2), during).await;
    let took = started.elapsed();
    // Asked through the proxy (5 s requests): the direct client's 60 s would stall on the
    // stopped node whenever it asked it first, and that wait would count as the read's.
    let moved = new_leader(&through, &topic, leader).await;
    let written = match delivered {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => panic!("the record failed: {e}"),
        Err(elapsed) => panic!(
            "no delivery in two minutes ({elapsed}): the stalled connection to {leader} was never given up"
        ),
    };
    eprintln!(
        "delivered at offset {} after {took:?} (request timeout {TIMEOUT:?}); leader now {moved:?}; route {}",
        written.offset,
        route.status()
    );
    assert!(
        moved.is_some_and(|n| n != leader),
        "leadership must have moved off the stopped node {leader}: {moved:?}"
    );
    read_until(&mut consumer, &mut seen, "during").await;
    eprintln!("read after {:?}", started.elapsed());
    // Still in force: nothing reached the client over the blackholed route meanwhile.
    assert_eq!(route.mode(), chaos_proxy::fault::Mode::Blackhole);
    // The client gave the stalled connections up: the proxy saw it close them. (Whether it
    // dials the node again meanwhile depends on which node its metadata requests pick, so a
    // redial proves nothing either way: the CI failure of 43cdc4b's successor.)
    let closed = route.client_closed() - closed_before;
    eprintln!("connections to node {leader} the client closed during the blackhole: {closed}");
    assert!(
        closed > 0,
        "the stalled connections to node {leader} were never closed"
    );

    drop(resume);
    route.set_mode(chaos_proxy::fault::Mode::Pass);
    all_three_brokers(&client).await;
    // The resumed node thinks itself the leader until the controller tells it otherwise, and
    // the direct client's metadata still names it: a log read now could ask that zombie for
    // its end (5, without "during"). Once it is back in the ISR it follows the new epoch.
    wait_for_partition(
        &client,
        &topic,
        Duration::from_mins(2),
        "the resumed node back in sync under the new leader",
        |p| p.leader != leader && p.isr.len() == 3,
    )
    .await;
    let _ = consumer.close().await;
    let _ = producer.close(Duration::from_secs(10)).await;

    let log = read_all(&client, &topic, 1).await;
    let values: Vec<String> = log[0]
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    let mut expected = before.clone();
    expected.push("during".to_owned());
    assert_eq!(values, expected, "the log holds each record once, in order");
    let read: Vec<&str> = seen.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(read, expected, "the reader read each record once, in order");
}

/// A new topic of one partition named after `prefix`, on `replicas` replicas with `configs`,
/// returned once its leader is elected and every replica is in sync.
async fn one_partition_topic(
    client: &Client,
    prefix: &str,
    replicas: i16,
    configs: &[(&str, &str)],
) -> String {
    let topic = unique_topic(prefix);
    let new = configs.iter().fold(
        ruststream_kafka::client::NewTopic::new(&topic, 1, replicas),
        |t, (k, v)| t.config(*k, *v),
    );
    if let Err(e) = Admin::new(client.clone())
        .create_topics(&[new], Duration::from_secs(30))
        .await
    {
        panic!("create {topic}: {e}");
    }
    let replicas = usize::try_from(replicas).unwrap_or_default();
    wait_for_partition(
        client,
        &topic,
        Duration::from_secs(30),
        "every replica in sync",
        |p| p.leader >= 0 && p.isr.len() == replicas,
    )
    .await;
    topic
}

/// A client whose every connection goes through the proxy at `bootstrap` (request timeout
/// [`TIMEOUT`]), an idempotent producer on it and a consumer assigned `topic`-0 from the start.
async fn behind_the_proxy(bootstrap: &str, topic: &str) -> (Client, Producer, Consumer) {
    let mut config = ruststream_kafka::client::ClientConfig::new(bootstrap);
    config.connect_timeout = Duration::from_secs(5);
    config.socket_timeout = TIMEOUT;
    let through = match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("through the proxy at {bootstrap}: {e}"),
    };
    let producer = match Producer::new(
        through.clone(),
        ProducerConfig {
            enable_idempotence: true,
            request_timeout: TIMEOUT,
            message_timeout: Duration::from_mins(3),
            ..ProducerConfig::default()
        },
    ) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let mut consumer = match Consumer::new(
        through.clone(),
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    ) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let tp = ruststream_kafka::client::TopicPartition::new(topic, 0);
    if let Err(e) = consumer.assign(&[(tp, ruststream_kafka::client::StartAt::Earliest)]) {
        panic!("assign: {e}");
    }
    (through, producer, consumer)
}

/// The request timeout of the client behind the proxy: short, so the test is quick.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Starts the fault proxy in this process on the routes `scripts/kafka env` gives
/// (`KAFKA_CHAOS_LISTENERS`); returns its routes and the bootstrap list through it. Panics
/// (failing the test) when the variables are missing: the 3-node cluster is needed.
async fn chaos_proxy_in_front() -> (Vec<std::sync::Arc<chaos_proxy::route::Route>>, String) {
    let routes = protocol_tests::chaos_proxy().await;
    let bootstrap = routes
        .iter()
        .map(|r| r.listen().to_string())
        .collect::<Vec<_>>()
        .join(",");
    (routes, bootstrap)
}

/// Sends `value` to partition 0 and waits for its acknowledgement.
async fn deliver(producer: &Producer, topic: &str, value: &str, limit: Duration) {
    let record = ProducerRecord::new(topic.to_owned(), Bytes::from(value.to_owned())).partition(0);
    let d = match producer.send(record).await {
        Ok(d) => d,
        Err(e) => panic!("send {value}: {e}"),
    };
    match tokio::time::timeout(limit, d).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => panic!("{value}: {e}"),
        Err(elapsed) => panic!("{value}: no answer in {limit:?} ({elapsed})"),
    }
}

/// Counts the Metadata requests a client sent and the Produce retries and writes it made.
#[derive(Default)]
struct Requests {
    metadata: AtomicUsize,
    retries: AtomicUsize,
    written_to: std::sync::Mutex<Vec<i32>>,
}

impl Observer for Requests {
    fn interest(&self) -> Interest {
        Interest::REQUESTS | Interest::PRODUCE
    }

    fn on_event(&self, event: &Event<'_>) {
        match *event {
            Event::Request { api_key: 3, .. } => {
                self.metadata.fetch_add(1, Ordering::Relaxed);
            }
            Event::ProduceRetry { .. } => {
                self.retries.fetch_add(1, Ordering::Relaxed);
            }
            Event::BatchWritten { node, .. } => self
                .written_to
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(node),
            _ => {}
        }
    }
}

/// KIP-951: a partition's leadership moves while every broker stays up (replicas reordered,
/// then a preferred leader election, by the Java admin client). The old leader answers the
/// next Produce with `NOT_LEADER_OR_FOLLOWER` and names the new leader; the producer sends
/// there at once, without asking anyone for metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_leader_named_by_the_answer_is_used_without_a_metadata_refresh() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let seen = Arc::new(Requests::default());
    let client = observed_client(Observers::new().with(seen.clone())).await;
    let (topic, producer) = replicated_topic_with_a_record(&client, "kip951").await;
    let (old, target) = leader_and_another_replica(&client, &topic);
    move_leader(&topic, target).await;
    let metadata_before = seen.metadata.load(Ordering::Relaxed);
    let retries_before = seen.retries.load(Ordering::Relaxed);
    if let Err(e) = send(&producer, &topic, 1).await.await {
        panic!("the record after the move: {e}");
    }
    let retries = seen.retries.load(Ordering::Relaxed) - retries_before;
    let metadata = seen.metadata.load(Ordering::Relaxed) - metadata_before;
    let last = seen
        .written_to
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .last()
        .copied();
    assert!(
        retries >= 1,
        "the old leader ({old}) never refused the record"
    );
    assert_eq!(last, Some(target), "written to the new leader");
    assert_eq!(
        metadata, 0,
        "the producer asked for metadata though the answer named the new leader"
    );
}

/// KIP-951 for a consumer: the leadership of the partition it reads moves while every broker
/// stays up; the old leader answers its Fetch with `NOT_LEADER_OR_FOLLOWER` and names the new
/// leader, and the consumer reads on from there without asking anyone for metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_follows_a_moved_leader_named_by_the_answer_without_a_metadata_refresh() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let seen = Arc::new(Requests::default());
    let reader = observed_client(Observers::new().with(seen.clone())).await;
    let client = client().await;
    let (topic, producer) = replicated_topic_with_a_record(&client, "kip951-fetch").await;
    let mut consumer = match Consumer::new(reader.clone(), ConsumerConfig::default()) {
        Ok(c) => c,
        Err(e) => panic!("consumer: {e}"),
    };
    let tp = ruststream_kafka::client::TopicPartition::new(&*topic, 0);
    if let Err(e) = consumer.assign(&[(tp, ruststream_kafka::client::StartAt::Earliest)]) {
        panic!("assign: {e}");
    }
    assert_eq!(next_values(&mut consumer, 1).await, ["0"]);
    let (_, target) = leader_and_another_replica(&reader, &topic);
    let metadata_before = seen.metadata.load(Ordering::Relaxed);
    move_leader(&topic, target).await;
    if let Err(e) = send(&producer, &topic, 1).await.await {
        panic!("the record after the move: {e}");
    }
    assert_eq!(next_values(&mut consumer, 1).await, ["1"]);
    assert_eq!(
        reader
            .with_metadata(|m| m.leader(&topic, 0))
            .map(|(n, _)| n),
        Some(target)
    );
    assert_eq!(
        seen.metadata.load(Ordering::Relaxed) - metadata_before,
        0,
        "the consumer asked for metadata though the answer named the new leader"
    );
}

/// A new topic of one partition on all three brokers, with a producer that wrote record 0.
async fn replicated_topic_with_a_record(client: &Client, prefix: &str) -> (String, Producer) {
    all_three_brokers(client).await;
    let topic = unique_topic(prefix);
    create_topic(client, &topic, 1).await;
    wait_until_fully_replicated(client, &[&topic], Duration::from_mins(1)).await;
    let producer = match Producer::new(client.clone(), ProducerConfig::default()) {
        Ok(p) => p,
        Err(e) => panic!("producer: {e}"),
    };
    if let Err(e) = send(&producer, &topic, 0).await.await {
        panic!("the first record: {e}");
    }
    (topic, producer)
}

/// The leader of partition 0 of `topic` as `client` knows it, and another of its replicas.
fn leader_and_another_replica(client: &Client, topic: &str) -> (i32, i32) {
    let (leader, replicas) = client.with_metadata(|m| {
        let leader = m.leader(topic, 0).map(|(node, _)| node);
        let replicas = m
            .topics
            .get(topic)
            .map(|t| t.partitions[0].replicas.clone());
        (leader, replicas.unwrap_or_default())
    });
    let Some(leader) = leader else {
        panic!("{topic}-0 has no leader");
    };
    let Some(&other) = replicas.iter().find(|&&n| n != leader) else {
        panic!("{topic}-0 has no other replica: {replicas:?}");
    };
    (leader, other)
}

/// Moves the leadership of partition 0 of `topic` to `node` with the Java admin client.
async fn move_leader(topic: &str, node: i32) {
    let args = [
        "move-leader".to_owned(),
        protocol_tests::bootstrap(),
        topic.to_owned(),
        "0".to_owned(),
        node.to_string(),
    ];
    let moved = tokio::task::spawn_blocking(move || {
        protocol_tests::java_interop(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await;
    match moved {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "moving the leader: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!("moving the leader: {e}"),
    }
}

/// The values of the next `n` records the consumer hands out (within 30 s).
async fn next_values(consumer: &mut Consumer, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while out.len() < n {
        let event = match tokio::time::timeout_at(deadline, consumer.poll()).await {
            Ok(Ok(event)) => event,
            Ok(Err(e)) => panic!("poll: {e}"),
            Err(elapsed) => panic!("no record within 30 s ({elapsed}); got {out:?}"),
        };
        if let ConsumerEvent::Records(batch) = event {
            for r in batch.records {
                out.push(
                    String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned(),
                );
            }
        }
    }
    out
}

/// Counts, per broker, the records fetch answers held.
#[derive(Default)]
struct FetchedFrom(std::sync::Mutex<std::collections::BTreeMap<i32, usize>>);

impl Observer for FetchedFrom {
    fn interest(&self) -> Interest {
        Interest::FETCH
    }

    fn on_event(&self, event: &Event<'_>) {
        if let Event::Fetched { node, records, .. } = *event {
            *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(node)
                .or_default() += records;
        }
    }
}

impl FetchedFrom {
    fn take(&self) -> std::collections::BTreeMap<i32, usize> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// KIP-392: a consumer whose `client.rack` is a follower's rack (`scripts/kafka` puts node N
/// in `rack-N`, with Kafka's rack-aware replica selector) reads from that follower, as the
/// leader tells it to; when that follower dies, it reads on from the leader, losing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_with_a_client_rack_fetches_from_the_replica_in_its_rack() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let fetched = Arc::new(FetchedFrom::default());
    let reader = observed_client(Observers::new().with(fetched.clone())).await;
    let client = client().await;
    let (topic, producer) = replicated_topic_with_a_record(&client, "kip392").await;
    let (leader, follower) = leader_and_another_replica(&client, &topic);
    let config = ConsumerConfig {
        client_rack: Some(format!("rack-{follower}")),
        ..ConsumerConfig::default()
    };
    let mut consumer = match Consumer::new(reader.clone(), config) {
        Ok(c) => c,
        Err(e) => panic!("consumer: {e}"),
    };
    let tp = ruststream_kafka::client::TopicPartition::new(&*topic, 0);
    if let Err(e) = consumer.assign(&[(tp, ruststream_kafka::client::StartAt::Earliest)]) {
        panic!("assign: {e}");
    }
    assert_eq!(
        send_range(&producer, &topic, 1..50).await,
        0,
        "records failed"
    );
    let expected: Vec<String> = (0..50).map(|i| i.to_string()).collect();
    assert_eq!(next_values(&mut consumer, 50).await, expected);
    let from = fetched.take();
    assert_eq!(
        from.iter()
            .filter(|(_, n)| **n > 0)
            .map(|(node, _)| *node)
            .collect::<Vec<_>>(),
        [follower],
        "records came from {from:?}; the leader is {leader}"
    );

    // The follower dies: the consumer goes back to the leader.
    let id = follower.to_string();
    if let Err(e) = tokio::task::spawn_blocking(move || kafka_script(&["kill", &id])).await {
        panic!("kill: {e}");
    }
    assert_eq!(
        send_range(&producer, &topic, 50..80).await,
        0,
        "records failed"
    );
    let expected: Vec<String> = (50..80).map(|i| i.to_string()).collect();
    assert_eq!(next_values(&mut consumer, 30).await, expected);
    let from = fetched.take();
    assert!(
        from.get(&leader).copied().unwrap_or(0) > 0,
        "after the follower died, records came from {from:?}; the leader is {leader}"
    );
    all_three_brokers(&client).await;
}
