//! The consumer by manual assignment: fetch sessions across partitions, seeks, pauses,
//! `read_committed` against the Java client's transactions.

use std::collections::BTreeMap;
use std::time::Duration;

use protocol_tests::{client, create_topic, java_interop, unique_topic};
use ruststream_kafka::client::{
    Client, Codec, Consumer, ConsumerConfig, ConsumerEvent, IsolationLevel, OffsetReset,
    ProducerConfig, ProducerRecord, Record, ResponseError, StartAt, TopicPartition,
};

use super::{bytes, producer, send_all};

/// A consumer without a group.
pub(crate) fn consumer(client: &Client, config: ConsumerConfig) -> Consumer {
    match Consumer::new(client.clone(), config) {
        Ok(c) => c,
        Err(e) => panic!("consumer: {e}"),
    }
}

/// Polls until `count` records arrived (failing after `timeout`), by partition.
pub(crate) async fn collect(
    consumer: &mut Consumer,
    count: usize,
    timeout: Duration,
) -> BTreeMap<i32, Vec<Record>> {
    let mut out: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    let mut got = 0;
    let deadline = tokio::time::Instant::now() + timeout;
    while got < count {
        match tokio::time::timeout_at(deadline, consumer.poll()).await {
            Err(elapsed) => panic!("{elapsed} with {got} of {count} records"),
            Ok(Err(e)) => panic!("poll: {e}"),
            Ok(Ok(ConsumerEvent::Records(r))) => {
                got += r.records.len();
                out.entry(r.partition).or_default().extend(r.records);
            }
            Ok(Ok(ConsumerEvent::Error(e))) => panic!("consumer error: {e}"),
            Ok(Ok(_)) => {}
        }
    }
    out
}

/// Produces `count` records `key-i`/`value-i` over the topic's partitions (keyed).
async fn produce(client: &Client, topic: &str, count: usize) {
    let p = producer(client, super::codec_config(Codec::Lz4)).await;
    let records = (0..count)
        .map(|i| {
            ProducerRecord::new(topic, bytes(format!("value-{i}")))
                .key(bytes(format!("key-{i}")))
                .timestamp(1_000_000 + i as i64)
        })
        .collect();
    send_all(&p, records).await;
}

