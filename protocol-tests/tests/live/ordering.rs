//! Keyed records over several partitions: placement by key and order within a partition.

use std::collections::HashMap;

use bytes::Bytes;
use protocol_tests::{client, create_topic, read_all, unique_topic};
use ruststream_kafka::client::{Partitioner, ProducerConfig, ProducerRecord};

use crate::{producer, send_all};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_keyed_records_keep_order_per_partition_and_librdkafka_placement() {
    let client = client().await;
    let topic = unique_topic("ordering");
    create_topic(&client, &topic, 6).await;
    let p = producer(
        &client,
        ProducerConfig {
            enable_idempotence: true,
            ..ProducerConfig::default()
        },
    )
    .await;
    let records: Vec<ProducerRecord> = (0..10_000)
        .map(|i| {
            ProducerRecord::new(topic.clone(), Bytes::from(format!("{i}")))
                .key(Bytes::from(format!("user-{}", i % 97)))
        })
        .collect();
    let reports = send_all(&p, records).await;
    let read = read_all(&client, &topic, 6).await;
    assert_eq!(read.iter().map(Vec::len).sum::<usize>(), 10_000);
    let mut partition_of_key: HashMap<Bytes, usize> = HashMap::new();
    for (partition, records) in read.iter().enumerate() {
        let mut last_seq: HashMap<&[u8], i64> = HashMap::new();
        for r in records {
            let key = r.key.clone().unwrap_or_default();
            let seq: i64 = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
                .parse()
                .unwrap_or(-1);
            if let Some(prev) = last_seq.insert(r.key.as_deref().unwrap_or_default(), seq) {
                assert!(
                    seq > prev,
                    "order within partition {partition} broke: {prev} then {seq}"
                );
            }
            let expected = Partitioner::ConsistentRandom.partition_for(Some(&key), 6);
            assert_eq!(expected, Some(partition as i32), "key {key:?} placement");
            assert_eq!(*partition_of_key.entry(key).or_insert(partition), partition);
        }
    }
    for (i, m) in reports.iter().enumerate() {
        let r = &read[m.partition as usize]
            .iter()
            .find(|r| r.offset == m.offset)
            .unwrap_or_else(|| panic!("report {i} points at no record"));
        assert_eq!(r.value.as_deref(), Some(format!("{i}").as_bytes()));
    }
}
