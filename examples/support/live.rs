//! What the examples' live tests share: the broker address and topics created up front.
#![allow(dead_code)]

use std::error::Error;
use std::time::Duration;

use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};

thread_local! {
    /// Set by [`built_against`] while it builds a service on this thread.
    static BUILDING_AGAINST: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Builds a service with `build` (an example's unchanged `app`) so that [`bootstrap`] answers
/// `bootstrap` while it runs: the quickstarts' `embedded` command points the same `app()` at
/// a cluster of its own. Per thread, so other tests of the process keep their target.
pub fn built_against<T>(bootstrap: &str, build: impl FnOnce() -> T) -> T {
    let previous = BUILDING_AGAINST.with(|b| b.replace(Some(bootstrap.to_owned())));
    let service = build();
    BUILDING_AGAINST.with(|b| *b.borrow_mut() = previous);
    service
}

/// The bootstrap servers: `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
/// `localhost:9092`.
pub fn bootstrap() -> String {
    if let Some(bootstrap) = BUILDING_AGAINST.with(|b| b.borrow().clone()) {
        return bootstrap;
    }
    #[cfg(feature = "testing")]
    if std::env::var("KAFKA_TEST_TARGET").as_deref() == Ok("embedded") {
        return embedded().bootstrap();
    }
    std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "localhost:9092".to_owned())
}

/// The schema registry the registry examples' `main` talks to: `SCHEMA_REGISTRY_URL`, else
/// the registry's usual local port.
pub fn registry_url() -> String {
    std::env::var("SCHEMA_REGISTRY_URL").unwrap_or_else(|_| "http://localhost:8081".into())
}

/// With `KAFKA_TEST_TARGET=embedded`, the live tests run against an embedded cluster this
/// process starts, reached through the ordinary `connect`.
#[cfg(feature = "testing")]
fn embedded() -> &'static ruststream_kafka::testing::EmbeddedCluster {
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

/// Creates `topic` with `partitions` partitions unless it exists, and waits for its leaders:
/// a group finds a topic at startup only if it exists then.
pub async fn ensure_topic(topic: &str, partitions: i32) -> Result<(), Box<dyn Error>> {
    let mut config = ClientConfig::new(&bootstrap());
    // Asking for a missing topic must not create it with the cluster's default partitions.
    config.allow_auto_create_topics = false;
    let client = Client::connect(config).await?;
    let admin = Admin::new(client.clone());
    if client.topic(topic).await.is_err() {
        admin
            .create_topics(
                &[NewTopic::new(topic, partitions, 1)],
                Duration::from_secs(30),
            )
            .await?;
    }
    admin
        .wait_for_leaders(&[topic], Duration::from_secs(30))
        .await?;
    client.close();
    Ok(())
}
