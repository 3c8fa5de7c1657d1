//! What the live tests of the broker, subscription, settlement, context and position examples
//! share beyond `live.rs`: names no earlier run used, a topic emptied for this run, records
//! placed before a service starts, and a wait for what the harness cannot count.
#![allow(dead_code)]

use std::error::Error;
use std::process;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ruststream::{Broker, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};
use ruststream_kafka::{KafkaBroker, KafkaOptions, KafkaPublish};

/// How long a live test gives the service to start and each reaction to settle.
pub const START: Duration = Duration::from_secs(30);

/// `base` made unique to this run: a consumer group nothing has committed into yet.
pub fn fresh(base: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{base}-{}-{nanos}", process::id())
}

/// The wall clock in epoch milliseconds, the unit of a record timestamp.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// Deletes `topic` (if it exists) and creates it again with `partitions` partitions, so the test
/// reads only what this run writes to it.
pub async fn recreate_topic(topic: &str, partitions: i32) -> Result<(), Box<dyn Error>> {
    let client = Client::connect(ClientConfig::new(&super::live::bootstrap())).await?;
    let admin = Admin::new(client.clone());
    let _ = admin.delete_topics(&[topic], Duration::from_secs(30)).await;
    // Deletion finishes in the background; creating the topic again succeeds once it has.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match admin
            .create_topics(
                &[NewTopic::new(topic, partitions, 1)],
                Duration::from_secs(30),
            )
            .await
        {
            Ok(()) => break,
            Err(err) if Instant::now() < deadline => {
                tracing::debug!(%err, topic, "topic not deleted yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
    client.close();
    Ok(())
}

/// Publishes `records` (JSON values) to `topic` in order, partition `partition` when given,
/// before any service under test reads it.
pub async fn seed<T: serde::Serialize>(
    topic: &str,
    partition: Option<i32>,
    records: &[T],
) -> Result<(), Box<dyn Error>> {
    let broker = KafkaBroker::new([super::live::bootstrap()])
        .connect()
        .await?;
    let publisher = broker.publisher(KafkaPublish::default());
    for record in records {
        let bytes = serde_json::to_vec(record)?;
        let options = partition.map(|p| KafkaOptions::default().partition(p));
        publisher
            .publish(OutgoingMessage::new(topic, &bytes[..]), options.as_ref())
            .await?;
    }
    broker.shutdown().await?;
    Ok(())
}

/// Waits until `done` holds, checking every 20 ms, for at most [`START`]: for deliveries the
/// harness did not publish itself and so cannot wait for.
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + START;
    while !done() {
        if Instant::now() >= deadline {
            return Err(format!("gave up waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// [`live::ensure_topic`](super::live::ensure_topic), tolerating the race where the metadata
/// probe itself had the cluster auto-create the topic: the second look then finds it.
pub async fn topic(topic: &str, partitions: i32) -> Result<(), Box<dyn Error>> {
    if super::live::ensure_topic(topic, partitions).await.is_ok() {
        return Ok(());
    }
    super::live::ensure_topic(topic, partitions).await
}

/// Publishes `records` (JSON values) to `topic` in order, each under its record key.
pub async fn seed_keyed<T: serde::Serialize>(
    topic: &str,
    records: &[(&str, T)],
) -> Result<(), Box<dyn Error>> {
    let broker = KafkaBroker::new([super::live::bootstrap()])
        .connect()
        .await?;
    let publisher = broker.publisher(KafkaPublish::default());
    for (key, record) in records {
        let bytes = serde_json::to_vec(record)?;
        let mut headers = ruststream::HeaderMap::default();
        headers.insert(
            ruststream_kafka::PARTITION_KEY_HEADER,
            key.as_bytes().to_vec(),
        );
        publisher
            .publish(
                OutgoingMessage::new(topic, &bytes[..]).with_headers(headers),
                None,
            )
            .await?;
    }
    broker.shutdown().await?;
    Ok(())
}

/// Where a test body run both ways writes the records it seeds: through a client of the live
/// cluster, or straight onto the embedded cluster of an in-process run.
pub enum Place {
    /// The live cluster at `live::bootstrap()`.
    Live,
    /// The embedded cluster `TestApp::start` connected the service to.
    #[cfg(feature = "testing")]
    Embedded(ruststream_kafka::testing::EmbeddedCluster),
}

impl Place {
    /// Writes each of `records`, JSON-encoded, onto `partition` of `topic` (or where the
    /// cluster puts a keyless record, with none named).
    pub async fn seed<T: serde::Serialize>(
        &self,
        topic: &str,
        partition: Option<i32>,
        records: &[T],
    ) -> Result<(), Box<dyn Error>> {
        match self {
            Place::Live => seed(topic, partition, records).await,
            #[cfg(feature = "testing")]
            Place::Embedded(cluster) => {
                for record in records {
                    let value = serde_json::to_vec(record)?;
                    match partition {
                        Some(partition) => {
                            cluster.produce_to(topic, partition, None, &value, &[])?
                        }
                        None => cluster.produce(topic, None, &value, &[])?,
                    };
                }
                Ok(())
            }
        }
    }
}
