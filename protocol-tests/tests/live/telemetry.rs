//! KIP-714: a client pushes its metrics to a cluster that subscribes to them. `scripts/kafka up`
//! gives every broker a telemetry receiver (`scripts/kafka-runtime/TelemetryReceiver.java`)
//! that decodes each push with the OTLP classes Kafka ships and writes it as one JSON line to
//! `$KAFKA_TELEMETRY_DIR/node-N.jsonl`; these tests read those lines.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use protocol_tests::{bootstrap, client, create_topic, unique_topic};
use ruststream_kafka::client::{
    Admin, Client, ClientConfig, ClientRole, ConsumerConfig, ProducerConfig, ProducerRecord,
    StartAt, TopicPartition,
};
use serde_json::Value;

use super::consume::{collect, consumer};
use super::{bytes, producer, send_all};

fn telemetry_dir() -> PathBuf {
    match std::env::var("KAFKA_TELEMETRY_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(e) => panic!(
            "KAFKA_TELEMETRY_DIR: {e}; start Kafka with `scripts/kafka up` and export \
             `scripts/kafka env`"
        ),
    }
}

/// Every push the brokers' receivers recorded from the client `client_id`.
fn pushes_of(client_id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(telemetry_dir()) else {
        return out;
    };
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        // (a line still being written has no newline yet: it is read next time)
        for line in text
            .split_inclusive('\n')
            .filter_map(|l| l.strip_suffix('\n'))
        {
            match serde_json::from_str::<Value>(line) {
                Ok(v) if v["client_id"] == client_id => out.push(v),
                Ok(_) => {}
                Err(e) => panic!("the receiver wrote a line that is not JSON ({e}): {line}"),
            }
        }
    }
    out
}

