//! Support for the live protocol tests: where the broker is, fresh topics, reading back, and
//! the Java client as an independent second implementation.
//!
//! The tests run against a target chosen by `KAFKA_TEST_TARGET`: `kafka` (the default) is the
//! cluster named by `KAFKA_TEST_URL` (default `127.0.0.1:9092`, the broker `scripts/kafka up`
//! starts); `embedded` is this crate's embedded cluster, in this process, reached through
//! in-memory pipes. The same tests with the same assertions run against both: a difference is
//! a bug in the embedded cluster, or a scenario it declares unsupported
//! ([`unsupported_on_embedded`], listed in `docs/embedded-cluster.md`). There is no skipping
//! against Kafka: a test that finds no broker fails.
//! Helpers panic on failure, by design: a panic is how a test fails.
#![allow(clippy::missing_panics_doc)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use ruststream_kafka::client::{
    Admin, Client, ClientConfig, IsolationLevel, NewTopic, Observers, OffsetSpec, PartitionReader,
    Record,
};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};

/// The cluster a test run talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Apache Kafka at `KAFKA_TEST_URL`.
    Kafka,
    /// The embedded cluster of `ruststream_kafka::testing`, in this process, through
    /// in-memory pipes.
    Embedded,
    /// The same embedded cluster reached through its loopback TCP listeners.
    EmbeddedTcp,
}

/// The target of this run, from `KAFKA_TEST_TARGET` (`kafka` or `embedded`); anything else
/// fails the test rather than silently picking one.
#[must_use]
pub fn target() -> Target {
    match std::env::var("KAFKA_TEST_TARGET").as_deref() {
        Err(_) | Ok("" | "kafka") => Target::Kafka,
        Ok("embedded") => Target::Embedded,
        Ok("embedded-tcp") => Target::EmbeddedTcp,
        Ok(other) => {
            panic!("KAFKA_TEST_TARGET={other}: expected `kafka`, `embedded` or `embedded-tcp`")
        }
    }
}

/// The embedded cluster every test of this process shares (three nodes, so leaders and
/// coordinators spread as on the real test cluster).
#[must_use]
pub fn embedded() -> &'static EmbeddedCluster {
    static CLUSTER: OnceLock<EmbeddedCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        EmbeddedCluster::new(ClusterOptions {
            nodes: 3,
            // The Kafka stand the tests run against starts with auto-creation on and one
            // partition per created topic, like Kafka's defaults.
            ..ClusterOptions::default()
        })
    })
}

/// Whether this scenario runs on this target: on the embedded cluster a scenario it does not
/// model is reported and passes without running; against Kafka every scenario runs.
#[must_use]
pub fn unsupported_on_embedded(why: &str) -> bool {
    if target() != Target::Kafka {
        eprintln!("not run on the embedded cluster: {why}");
        return true;
    }
    false
}

/// The bootstrap servers of the cluster under test.
#[must_use]
pub fn bootstrap() -> String {
    match target() {
        Target::Kafka => {
            std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "127.0.0.1:9092".to_owned())
        }
        Target::Embedded => embedded().bootstrap(),
        Target::EmbeddedTcp => embedded_loopback().to_owned(),
    }
}

/// The loopback bootstrap list of [`embedded`]: its listeners run on a thread of their own,
/// so they outlive every test's runtime.
fn embedded_loopback() -> &'static str {
    static LOOPBACK: OnceLock<String> = OnceLock::new();
    LOOPBACK.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => panic!("a runtime for the embedded listeners: {e}"),
            };
            runtime.block_on(async move {
                let opened = embedded()
                    .listen()
                    .await
                    .map(|_| embedded().loopback_bootstrap());
                let _ = tx.send(opened);
                std::future::pending::<()>().await;
            });
        });
        match rx.recv() {
            Ok(Ok(Some(bootstrap))) => bootstrap,
            other => panic!("the embedded cluster's loopback listeners did not open: {other:?}"),
        }
    })
}

/// A client connected to the cluster under test; panics (failing the test) when there is none.
pub async fn client() -> Client {
    observed_client(Observers::new()).await
}

/// [`client`] reporting to `observers`.
pub async fn observed_client(observers: Observers) -> Client {
    logs();
    let url = bootstrap();
    let mut config = ClientConfig::new(&url);
    config.connect_timeout = Duration::from_secs(10);
    config.observers = observers;
    match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!(
            "no Kafka broker at {url} ({e}); start one with `scripts/kafka up` (live tests never skip)"
        ),
    }
}

/// A topic name no other test uses.
#[must_use]
pub fn unique_topic(prefix: &str) -> String {
    format!("{prefix}-{:016x}", fastrand::u64(..))
}

/// Creates `name` with `partitions` partitions and the largest replication factor up to 3
/// that the cluster has brokers for.
pub async fn create_topic(client: &Client, name: &str, partitions: i32) {
    let brokers = client.with_metadata(|m| m.brokers.len());
    let rf = i16::try_from(brokers.clamp(1, 3)).unwrap_or(1);
    let admin = Admin::new(client.clone());
    if let Err(e) = admin
        .create_topics(
            &[NewTopic::new(name, partitions, rf)],
            Duration::from_secs(30),
        )
        .await
    {
        panic!("creating {name}: {e}");
    }
}

