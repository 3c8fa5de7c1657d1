//! The native client against a real Apache Kafka broker (`scripts/kafka up`).

mod admin;
mod batches;
mod closing;
mod codecs;
mod consume;
mod group;
mod group_kip848;
mod idempotence;
mod interop;
mod observe;
mod offsets;
mod ordering;
mod telemetry;
mod topics;
mod transactions;

use std::time::Duration;

use bytes::Bytes;
use ruststream_kafka::client::{
    Client, Codec, Producer, ProducerConfig, ProducerRecord, RecordMetadata,
};

/// A producer with `config` on a fresh client.
async fn producer(client: &Client, config: ProducerConfig) -> Producer {
    match Producer::new(client.clone(), config) {
        Ok(p) => p,
        Err(e) => panic!("producer: {e}"),
    }
}

/// Sends every record and waits for all delivery reports, in order.
async fn send_all(producer: &Producer, records: Vec<ProducerRecord>) -> Vec<RecordMetadata> {
    let mut futures = Vec::with_capacity(records.len());
    for r in records {
        match producer.send(r).await {
            Ok(f) => futures.push(f),
            Err(e) => panic!("send: {e}"),
        }
    }
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        match f.await {
            Ok(m) => out.push(m),
            Err(e) => panic!("delivery: {e}"),
        }
    }
    out
}

fn codec_config(codec: Codec) -> ProducerConfig {
    ProducerConfig {
        compression: codec,
        linger: Duration::from_millis(5),
        ..ProducerConfig::default()
    }
}

fn bytes(s: String) -> Bytes {
    Bytes::from(s)
}
