//! Metrics of a Kafka service for Prometheus: the client's events become metrics of the
//! `metrics` facade (`MetricsObserver`), and the service serves them on an HTTP endpoint with
//! `metrics-exporter-prometheus`.
//!
//! ```text
//! $ cargo run --features testing --example kafka_metrics           # on an embedded cluster
//! $ cargo run --example kafka_metrics -- live                       # on KAFKA_TEST_URL
//! ```
//!
//! Either way it starts the service (a group reading `metered-orders`), publishes orders
//! keyed over the topic's three partitions, waits until the handler has them all, scrapes its
//! own endpoint, prints the exposition (per-partition `kafka_consumer_lag`, the
//! `kafka_producer_*` counters, request latencies) and exits 0; 1 if a figure is missing.
//!
//! In a service of your own: install the exporter, then register the observer on the broker,
//! `KafkaBroker::new(..).observer(MetricsObserver::new())`. The list of metrics is on
//! `MetricsObserver`.

#[path = "support/live.rs"]
mod live;

use std::error::Error;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use ruststream::{Broker, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher};
use ruststream_kafka::client::MetricsObserver;
use ruststream_kafka::prelude::*;
use ruststream_kafka::{KafkaPublish, KafkaTopic, PARTITION_KEY_HEADER};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The topic the service reads; three partitions, each with a lag of its own.
const ORDERS: &str = "metered-orders";
const PARTITIONS: i32 = 3;
/// How many orders a run publishes.
const COUNT: usize = 60;

/// The orders the handler has seen since the process started.
static HANDLED: AtomicUsize = AtomicUsize::new(0);

#[derive(Serialize, Deserialize, Debug)]
struct Order {
    id: u64,
}

#[subscriber(KafkaTopic::new("metered-orders").group("metered-orders"))]
async fn handle(order: &Order) -> HandlerOutcome {
    tracing::debug!(order.id, "order handled");
    HANDLED.fetch_add(1, Ordering::Relaxed);
    HandlerOutcome::ack()
}

/// The service: its broker reports to the metrics observer.
fn app(bootstrap: &str) -> impl App {
    RustStream::new(AppInfo::new("metered-orders", "0.1.0")).with_broker(
        KafkaBroker::new([bootstrap]).observer(MetricsObserver::new()),
        |b| {
            b.include(handle);
        },
    )
}

type RunError = Box<dyn Error + Send + Sync>;

/// Upper bounds of the latency buckets, in seconds: a millisecond to ten seconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// Installs the Prometheus exporter (once per process: the recorder is global) on a free
/// loopback port, and returns where it listens.
fn exporter() -> Result<SocketAddr, RunError> {
    static ENDPOINT: OnceLock<Result<SocketAddr, String>> = OnceLock::new();
    ENDPOINT
        .get_or_init(|| {
            // The exporter binds the port itself and does not say which one it got: pick a
            // free one first (another process could take it in between; a retry picks again).
            let mut last = String::new();
            for _ in 0..3 {
                let addr = std::net::TcpListener::bind(("127.0.0.1", 0))
                    .and_then(|l| l.local_addr())
                    .map_err(|e| e.to_string())?;
                // Histograms with buckets (not summaries): they add up across instances.
                // Installed from a thread outside any runtime, the exporter gets a runtime
                // of its own: it outlives the caller's (each test has one).
                let built = std::thread::spawn(move || {
                    PrometheusBuilder::new()
                        .with_http_listener(addr)
                        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                        .and_then(PrometheusBuilder::install)
                        .map_err(|e| e.to_string())
                })
                .join()
                .unwrap_or_else(|_| Err("the exporter's installation panicked".into()));
                match built {
                    Ok(()) => return Ok(addr),
                    Err(e) => last = e,
                }
            }
            Err(format!("the Prometheus exporter did not start: {last}"))
        })
        .clone()
        .map_err(Into::into)
}

/// One `GET /metrics` on `endpoint`: the exposition text.
async fn scrape(endpoint: SocketAddr) -> Result<String, RunError> {
    let mut stream = tokio::net::TcpStream::connect(endpoint).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await??;
    let response = String::from_utf8(response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("the exporter's answer has no body")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("the exporter answered {:?}", head.lines().next()).into());
    }
    Ok(body.to_owned())
}

/// The value of the sample named `name` whose labels include each of `labels`.
fn sample(exposition: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        (rest.starts_with('{') && all).then(|| value.parse().ok())?
    })
}

/// What a scrape must show once every order was handled, or what it lacks.
fn missing(exposition: &str, published: usize) -> Vec<String> {
    let mut missing = Vec::new();
    let produced = sample(
        exposition,
        "kafka_producer_records_total",
        &[("topic", ORDERS)],
    );
    if produced.is_none_or(|n| n < f64::from(u32::try_from(published).unwrap_or(u32::MAX))) {
        missing.push(format!(
            "kafka_producer_records_total{{topic={ORDERS:?}}} >= {published} (is {produced:?})"
        ));
    }
    for partition in 0..PARTITIONS {
        let p = partition.to_string();
        let lag = sample(
            exposition,
            "kafka_consumer_lag",
            &[("topic", ORDERS), ("partition", &p)],
        );
        if lag != Some(0.0) {
            missing.push(format!(
                "kafka_consumer_lag{{topic={ORDERS:?},partition=\"{p}\"}} 0 (is {lag:?})"
            ));
        }
    }
    let settled = sample(
        exposition,
        "kafka_consumer_settled_total",
        &[("topic", ORDERS), ("outcome", "acked")],
    );
    if settled.is_none_or(|n| n < f64::from(u32::try_from(published).unwrap_or(u32::MAX))) {
        missing.push(format!(
            "kafka_consumer_settled_total{{topic={ORDERS:?},outcome=\"acked\"}} >= {published} (is {settled:?})"
        ));
    }
    if sample(exposition, "kafka_consumer_assigned_partitions", &[]).is_none_or(|n| n < 1.0) {
        missing.push("kafka_consumer_assigned_partitions >= 1".into());
    }
    if !exposition.contains("kafka_client_request_duration_seconds") {
        missing.push("kafka_client_request_duration_seconds".into());
    }
    missing
}

