//! Batches at the size limits: records near `message.max.bytes`, and full batches of small ones.

use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{client, create_topic, read_all, unique_topic};
use ruststream_kafka::client::{Codec, Error, ProducerConfig, ProducerRecord};

use crate::{producer, send_all};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_near_message_max_bytes_go_through_and_larger_ones_are_refused() {
    let client = client().await;
    let topic = unique_topic("large");
    create_topic(&client, &topic, 2).await;
    for codec in [Codec::None, Codec::Zstd] {
        let p = producer(
            &client,
            ProducerConfig {
                compression: codec,
                ..ProducerConfig::default()
            },
        )
        .await;
        // 1_000_000 is message.max.bytes; leave room for the batch and record framing.
        let mut value = vec![0u8; 999_900];
        fastrand::fill(&mut value);
        let records: Vec<ProducerRecord> = (0..4)
            .map(|i| {
                ProducerRecord::new(topic.clone(), Bytes::from(value.clone())).partition(i % 2)
            })
            .collect();
        let reports = send_all(&p, records).await;
        assert_eq!(reports.len(), 4);
        let too_big = ProducerRecord::new(topic.clone(), Bytes::from(vec![0u8; 1_000_001]));
        match p.send(too_big).await {
            Err(Error::InvalidRecord(text)) => assert!(text.contains("too large"), "{text}"),
            other => panic!("an oversized record must be refused: {other:?}"),
        }
        let read = read_all(&client, &topic, 2).await;
        let last = read
            .iter()
            .flatten()
            .filter(|r| r.value.as_deref() == Some(&value[..]))
            .count();
        assert_eq!(last, 4, "{codec:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_batches_of_small_records_fill_to_the_batch_limit() {
    let client = client().await;
    let topic = unique_topic("full-batches");
    create_topic(&client, &topic, 1).await;
    let config = ProducerConfig {
        linger: Duration::from_millis(200),
        compression: Codec::Lz4,
        ..ProducerConfig::default()
    };
    let p = producer(&client, config).await;
    let records: Vec<ProducerRecord> = (0..50_000)
        .map(|i| {
            ProducerRecord::new(topic.clone(), Bytes::from(format!("{i:0>60}")))
                .key(Bytes::from(format!("k{i}")))
        })
        .collect();
    let reports = send_all(&p, records).await;
    for (i, m) in reports.iter().enumerate() {
        assert_eq!(
            m.offset, i as i64,
            "one partition: offsets follow send order"
        );
    }
    let read = read_all(&client, &topic, 1).await;
    assert_eq!(read[0].len(), 50_000);
    for (i, r) in read[0].iter().enumerate() {
        assert_eq!(r.value.as_deref(), Some(format!("{i:0>60}").as_bytes()));
    }
}
