//! First light: publish and consume through the adapter against the cluster under test.

use crate::live;

use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker, ConnectedBroker, HeaderMap, IncomingMessage, OutgoingMessage, Publisher, Subscriber,
    SubscriptionSource,
};
use ruststream_kafka::{Commit, KafkaBroker, KafkaPublish, KafkaTopic, StartOffset};

/// A `Commit::Tracked` subscription to `topic` from its earliest offset.
async fn tracked_from_the_start(
    topic: &str,
    broker: &ruststream_kafka::ConnectedKafkaBroker,
) -> ruststream_kafka::KafkaSubscriber {
    KafkaTopic::new(topic)
        .start(StartOffset::Earliest)
        .commit(Commit::Tracked)
        .subscribe(broker)
        .await
        .expect("subscribe")
}

/// The next delivery of `stream`, within 30 s.
async fn next_in_time<S, T, E>(stream: &mut S) -> T
where
    S: futures::Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Debug,
{
    tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("a delivery in time")
        .expect("the stream does not end")
        .expect("no error")
}

/// Publishes `n` records to `topic` on `broker`'s shared producer, then acks `n` deliveries
/// of `stream`.
async fn publish_and_ack<S>(
    broker: &ruststream_kafka::ConnectedKafkaBroker,
    stream: &mut S,
    topic: &str,
    n: usize,
) where
    S: futures::Stream<Item = Result<ruststream_kafka::KafkaMessage, ruststream_kafka::KafkaError>>
        + Unpin,
{
    let publisher = broker.publisher(KafkaPublish::default());
    for i in 0..n {
        publisher
            .publish(
                OutgoingMessage::new(topic, format!("m{i}").as_bytes()),
                None,
            )
            .await
            .expect("publish");
    }
    for _ in 0..n {
        next_in_time(stream).await.ack().await.expect("ack");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_published_is_delivered_and_acked() {
    live::logs();
    let topic = live::unique("smoke");
    live::create_topic(&topic, 3).await;
    let broker = KafkaBroker::new([live::url()])
        .default_group(live::unique("smoke-group"))
        .connect()
        .await
        .expect("connect");
    let mut subscriber = tracked_from_the_start(&topic, &broker).await;
    let publisher = broker.publisher(KafkaPublish::default());
    let mut headers = HeaderMap::new();
    headers.insert("kafka-partition-key", "k1");
    headers.insert("trace", "abc");
    publisher
        .publish(
            OutgoingMessage::new(&topic, b"hello").with_headers(headers),
            None,
        )
        .await
        .expect("publish");
    let mut stream = subscriber.stream();
    let message = next_in_time(&mut stream).await;
    assert_eq!(message.payload(), b"hello");
    assert_eq!(message.key(), Some(&b"k1"[..]));
    assert_eq!(message.headers().get_str("trace"), Some("abc"));
    assert_eq!(message.headers().get_str("kafka-partition-key"), Some("k1"));
    message.ack().await.expect("ack");
    drop(stream);
    drop(subscriber);
    let closed = broker.shutdown().await.expect("shutdown flushes");
    assert_eq!(closed.unflushed_records(), 0);
}

/// Counts what an observer registered on the broker hears, by family.
#[derive(Default)]
struct Counts {
    opened: std::sync::atomic::AtomicUsize,
    produce_answered: std::sync::atomic::AtomicUsize,
    fetch_answered: std::sync::atomic::AtomicUsize,
    records_written: std::sync::atomic::AtomicUsize,
    records_fetched: std::sync::atomic::AtomicUsize,
    assigned: std::sync::atomic::AtomicUsize,
    delivered: std::sync::atomic::AtomicUsize,
    acked: std::sync::atomic::AtomicUsize,
}

/// The observer the broker holds, sharing its counts with the test.
struct Observed(std::sync::Arc<Counts>);

impl ruststream_kafka::client::Observer for Observed {
    fn on_event(&self, event: &ruststream_kafka::client::Event<'_>) {
        use ruststream_kafka::client::Event;
        use ruststream_kafka::client::observe::RequestOutcome;
        use std::sync::atomic::Ordering::Relaxed;
        match event {
            Event::ConnectionOpened { .. } => {
                self.0.opened.fetch_add(1, Relaxed);
            }
            Event::Request {
                api_key: 0,
                outcome: RequestOutcome::Answered,
                ..
            } => {
                self.0.produce_answered.fetch_add(1, Relaxed);
            }
            Event::Request {
                api_key: 1,
                outcome: RequestOutcome::Answered,
                ..
            } => {
                self.0.fetch_answered.fetch_add(1, Relaxed);
            }
            Event::BatchWritten { records, .. } => {
                self.0.records_written.fetch_add(*records, Relaxed);
            }
            Event::Fetched { records, .. } => {
                self.0.records_fetched.fetch_add(*records, Relaxed);
            }
            Event::Rebalance {
                change: ruststream_kafka::client::PartitionChange::Assigned,
                partitions,
                ..
            } => {
                self.0.assigned.fetch_add(partitions.len(), Relaxed);
            }
            Event::Delivered { .. } => {
                self.0.delivered.fetch_add(1, Relaxed);
            }
            Event::Settled {
                outcome: ruststream_kafka::client::Settlement::Acked,
                accepted: true,
                ..
            } => {
                self.0.acked.fetch_add(1, Relaxed);
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_on_the_broker_hears_the_publishes_and_the_subscriptions_requests() {
    use std::sync::atomic::Ordering::Relaxed;
    live::logs();
    let topic = live::unique("observed");
    live::create_topic(&topic, 2).await;
    let counts = std::sync::Arc::new(Counts::default());
    let broker = KafkaBroker::new([live::url()])
        .default_group(live::unique("observed-group"))
        .observer(Observed(counts.clone()))
        .connect()
        .await
        .expect("connect");
    let opened_by_connect = counts.opened.load(Relaxed);
    assert!(opened_by_connect > 0, "the connect probe's connection");
    let mut subscriber = tracked_from_the_start(&topic, &broker).await;
    let publisher = broker.publisher(KafkaPublish::default());
    publisher
        .publish(OutgoingMessage::new(&topic, b"seen"), None)
        .await
        .expect("publish");
    let mut stream = subscriber.stream();
    let message = next_in_time(&mut stream).await;
    message.ack().await.expect("ack");
    assert!(
        counts.produce_answered.load(Relaxed) >= 1,
        "the publish's Produce was heard"
    );
    assert!(
        counts.fetch_answered.load(Relaxed) >= 1,
        "the subscription's fetches were heard"
    );
    assert!(
        counts.opened.load(Relaxed) > opened_by_connect,
        "the subscription's own connections were heard"
    );
    assert_eq!(
        counts.records_written.load(Relaxed),
        1,
        "the published record, in a written batch"
    );
    assert!(
        counts.records_fetched.load(Relaxed) >= 1,
        "the record, in a fetch"
    );
    assert_eq!(
        counts.assigned.load(Relaxed),
        2,
        "the group gave the subscription both partitions"
    );
    assert_eq!(counts.delivered.load(Relaxed), 1, "the record, handed out");
    assert_eq!(counts.acked.load(Relaxed), 1, "its ack, taken");
    drop(stream);
    drop(subscriber);
    broker.shutdown().await.expect("shutdown flushes");
}

/// `statistics.interval.ms` logs librdkafka's statistics at INFO every interval: one line per
/// broker, JSON with its names, the records produced and consumed counted in them.
// One thread: the subscriber that captures the lines is this thread's, and every task of the
// broker runs on it.
#[tokio::test(flavor = "current_thread")]
async fn statistics_interval_logs_the_statistics_at_info() {
    let captured = crate::captured::Captured::default();
    let _local =
        tracing::subscriber::set_default(captured.subscriber("ruststream_kafka::statistics=info"));
    let topic = live::unique("statistics");
    live::create_topic(&topic, 2).await;
    let broker = KafkaBroker::new([live::url()])
        .default_group(live::unique("statistics-group"))
        .config("statistics.interval.ms", "200")
        .connect()
        .await
        .expect("connect");
    let mut subscriber = tracked_from_the_start(&topic, &broker).await;
    let mut stream = subscriber.stream();
    publish_and_ack(&broker, &mut stream, &topic, 5).await;
    // the next report counts all of them
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let report = loop {
        let text = captured.text();
        let last = text.lines().rev().find_map(|line| {
            line.split_once("statistics=")
                .map(|(_, json)| json.to_owned())
        });
        if let Some(json) = last {
            let v: serde_json::Value = serde_json::from_str(&json).expect("the line is JSON");
            if v["txmsgs"] == 5 && v["rxmsgs"] == 5 {
                break v;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no report counted the 5 records within 10 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(report["tx"].as_u64().unwrap_or(0) > 0, "{report}");
    assert_eq!(report["msg_cnt"], 0, "{report}");
    let partitions = &report["topics"][&topic]["partitions"];
    let lags: Vec<_> = ["0", "1"]
        .iter()
        .map(|p| partitions[*p]["consumer_lag"].clone())
        .collect();
    assert!(
        lags.iter().all(|lag| *lag == 0 || *lag == -1) && lags.contains(&serde_json::json!(0)),
        "caught up: {report}"
    );
    assert!(report["brokers"].as_object().is_some_and(|b| !b.is_empty()));
    drop(stream);
    drop(subscriber);
    broker.shutdown().await.expect("shutdown");
}

/// The lines the brokers' KIP-714 receivers (`scripts/kafka up`) wrote for `client_id`.
fn telemetry_pushes(client_id: &str) -> Vec<serde_json::Value> {
    let dir = std::env::var("KAFKA_TELEMETRY_DIR")
        .expect("KAFKA_TELEMETRY_DIR: export `scripts/kafka env` of the running cluster");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        out.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v["client_id"] == client_id),
        );
    }
    out
}

/// The sum of metric `name`'s points for `topic` over `pushes`.
fn telemetry_total(pushes: &[serde_json::Value], name: &str, topic: &str) -> i64 {
    pushes
        .iter()
        .flat_map(|p| p["metrics"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["name"] == name)
        .flat_map(|m| m["points"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["attributes"]["topic"] == topic)
        .filter_map(|p| p["value"].as_i64())
        .sum()
}

/// With `enable.metrics.push` (on by default), a cluster that subscribes to a service's metrics
/// gets them (KIP-714): the broker's client pushes the producer's, the subscription's client the
/// consumer's, and the shutdown sends each one's terminating push, after which the counts add up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribing_cluster_gets_the_services_metrics_until_its_shutdown() {
    if live::unsupported_on_embedded("the embedded cluster has no KIP-714 telemetry receiver") {
        return;
    }
    live::logs();
    let topic = live::unique("telemetry");
    live::create_topic(&topic, 2).await;
    let client_id = format!("{topic}-service");
    let admin = ruststream_kafka::client::Admin::new(live::admin_client().await);
    let subscription = format!("{topic}-subscription");
    admin
        .alter_client_metrics(
            &subscription,
            &[
                ("metrics", Some("*")),
                ("interval.ms", Some("1000")),
                ("match", Some(&format!("client_id={client_id}"))),
            ],
        )
        .await
        .expect("a client metrics subscription");
    // the controller's record reaches the brokers' subscription tables shortly after
    tokio::time::sleep(Duration::from_secs(1)).await;
    let broker = KafkaBroker::new([live::url()])
        .default_group(live::unique("telemetry-group"))
        .config("client.id", &client_id)
        .connect()
        .await
        .expect("connect");
    let mut subscriber = tracked_from_the_start(&topic, &broker).await;
    let mut stream = subscriber.stream();
    publish_and_ack(&broker, &mut stream, &topic, 12).await;
    drop(stream);
    drop(subscriber);
    broker.shutdown().await.expect("shutdown");
    let pushes = telemetry_pushes(&client_id);
    let terminating: Vec<_> = pushes.iter().filter(|p| p["terminating"] == true).collect();
    assert_eq!(
        terminating.len(),
        2,
        "one terminating push from the broker's client and one from the subscription's: {pushes:#?}"
    );
    assert_ne!(
        terminating[0]["client_instance_id"], terminating[1]["client_instance_id"],
        "two client instances"
    );
    let sent = "org.apache.kafka.producer.topic.record.send.total";
    let consumed = "org.apache.kafka.consumer.fetch.manager.records.consumed.total";
    assert_eq!(telemetry_total(&pushes, sent, &topic), 12, "{pushes:#?}");
    assert_eq!(
        telemetry_total(&pushes, consumed, &topic),
        12,
        "{pushes:#?}"
    );
    let _ = admin
        .alter_client_metrics(
            &subscription,
            &[("metrics", None), ("interval.ms", None), ("match", None)],
        )
        .await;
}