/// Polls the receivers' files until `done` holds of `client_id`'s pushes.
async fn wait_for_pushes(
    client_id: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pushes = pushes_of(client_id);
        if done(&pushes) {
            return pushes;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} from {client_id} within 30 s; its pushes: {pushes:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The sum over every push of metric `name`'s (integer) points whose attributes include
/// `having`.
fn total(pushes: &[Value], name: &str, having: &[(&str, Value)]) -> i64 {
    points(pushes, name, having)
        .iter()
        .map(|v| v.as_i64().unwrap_or(i64::MIN / 2))
        .sum()
}

/// The values of metric `name`'s points whose attributes include `having`, over `pushes`.
fn points(pushes: &[Value], name: &str, having: &[(&str, Value)]) -> Vec<Value> {
    let mut out = Vec::new();
    for push in pushes {
        for metric in push["metrics"].as_array().into_iter().flatten() {
            if metric["name"] != name {
                continue;
            }
            for point in metric["points"].as_array().into_iter().flatten() {
                if having.iter().all(|(k, v)| point["attributes"][*k] == *v) {
                    out.push(point["value"].clone());
                }
            }
        }
    }
    out
}

async fn telemetry_client(client_id: &str, role: ClientRole) -> Client {
    let mut config = ClientConfig::new(&bootstrap());
    config.client_id = client_id.to_owned();
    config.role = role;
    match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("connect {client_id}: {e}"),
    }
}

/// Subscribes the clients whose ids start with `prefix-` to both families of metrics, pushed
/// every second (client ids are matched as regular expressions).
async fn subscribe(admin: &Admin, subscription: &str, prefix: &str) {
    let matching = format!("client_id={prefix}-.*");
    if let Err(e) = admin
        .alter_client_metrics(
            subscription,
            &[
                (
                    "metrics",
                    Some("org.apache.kafka.producer.,org.apache.kafka.consumer."),
                ),
                ("interval.ms", Some("1000")),
                ("match", Some(&matching)),
            ],
        )
        .await
    {
        panic!("creating the client metrics subscription: {e}");
    }
    // The controller's record reaches the brokers' subscription tables shortly after.
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A consumer client reads the 30 records of `topic`'s three partitions: how many each had.
async fn consume_all(consumer_id: &str, topic: &str) -> (Client, BTreeMap<i32, usize>) {
    let consumer_client = telemetry_client(consumer_id, ClientRole::Consumer).await;
    let mut c = consumer(&consumer_client, ConsumerConfig::default());
    let all: Vec<_> = (0..3)
        .map(|p| (TopicPartition::new(topic, p), StartAt::Earliest))
        .collect();
    if let Err(e) = c.assign(&all) {
        panic!("assign: {e}");
    }
    let got = collect(&mut c, 30, Duration::from_secs(30)).await;
    // The consumer goes on fetching (and its client pushing) after this returns.
    tokio::spawn(async move { while c.poll().await.is_ok() {} });
    let per_partition = got.iter().map(|(p, r)| (*p, r.len())).collect();
    (consumer_client, per_partition)
}

/// The consumer's pushes, once it sent its terminating one: the records consumed add up, the
/// lag of each partition is 0 in the last push, and no producer metric came from it.
async fn check_consumer_pushes(
    consumer_id: &str,
    topic: &str,
    per_partition: &BTreeMap<i32, usize>,
    consumed: impl Fn(&[Value]) -> i64,
) {
    let pushes = wait_for_pushes(consumer_id, "terminating push", |p| {
        p.iter().any(|push| push["terminating"] == true)
    })
    .await;
    assert_eq!(consumed(&pushes), 30, "records consumed, over all pushes");
    // The last push's lag per partition is 0: everything was read.
    let last = pushes.last().cloned().into_iter().collect::<Vec<_>>();
    for (partition, count) in per_partition {
        assert!(*count > 0);
        assert_eq!(
            points(
                &last,
                "org.apache.kafka.consumer.fetch.manager.records.lag",
                &[
                    ("topic", Value::from(topic)),
                    ("partition", Value::from(*partition)),
                ],
            ),
            [Value::from(0)],
            "partition {partition}'s lag in the last push"
        );
    }
    // No consumer metric from the producer, no producer metric from the consumer.
    assert!(
        points(
            &pushes,
            "org.apache.kafka.producer.topic.record.send.total",
            &[]
        )
        .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_pushes_the_producers_and_the_consumers_metrics_to_a_subscribing_cluster() {
    if protocol_tests::unsupported_on_embedded(
        "the embedded cluster has no KIP-714 telemetry receiver (it advertises neither API)",
    ) {
        return;
    }
    let admin_client = client().await;
    let topic = unique_topic("telemetry");
    create_topic(&admin_client, &topic, 3).await;
    let subscription = format!("{topic}-subscription");
    let admin = Admin::new(admin_client.clone());
    subscribe(&admin, &subscription, &topic).await;

    let producer_id = format!("{topic}-producer");
    let producer_client = telemetry_client(&producer_id, ClientRole::Producer).await;
    let p = producer(&producer_client, ProducerConfig::default()).await;
    let records = (0..30)
        .map(|i| {
            ProducerRecord::new(&topic, bytes(format!("value-{i}"))).key(bytes(format!("key-{i}")))
        })
        .collect();
    send_all(&p, records).await;

    let consumer_id = format!("{topic}-consumer");
    let (consumer_client, per_partition) = consume_all(&consumer_id, &topic).await;

    // Periodic pushes arrive, decoded by Kafka's own OTLP classes, with the instance id the
    // broker assigned.
    let sent = |p: &[Value]| {
        total(
            p,
            "org.apache.kafka.producer.topic.record.send.total",
            &[("topic", Value::from(topic.as_str()))],
        )
    };
    let pushes = wait_for_pushes(&producer_id, "push counting the 30 records", |p| {
        sent(p) >= 30
    })
    .await;
    let instance = producer_client.telemetry_instance_id();
    assert!(
        instance.is_some(),
        "the broker assigned no client instance id"
    );
    for push in &pushes {
        assert_eq!(
            push.get("error"),
            None,
            "the receiver could not decode a push: {push}"
        );
        assert_eq!(push["client_instance_id"].as_str(), instance.as_deref());
        assert_eq!(push["terminating"], false);
    }
    assert!(
        !points(
            &pushes,
            "org.apache.kafka.producer.node.request.latency.avg",
            &[]
        )
        .is_empty(),
        "no request latency per node in {pushes:#?}"
    );
    let consumed = |p: &[Value]| {
        total(
            p,
            "org.apache.kafka.consumer.fetch.manager.records.consumed.total",
            &[("topic", Value::from(topic.as_str()))],
        )
    };
    wait_for_pushes(&consumer_id, "push counting the 30 records consumed", |p| {
        consumed(p) >= 30
    })
    .await;

    // The terminating push comes last, and with it the counts add up exactly: every count
    // went out once (the sums are deltas since the previous push the broker took).
    producer_client.push_final_metrics().await;
    consumer_client.push_final_metrics().await;
    let pushes = wait_for_pushes(&producer_id, "terminating push", |p| {
        p.iter().any(|push| push["terminating"] == true)
    })
    .await;
    assert_eq!(sent(&pushes), 30, "records sent, over all pushes");
    assert_eq!(
        pushes.last().map(|p| p["terminating"].clone()),
        Some(Value::Bool(true)),
        "the terminating push is the last"
    );
    check_consumer_pushes(&consumer_id, &topic, &per_partition, consumed).await;

    // After the terminating push, nothing more.
    let before = pushes_of(&producer_id).len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        pushes_of(&producer_id).len(),
        before,
        "a push after the terminating one"
    );
    let _ = admin
        .alter_client_metrics(
            &subscription,
            &[("metrics", None), ("interval.ms", None), ("match", None)],
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_without_a_matching_subscription_pushes_nothing() {
    if protocol_tests::unsupported_on_embedded(
        "the embedded cluster has no KIP-714 telemetry receiver (it advertises neither API)",
    ) {
        return;
    }
    // The receivers are there (the test above uses them), but no subscription matches this
    // client: it gets an instance id and an empty subscription, and never pushes.
    let client_id = unique_topic("telemetry-unsubscribed");
    let c = telemetry_client(&client_id, ClientRole::Producer).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while c.telemetry_instance_id().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no GetTelemetrySubscriptions answer within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.push_final_metrics().await;
    assert_eq!(pushes_of(&client_id), Vec::<Value>::new());
}
