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
