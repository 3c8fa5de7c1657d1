//! Shared support for the adapter's live tests: the cluster under test, fresh names, topics,
//! and small stream helpers.
//!
//! The cluster is `KAFKA_TEST_URL` (what `scripts/kafka env` prints; `127.0.0.1:9092` when
//! unset). There is no skipping: a test that finds no broker fails.
#![allow(dead_code, clippy::missing_panics_doc, unreachable_pub)]

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{Stream, StreamExt};
use ruststream::{
    Broker, HeaderMap, IncomingMessage, OutgoingMessage, Publisher, SubscriptionSource,
};
use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};
use ruststream_kafka::{
    Commit, ConnectedKafkaBroker, KafkaBroker, KafkaError, KafkaMessage, KafkaOptions,
    KafkaPublish, KafkaPublisher, KafkaSubscriber, KafkaTopic, StartOffset,
};

/// How long a test waits for a delivery it expects.
pub const WAIT: Duration = Duration::from_secs(20);

/// How long a test watches for a delivery it does not expect.
pub const QUIET: Duration = Duration::from_secs(2);

/// The bootstrap servers of the cluster under test.
pub fn url() -> String {
    #[cfg(feature = "testing")]
    if embedded_target() {
        return embedded().bootstrap();
    }
    std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "127.0.0.1:9092".to_owned())
}

/// Whether this run targets the embedded cluster (`KAFKA_TEST_TARGET=embedded`) instead of
/// Kafka: the same tests, the same assertions, the embedded cluster reached through its
/// in-memory addresses with the ordinary `connect`.
pub fn embedded_target() -> bool {
    match std::env::var("KAFKA_TEST_TARGET").as_deref() {
        Err(_) | Ok("" | "kafka") => false,
        Ok("embedded") => true,
        Ok(other) => panic!("KAFKA_TEST_TARGET={other}: expected `kafka` or `embedded`"),
    }
}

/// Whether this scenario runs on this target: on the embedded cluster a scenario it cannot
/// reproduce (listed in `docs/embedded-cluster.md`) is reported and passes without running.
pub fn unsupported_on_embedded(why: &str) -> bool {
    if embedded_target() {
        eprintln!("not run on the embedded cluster: {why}");
        return true;
    }
    false
}

/// The embedded cluster every test of this binary shares.
#[cfg(feature = "testing")]
pub fn embedded() -> &'static ruststream_kafka::testing::EmbeddedCluster {
    static CLUSTER: std::sync::OnceLock<ruststream_kafka::testing::EmbeddedCluster> =
        std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| {
        ruststream_kafka::testing::EmbeddedCluster::new(ruststream_kafka::testing::ClusterOptions {
            // A real coordinator takes milliseconds to form a group; this keeps the
            // embedded one from answering faster than any bound a test sets.
            group_initial_rebalance_delay: std::time::Duration::from_millis(100),
            ..ruststream_kafka::testing::ClusterOptions::default()
        })
    })
}

/// A name no other test or run uses.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{:012x}",
        std::process::id(),
        fastrand::u64(..) >> 16
    )
}

/// A client for setting up topics and checking results.
pub async fn admin_client() -> Client {
    let url = url();
    let mut config = ClientConfig::new(&url);
    config.connect_timeout = Duration::from_secs(10);
    match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("no Kafka broker at {url} ({e}); start one with `scripts/kafka up`"),
    }
}

/// Creates `topic` with `partitions` partitions and waits for its leaders.
pub async fn create_topic(topic: &str, partitions: i32) {
    let client = admin_client().await;
    let admin = Admin::new(client.clone());
    admin
        .create_topics(
            &[NewTopic::new(topic, partitions, 1)],
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("creating {topic}: {e}"));
    admin
        .wait_for_leaders(&[topic], Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("leaders of {topic}: {e}"));
    client.close();
}

/// A fresh topic with `partitions` partitions, created and led.
pub async fn topic(prefix: &str, partitions: i32) -> String {
    let name = unique(prefix);
    create_topic(&name, partitions).await;
    name
}

/// Creates `topic` once per process from synchronous code (a conformance source factory), on
/// the multi-threaded test runtime.
pub fn ensure_topic(topic: &str, partitions: i32) {
    static CREATED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    {
        let mut created = CREATED.lock().unwrap();
        if !created
            .get_or_insert_with(HashSet::new)
            .insert(topic.to_owned())
        {
            return;
        }
    }
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| handle.block_on(create_topic(topic, partitions)));
}

/// Logs to the test output when `RUST_LOG` is set.
pub fn logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// The broker under test, with a fresh default group.
pub fn broker() -> KafkaBroker {
    KafkaBroker::new([url()]).default_group(unique("default"))
}

/// Connects a broker.
pub async fn connect(broker: KafkaBroker) -> ConnectedKafkaBroker {
    broker.connect().await.expect("connect")
}

/// Group settings that keep rebalances short: a member that stops heartbeating is gone after
/// 6 s (the cluster's minimum), and members learn of a rebalance within half a second.
pub fn quick(topic: KafkaTopic) -> KafkaTopic {
    topic
        .config("session.timeout.ms", "6000")
        .config("heartbeat.interval.ms", "300")
}

/// The descriptor most tests read with: `group`, from the start, tracked commits, quick
/// rebalances.
pub fn tracked(topic: &str, group: &str) -> KafkaTopic {
    quick(
        KafkaTopic::new(topic)
            .group(group)
            .start(StartOffset::Earliest)
            .commit(Commit::Tracked),
    )
}