/// Every committed record of every partition, read from offset 0 up to the current end.
pub async fn read_all(client: &Client, topic: &str, partitions: i32) -> Vec<Vec<Record>> {
    let admin = Admin::new(client.clone());
    let mut out = Vec::new();
    for p in 0..partitions {
        let end = match admin
            .list_offset(topic, p, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await
        {
            Ok((end, _)) => end,
            Err(e) => panic!("end offset of {topic}-{p}: {e}"),
        };
        let reader = PartitionReader::new(client.clone(), topic, p);
        match reader.read_range(0, end, Duration::from_mins(1)).await {
            Ok(records) => out.push(records),
            Err(e) => panic!("reading {topic}-{p}: {e}"),
        }
    }
    out
}

/// The repository root.
#[must_use]
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), PathBuf::from)
}

/// Starts node `id` of the running cluster again (`scripts/kafka start`), trying up to three
/// times: a node killed a moment ago can still hold its data directory's lock, and then the new
/// JVM exits during startup.
#[must_use = "the script's output says where the node listens"]
pub fn start_node(id: &str) -> String {
    let mut last = String::new();
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(3));
        }
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/kafka"))
            .args(["start", id])
            .output();
        match out {
            Ok(o) if o.status.success() => return String::from_utf8_lossy(&o.stdout).into_owned(),
            Ok(o) => {
                last = format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            Err(e) => last = format!("running scripts/kafka: {e}"),
        }
    }
    panic!("scripts/kafka start {id} failed three times: {last}")
}

/// Runs `scripts/kafka` with `args` and returns its stdout; panics on failure.
#[must_use]
pub fn kafka_script(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/kafka"))
        .args(args)
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => panic!(
            "scripts/kafka {args:?} failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("running scripts/kafka: {e}"),
    }
}

/// Runs the Java interop program (the official Java client) with `args`.
#[must_use]
pub fn java_interop(args: &[&str]) -> std::process::Output {
    static CLASSPATH: OnceLock<String> = OnceLock::new();
    let classpath = CLASSPATH.get_or_init(|| kafka_script(&["java-classpath"]).trim().to_owned());
    let out = Command::new("java")
        .arg("-cp")
        .arg(classpath)
        .arg(repo_root().join("scripts/interop/Interop.java"))
        .args(args)
        .output();
    match out {
        Ok(o) => o,
        Err(e) => panic!("running java: {e}"),
    }
}

/// Lower-case hex of `bytes`, or `-` for none (the interop program's notation).
#[must_use]
pub fn hex(bytes: Option<&[u8]>) -> String {
    use std::fmt::Write;
    match bytes {
        None => "-".to_owned(),
        Some(b) => b
            .iter()
            .fold(String::with_capacity(b.len() * 2), |mut s, x| {
                let _ = write!(s, "{x:02x}");
                s
            }),
    }
}

/// A record in the interop program's one-line notation:
/// `partition \t offset \t timestamp \t key \t value \t headers`.
#[must_use]
pub fn interop_line(partition: i32, r: &Record) -> String {
    let headers: Vec<String> = r
        .headers
        .iter()
        .map(|h| {
            format!(
                "{}={}",
                String::from_utf8_lossy(&h.key),
                hex(h.value.as_deref())
            )
        })
        .collect();
    format!(
        "{partition}\t{}\t{}\t{}\t{}\t{}",
        r.offset,
        r.timestamp,
        hex(r.key.as_deref()),
        hex(r.value.as_deref()),
        headers.join(",")
    )
}

/// Sends the client's logs to the test output when `RUST_LOG` is set (e.g.
/// `RUST_LOG=ruststream_kafka=debug`).
pub fn logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// Starts the fault proxy in this process on the routes `scripts/kafka env` gives
/// (`KAFKA_CHAOS_LISTENERS`) and returns its routes. Panics (failing the test) when the
/// variables are missing: the 3-node cluster is needed.
pub async fn chaos_proxy() -> Vec<std::sync::Arc<chaos_proxy::route::Route>> {
    let listeners = std::env::var("KAFKA_CHAOS_LISTENERS").unwrap_or_else(|_| {
        panic!("KAFKA_CHAOS_LISTENERS is not set: eval \"$(scripts/kafka env | sed 's/^/export /')\" after scripts/kafka up --nodes 3")
    });
    let mut routes = Vec::new();
    for spec in listeners.split(';').filter(|s| !s.is_empty()) {
        match chaos_proxy::cli::parse_route(spec) {
            Ok(r) => routes.push(r),
            Err(e) => panic!("KAFKA_CHAOS_LISTENERS: {e}"),
        }
    }
    let config = chaos_proxy::cli::Config {
        control: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        routes,
    };
    let proxy = match chaos_proxy::Proxy::bind(&config).await {
        Ok(p) => p,
        Err(e) => panic!("the fault proxy: {e}"),
    };
    let routes = proxy.routes().to_vec();
    tokio::spawn(proxy.run());
    routes
}