fn all_at(topic: &str, partitions: i32, start: StartAt) -> Vec<(TopicPartition, StartAt)> {
    (0..partitions)
        .map(|p| (TopicPartition::new(topic, p), start))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assigned_partitions_are_read_whole_and_in_order() {
    let client = client().await;
    let topic = unique_topic("consume-all");
    create_topic(&client, &topic, 6).await;
    produce(&client, &topic, 30_000).await;
    let mut c = consumer(&client, ConsumerConfig::default());
    if let Err(e) = c.assign(&all_at(&topic, 6, StartAt::Earliest)) {
        panic!("assign: {e}");
    }
    let got = collect(&mut c, 30_000, Duration::from_mins(1)).await;
    let mut values = Vec::new();
    for (p, records) in &got {
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as i64, "partition {p}: a gap or a re-read");
        }
        values.extend(records.iter().filter_map(|r| r.value.clone()));
        assert_eq!(
            c.position(&TopicPartition::new(&topic, *p)),
            Some(records.len() as i64)
        );
    }
    values.sort();
    let mut expected: Vec<_> = (0..30_000).map(|i| bytes(format!("value-{i}"))).collect();
    expected.sort();
    assert_eq!(values, expected);
    // Nothing more arrives.
    assert!(
        tokio::time::timeout(Duration::from_secs(1), c.poll())
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeks_take_effect_before_the_next_record() {
    let client = client().await;
    let topic = unique_topic("consume-seek");
    create_topic(&client, &topic, 1).await;
    produce(&client, &topic, 1_000).await;
    let tp = TopicPartition::new(&topic, 0);
    let mut c = consumer(&client, ConsumerConfig::default());
    if let Err(e) = c.assign(&[(tp.clone(), StartAt::Offset(990))]) {
        panic!("assign: {e}");
    }
    let got = collect(&mut c, 10, Duration::from_secs(30)).await;
    assert_eq!(got[&0][0].offset, 990);

    for (to, first) in [
        (StartAt::Offset(500), 500),
        (StartAt::Earliest, 0),
        // Timestamps are 1_000_000 + i.
        (StartAt::Timestamp(1_000_250), 250),
        (StartAt::Latest, 1_000),
    ] {
        if let Err(e) = c.seek(&tp, to).await {
            panic!("seek {to:?}: {e}");
        }
        assert_eq!(c.position(&tp), Some(first), "{to:?}");
        if first < 1_000 {
            let got = collect(&mut c, 1, Duration::from_secs(30)).await;
            assert_eq!(got[&0][0].offset, first, "{to:?}");
        }
    }
    // After the end: nothing, until something is written.
    assert!(
        tokio::time::timeout(Duration::from_millis(800), c.poll())
            .await
            .is_err()
    );
    produce(&client, &topic, 1).await;
    let got = collect(&mut c, 1, Duration::from_secs(30)).await;
    assert_eq!(got[&0][0].offset, 1_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_partitions_wait_and_others_go_on() {
    let client = client().await;
    let topic = unique_topic("consume-pause");
    create_topic(&client, &topic, 2).await;
    let mut c = consumer(&client, ConsumerConfig::default());
    if let Err(e) = c.assign(&all_at(&topic, 2, StartAt::Earliest)) {
        panic!("assign: {e}");
    }
    let p0 = TopicPartition::new(&topic, 0);
    c.pause(std::slice::from_ref(&p0));
    let p = producer(&client, super::codec_config(Codec::None)).await;
    let records = (0..200)
        .map(|i| {
            let mut r = ProducerRecord::new(&topic, bytes(format!("v{i}")));
            r.partition = Some(i % 2);
            r
        })
        .collect();
    send_all(&p, records).await;
    let got = collect(&mut c, 100, Duration::from_secs(30)).await;
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![1]);
    assert!(
        tokio::time::timeout(Duration::from_millis(800), c.poll())
            .await
            .is_err(),
        "a paused partition handed records out"
    );
    c.resume(std::slice::from_ref(&p0));
    let got = collect(&mut c, 100, Duration::from_secs(30)).await;
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![0]);
    assert_eq!(got[&0].first().map(|r| r.offset), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_skips_the_java_clients_aborted_transactions() {
    if protocol_tests::target() == protocol_tests::Target::Embedded
        && protocol_tests::unsupported_on_embedded(
            "runs the Java client (scripts/interop), which reaches brokers over TCP only",
        )
    {
        return;
    }
    let client = client().await;
    let topic = unique_topic("consume-txn");
    create_topic(&client, &topic, 1).await;
    let bootstrap = protocol_tests::bootstrap();
    for (count, outcome) in [("100", "commit"), ("70", "abort"), ("50", "commit")] {
        let out = java_interop(&["produce-txn", &bootstrap, &topic, "gzip", count, outcome]);
        assert!(
            out.status.success(),
            "java produce-txn: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (isolation, expected) in [
        (IsolationLevel::ReadCommitted, 150),
        (IsolationLevel::ReadUncommitted, 220),
    ] {
        let mut c = consumer(
            &client,
            ConsumerConfig {
                isolation,
                ..ConsumerConfig::default()
            },
        );
        if let Err(e) = c.assign(&all_at(&topic, 1, StartAt::Earliest)) {
            panic!("assign: {e}");
        }
        let got = collect(&mut c, expected, Duration::from_secs(30)).await;
        let records = &got[&0];
        assert_eq!(records.len(), expected, "{isolation:?}");
        // Three transactions, each with its marker: offsets 0..100, 101..171, 172..222.
        if isolation == IsolationLevel::ReadCommitted {
            assert!(records.iter().all(|r| r.offset < 100 || r.offset >= 172));
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(800), c.poll())
                .await
                .is_err(),
            "{isolation:?}: more than expected"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_sessions_go_incremental_and_start_over_after_a_dropped_connection() {
    let client = client().await;
    let topic = unique_topic("consume-session");
    create_topic(&client, &topic, 4).await;
    let mut c = consumer(&client, ConsumerConfig::default());
    if let Err(e) = c.assign(&all_at(&topic, 4, StartAt::Earliest)) {
        panic!("assign: {e}");
    }
    let mut got: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for round in 0..6 {
        if round == 3 {
            // Caught up, the fetcher long-polls; dropping every connection to the broker fails
            // that request, and the fetcher must start a new session (a session itself
            // outlives connections, but not a request lost in flight).
            tokio::time::sleep(Duration::from_millis(200)).await;
            let leader = match client.leader_of(&topic, 0).await {
                Ok((node, _)) => node,
                Err(e) => panic!("{e}"),
            };
            client.disconnect(leader).await;
        }
        produce(&client, &topic, 500).await;
        for (p, records) in collect(&mut c, 500, Duration::from_secs(30)).await {
            got.entry(p).or_default().extend(records);
        }
    }
    let stats = c.fetch_stats();
    println!("{stats:?}");
    assert!(stats.incremental > stats.full, "{stats:?}");
    assert!(stats.failed >= 1, "the fetch in flight failed: {stats:?}");
    assert!(
        stats.full >= 2,
        "a new session after the failed fetch: {stats:?}"
    );
    let total: usize = got.values().map(Vec::len).sum();
    assert_eq!(total, 3_000);
    for (p, records) in &got {
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as i64, "partition {p}: a gap or a re-read");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_out_of_range_follow_auto_offset_reset() {
    let client = client().await;
    let topic = unique_topic("consume-reset");
    create_topic(&client, &topic, 1).await;
    produce(&client, &topic, 10).await;
    let tp = TopicPartition::new(&topic, 0);
    for reset in [
        OffsetReset::Earliest,
        OffsetReset::Latest,
        OffsetReset::Error,
    ] {
        let mut c = consumer(
            &client,
            ConsumerConfig {
                auto_offset_reset: reset,
                ..ConsumerConfig::default()
            },
        );
        if let Err(e) = c.assign(&[(tp.clone(), StartAt::Offset(1_000))]) {
            panic!("assign: {e}");
        }
        match reset {
            OffsetReset::Earliest => {
                let got = collect(&mut c, 10, Duration::from_secs(30)).await;
                assert_eq!(got[&0][0].offset, 0);
            }
            OffsetReset::Latest => {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                while c.position(&tp) != Some(10) {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "{:?}",
                        c.position(&tp)
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            OffsetReset::Error => {
                match tokio::time::timeout(Duration::from_secs(30), c.poll()).await {
                    Ok(Ok(ConsumerEvent::Error(e))) => {
                        assert_eq!(e.code(), Some(ResponseError::OffsetOutOfRange), "{e}");
                        assert!(e.to_string().contains("auto.offset.reset"), "{e}");
                    }
                    other => panic!("expected an out-of-range error, got {other:?}"),
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_stays_bounded_while_the_caller_does_not_poll() {
    let client = client().await;
    let topic = unique_topic("consume-bounded");
    create_topic(&client, &topic, 2).await;
    // Batches smaller than the partition fetch limit: a larger first batch would be returned
    // whole (KIP-74) and overshoot the buffer by up to its size, as in librdkafka.
    let p = producer(
        &client,
        ProducerConfig {
            batch_size: 16 * 1024,
            ..super::codec_config(Codec::None)
        },
    )
    .await;
    let value = bytes("x".repeat(1_000));
    let records = (0..6_000)
        .map(|_| ProducerRecord::new(&topic, value.clone()))
        .collect();
    send_all(&p, records).await;
    let limit = 256 * 1024;
    let per_fetch = 64 * 1024;
    let mut c = consumer(
        &client,
        ConsumerConfig {
            queued_max_bytes: limit,
            max_partition_fetch_bytes: per_fetch as i32,
            ..ConsumerConfig::default()
        },
    );
    if let Err(e) = c.assign(&all_at(&topic, 2, StartAt::Earliest)) {
        panic!("assign: {e}");
    }
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let buffered = c.buffered_bytes();
        // One response of each partition may land on top of a full buffer.
        assert!(
            buffered <= limit + 2 * per_fetch + 4_096,
            "{buffered} bytes buffered"
        );
    }
    assert!(
        c.buffered_bytes() >= limit,
        "the buffer fills up to its limit"
    );
    let got = collect(&mut c, 6_000, Duration::from_mins(1)).await;
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 6_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_assignment_commits_into_a_group_and_resumes_there() {
    let client = client().await;
    let topic = unique_topic("consume-manual-commit");
    create_topic(&client, &topic, 1).await;
    produce(&client, &topic, 300).await;
    let group = unique_topic("manual");
    let tp = TopicPartition::new(&topic, 0);
    let config = || ConsumerConfig {
        enable_auto_commit: false,
        ..ConsumerConfig::for_group(&group)
    };
    let mut c = consumer(&client, config());
    if let Err(e) = c.assign(&[(tp.clone(), StartAt::Offset(0))]) {
        panic!("assign: {e}");
    }
    collect(&mut c, 100, Duration::from_secs(30)).await;
    if let Err(e) = c.store_offset(&tp, 123) {
        panic!("store: {e}");
    }
    if let Err(e) = c.commit().await {
        panic!("commit: {e}");
    }
    if let Err(e) = c.close().await {
        panic!("close: {e}");
    }
    let mut c = consumer(&client, config());
    if let Err(e) = c.assign(&[(tp.clone(), StartAt::Committed)]) {
        panic!("assign: {e}");
    }
    let got = collect(&mut c, 1, Duration::from_secs(30)).await;
    assert_eq!(got[&0][0].offset, 123);
    match c.committed(std::slice::from_ref(&tp)).await {
        Ok(committed) => assert_eq!(committed[0].offset, 123),
        Err(e) => panic!("committed: {e}"),
    }
}
