//! Another Kafka client's command-line tools against the embedded cluster: the cluster served
//! on an ephemeral loopback port, and each tool run with its input fed and closed (end of
//! input is what makes a console producer flush and exit), its output kept, and a bound on
//! how long it may take, so a tool that hangs fails the test instead of stalling it.

use std::process::{Output, Stdio};
use std::time::Duration;

use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// A cluster listening on an ephemeral loopback port, and its bootstrap address.
pub async fn serve(options: ClusterOptions) -> (EmbeddedCluster, String) {
    let cluster = EmbeddedCluster::new(options);
    cluster
        .listen_on(&["127.0.0.1:0".parse().expect("an address")])
        .await
        .expect("listens");
    let bootstrap = cluster.loopback_bootstrap().expect("listening");
    (cluster, bootstrap)
}

/// Runs `command` with `stdin` as its input; panics (failing the test) when it cannot start
/// (`missing` says what to install) or does not exit within `bound`.
pub async fn run(mut command: Command, stdin: &str, bound: Duration, missing: &str) -> Output {
    let shown = format!("{:?}", command.as_std());
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {shown} ({e}): {missing}"));
    let mut input = child.stdin.take().expect("stdin is piped");
    input
        .write_all(stdin.as_bytes())
        .await
        .expect("writes the tool's input");
    drop(input);
    tokio::time::timeout(bound, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{shown} did not finish within {bound:?}"))
        .expect("waits for the tool")
}

/// The codecs and `compression.level`s the interoperability tests write with: every codec at
/// its default (`-1`), and the compressing ones at their lowest and highest level too.
pub const CODEC_LEVELS: [(&str, i32); 13] = [
    ("none", -1),
    ("gzip", -1),
    ("gzip", 1),
    ("gzip", 9),
    ("snappy", -1),
    ("snappy", 1),
    ("snappy", 9),
    ("lz4", -1),
    ("lz4", 1),
    ("lz4", 12),
    ("zstd", -1),
    ("zstd", 1),
    ("zstd", 22),
];

/// Writes, with this crate's producer on `bootstrap`, one batch to `topic` per codec and level
/// of [`CODEC_LEVELS`], each of `per_batch` keyed records whose values repeat enough to
/// compress; returns them as `key=value` lines, in the order written (one partition).
pub async fn produce_every_codec(bootstrap: &str, topic: &str, per_batch: usize) -> Vec<String> {
    use ruststream_kafka::client::Codec;
    use ruststream_kafka::client::{
        Client, ClientConfig, Producer, ProducerConfig, ProducerRecord,
    };
    let client = Client::connect(ClientConfig::new(bootstrap))
        .await
        .unwrap_or_else(|e| panic!("no cluster at {bootstrap}: {e}"));
    let mut lines = Vec::new();
    for (name, level) in CODEC_LEVELS {
        let config = ProducerConfig {
            compression: Codec::from_name(name).expect("a codec"),
            compression_level: level,
            linger: Duration::from_secs(1),
            ..ProducerConfig::default()
        };
        let producer = Producer::new(client.clone(), config).expect("producer");
        let mut pending = Vec::new();
        for i in 0..per_batch {
            let key = format!("{name}{level}-{i}");
            let value = format!(
                "{name} at level {level}, record {i}: {}",
                "abc".repeat(40 + i)
            );
            lines.push(format!("{key}={value}"));
            let record = ProducerRecord {
                topic: topic.to_owned(),
                partition: Some(0),
                key: Some(key.into_bytes().into()),
                value: Some(value.into_bytes().into()),
                ..ProducerRecord::default()
            };
            pending.push(producer.send(record).await.expect("queued"));
        }
        for written in pending {
            written.await.expect("the cluster took the batch");
        }
        assert_eq!(producer.close(Duration::from_secs(10)).await, 0);
    }
    client.close();
    lines
}

/// The cluster an interoperability test that writes with this crate runs on: Kafka at
/// `KAFKA_TEST_URL` (which validates every batch it appends), or, under
/// `KAFKA_TEST_TARGET=embedded` or with no URL outside a live run, an embedded cluster on a
/// loopback port. A live run (`RUSTSTREAM_REQUIRE_LIVE`) without a URL fails.
pub async fn cluster_under_test() -> (Option<EmbeddedCluster>, String) {
    let embedded = std::env::var("KAFKA_TEST_TARGET").is_ok_and(|t| t.starts_with("embedded"));
    match std::env::var("KAFKA_TEST_URL") {
        Ok(url) if !embedded && !url.is_empty() => (None, url),
        _ => {
            assert!(
                embedded || std::env::var_os("RUSTSTREAM_REQUIRE_LIVE").is_none(),
                "RUSTSTREAM_REQUIRE_LIVE is set but KAFKA_TEST_URL is not"
            );
            let (cluster, bootstrap) = serve(ClusterOptions::default()).await;
            (Some(cluster), bootstrap)
        }
    }
}

/// This crate's batches of every codec and level ([`produce_every_codec`], five records each)
/// on a fresh topic named after `prefix` on the cluster under test: the cluster (when
/// embedded, kept alive by the caller), its bootstrap, the topic and the `key=value` lines
/// written.
pub async fn our_batches(prefix: &str) -> (Option<EmbeddedCluster>, String, String, Vec<String>) {
    let (cluster, bootstrap) = cluster_under_test().await;
    let topic = one_partition_topic(&bootstrap, prefix).await;
    let sent = produce_every_codec(&bootstrap, &topic, 5).await;
    (cluster, bootstrap, topic, sent)
}

/// A topic of one partition named `prefix` and this process, created on `bootstrap`.
pub async fn one_partition_topic(bootstrap: &str, prefix: &str) -> String {
    use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};
    let topic = format!("{prefix}-{}-{}", std::process::id(), unique_suffix());
    let client = Client::connect(ClientConfig::new(bootstrap))
        .await
        .unwrap_or_else(|e| panic!("no cluster at {bootstrap}: {e}"));
    let admin = Admin::new(client.clone());
    admin
        .create_topics(&[NewTopic::new(&topic, 1, 1)], Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("creating {topic}: {e}"));
    admin
        .wait_for_leaders(&[&topic], Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("leaders of {topic}: {e}"));
    client.close();
    topic
}

/// A suffix that tells this run's topics from an earlier run's on the same cluster.
fn unique_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
