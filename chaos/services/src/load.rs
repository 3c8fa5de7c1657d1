//! The load generator: an idempotent producer (`acks=all`) writing records with a unique id, a
//! key and a per-process sequence number to the input topic at a steady rate.
//!
//! Its history has a `send` line before each record is queued and then exactly one of `ack`
//! (with partition and offset) or `fail` once its delivery report arrives; a record with a
//! `send` line and neither is of unknown outcome (the process died first). SIGTERM stops
//! sending, flushes what is queued and exits.

use std::time::Duration;

use ruststream_kafka::client::{
    Acks, Client, ClientConfig, Producer, ProducerConfig, ProducerRecord,
};
use serde_json::json;

use crate::args::{Args, BoxError};
use crate::history::History;

/// Runs the generator until SIGTERM or SIGINT.
pub async fn run(args: &Args) -> Result<(), BoxError> {
    let bootstrap = args.need("bootstrap")?;
    let topic = args.need("topic")?.to_owned();
    let instance = args.need("instance")?.to_owned();
    let history = History::open(args.need("history")?, &instance)?;
    let keys: u64 = args.num("keys", 16)?;
    let rate: u64 = args.num("rate", 200)?;
    let client = Client::connect(ClientConfig::new(bootstrap)).await?;
    let config = ProducerConfig {
        acks: Acks::All,
        enable_idempotence: true,
        message_timeout: Duration::from_mins(2),
        linger: Duration::from_millis(5),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client, config)?;
    history.log("start", json!({"role": "load", "topic": topic}));
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate.max(1)));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut seq: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
        let key = format!("k{}", seq % keys);
        let id = format!("{instance}-{seq}");
        let value = json!({"id": id, "key": key, "seq": seq}).to_string();
        history.log("send", json!({"id": id, "key": key, "seq": seq}));
        let record = ProducerRecord::new(topic.clone(), value.into_bytes()).key(key.into_bytes());
        // Waiting for queue space is the back-pressure: the rate drops while the cluster is
        // unreachable, and every queued record still gets its outcome logged.
        let delivery = match producer.send(record).await {
            Ok(delivery) => delivery,
            Err(e) => {
                history.log("fail", json!({"id": id, "err": e.to_string()}));
                seq += 1;
                continue;
            }
        };
        let history = history.clone();
        tokio::spawn(async move {
            match delivery.await {
                Ok(meta) => history.log(
                    "ack",
                    json!({"id": id, "p": meta.partition, "o": meta.offset}),
                ),
                Err(e) => history.log("fail", json!({"id": id, "err": e.to_string()})),
            }
        });
        seq += 1;
    }
    history.log("stopping", json!({"sent": seq}));
    let left = producer.close(Duration::from_mins(1)).await;
    // Give the delivery tasks a moment to write their lines.
    tokio::time::sleep(Duration::from_millis(200)).await;
    history.log("stopped", json!({"unflushed": left}));
    Ok(())
}