/// Runs the service on `bootstrap`, publishes [`COUNT`] orders, waits for the handler and for a
/// scrape that shows them, and returns that scrape.
async fn run(bootstrap: &str) -> Result<String, RunError> {
    // One run at a time in a process: the handler's count and the series are shared.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let endpoint = exporter()?;
    let running = app(bootstrap).start().await?;
    let outcome = publish_and_scrape(bootstrap, endpoint).await;
    let stopped = running.shutdown().await;
    let exposition = outcome?;
    stopped?;
    Ok(exposition)
}

async fn publish_and_scrape(bootstrap: &str, endpoint: SocketAddr) -> Result<String, RunError> {
    let before = HANDLED.load(Ordering::Relaxed);
    let connected = KafkaBroker::new([bootstrap])
        .observer(MetricsObserver::new())
        .connect()
        .await?;
    let publisher = connected.publisher(KafkaPublish::default());
    for id in 0..COUNT {
        let body = serde_json::to_vec(&Order { id: id as u64 })?;
        let mut headers = HeaderMap::new();
        headers.insert(PARTITION_KEY_HEADER, Bytes::from(format!("customer-{id}")));
        publisher
            .publish(
                OutgoingMessage::new(ORDERS, body.as_slice()).with_headers(headers),
                None,
            )
            .await?;
    }
    connected.shutdown().await?;
    drop(publisher);
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        let exposition = scrape(endpoint).await?;
        let handled = HANDLED.load(Ordering::Relaxed) - before;
        let lacking = missing(&exposition, COUNT);
        if handled >= COUNT && lacking.is_empty() {
            return Ok(exposition);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "after 60 s: {handled} of {COUNT} orders handled; the scrape lacks {lacking:?}\n{exposition}"
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The embedded run: a cluster of this process, listening on a loopback port.
#[cfg(feature = "testing")]
async fn embedded() -> Result<String, RunError> {
    use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
    let cluster = EmbeddedCluster::new(ClusterOptions::default());
    cluster.listen().await?;
    let bootstrap = cluster
        .loopback_bootstrap()
        .ok_or("the embedded cluster opened no listener")?;
    let _ = cluster.create_topic(ORDERS, PARTITIONS);
    eprintln!("embedded Kafka on {bootstrap}");
    run(&bootstrap).await
}

#[cfg(not(feature = "testing"))]
#[allow(
    clippy::unused_async,
    reason = "the signature of the embedded run it stands for"
)]
async fn embedded() -> Result<String, RunError> {
    Err("the embedded cluster is behind the `testing` feature: \
         cargo run --features testing --example kafka_metrics (or `-- live` for a broker)"
        .into())
}

async fn live_run() -> Result<String, RunError> {
    live::ensure_topic(ORDERS, PARTITIONS)
        .await
        .map_err(|e| e.to_string())?;
    run(&live::bootstrap()).await
}

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("kafka_metrics: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let live = std::env::args().nth(1).as_deref() == Some("live");
    let outcome = runtime.block_on(async {
        if live {
            live_run().await
        } else {
            embedded().await
        }
    });
    match outcome {
        Ok(exposition) => {
            print!("{exposition}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kafka_metrics: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_found_by_its_name_and_labels() {
        let text = "# TYPE kafka_consumer_lag gauge\n\
                    kafka_consumer_lag{topic=\"a\",partition=\"0\"} 3\n\
                    kafka_consumer_lag{topic=\"a\",partition=\"1\"} 0\n\
                    kafka_consumer_lag_other{topic=\"a\"} 9\n";
        assert_eq!(
            sample(text, "kafka_consumer_lag", &[("partition", "1")]),
            Some(0.0)
        );
        assert_eq!(
            sample(text, "kafka_consumer_lag", &[("topic", "a")]),
            Some(3.0)
        );
        assert_eq!(sample(text, "kafka_consumer_lag", &[("topic", "b")]), None);
        let lacking = missing(text, 1);
        assert!(lacking.iter().any(|m| m.contains("producer_records")));
        assert!(lacking.iter().any(|m| m.contains("partition=\"0\"} 0")));
    }

    /// The command's own run, on an embedded cluster of the test.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_embedded_run_scrapes_the_lag_and_the_produce_counters() -> Result<(), RunError> {
        let exposition = embedded().await?;
        assert!(missing(&exposition, COUNT).is_empty());
        Ok(())
    }

    /// The same against the broker of the environment (Kafka in CI).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scrape_on_the_broker_shows_the_lag_and_the_produce_counters() -> Result<(), RunError>
    {
        let exposition = live_run().await?;
        assert!(missing(&exposition, COUNT).is_empty());
        Ok(())
    }
}
