//! Transactions against a real broker: what commits is visible to `read_committed` readers
//! (ours and the Java client's), what aborts never is, fencing, the broker's transaction
//! timeout, and an exactly-once consume-transform-produce loop whose producer is killed over
//! and over.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{bootstrap, client, create_topic, java_interop, unique_topic};
use ruststream_kafka::client::{
    Admin, Client, ConsumerConfig, ConsumerEvent, Error, IsolationLevel, OffsetReset, OffsetSpec,
    OffsetToCommit, ProducerConfig, ProducerRecord, Record, StartAt, Subscription, TopicPartition,
    TransactionErrorKind, TransactionProtocol, TransactionalProducer,
};

use crate::consume::{collect, consumer};

/// A transactional producer with `config`, initialized.
pub(crate) async fn initialized(client: &Client, config: ProducerConfig) -> TransactionalProducer {
    let p = match TransactionalProducer::new(client.clone(), config) {
        Ok(p) => p,
        Err(e) => panic!("transactional producer: {e}"),
    };
    if let Err(e) = p.init().await {
        panic!("init: {e}");
    }
    p
}

fn config(id: &str) -> ProducerConfig {
    ProducerConfig {
        linger: Duration::from_millis(5),
        ..ProducerConfig::transactional(id)
    }
}

/// The transaction error kind of a result, `None` for success or another error.
fn kind<T>(r: &Result<T, Error>) -> Option<TransactionErrorKind> {
    match r {
        Err(Error::Transaction(e)) => Some(e.kind()),
        _ => None,
    }
}

/// Sends `values` round-robin over `partitions` partitions in the open transaction and waits
/// for their delivery reports.
async fn send_values(p: &TransactionalProducer, topic: &str, partitions: i32, values: &[String]) {
    let mut reports = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let record =
            ProducerRecord::new(topic, Bytes::from(v.clone())).partition(i as i32 % partitions);
        match p.send(record).await {
            Ok(d) => reports.push(d),
            Err(e) => panic!("send {v}: {e}"),
        }
    }
    for d in reports {
        if let Err(e) = d.await {
            panic!("delivery: {e}");
        }
    }
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn value_of(r: &Record) -> String {
    String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()
}

/// Reads every partition from the start with `isolation` until `count` records came, then
/// checks that nothing more comes; returns the values read.
async fn read_values(
    client: &Client,
    topic: &str,
    partitions: i32,
    isolation: IsolationLevel,
    count: usize,
) -> Vec<String> {
    let mut c = consumer(
        client,
        ConsumerConfig {
            isolation,
            ..ConsumerConfig::default()
        },
    );
    let all: Vec<(TopicPartition, StartAt)> = (0..partitions)
        .map(|p| (TopicPartition::new(topic, p), StartAt::Earliest))
        .collect();
    if let Err(e) = c.assign(&all) {
        panic!("assign: {e}");
    }
    let got = collect(&mut c, count, Duration::from_mins(1)).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(800), c.poll())
            .await
            .is_err(),
        "{isolation:?}: more than {count} records"
    );
    got.values().flatten().map(value_of).collect()
}

