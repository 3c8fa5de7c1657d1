//! What the examples' live tests share: the broker address and topics created up front.
#![allow(dead_code)]

use std::error::Error;
use std::time::Duration;

use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};

/// The bootstrap servers: `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
/// `localhost:9092`.
pub fn bootstrap() -> String {
    std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "localhost:9092".to_owned())
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
