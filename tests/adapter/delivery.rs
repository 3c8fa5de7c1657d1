//! What a delivery carries (reference 4.C): body, headers and key as the wire record has them,
//! coordinates, lane keys, its own position, and a delivery that outlives its subscription.
//! Records with null values and null-valued or spoofed key headers are written with the native
//! producer, since the adapter's publisher never writes them.

use crate::live;

use std::time::Duration;

use bytes::Bytes;
use ruststream::{
    IncomingMessage, Partitioned, Positioned, Seekable, Seeker, Subscriber, SubscriptionSource,
};
use ruststream_kafka::client::{Admin, Header, Producer, ProducerConfig, ProducerRecord};
use ruststream_kafka::{
    Commit, KafkaPosition, KafkaTopic, LaneKey, PARTITION_KEY_HEADER, StartOffset,
};

fn source(topic: &str) -> KafkaTopic {
    live::quick(
        KafkaTopic::new(topic)
            .group(live::unique("delivery"))
            .start(StartOffset::Earliest)
            .commit(Commit::Tracked),
    )
}

async fn produce(records: Vec<ProducerRecord>) {
    let client = live::admin_client().await;
    let producer = Producer::new(client.clone(), ProducerConfig::default()).expect("producer");
    for record in records {
        producer
            .send(record)
            .await
            .expect("enqueue")
            .await
            .expect("delivered");
    }
    producer.close(Duration::from_secs(5)).await;
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_shows_the_wire_record() {
    live::logs();
    let topic = live::topic("carries", 3).await;
    let before = live::now_millis();
    produce(vec![
        ProducerRecord {
            topic: topic.clone(),
            partition: Some(2),
            key: Some(Bytes::from_static(b"real key")),
            value: Some(Bytes::from_static(b"body")),
            headers: vec![
                Header::new(
                    Bytes::from_static(b"Kafka-Partition-Key"),
                    Some(Bytes::from_static(b"spoof")),
                ),
                Header::new(Bytes::from_static(b"empty"), None),
                Header::new(
                    Bytes::from_static(b"trace"),
                    Some(Bytes::from_static(b"t-1")),
                ),
            ],
            timestamp: None,
        },
        ProducerRecord {
            topic: topic.clone(),
            partition: Some(2),
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: Some(1_234),
        },
    ])
    .await;
    let connected = live::connect(live::broker()).await;
    let mut subscriber = source(&topic)
        .lane_key(LaneKey::RecordKey)
        .subscribe(&connected)
        .await
        .expect("subscribe");
    let mut stream = subscriber.stream();
    let first = live::next(&mut stream).await;
    assert_eq!(first.payload(), b"body");
    assert_eq!(first.key(), Some(&b"real key"[..]));
    assert_eq!(
        (first.topic(), first.partition(), first.offset()),
        (topic.as_str(), 2, 0)
    );
    let stamp = first.timestamp_millis().expect("a timestamp");
    assert!(
        stamp >= before - 1_000 && stamp <= live::now_millis() + 1_000,
        "{stamp}"
    );
    let headers = first.headers();
    assert_eq!(headers.get_str("trace"), Some("t-1"));
    assert_eq!(
        headers.get("empty").map(<[u8]>::len),
        Some(0),
        "a null header is empty"
    );
    assert_eq!(
        headers.get_str(PARTITION_KEY_HEADER),
        Some("real key"),
        "the key, not the spoof"
    );
    assert_eq!(headers.len(), 3);
    assert_eq!(
        IncomingMessage::partition_key(&first),
        Some(&b"real key"[..])
    );
    assert_eq!(Partitioned::partition_key(&first), Some(&b"real key"[..]));
    assert_eq!(first.position(), KafkaPosition::topic_offset(&topic, 2, 0));

    let second = live::next(&mut stream).await;
    assert_eq!(second.payload(), b"", "a null value is an empty body");
    assert_eq!(second.key(), None);
    assert_eq!(second.timestamp_millis(), Some(1_234));
    assert!(second.headers().is_empty());
    assert_eq!(
        IncomingMessage::partition_key(&second),
        None,
        "keyless under RecordKey"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_lanes_key_on_the_partition_number() {
    live::logs();
    let topic = live::topic("lanes", 3).await;
    let connected = live::connect(live::broker()).await;
    let mut subscriber = source(&topic)
        .subscribe(&connected)
        .await
        .expect("subscribe");
    let publisher = live::plain_publisher(&connected);
    live::send_to(&publisher, &topic, 2, b"x").await;
    let mut stream = subscriber.stream();
    let message = live::next(&mut stream).await;
    assert_eq!(IncomingMessage::partition_key(&message), Some(&b"2"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeking_to_a_position_redelivers_the_record_and_what_follows() {
    live::logs();
    let topic = live::topic("own-position", 1).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    for p in ["a", "b", "c"] {
        live::send(&publisher, &topic, p.as_bytes()).await;
    }
    let mut subscriber = source(&topic)
        .subscribe(&connected)
        .await
        .expect("subscribe");
    let seeker = subscriber.seeker();
    let mut stream = subscriber.stream();
    let _a = live::next(&mut stream).await;
    let b = live::next(&mut stream).await;
    let _c = live::next(&mut stream).await;
    seeker.seek(b.position()).await.expect("seek to b");
    let again: Vec<_> = live::payloads(&mut stream, 2, true).await;
    assert_eq!(again, [b"b".to_vec(), b"c".to_vec()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_delivery_outlives_its_subscription_and_closes_it_when_dropped() {
    live::logs();
    let topic = live::topic("held", 1).await;
    let group = live::unique("held");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    let mut headers = ruststream::HeaderMap::new();
    headers.insert("trace-id", "held-1");
    ruststream::Publisher::publish(
        &publisher,
        ruststream::OutgoingMessage::new(&topic, b"held body").with_headers(headers),
        None,
    )
    .await
    .expect("publish");
    let mut subscriber = live::quick(
        KafkaTopic::new(&topic)
            .group(&group)
            .start(StartOffset::Earliest),
    )
    .subscribe(&connected)
    .await
    .expect("subscribe");
    let held = {
        let mut stream = subscriber.stream();
        live::next(&mut stream).await
    };
    drop(subscriber);
    let admin = Admin::new(live::admin_client().await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let described = admin.describe_group(&group).await.expect("describe");
    assert_eq!(
        described.members.len(),
        1,
        "the delivery keeps the consumer: {described:?}"
    );
    assert_eq!(held.payload(), b"held body");
    assert_eq!(held.headers().get_str("trace-id"), Some("held-1"));
    drop(held);
    let mut left = false;
    for _ in 0..50 {
        if admin
            .describe_group(&group)
            .await
            .expect("describe")
            .members
            .is_empty()
        {
            left = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        left,
        "the consumer closes when the last delivery is dropped"
    );
}
