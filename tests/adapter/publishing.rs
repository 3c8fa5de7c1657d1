//! Publishing against the cluster (reference 4.H): what reaches the wire, partition pinning,
//! key placement, the local queue bound, the record size limit, illegal destinations and the
//! durable producer settings. Records are read back with the native client's partition reader,
//! so the test sees the wire record, not the adapter's view of it.

use crate::live;

use std::time::Duration;

use bytes::Bytes;
use ruststream::{HeaderMap, OutgoingMessage, Publisher};
use ruststream_kafka::client::{PartitionReader, Record};
use ruststream_kafka::{
    EOS_SOURCE_HEADER, KafkaError, KafkaOptions, KafkaPublish, PARTITION_KEY_HEADER,
};

/// The records of `topic[partition]` from offset 0 up to `until`.
async fn records(topic: &str, partition: i32, until: i64) -> Vec<Record> {
    let client = live::admin_client().await;
    let records = PartitionReader::new(client.clone(), topic, partition)
        .read_range(0, until, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("reading {topic}[{partition}]: {e}"));
    client.close();
    records
}

fn headers_of(record: &Record) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    record
        .headers
        .iter()
        .map(|h| (h.key.to_vec(), h.value.map(|v| v.to_vec())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_header_becomes_the_key_and_the_source_header_never_leaves() {
    live::logs();
    let topic = live::topic("wire", 1).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    let mut headers = HeaderMap::new();
    headers.insert(PARTITION_KEY_HEADER, "customer-7");
    headers.insert(EOS_SOURCE_HEADER, "0:1:orders");
    headers.insert("trace-id", "abc");
    publisher
        .publish(
            OutgoingMessage::new(&topic, b"with headers").with_headers(headers),
            None,
        )
        .await
        .expect("publish");
    publisher
        .publish(OutgoingMessage::new(&topic, b"bare"), None)
        .await
        .expect("publish");
    let got = records(&topic, 0, 2).await;
    assert_eq!(got[0].key.as_deref(), Some(&b"customer-7"[..]));
    assert_eq!(got[0].value.as_deref(), Some(&b"with headers"[..]));
    assert_eq!(
        headers_of(&got[0]),
        [(b"trace-id".to_vec(), Some(b"abc".to_vec()))]
    );
    assert_eq!(got[1].key, None);
    assert!(got[1].headers.is_empty(), "no header list at all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_partition_wins_per_record_and_a_missing_one_is_refused() {
    live::logs();
    let topic = live::topic("pinned", 3).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for (partition, payload) in [(2, "two"), (0, "zero"), (2, "two again")] {
        let mut headers = HeaderMap::new();
        // The pin beats the key.
        headers.insert(PARTITION_KEY_HEADER, "some key");
        publisher
            .publish(
                OutgoingMessage::new(&topic, payload.as_bytes()).with_headers(headers),
                Some(&KafkaOptions::default().partition(partition)),
            )
            .await
            .expect("publish");
    }
    let two: Vec<_> = records(&topic, 2, 2).await;
    assert_eq!(two[0].value.as_deref(), Some(&b"two"[..]));
    assert_eq!(two[1].value.as_deref(), Some(&b"two again"[..]));
    assert_eq!(
        records(&topic, 0, 1).await[0].value.as_deref(),
        Some(&b"zero"[..])
    );

    let err = publisher
        .publish(
            OutgoingMessage::new(&topic, b"nowhere"),
            Some(&KafkaOptions::default().partition(5)),
        )
        .await
        .expect_err("partition 5 does not exist");
    assert!(matches!(err, KafkaError::Publish(_)), "{err}");
    assert!(
        err.to_string().to_lowercase().contains("unknown partition"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_one_key_share_a_partition_in_order() {
    live::logs();
    let topic = live::topic("keyed", 4).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for i in 0..8 {
        live::send_keyed(&publisher, &topic, "account-42", format!("k{i}").as_bytes()).await;
    }
    let client = live::admin_client().await;
    let mut holders = Vec::new();
    for p in 0..4 {
        let fetched = PartitionReader::new(client.clone(), &topic, p)
            .fetch(0)
            .await
            .expect("fetch");
        if fetched.high_watermark > 0 {
            holders.push((p, fetched.high_watermark));
        }
    }
    assert_eq!(holders.len(), 1, "one partition holds the key: {holders:?}");
    let (partition, count) = holders[0];
    assert_eq!(count, 8);
    let values: Vec<_> = records(&topic, partition, 8)
        .await
        .into_iter()
        .map(|r| String::from_utf8(r.value.expect("value").to_vec()).expect("utf-8"))
        .collect();
    assert_eq!(values, ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_timeout_bounds_the_wait_for_queue_space() {
    live::logs();
    let topic = live::topic("queue", 1).await;
    let connected = live::connect(
        live::broker()
            .producer_config("queue.buffering.max.messages", "1")
            .producer_config("linger.ms", "1500"),
    )
    .await;
    let bounded =
        connected.publisher(KafkaPublish::default().queue_timeout(Duration::from_millis(250)));
    let (a, b) = tokio::join!(
        bounded.publish(OutgoingMessage::new(&topic, b"a"), None),
        bounded.publish(OutgoingMessage::new(&topic, b"b"), None),
    );
    let failed: Vec<_> = [a, b].into_iter().filter_map(Result::err).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(matches!(failed[0], KafkaError::Publish(_)), "{}", failed[0]);

    let unbounded = live::plain_publisher(&connected);
    let (a, b) = tokio::join!(
        unbounded.publish(OutgoingMessage::new(&topic, b"c"), None),
        unbounded.publish(OutgoingMessage::new(&topic, b"d"), None),
    );
    a.expect("waits for space");
    b.expect("waits for space");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_size_limit_counts_like_librdkafka() {
    live::logs();
    let topic = live::topic("size", 1).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    // 36 bytes of framing, and 68 for a header named `n` with a 64-byte value (librdkafka
    // counts the name, the value and their varint lengths).
    let header_cost = 68;
    let fits = 1_000_000 - 36 - header_cost;
    let with_header = |len: usize| {
        let mut headers = HeaderMap::new();
        headers.insert("n", Bytes::from(vec![b'h'; 64]));
        (vec![b'x'; len], headers)
    };
    let (payload, headers) = with_header(fits);
    publisher
        .publish(
            OutgoingMessage::new(&topic, payload.as_slice()).with_headers(headers),
            None,
        )
        .await
        .expect("exactly the limit is accepted");
    let (payload, headers) = with_header(fits + 1);
    let err = publisher
        .publish(
            OutgoingMessage::new(&topic, payload.as_slice()).with_headers(headers),
            None,
        )
        .await
        .expect_err("one byte over");
    assert!(matches!(err, KafkaError::Publish(_)), "{err}");
    assert!(err.to_string().contains("too large"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_illegal_destination_is_refused() {
    live::logs();
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for bad in ["", "conformance refused topic", ".."] {
        let err = publisher
            .publish(OutgoingMessage::new(bad, b"x"), None)
            .await
            .expect_err("illegal");
        assert!(matches!(err, KafkaError::Publish(_)), "{bad:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_producer_starts_and_delivers() {
    live::logs();
    let topic = live::topic("durable", 1).await;
    let connected = live::connect(
        live::broker()
            .producer_config("acks", "all")
            .producer_config("enable.idempotence", "true"),
    )
    .await;
    let publisher = live::plain_publisher(&connected);
    for i in 0..3 {
        live::send(&publisher, &topic, format!("d{i}").as_bytes()).await;
    }
    assert_eq!(records(&topic, 0, 3).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_is_small_and_does_nothing_before_its_first_poll() {
    live::logs();
    let topic = live::topic("lazy", 1).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    // The producer is open and the topic known: the next publish could be queued at once.
    live::send(&publisher, &topic, b"first").await;
    let unpolled = publisher.publish(OutgoingMessage::new(&topic, b"never"), None);
    // A caller with many publishes in flight keeps one of these per record, and moves each
    // into its set: 576 bytes until issue 20, 984 for ruststream-rdkafka 0.7.1's.
    let size = std::mem::size_of_val(&unpolled);
    assert!(size <= 192, "a publish's future is {size} bytes");
    drop(unpolled);
    live::send(&publisher, &topic, b"second").await;
    let got = records(&topic, 0, 2).await;
    let values: Vec<_> = got.iter().map(|r| r.value.as_deref()).collect();
    assert_eq!(
        values,
        [Some(&b"first"[..]), Some(&b"second"[..])],
        "a publish dropped before its first poll sent nothing"
    );
}
