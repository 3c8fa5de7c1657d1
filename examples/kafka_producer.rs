//! Publishing without a service: connect, publish keyed and pinned records, shut down.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_producer -- 42      # publishes {"id":42} to `orders`
//! ```

use std::error::Error;

use ruststream::{Broker, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher};
use ruststream_kafka::{KafkaBroker, KafkaOptions, KafkaPublish, PARTITION_KEY_HEADER};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let id: u64 = std::env::args().nth(1).map_or(Ok(1), |a| a.parse())?;
    let bootstrap = std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "localhost:9092".into());
    let connected = KafkaBroker::new([bootstrap])
        .producer_config("acks", "all")
        .connect()
        .await?;
    let publisher = connected.publisher(KafkaPublish::default());

    // Keyed: the key picks the partition (librdkafka's consistent_random partitioner).
    let body = format!("{{\"id\":{id}}}");
    let mut headers = HeaderMap::new();
    headers.insert(PARTITION_KEY_HEADER, id.to_string());
    publisher
        .publish(
            OutgoingMessage::new("orders", body.as_bytes()).with_headers(headers),
            None,
        )
        .await?;
    println!("published order {id}");

    // Pinned: the partition setting beats key and partitioner.
    let audit = format!("{{\"order\":{id}}}");
    publisher
        .publish(
            OutgoingMessage::new("orders-audit", audit.as_bytes()),
            Some(&KafkaOptions::default().partition(0)),
        )
        .await?;

    let closed = connected.shutdown().await?;
    println!("unflushed records: {}", closed.unflushed_records());
    Ok(())
}
