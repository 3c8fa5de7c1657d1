//! Shared support for the adapter's live tests: the cluster under test, fresh names, topics.
//!
//! The cluster is `KAFKA_TEST_URL` (what `scripts/kafka env` prints; `127.0.0.1:9092` when
//! unset). There is no skipping: a test that finds no broker fails.
#![allow(dead_code, clippy::missing_panics_doc)]

use std::time::Duration;

use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};

/// The bootstrap servers of the cluster under test.
pub fn url() -> String {
    std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "127.0.0.1:9092".to_owned())
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

/// Logs to the test output when `RUST_LOG` is set.
pub fn logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
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