/// Opens `source`.
pub async fn open(connected: &ConnectedKafkaBroker, source: KafkaTopic) -> KafkaSubscriber {
    source.subscribe(connected).await.expect("subscribe")
}

/// Now, in ms since the epoch.
pub fn now_millis() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis(),
    )
    .expect("fits")
}

/// A publisher with the default policy (acks from `producer_config`, no queue timeout).
pub fn plain_publisher(connected: &ConnectedKafkaBroker) -> KafkaPublisher {
    connected.publisher(KafkaPublish::default())
}

/// Publishes `payload` to `topic`.
pub async fn send(publisher: &KafkaPublisher, topic: &str, payload: &[u8]) {
    let record = OutgoingMessage::new(topic, payload);
    if let Err(e) = publisher.publish(record, None).await {
        panic!("publishing to {topic}: {e}");
    }
}

/// Publishes `payload` to `partition` of `topic`.
pub async fn send_to(publisher: &KafkaPublisher, topic: &str, partition: i32, payload: &[u8]) {
    let pinned = KafkaOptions::default().partition(partition);
    let record = OutgoingMessage::new(topic, payload);
    if let Err(e) = publisher.publish(record, Some(&pinned)).await {
        panic!("publishing to {topic}[{partition}]: {e}");
    }
}

/// Publishes `payload` to `topic` under record key `key`.
pub async fn send_keyed(publisher: &KafkaPublisher, topic: &str, key: &str, payload: &[u8]) {
    let mut headers = HeaderMap::new();
    headers.insert(ruststream_kafka::PARTITION_KEY_HEADER, key.to_owned());
    publisher
        .publish(
            OutgoingMessage::new(topic, payload).with_headers(headers),
            None,
        )
        .await
        .unwrap_or_else(|e| panic!("publishing to {topic}: {e}"));
}

/// A subscription's stream of deliveries, as the helpers below read it.
pub trait Deliveries: Stream<Item = Result<KafkaMessage, KafkaError>> + Unpin {}

impl<S: Stream<Item = Result<KafkaMessage, KafkaError>> + Unpin> Deliveries for S {}

/// The next delivery, failing the test when none comes within [`WAIT`].
pub async fn next<S>(stream: &mut S) -> KafkaMessage
where
    S: Deliveries,
{
    let item = tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("no delivery within {WAIT:?}"));
    match item {
        Some(Ok(message)) => message,
        Some(Err(e)) => panic!("the stream yielded an error: {e}"),
        None => panic!("the stream ended"),
    }
}

/// The next `n` deliveries' payloads, acked or not per `ack`.
pub async fn payloads<S>(stream: &mut S, n: usize, ack: bool) -> Vec<Vec<u8>>
where
    S: Deliveries,
{
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let message = next(stream).await;
        out.push(message.payload().to_vec());
        if ack {
            message.ack().await.expect("ack");
        }
    }
    out
}

/// Fails when a delivery arrives within `quiet`.
pub async fn nothing_within<S>(stream: &mut S, quiet: Duration)
where
    S: Deliveries,
{
    if let Ok(Some(item)) = tokio::time::timeout(quiet, stream.next()).await {
        match item {
            Ok(m) => panic!(
                "unexpected delivery {:?} at {}[{}]@{}",
                String::from_utf8_lossy(m.payload()),
                m.topic(),
                m.partition(),
                m.offset()
            ),
            Err(e) => panic!("unexpected stream error: {e}"),
        }
    }
}

/// `payload` as text.
pub fn text(message: &KafkaMessage) -> String {
    String::from_utf8_lossy(message.payload()).into_owned()
}

/// Payloads `prefix-0 .. prefix-{n-1}`.
pub fn numbered(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .collect()
}

/// Every record of `topic`/`partition` a reader at `isolation` sees now (it stops at the
/// first empty fetch).
pub async fn read_partition(
    topic: &str,
    partition: i32,
    isolation: ruststream_kafka::client::IsolationLevel,
) -> Vec<ruststream_kafka::client::Record> {
    use ruststream_kafka::client::PartitionReader;
    let client = admin_client().await;
    let mut reader = PartitionReader::new(client.clone(), topic, partition);
    reader.isolation = isolation;
    reader.max_wait = Duration::from_millis(300);
    let mut records = Vec::new();
    let mut offset = 0;
    loop {
        let fetched = reader
            .fetch(offset)
            .await
            .unwrap_or_else(|e| panic!("reading {topic}[{partition}]: {e}"));
        if fetched.records.is_empty() && fetched.next_offset <= offset {
            break;
        }
        offset = fetched.next_offset.max(offset + 1);
        records.extend(fetched.records);
    }
    client.close();
    records
}

/// The values (as text) of [`read_partition`].
pub async fn values(
    topic: &str,
    partition: i32,
    isolation: ruststream_kafka::client::IsolationLevel,
) -> Vec<String> {
    read_partition(topic, partition, isolation)
        .await
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// The offset `group` has committed for `topic`/`partition` (-1 for none).
pub async fn committed(group: &str, topic: &str, partition: i32) -> i64 {
    use ruststream_kafka::client::consumer::Offsets;
    let client = admin_client().await;
    let offsets = Offsets::new(client.clone(), group)
        .fetch(&[(topic, partition)], true)
        .await
        .unwrap_or_else(|e| panic!("committed offsets of {group}: {e}"));
    client.close();
    offsets.first().map_or(-1, |o| o.offset)
}

/// Waits up to `bound` for `check` to hold, polling.
pub async fn eventually<F, Fut>(bound: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
