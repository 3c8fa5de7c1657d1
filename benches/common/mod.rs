//! What the side-by-side benches share: settings from the environment, process CPU time,
//! the Java client's classpath, medians.

#![allow(dead_code, reason = "each bench uses a different part")]

use std::process::Command;

/// `name` from the environment as a number, else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The process's user + system CPU seconds so far.
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields
        .get(11)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
    ticks / 100.0
}

/// The classpath of the Java client `scripts/kafka` fetched.
pub fn java_classpath() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/kafka"))
        .arg("java-classpath")
        .output()
        .expect("scripts/kafka java-classpath");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The broker under test (`KAFKA_TEST_URL`), a runtime, and a client connected to it.
pub fn connect() -> (
    String,
    tokio::runtime::Runtime,
    ruststream_kafka::client::Client,
) {
    let bootstrap = std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "127.0.0.1:9092".to_owned());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = runtime
        .block_on(ruststream_kafka::client::Client::connect(
            ruststream_kafka::client::ClientConfig::new(&bootstrap),
        ))
        .expect("no broker: run scripts/kafka up");
    (bootstrap, runtime, client)
}

/// A new topic named `prefix-<random>` with `partitions` partitions.
pub fn new_topic(
    runtime: &tokio::runtime::Runtime,
    client: &ruststream_kafka::client::Client,
    prefix: &str,
    partitions: i32,
) -> String {
    use ruststream_kafka::client::{Admin, NewTopic};
    let topic = format!("{prefix}-{:08x}", fastrand::u32(..));
    runtime
        .block_on(Admin::new(client.clone()).create_topics(
            &[NewTopic::new(&topic, partitions, 1)],
            std::time::Duration::from_secs(30),
        ))
        .expect("create topic");
    topic
}

/// Sends `records` values of `size` bytes to `topic` and waits until every one is delivered.
pub async fn send_and_wait(
    producer: &ruststream_kafka::client::Producer,
    topic: &str,
    records: usize,
    size: usize,
) {
    use ruststream_kafka::client::ProducerRecord;
    let payload = bytes::Bytes::from(vec![b'x'; size]);
    let mut last = None;
    for _ in 0..records {
        let r = ProducerRecord {
            topic: topic.to_owned(),
            value: Some(payload.clone()),
            ..ProducerRecord::default()
        };
        last = Some(producer.send(r).await.expect("send"));
    }
    let left = producer.flush(std::time::Duration::from_mins(5)).await;
    assert_eq!(left, 0, "records left after flush");
    if let Some(last) = last {
        last.await.expect("delivery");
    }
}