/// The values the Java client's consumer reads: the first `count` records of each run.
fn java_values(topic: &str, count: usize, isolation: &str) -> Vec<String> {
    let prop = format!("isolation.level={isolation}");
    let out = java_interop(&[
        "--prop",
        &prop,
        "consume",
        &bootstrap(),
        topic,
        &count.to_string(),
        "60000",
    ]);
    assert!(
        out.status.success(),
        "java consume ({isolation}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split('\t').nth(4))
        .map(|hex| {
            let bytes: Vec<u8> = (0..hex.len() / 2)
                .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_records_are_visible_and_aborted_ones_only_to_read_uncommitted() {
    let client = client().await;
    let topic = unique_topic("txn-visibility");
    create_topic(&client, &topic, 3).await;
    let p = initialized(&client, config(&unique_topic("txn-visibility"))).await;
    // Kafka 4 clusters (and the embedded one, by default) finalize `transaction.version` 2,
    // so the producer speaks KIP-890; Kafka 3 stops at the classic protocol.
    let kafka_3 = protocol_tests::target() == protocol_tests::Target::Kafka
        && std::env::var("KAFKA_VERSION").is_ok_and(|v| v.starts_with("3."));
    let expected = if kafka_3 {
        TransactionProtocol::Classic
    } else {
        TransactionProtocol::V2
    };
    assert_eq!(p.protocol(), Some(expected));
    // The aborted transaction first: were its records visible, they would come first.
    let aborted = values("aborted", 150);
    let committed = values("committed", 200);
    if let Err(e) = p.begin() {
        panic!("begin: {e}");
    }
    send_values(&p, &topic, 3, &aborted).await;
    if let Err(e) = p.abort().await {
        panic!("abort: {e}");
    }
    if let Err(e) = p.begin() {
        panic!("begin: {e}");
    }
    send_values(&p, &topic, 3, &committed).await;
    if let Err(e) = p.commit().await {
        panic!("commit: {e}");
    }
    let mut everything = aborted.clone();
    everything.extend(committed.iter().cloned());

    let ours = read_values(&client, &topic, 3, IsolationLevel::ReadCommitted, 200).await;
    assert_eq!(
        sorted(ours),
        sorted(committed.clone()),
        "ours, read_committed"
    );
    let ours = read_values(&client, &topic, 3, IsolationLevel::ReadUncommitted, 350).await;
    assert_eq!(
        sorted(ours),
        sorted(everything.clone()),
        "ours, read_uncommitted"
    );

    if protocol_tests::target() == protocol_tests::Target::Embedded
        && protocol_tests::unsupported_on_embedded(
            "the Java client's reads (scripts/interop) reach brokers over TCP only",
        )
    {
        return;
    }
    let java = java_values(&topic, 200, "read_committed");
    assert_eq!(sorted(java), sorted(committed), "Java, read_committed");
    let java = java_values(&topic, 350, "read_uncommitted");
    assert_eq!(sorted(java), sorted(everything), "Java, read_uncommitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_machine_refuses_misuse_and_changes_nothing() {
    let client = client().await;
    let topic = unique_topic("txn-misuse");
    create_topic(&client, &topic, 1).await;
    let p = match TransactionalProducer::new(client.clone(), config(&unique_topic("txn-misuse"))) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(kind(&p.begin()), Some(TransactionErrorKind::Uninitialized));
    if let Err(e) = p.init().await {
        panic!("init: {e}");
    }
    let record = || ProducerRecord::new(topic.clone(), Bytes::from_static(b"x"));
    assert_eq!(
        kind(&p.send(record()).await),
        Some(TransactionErrorKind::NoTransaction)
    );
    assert_eq!(
        kind(&p.commit().await),
        Some(TransactionErrorKind::NoTransaction)
    );
    assert_eq!(
        kind(&p.abort().await),
        Some(TransactionErrorKind::NoTransaction)
    );
    assert!(p.begin().is_ok());
    let clone = p.clone();
    assert_eq!(
        kind(&clone.begin()),
        Some(TransactionErrorKind::Busy),
        "a clone shares the transaction"
    );
    send_values(&p, &topic, 1, &values("kept", 3)).await;
    // The refused begin left the open transaction alone: it commits what it had.
    assert!(p.commit().await.is_ok());
    // A transaction with nothing in it commits (and aborts) without the coordinator.
    assert!(p.begin().is_ok());
    assert!(p.commit().await.is_ok());
    assert!(p.begin().is_ok());
    assert!(p.abort().await.is_ok());
    let read = read_values(&client, &topic, 1, IsolationLevel::ReadCommitted, 3).await;
    assert_eq!(sorted(read), values("kept", 3));
    // Plain producers refuse a transactional id; transactional ones need idempotence.
    assert!(ruststream_kafka::client::Producer::new(client.clone(), config("x")).is_err());
    let refused = TransactionalProducer::new(
        client.clone(),
        ProducerConfig {
            enable_idempotence: false,
            ..config("x")
        },
    );
    assert!(refused.err().is_some_and(|e| {
        e.to_string()
            .contains("`transactional.id` requires `enable.idempotence=true`")
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_with_the_same_id_fences_the_first() {
    let client = client().await;
    let topic = unique_topic("txn-fence");
    create_topic(&client, &topic, 3).await;
    let id = unique_topic("txn-fence");
    let first = initialized(&client, config(&id)).await;
    if let Err(e) = first.begin() {
        panic!("begin: {e}");
    }
    send_values(&first, &topic, 3, &values("first", 60)).await;
    let second = initialized(&client, config(&id)).await;
    let refused = first.commit().await;
    assert_eq!(
        kind(&refused),
        Some(TransactionErrorKind::Fenced),
        "{refused:?}"
    );
    assert!(
        refused
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("fenced")),
        "{refused:?}"
    );
    // Unusable until init: every call says so.
    assert_eq!(kind(&first.begin()), Some(TransactionErrorKind::Fenced));
    assert_eq!(
        kind(&first.abort().await),
        Some(TransactionErrorKind::Fenced)
    );
    let record = ProducerRecord::new(topic.clone(), Bytes::from_static(b"late"));
    assert_eq!(
        kind(&first.send(record).await),
        Some(TransactionErrorKind::Fenced)
    );

    if let Err(e) = second.begin() {
        panic!("begin: {e}");
    }
    send_values(&second, &topic, 3, &values("second", 30)).await;
    if let Err(e) = second.commit().await {
        panic!("commit: {e}");
    }
    // The first producer's open transaction was aborted when the second one initialized.
    let read = read_values(&client, &topic, 3, IsolationLevel::ReadCommitted, 30).await;
    assert_eq!(sorted(read), sorted(values("second", 30)));
    let read = read_values(&client, &topic, 3, IsolationLevel::ReadUncommitted, 90).await;
    assert_eq!(read.len(), 90);

    // Re-initializing makes the first usable again, and fences the second in turn.
    if let Err(e) = first.init().await {
        panic!("re-init: {e}");
    }
    if let Err(e) = second.begin() {
        panic!("begin: {e}");
    }
    if let Ok(d) = second
        .send(ProducerRecord::new(topic.clone(), Bytes::from_static(b"x")).partition(0))
        .await
    {
        drop(d.await);
    }
    assert_eq!(
        kind(&second.commit().await),
        Some(TransactionErrorKind::Fenced)
    );
    assert!(first.begin().is_ok());
    send_values(&first, &topic, 3, &values("again", 3)).await;
    assert!(first.commit().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_open_past_its_timeout_is_aborted_by_the_broker() {
    let client = client().await;
    let topic = unique_topic("txn-timeout");
    create_topic(&client, &topic, 1).await;
    let timeout = Duration::from_secs(2);
    let p = initialized(
        &client,
        ProducerConfig {
            transaction_timeout: timeout,
            ..config(&unique_topic("txn-timeout"))
        },
    )
    .await;
    if let Err(e) = p.begin() {
        panic!("begin: {e}");
    }
    send_values(&p, &topic, 1, &values("expired", 5)).await;
    // The broker looks for expired transactions every
    // `transaction.abort.timed.out.transaction.cleanup.interval.ms` (10 s by default); its
    // abort marker moves the last stable offset past the records.
    let admin = Admin::new(client.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        let stable = admin
            .list_offset(&topic, 0, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await;
        if stable.as_ref().is_ok_and(|(o, _)| *o > 5) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the broker did not abort the transaction ({stable:?})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let refused = p.commit().await;
    eprintln!("commit after the timeout: {refused:?}");
    // Classic: PRODUCER_FENCED; v2: INVALID_TXN_STATE (fatal). Either way init is needed.
    let fatal = match &refused {
        Err(Error::Transaction(e)) => e.is_fatal(),
        _ => false,
    };
    assert!(fatal, "{refused:?}");
    assert!(
        refused
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("transaction.timeout.ms")),
        "the error names the likely cause: {refused:?}"
    );
    let read = read_values(&client, &topic, 1, IsolationLevel::ReadCommitted, 0).await;
    assert!(read.is_empty());
    let read = read_values(&client, &topic, 1, IsolationLevel::ReadUncommitted, 5).await;
    assert_eq!(read.len(), 5);
    // init makes it usable again.
    if let Err(e) = p.init().await {
        panic!("re-init: {e}");
    }
    assert!(p.begin().is_ok());
    send_values(&p, &topic, 1, &values("kept", 2)).await;
    assert!(p.commit().await.is_ok());
    let read = read_values(&client, &topic, 1, IsolationLevel::ReadCommitted, 2).await;
    assert_eq!(sorted(read), values("kept", 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_commit_with_the_transaction_and_only_for_the_current_member() {
    let client = client().await;
    let topic = unique_topic("txn-offsets");
    create_topic(&client, &topic, 1).await;
    let p = initialized(&client, config(&unique_topic("txn-offsets"))).await;
    let group = unique_topic("txn-offsets-group");
    let mut c = consumer(
        &client,
        ConsumerConfig {
            enable_auto_commit: false,
            session_timeout: Duration::from_secs(10),
            ..ConsumerConfig::for_group(&group)
        },
    );
    if let Err(e) = c.subscribe(Subscription::Topics(vec![topic.clone()])) {
        panic!("subscribe: {e}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        match tokio::time::timeout_at(deadline, c.poll()).await {
            Ok(Ok(ConsumerEvent::Assigned(_))) => break,
            Ok(Ok(_)) => {}
            other => panic!("no assignment: {other:?}"),
        }
    }
    let Some(group_metadata) = c.group_metadata() else {
        panic!("no group metadata");
    };
    assert!(group_metadata.member.is_some(), "{group_metadata:?}");
    let at = |offset| OffsetToCommit {
        topic: topic.clone(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    };
    let committed = || async {
        match c.committed(&[TopicPartition::new(&topic, 0)]).await {
            Ok(o) => o[0].offset,
            Err(e) => panic!("committed: {e}"),
        }
    };
    // Aborted: the offsets go with the transaction.
    assert!(p.begin().is_ok());
    if let Err(e) = p.send_offsets(&[at(10)], &group_metadata).await {
        panic!("send_offsets: {e}");
    }
    assert!(p.abort().await.is_ok());
    assert_eq!(committed().await, -1);
    // A member of another generation is refused (KIP-447): the transaction must abort.
    let mut stale = group_metadata.clone();
    if let Some(m) = &mut stale.member {
        m.generation += 7;
    }
    assert!(p.begin().is_ok());
    let refused = p.send_offsets(&[at(15)], &stale).await;
    assert_eq!(
        kind(&refused),
        Some(TransactionErrorKind::Abortable),
        "{refused:?}"
    );
    assert_eq!(
        kind(&p.commit().await),
        Some(TransactionErrorKind::Abortable)
    );
    assert!(p.abort().await.is_ok());
    // Committed: the group has them.
    assert!(p.begin().is_ok());
    if let Err(e) = p.send_offsets(&[at(20)], &group_metadata).await {
        panic!("send_offsets: {e}");
    }
    if let Err(e) = p.commit().await {
        panic!("commit: {e}");
    }
    assert_eq!(committed().await, 20);
}

/// One run of an exactly-once consume-transform-produce loop, as a service would run it: the
/// producer fences its predecessors, then the consumer joins the group (a static member, so
/// that a restart takes the place of the killed run without waiting for its session to
/// expire) and resumes at the committed offsets. Every poll's records become one transaction
/// with their consumed offsets. Returns at the first error (a crash), or runs until killed.
async fn transform(
    client: Client,
    input: String,
    output: String,
    group: String,
    id: String,
) -> Result<(), Error> {
    let producer = TransactionalProducer::new(client.clone(), config(&id))?;
    producer.init().await?;
    let mut consumer = ruststream_kafka::client::Consumer::new(
        client.clone(),
        ConsumerConfig {
            group_instance_id: Some("transformer".to_owned()),
            session_timeout: Duration::from_secs(10),
            enable_auto_commit: false,
            enable_auto_offset_store: false,
            auto_offset_reset: OffsetReset::Earliest,
            isolation: IsolationLevel::ReadCommitted,
            ..ConsumerConfig::for_group(&group)
        },
    )?;
    consumer.subscribe(Subscription::Topics(vec![input.clone()]))?;
    loop {
        let ConsumerEvent::Records(batch) = consumer.poll().await? else {
            continue;
        };
        // Small transactions, so that kills land in all their phases.
        for chunk in batch.records.chunks(200) {
            let Some(last) = chunk.last().map(|r| r.offset) else {
                continue;
            };
            producer.begin()?;
            for r in chunk {
                let value = format!("out-{}", value_of(r));
                producer
                    .send(ProducerRecord::new(&output, Bytes::from(value)))
                    .await?;
            }
            let next = OffsetToCommit {
                topic: input.clone(),
                partition: batch.partition,
                offset: last + 1,
                leader_epoch: batch.leader_epoch,
                metadata: None,
            };
            let Some(group) = consumer.group_metadata() else {
                return Err(Error::Config("no group".into()));
            };
            producer.send_offsets(&[next], &group).await?;
            producer.commit().await?;
        }
    }
}

/// The group's committed offsets of the input, summed (-1 when unknown). `stable` waits for
/// the offsets of open transactions to settle; without it they are left out.
async fn committed_total(
    client: &Client,
    group: &str,
    input: &str,
    partitions: i32,
    stable: bool,
) -> i64 {
    let offsets = ruststream_kafka::client::Offsets::new(client.clone(), group);
    let wanted: Vec<(&str, i32)> = (0..partitions).map(|p| (input, p)).collect();
    match offsets.fetch(&wanted, stable).await {
        Ok(o) => o.iter().map(|c| c.offset.max(0)).sum(),
        Err(e) => {
            eprintln!("committed offsets: {e}");
            -1
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_transform_produce_is_exactly_once_through_repeated_kills() {
    const RECORDS: usize = 50_000;
    const PARTITIONS: i32 = 6;
    const KILLS: usize = 6;
    let client = client().await;
    let input = unique_topic("eos-in");
    let output = unique_topic("eos-out");
    create_topic(&client, &input, PARTITIONS).await;
    create_topic(&client, &output, PARTITIONS).await;
    let plain = crate::producer(
        &client,
        ProducerConfig {
            enable_idempotence: true,
            ..ProducerConfig::default()
        },
    )
    .await;
    let records = (0..RECORDS)
        .map(|i| {
            ProducerRecord::new(&input, Bytes::from(i.to_string())).key(Bytes::from(i.to_string()))
        })
        .collect();
    crate::send_all(&plain, records).await;
    let group = unique_topic("eos-group");
    let id = unique_topic("eos-id");
    let start = || {
        tokio::spawn(transform(
            client.clone(),
            input.clone(),
            output.clone(),
            group.clone(),
            id.clone(),
        ))
    };
    for kill in 0..KILLS {
        let run = start();
        let after = Duration::from_millis(fastrand::u64(200..1_500));
        tokio::time::sleep(after).await;
        run.abort();
        if let Ok(Err(e)) = run.await {
            eprintln!("run {kill} crashed by itself: {e}");
        }
        let total = committed_total(&client, &group, &input, PARTITIONS, false).await;
        eprintln!("killed run {kill} after {after:?}; committed input offsets sum to {total}");
    }
    // The last run finishes the input (restarted if it crashes).
    let deadline = tokio::time::Instant::now() + Duration::from_mins(4);
    let mut run = start();
    loop {
        let total = committed_total(&client, &group, &input, PARTITIONS, false).await;
        if total == RECORDS as i64
            && committed_total(&client, &group, &input, PARTITIONS, true).await == total
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the input was not consumed in time (committed {total} of {RECORDS})"
        );
        if run.is_finished() {
            if let Ok(Err(e)) = run.await {
                eprintln!("the last run crashed: {e}; restarting");
            }
            run = start();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    run.abort();
    drop(run.await);

    let read = protocol_tests::read_all(&client, &output, PARTITIONS).await;
    let mut seen = HashSet::with_capacity(RECORDS);
    for r in read.iter().flatten() {
        let v = value_of(r);
        assert!(seen.insert(v.clone()), "{v} committed twice");
    }
    let missing: Vec<usize> = (0..RECORDS)
        .filter(|i| !seen.contains(&format!("out-{i}")))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "results missing, e.g. {missing:?}");
    assert_eq!(seen.len(), RECORDS, "nothing but the results");
}
