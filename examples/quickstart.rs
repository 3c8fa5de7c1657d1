//! Produce a few records to a local Kafka and read them back with the native client.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example quickstart
//! ```

use std::time::Duration;

use bytes::Bytes;
use ruststream_kafka::client::{
    Admin, Client, ClientConfig, NewTopic, PartitionReader, Producer, ProducerConfig,
    ProducerRecord, Result,
};

#[tokio::main]
async fn main() -> Result<()> {
    let bootstrap = std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "127.0.0.1:9092".to_owned());
    let client = Client::connect(ClientConfig::new(&bootstrap)).await?;
    let topic = format!("quickstart-{:08x}", fastrand::u32(..));
    Admin::new(client.clone())
        .create_topics(&[NewTopic::new(&topic, 1, 1)], Duration::from_secs(30))
        .await?;

    let producer = Producer::new(client.clone(), ProducerConfig::default())?;
    let mut deliveries = Vec::new();
    for i in 0..5 {
        let record = ProducerRecord::new(topic.clone(), Bytes::from(format!("hello {i}")))
            .key(Bytes::from(format!("user-{i}")));
        deliveries.push(producer.send(record).await?);
    }
    for d in deliveries {
        let m = d.await?;
        println!(
            "delivered to {}-{} at offset {}",
            m.topic, m.partition, m.offset
        );
    }

    let reader = PartitionReader::new(client.clone(), &topic, 0);
    for r in reader.read_range(0, 5, Duration::from_secs(10)).await? {
        let value = r.value.as_deref().map(String::from_utf8_lossy);
        println!("read offset {}: {value:?}", r.offset);
    }
    producer.close(Duration::from_secs(5)).await;
    Ok(())
}
