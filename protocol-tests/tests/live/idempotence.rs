//! Idempotent produce through dropped connections: retries happen, nothing is written twice,
//! nothing is lost, and each partition keeps send order.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{client, create_topic, read_all, unique_topic};
use ruststream_kafka::client::{Acks, ProducerConfig, ProducerRecord};

use crate::producer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_through_dropped_connections_write_each_record_once() {
    let client = client().await;
    let topic = unique_topic("idempotent");
    create_topic(&client, &topic, 3).await;
    let config = ProducerConfig {
        enable_idempotence: true,
        linger: Duration::from_millis(2),
        batch_num_messages: 200,
        // Far more than the test needs: a producer that stalls fails here instead of
        // finishing late.
        message_timeout: Duration::from_mins(1),
        ..ProducerConfig::default()
    };
    let p = producer(&client, config).await;
    // One delivery first, so the producer id is in hand before connections start dropping.
    let first = ProducerRecord::new(topic.clone(), Bytes::from_static(b"-1")).partition(0);
    match p.send(first).await {
        Ok(d) => drop(d.await),
        Err(e) => panic!("{e}"),
    }
    let stop = Arc::new(AtomicBool::new(false));
    let chaos = {
        let client = client.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let nodes: Vec<i32> = client.with_metadata(|m| m.brokers.keys().copied().collect());
            let mut drops = 0u32;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(fastrand::u64(10..50))).await;
                for n in &nodes {
                    client.disconnect(*n).await;
                }
                drops += 1;
            }
            drops
        })
    };
    // Rounds of 40 000 until a drop has cut a request short: on a fast in-memory cluster
    // with a busy scheduler, one round can finish before the first drop lands.
    let round = 40_000;
    let mut total = 0;
    let mut delivered = 0;
    let mut failed = 0;
    for _ in 0..5 {
        let mut deliveries = Vec::with_capacity(round);
        for i in total..total + round {
            let record = ProducerRecord::new(topic.clone(), Bytes::from(format!("{i}")))
                .partition((i % 3) as i32);
            match p.send(record).await {
                Ok(d) => deliveries.push(d),
                Err(e) => panic!("send {i}: {e}"),
            }
            if i % 1000 == 0 {
                tokio::task::yield_now().await;
            }
        }
        total += round;
        for d in deliveries {
            match d.await {
                Ok(_) => delivered += 1,
                Err(e) => {
                    failed += 1;
                    eprintln!("delivery failed: {e}");
                }
            }
        }
        if p.retries() > 0 {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let drops = chaos.await.unwrap_or(0);
    let retries = p.retries();
    eprintln!(
        "connection drops {drops}, batch retries {retries}, delivered {delivered}, failed {failed}"
    );
    assert!(
        drops > 0 && retries > 0,
        "the test must force retries (drops {drops}, retries {retries})"
    );
    assert_eq!(failed, 0, "every record is delivered despite the drops");

    let read = read_all(&client, &topic, 3).await;
    let mut seen = HashSet::new();
    for (partition, records) in read.iter().enumerate() {
        let mut last = -1i64;
        for r in records {
            let n: i64 = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
                .parse()
                .unwrap_or(-2);
            if n == -1 {
                continue; // the warm-up record
            }
            assert!(seen.insert(n), "record {n} written twice");
            assert_eq!(n % 3, partition as i64);
            assert!(n > last, "partition {partition}: {n} after {last}");
            last = n;
        }
    }
    assert_eq!(seen.len(), total, "every record read back exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_and_one_deliver() {
    let client = client().await;
    let topic = unique_topic("acks");
    create_topic(&client, &topic, 1).await;
    for (acks, expect_offsets) in [(Acks::Leader, true), (Acks::None, false)] {
        let p = producer(
            &client,
            ProducerConfig {
                acks,
                ..ProducerConfig::default()
            },
        )
        .await;
        let mut reports = Vec::new();
        for i in 0..100 {
            match p
                .send(ProducerRecord::new(
                    topic.clone(),
                    Bytes::from(format!("{i}")),
                ))
                .await
            {
                Ok(d) => reports.push(d),
                Err(e) => panic!("{e}"),
            }
        }
        for d in reports {
            let m = match d.await {
                Ok(m) => m,
                Err(e) => panic!("{acks:?}: {e}"),
            };
            assert_eq!(m.offset >= 0, expect_offsets, "{acks:?}: {m:?}");
        }
        assert_eq!(p.close(Duration::from_secs(10)).await, 0);
    }
    let read = read_all(&client, &topic, 1).await;
    assert_eq!(read[0].len(), 200);
}
