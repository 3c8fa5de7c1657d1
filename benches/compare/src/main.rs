//! ruststream-kafka side by side with ruststream-rdkafka 0.7.1, on one broker, in one run.
//!
//! ```text
//! scripts/bench-compare            # or: cd benches/compare && cargo run --release
//! ```
//!
//! The parent process creates the topics and fills them (through our adapter), then runs every
//! measurement in a child process of this same binary, so each figure (and each peak RSS) is
//! one adapter alone in a fresh process. Rounds interleave the adapters and alternate which
//! goes first; the report gives medians and ratios (ours / rdkafka).
//!
//! - publish: `ConnectedKafkaBroker::publisher(KafkaPublish::default())` with
//!   `producer_config("acks", "all")`, `COMPARE_WINDOW` publishes in flight, 512-byte JSON
//!   bodies, into a fresh 6-partition topic; records/s from the first publish to the last
//!   delivery report. `publish-deep` is the same with `COMPARE_DEEP_WINDOW` in flight: with
//!   1 000 in flight both clients mostly wait out `linger.ms` (5 ms) and the broker's answer,
//!   with 10 000 they are busy, so it shows what each costs.
//! - consume (`Commit::Auto`, `Commit::Tracked`): a fresh group reads the whole pre-filled
//!   6-partition topic from the earliest offset through `Subscriber::stream()`, acking every
//!   delivery; records/s from the first delivery to the last ack.
//! - publish-1p, publish-1p-deep: the same into a topic of one partition (issue 20).
//! - sequential: `COMPARE_SEQUENTIAL` publishes into one partition, each awaited before the
//!   next (`acks=all`): records/s and the median p50 and p99 latency of one publish.
//! - sequential-task: the same from a task spawned on the runtime, as a service's handler
//!   publishes, rather than from the thread that blocks on the runtime.
//! - CPU us/record: the child's user + system time (`CLOCK_PROCESS_CPUTIME_ID`, every thread,
//!   librdkafka's C threads included, connect and start-up included) per record.
//! - RSS: the child's peak resident set (`VmHWM`) at the end of its measurement.
//! - allocations: `COMPARE_ALLOC_RECORDS` sequential publishes (as `sequential`) in a second
//!   build of this binary (feature `count-allocations`, `COMPARE_COUNTING_EXE`) whose global
//!   allocator counts every Rust allocation of the process, every thread; bytes and allocations
//!   per publish. librdkafka's own allocations are C `malloc`s this cannot see: the reference's
//!   figure is its Rust side alone, so the comparison favours it.
//! - heap: every heap allocation of the process, Rust's and C's alike (librdkafka's `malloc`s
//!   included), counted by `valgrind --tool=dhat`: each adapter makes `COMPARE_HEAP_N` and three
//!   times as many sequential publishes (as `sequential`); per publish = (A(3N) - A(N)) / 2N,
//!   in bytes and in allocations. This is the like-for-like allocation figure.
//! - sight (issue 19): every figure also for ours with sight on (`seen`: `MetricsObserver`
//!   recorded by a Prometheus recorder and rendered once at the end, as a scrape, and an INFO
//!   tracing subscriber), as the ratio to ours without it. `COMPARE_SIGHT=0` leaves it out.
//! - instructions per consumed record: each adapter reads a topic of M and one of 2M records
//!   under `valgrind --tool=callgrind --collect-atstart=yes` (whole process, every thread,
//!   librdkafka's C threads included); per record = (I(2M) - I(M)) / M.
//!
//! Settings (environment): `KAFKA_TEST_URL` (127.0.0.1:9092), `COMPARE_ROUNDS` (3),
//! `COMPARE_PUBLISH` (300000), `COMPARE_CONSUME` (500000), `COMPARE_WINDOW` (1000),
//! `COMPARE_DEEP_WINDOW` (10000), `COMPARE_CG_M` (200000), `COMPARE_ONLY` (comma list of
//! publish, publish-deep, publish-1p, publish-1p-deep, sequential, sequential-task, allocations,
//! auto, tracked,
//! heap, callgrind; default all), `COMPARE_HEAP_N` (200), `COMPARE_SEQUENTIAL` (5000), `COMPARE_ALLOC_RECORDS` (1000),
//! `COMPARE_COUNTING_EXE` (set by `scripts/bench-compare`), `COMPARE_SMAPS` (a child copies its
//! `/proc/self/smaps` there as it ends), `COMPARE_LATENCIES_DIR` (each
//! sequential publish's latency, one file per child), `COMPARE_SIGHT`, `VALGRIND` (valgrind).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};

#[cfg(feature = "count-allocations")]
#[global_allocator]
static COUNTED: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Bytes allocated and allocations made so far by the whole process (zeros unless this is the
/// counting build).
fn allocated() -> (u64, u64) {
    #[cfg(feature = "count-allocations")]
    {
        let stats = COUNTED.stats();
        (
            (stats.bytes_allocated + stats.bytes_reallocated.max(0) as usize) as u64,
            (stats.allocations + stats.reallocations) as u64,
        )
    }
    #[cfg(not(feature = "count-allocations"))]
    (0, 0)
}

const PARTITIONS: i32 = 6;
const BODY_SIZE: usize = 512;
/// How long one child may take before it is counted as failed.
const CHILD_TIMEOUT: Duration = Duration::from_mins(10);

/// A 512-byte JSON object.
fn body() -> Vec<u8> {
    let head = r#"{"id":4242,"kind":"order","pad":""#;
    let tail = r#""}"#;
    let mut body = String::with_capacity(BODY_SIZE);
    body.push_str(head);
    while body.len() < BODY_SIZE - tail.len() {
        body.push('x');
    }
    body.push_str(tail);
    debug_assert_eq!(body.len(), BODY_SIZE);
    body.into_bytes()
}

/// The process's peak resident set in KiB (`VmHWM`), 0 if unknown.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}

/// The process's CPU time so far, user + system, in seconds; 0 if unknown.
fn cpu_seconds() -> f64 {
    // CLOCK_PROCESS_CPUTIME_ID: user and system time of every thread of the process, exact
    // to the scheduler's accounting (the ticks of `/proc/self/stat` are 10 ms apart).
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn url() -> String {
    std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "127.0.0.1:9092".to_owned())
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{nanos:08x}", std::process::id())
}

/// The same measurement code for both crates: they have the same public API. `$make` builds
/// the broker from the bootstrap address (`seen`: ours with sight on).
macro_rules! adapter {
    ($name:ident, $krate:ident, $make:ident) => {
        mod $name {
            use std::time::Instant;

            use futures::StreamExt;
            use futures::stream::FuturesUnordered;
            use ruststream::{
                Broker, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, Subscriber,
            };
            use $krate::{Commit, KafkaPublish, KafkaTopic, StartOffset};

            /// A connection with `acks=all`, its plain publisher and a body, after one untimed
            /// publish to `topic`: it opens the producer and learns the topic's partitions
            /// before any clock runs.
            async fn open(
                url: &str,
                topic: &str,
            ) -> (
                $krate::ConnectedKafkaBroker,
                $krate::KafkaPublisher,
                Vec<u8>,
            ) {
                let broker = super::$make(url)
                    .producer_config("acks", "all")
                    .connect()
                    .await
                    .expect("connect");
                let publisher = broker.publisher(KafkaPublish::default());
                let body = super::body();
                publisher
                    .publish(OutgoingMessage::new(topic, &body[..]), None)
                    .await
                    .expect("first publish");
                (broker, publisher, body)
            }

            /// Publishes `records` bodies to `topic`, `window` in flight; records/s.
            pub async fn publish(url: &str, topic: &str, records: usize, window: usize) -> f64 {
                let (broker, publisher, body) = open(url, topic).await;
                let start = Instant::now();
                let mut in_flight = FuturesUnordered::new();
                let mut sent = 0;
                while sent < records || !in_flight.is_empty() {
                    while sent < records && in_flight.len() < window {
                        in_flight
                            .push(publisher.publish(OutgoingMessage::new(topic, &body[..]), None));
                        sent += 1;
                    }
                    if let Some(outcome) = in_flight.next().await {
                        outcome.expect("publish");
                    }
                }
                let rate = records as f64 / start.elapsed().as_secs_f64();
                drop(in_flight);
                let _ = broker.shutdown().await;
                rate
            }

            /// Publishes `records` bodies to `topic` one at a time, each awaited before the
            /// next (`acks=all`); records/s, each publish's latency in µs, and the bytes
            /// allocated and the allocations per publish (zeros unless counting).
            pub async fn sequential(
                url: &str,
                topic: &str,
                records: usize,
            ) -> (f64, Vec<f64>, f64, f64) {
                let (broker, publisher, body) = open(url, topic).await;
                let mut latencies = Vec::with_capacity(records);
                let (bytes_before, count_before) = super::allocated();
                let start = Instant::now();
                for _ in 0..records {
                    let sent = Instant::now();
                    publisher
                        .publish(OutgoingMessage::new(topic, &body[..]), None)
                        .await
                        .expect("publish");
                    latencies.push(sent.elapsed().as_secs_f64() * 1e6);
                }
                let rate = records as f64 / start.elapsed().as_secs_f64();
                let (bytes_after, count_after) = super::allocated();
                let per = |after: u64, before: u64| (after - before) as f64 / records.max(1) as f64;
                let _ = broker.shutdown().await;
                (
                    rate,
                    latencies,
                    per(bytes_after, bytes_before),
                    per(count_after, count_before),
                )
            }

            /// Reads `records` deliveries of `topic` in a fresh group, acking each; records/s
            /// from the first delivery to the last ack, and a checksum of the bodies.
            pub async fn consume(
                url: &str,
                topic: &str,
                group: &str,
                records: usize,
                tracked: bool,
            ) -> (f64, u64) {
                let broker = super::$make(url).connect().await.expect("connect");
                let commit = if tracked {
                    Commit::Tracked
                } else {
                    Commit::Auto
                };
                let mut subscriber = broker
                    .subscribe_with(
                        KafkaTopic::new(topic)
                            .group(group)
                            .start(StartOffset::Earliest)
                            .commit(commit),
                    )
                    .await
                    .expect("subscribe");
                let mut stream = std::pin::pin!(subscriber.stream());
                let mut start = None;
                let mut sum = 0u64;
                for n in 0..records {
                    let message = stream
                        .next()
                        .await
                        .expect("the stream does not end")
                        .expect("a delivery");
                    if start.is_none() {
                        start = Some(Instant::now());
                    }
                    let payload = std::hint::black_box(message.payload());
                    sum += payload.len() as u64 + u64::from(payload[n % payload.len()]);
                    message.ack().await.expect("ack");
                }
                let elapsed = start.map_or(0.0, |s| s.elapsed().as_secs_f64());
                ((records - 1) as f64 / elapsed, sum)
            }
        }
    };
}

adapter!(ours, ruststream_kafka, plain_ours);
adapter!(seen, ruststream_kafka, seen_ours);
adapter!(rd, ruststream_rdkafka, plain_rd);

fn plain_ours(url: &str) -> ruststream_kafka::KafkaBroker {
    ruststream_kafka::KafkaBroker::new([url])
}

fn plain_rd(url: &str) -> ruststream_rdkafka::KafkaBroker {
    ruststream_rdkafka::KafkaBroker::new([url])
}

/// Ours with everything an operator turns on: the metrics observer (every metric of
/// `MetricsObserver`, with consumer lag), recorded by a Prometheus recorder; the child also
/// installs an INFO tracing subscriber (see [`sight_on`]).
fn seen_ours(url: &str) -> ruststream_kafka::KafkaBroker {
    ruststream_kafka::KafkaBroker::new([url])
        .observer(ruststream_kafka::client::MetricsObserver::new())
}

/// Installs, in a `seen` child, what a service watching the client runs: a Prometheus metrics
/// recorder (rendered at the end, as a scrape would) and a tracing subscriber at INFO with
/// the crate's spans, writing to a sink.
fn sight_on() -> metrics_exporter_prometheus::PrometheusHandle {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("a metrics recorder");
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::io::sink)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("a tracing subscriber");
    handle
}

/// Our client, for the topics.
async fn admin() -> Admin {
    let client = Client::connect(ClientConfig::new(&url()))
        .await
        .expect("no broker at KAFKA_TEST_URL: run scripts/kafka up");
    Admin::new(client)
}

async fn create_topic(admin: &Admin, name: &str, partitions: i32) {
    admin
        .create_topics(
            &[NewTopic::new(name, partitions, 1)],
            Duration::from_secs(30),
        )
        .await
        .expect("create topic");
    admin
        .wait_for_leaders(&[name], Duration::from_secs(30))
        .await
        .expect("topic leaders");
}

// --- children ---

/// `child publish|auto|tracked ours|rd TOPIC RECORDS WINDOW`: one measurement, one result
/// line.
fn child(args: &[String]) {
    let [kind, side, topic, records, window] = args else {
        panic!("child KIND SIDE TOPIC RECORDS WINDOW");
    };
    let records: usize = records.parse().expect("RECORDS");
    let window: usize = window.parse().expect("WINDOW");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = url();
    let group = unique("cmp-group");
    let sight = (side == "seen").then(sight_on);
    let mut allocations = (0.0, 0.0);
    let work = async {
        let plain = |rate| (rate, 0, Vec::new());
        match (kind.as_str(), side.as_str()) {
            ("publish", "ours") => plain(ours::publish(&url, topic, records, window).await),
            ("publish", "seen") => plain(seen::publish(&url, topic, records, window).await),
            ("publish", "rd") => plain(rd::publish(&url, topic, records, window).await),
            ("sequential" | "sequential-task", "ours" | "seen" | "rd") => {
                // From a task on the runtime's workers (as a service's handler publishes),
                // or from the thread that blocks on the runtime.
                macro_rules! sequential {
                    ($side:ident) => {
                        if kind == "sequential-task" {
                            let (url, topic) = (url.clone(), topic.clone());
                            tokio::spawn(
                                async move { $side::sequential(&url, &topic, records).await },
                            )
                            .await
                            .expect("the publishing task")
                        } else {
                            $side::sequential(&url, topic, records).await
                        }
                    };
                }
                let (rate, latencies, bytes, count) = match side.as_str() {
                    "ours" => sequential!(ours),
                    "seen" => sequential!(seen),
                    _ => sequential!(rd),
                };
                allocations = (bytes, count);
                (rate, 0, latencies)
            }
            ("auto" | "tracked", "ours") => {
                let (rate, sum) =
                    ours::consume(&url, topic, &group, records, kind == "tracked").await;
                (rate, sum, Vec::new())
            }
            ("auto" | "tracked", "seen") => {
                let (rate, sum) =
                    seen::consume(&url, topic, &group, records, kind == "tracked").await;
                (rate, sum, Vec::new())
            }
            ("auto" | "tracked", "rd") => {
                let (rate, sum) =
                    rd::consume(&url, topic, &group, records, kind == "tracked").await;
                (rate, sum, Vec::new())
            }
            other => panic!("unknown child {other:?}"),
        }
    };
    let (rate, sum, mut latencies) = runtime.block_on(async {
        tokio::time::timeout(CHILD_TIMEOUT, work)
            .await
            .expect("the child timed out")
    });
    // A scrape: the metrics were recorded, and rendering them is part of what sight costs.
    let scraped = sight.map_or(0, |handle| handle.render().len());
    // The whole child's CPU time (user + system, every thread, librdkafka's too), per record:
    // it holds where throughput is bound by the broker's round trip.
    let cpu_us = cpu_seconds() * 1e6 / records.max(1) as f64;
    // The mappings and what each holds resident as the child ends, for a closer look at RSS.
    if let Ok(path) = std::env::var("COMPARE_SMAPS") {
        let _ = std::fs::copy("/proc/self/smaps", path);
    }
    // Every latency, in order of the publishes, for a closer look at a tail.
    if let Ok(dir) = std::env::var("COMPARE_LATENCIES_DIR")
        && !latencies.is_empty()
    {
        let text = latencies.iter().fold(String::new(), |mut text, l| {
            let _ = writeln!(text, "{l:.0}");
            text
        });
        let _ = std::fs::write(
            format!("{dir}/{kind}-{side}-{}.txt", std::process::id()),
            text,
        );
    }
    latencies.sort_by(f64::total_cmp);
    let quantile = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "RESULT rate={rate} hwm_kib={} sum={sum} scraped={scraped} cpu_us={cpu_us} p50_us={} p99_us={} alloc_bytes={} allocs={}",
        peak_rss_kib(),
        quantile(0.50),
        quantile(0.99),
        allocations.0,
        allocations.1
    );
    // No orderly close: what closing costs is no part of any figure.
    std::process::exit(0);
}

/// What one child reported.
struct Reported {
    rate: f64,
    hwm_kib: u64,
    cpu_us: f64,
    p50_us: f64,
    p99_us: f64,
    alloc_bytes: f64,
    allocs: f64,
}

/// Runs a child (under `wrapper` if given; the counting build of this binary if `counting`)
/// and parses its result line.
/// Whether a child of `kind` publishes one record at a time (from the blocking thread or from
/// a task).
fn sequential(kind: &str) -> bool {
    kind == "sequential" || kind == "sequential-task"
}

fn run_child(wrapper: &[String], counting: bool, args: &[&str]) -> Reported {
    let exe = if counting {
        std::path::PathBuf::from(
            std::env::var("COMPARE_COUNTING_EXE").expect("COMPARE_COUNTING_EXE"),
        )
    } else {
        std::env::current_exe().expect("current exe")
    };
    let mut command = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let out = command
        .arg("child")
        .args(args)
        .output()
        .expect("start child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with("RESULT "));
    let Some(line) = line.filter(|_| out.status.success()) else {
        panic!(
            "child {args:?} failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or("0")
            .to_owned()
    };
    Reported {
        rate: field("rate").parse().unwrap_or(0.0),
        hwm_kib: field("hwm_kib").parse().unwrap_or(0),
        cpu_us: field("cpu_us").parse().unwrap_or(0.0),
        p50_us: field("p50_us").parse().unwrap_or(0.0),
        p99_us: field("p99_us").parse().unwrap_or(0.0),
        alloc_bytes: field("alloc_bytes").parse().unwrap_or(0.0),
        allocs: field("allocs").parse().unwrap_or(0.0),
    }
}

// --- the parent ---

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    }
}

#[derive(Default)]
struct Figures {
    rates: Vec<f64>,
    rss_kib: Vec<f64>,
    cpu_us: Vec<f64>,
    p50_us: Vec<f64>,
    p99_us: Vec<f64>,
    alloc_bytes: Vec<f64>,
    allocs: Vec<f64>,
}

/// The total instructions (`Ir`) a callgrind output file reports.
fn callgrind_total(path: &str) -> u64 {
    let text = std::fs::read_to_string(path).expect("callgrind output");
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("a totals line")
}

/// The bytes and blocks a dhat output file says the process allocated in all (the sums of
/// every allocation point's `tb` and `tbk`).
fn dhat_totals(path: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(path).expect("dhat output");
    let sum = |field: &str| -> u64 {
        text.match_indices(field)
            .filter_map(|(at, _)| {
                let digits: String = text[at + field.len()..]
                    .chars()
                    .skip_while(|c| c.is_whitespace())
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<u64>().ok()
            })
            .sum()
    };
    (sum("\"tb\":"), sum("\"tbk\":"))
}

#[allow(clippy::too_many_lines, reason = "the run, top to bottom")]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child") {
        child(&args[1..]);
        return;
    }
    let rounds = env_usize("COMPARE_ROUNDS", 3);
    let publish_records = env_usize("COMPARE_PUBLISH", 300_000);
    let consume_records = env_usize("COMPARE_CONSUME", 500_000);
    let m = env_usize("COMPARE_CG_M", 200_000);
    let only = std::env::var("COMPARE_ONLY").unwrap_or_default();
    let wanted = |what: &str| only.is_empty() || only.split(',').any(|w| w.trim() == what);
    let window = env_usize("COMPARE_WINDOW", 1000);
    let deep_window = env_usize("COMPARE_DEEP_WINDOW", 10_000);
    eprintln!(
        "compare: broker {}, {rounds} rounds, publish {publish_records} (windows {window} and \
         {deep_window}), consume {consume_records}, callgrind M = {m}",
        url()
    );

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let admin = runtime.block_on(admin());
    let mut topics = Vec::new();
    let consume_topic = unique("cmp-consume");
    if wanted("auto") || wanted("tracked") {
        runtime.block_on(async {
            create_topic(&admin, &consume_topic, PARTITIONS).await;
            let start = Instant::now();
            ours::publish(&url(), &consume_topic, consume_records - 1, window).await;
            eprintln!(
                "compare: filled {consume_topic} with {consume_records} records in {:.1} s",
                start.elapsed().as_secs_f64()
            );
        });
        topics.push(consume_topic.clone());
    }

    // `seen` (ours with sight on) runs unless COMPARE_SIGHT=0.
    let sides: Vec<&str> = if std::env::var("COMPARE_SIGHT").is_ok_and(|v| v == "0") {
        vec!["ours", "rd"]
    } else {
        vec!["ours", "rd", "seen"]
    };
    let mut figures: BTreeMap<(&str, &str), Figures> = BTreeMap::new();
    // (name, what the child does, publishes in flight)
    let sequential_records = env_usize("COMPARE_SEQUENTIAL", 5000);
    // (name, what the child does, publishes in flight, partitions of a publish topic)
    let scenarios: Vec<(&str, &str, usize, i32)> = [
        ("publish", "publish", window, PARTITIONS),
        ("publish-deep", "publish", deep_window, PARTITIONS),
        ("publish-1p", "publish", window, 1),
        ("publish-1p-deep", "publish", deep_window, 1),
        ("sequential", "sequential", 1, 1),
        ("sequential-task", "sequential-task", 1, 1),
        ("allocations", "sequential", 1, 1),
        ("auto", "auto", window, PARTITIONS),
        ("tracked", "tracked", window, PARTITIONS),
    ]
    .into_iter()
    .filter(|(name, ..)| wanted(name))
    .filter(|(name, ..)| {
        let counting = std::env::var_os("COMPARE_COUNTING_EXE").is_some();
        if *name == "allocations" && !counting {
            eprintln!("compare: COMPARE_COUNTING_EXE is not set: allocations are skipped");
        }
        *name != "allocations" || counting
    })
    .collect();
    let alloc_records = env_usize("COMPARE_ALLOC_RECORDS", 1000);
    for round in 0..rounds {
        // Each side leads in turn.
        let mut order = sides.clone();
        order.rotate_left(round % sides.len());
        for &(scenario, kind, in_flight, partitions) in &scenarios {
            for &side in &order {
                let publishes = kind == "publish" || sequential(kind);
                let (topic, records) = if publishes {
                    let topic = unique("cmp-publish");
                    runtime.block_on(create_topic(&admin, &topic, partitions));
                    topics.push(topic.clone());
                    let records = if scenario == "allocations" {
                        alloc_records
                    } else if sequential(kind) {
                        sequential_records
                    } else {
                        publish_records
                    };
                    (topic, records)
                } else {
                    (consume_topic.clone(), consume_records)
                };
                let got = run_child(
                    &[],
                    scenario == "allocations",
                    &[
                        kind,
                        side,
                        &topic,
                        &records.to_string(),
                        &in_flight.to_string(),
                    ],
                );
                eprintln!(
                    "compare: round {} {scenario:15} {side:4} {:>10.0} records/s, {:.2} CPU us/record, peak RSS {:.1} MiB{}",
                    round + 1,
                    got.rate,
                    got.cpu_us,
                    got.hwm_kib as f64 / 1024.0,
                    if scenario == "allocations" {
                        format!(
                            ", {:.0} bytes and {:.1} allocations per publish",
                            got.alloc_bytes, got.allocs
                        )
                    } else if sequential(kind) {
                        format!(", p50 {:.0} us, p99 {:.0} us", got.p50_us, got.p99_us)
                    } else {
                        String::new()
                    }
                );
                let f = figures.entry((scenario, side)).or_default();
                f.rates.push(got.rate);
                f.rss_kib.push(got.hwm_kib as f64);
                f.cpu_us.push(got.cpu_us);
                f.p50_us.push(got.p50_us);
                f.p99_us.push(got.p99_us);
                f.alloc_bytes.push(got.alloc_bytes);
                f.allocs.push(got.allocs);
                if publishes {
                    // The log of a publish round is read by nobody.
                    let _ = runtime
                        .block_on(admin.delete_topics(&[topic.as_str()], Duration::from_secs(30)));
                }
            }
        }
    }

    let mut instructions: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    if wanted("callgrind") {
        let valgrind = std::env::var("VALGRIND").unwrap_or_else(|_| "valgrind".to_owned());
        let dir = std::env::temp_dir().join(unique("cmp-callgrind"));
        std::fs::create_dir_all(&dir).expect("callgrind dir");
        let sized: Vec<(usize, String)> = [m, 2 * m]
            .into_iter()
            .map(|n| {
                let topic = unique(&format!("cmp-cg{n}"));
                runtime.block_on(async {
                    create_topic(&admin, &topic, PARTITIONS).await;
                    ours::publish(&url(), &topic, n - 1, window).await;
                });
                topics.push(topic.clone());
                (n, topic)
            })
            .collect();
        // Both commit modes, unless `COMPARE_ONLY` names one of them.
        let named = |what: &str| only.split(',').any(|w| w.trim() == what);
        let modes: Vec<&str> = ["auto", "tracked"]
            .into_iter()
            .filter(|m| named(m) || !(named("auto") || named("tracked")))
            .collect();
        for scenario in modes {
            for &side in &sides {
                let mut totals = Vec::new();
                for (n, topic) in &sized {
                    let out = dir.join(format!("callgrind.{side}.{scenario}.{n}.out"));
                    let out = out.to_string_lossy().into_owned();
                    let wrapper = vec![
                        valgrind.clone(),
                        "--tool=callgrind".to_owned(),
                        "--collect-atstart=yes".to_owned(),
                        format!("--callgrind-out-file={out}"),
                    ];
                    let start = Instant::now();
                    run_child(
                        &wrapper,
                        false,
                        &[scenario, side, topic, &n.to_string(), &window.to_string()],
                    );
                    let total = callgrind_total(&out);
                    eprintln!(
                        "compare: callgrind {scenario:8} {side:4} {n:>7} records: {total} instructions ({:.0} s) -> {out}",
                        start.elapsed().as_secs_f64()
                    );
                    totals.push(total);
                }
                let per = (totals[1] as f64 - totals[0] as f64) / m as f64;
                instructions.insert((scenario, side), per);
            }
        }
    }

    // Every heap allocation of the process (Rust and C alike: librdkafka's `malloc`s too),
    // per sequential publish: dhat counts N and 3N publishes, the difference over 2N.
    let mut heap: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    if wanted("heap") {
        let valgrind = std::env::var("VALGRIND").unwrap_or_else(|_| "valgrind".to_owned());
        let dir = std::env::temp_dir().join(unique("cmp-dhat"));
        std::fs::create_dir_all(&dir).expect("dhat dir");
        let n = env_usize("COMPARE_HEAP_N", 200);
        for &side in &sides {
            let mut totals = Vec::new();
            for records in [n, 3 * n] {
                let topic = unique("cmp-heap");
                runtime.block_on(create_topic(&admin, &topic, 1));
                topics.push(topic.clone());
                let out = dir.join(format!("dhat.{side}.{records}.json"));
                let out = out.to_string_lossy().into_owned();
                let wrapper = vec![
                    valgrind.clone(),
                    "--tool=dhat".to_owned(),
                    format!("--dhat-out-file={out}"),
                ];
                run_child(
                    &wrapper,
                    false,
                    &["sequential", side, &topic, &records.to_string(), "1"],
                );
                let (bytes, blocks) = dhat_totals(&out);
                eprintln!(
                    "compare: dhat sequential {side:4} {records:>5} publishes: {bytes} bytes in {blocks} allocations -> {out}"
                );
                totals.push((bytes, blocks));
            }
            let per = |later: u64, earlier: u64| (later as f64 - earlier as f64) / (2 * n) as f64;
            heap.insert(
                side,
                (per(totals[1].0, totals[0].0), per(totals[1].1, totals[0].1)),
            );
        }
    }

    runtime.block_on(async {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let _ = admin.delete_topics(&names, Duration::from_secs(30)).await;
    });

    // --- the report ---
    let mut report = String::new();
    let _ = writeln!(
        report,
        "\n{:<30} {:>14} {:>14} {:>12} {:>14} {:>10}",
        "figure (median)", "ours", "rdkafka", "ours/rdkafka", "ours+sight", "sight/ours"
    );
    // The sight columns, where `seen` ran.
    let sight = |seen: Option<f64>, ours: f64| {
        seen.map_or_else(String::new, |v| format!(" {v:>14.1} {:>10.3}", v / ours))
    };
    for (scenario, kind, ..) in &scenarios {
        let (Some(o), Some(r)) = (
            figures.get(&(scenario, "ours")),
            figures.get(&(scenario, "rd")),
        ) else {
            continue;
        };
        let seen = figures.get(&(scenario, "seen"));
        if *scenario == "allocations" {
            // librdkafka's C allocations are not counted: its figure is its Rust side alone.
            for (name, pick) in [
                (
                    "bytes/publish",
                    (|f: &Figures| f.alloc_bytes.clone()) as fn(&Figures) -> Vec<f64>,
                ),
                ("allocations/publish", |f: &Figures| f.allocs.clone()),
            ] {
                let (ao, ar) = (median(pick(o)), median(pick(r)));
                let _ = writeln!(
                    report,
                    "{:<30} {ao:>14.1} {ar:>14.1} {:>12.2}{}",
                    format!("alloc {name}"),
                    ao / ar,
                    sight(seen.map(|s| median(pick(s))), ao)
                );
            }
            continue;
        }
        let (ro, rr) = (median(o.rates.clone()), median(r.rates.clone()));
        let _ = writeln!(
            report,
            "{:<30} {ro:>14.0} {rr:>14.0} {:>12.2}{}",
            format!("{scenario} records/s"),
            ro / rr,
            sight(seen.map(|s| median(s.rates.clone())), ro)
        );
        let (mo, mr) = (
            median(o.rss_kib.clone()) / 1024.0,
            median(r.rss_kib.clone()) / 1024.0,
        );
        let _ = writeln!(
            report,
            "{:<30} {mo:>14.1} {mr:>14.1} {:>12.2}{}",
            format!("{scenario} peak RSS MiB"),
            mo / mr,
            sight(seen.map(|s| median(s.rss_kib.clone()) / 1024.0), mo)
        );
        let (co, cr) = (median(o.cpu_us.clone()), median(r.cpu_us.clone()));
        let _ = writeln!(
            report,
            "{:<30} {co:>14.2} {cr:>14.2} {:>12.2}{}",
            format!("{scenario} CPU us/record"),
            co / cr,
            sight(seen.map(|s| median(s.cpu_us.clone())), co)
        );
        if sequential(kind) {
            for (name, pick) in [
                (
                    "p50",
                    (|f: &Figures| f.p50_us.clone()) as fn(&Figures) -> Vec<f64>,
                ),
                ("p99", |f: &Figures| f.p99_us.clone()),
            ] {
                let (lo, lr) = (median(pick(o)), median(pick(r)));
                let _ = writeln!(
                    report,
                    "{:<30} {lo:>14.0} {lr:>14.0} {:>12.2}{}",
                    format!("{scenario} {name} us"),
                    lo / lr,
                    sight(seen.map(|s| median(pick(s))), lo)
                );
            }
        }
    }
    for scenario in ["auto", "tracked"] {
        if let (Some(o), Some(r)) = (
            instructions.get(&(scenario, "ours")),
            instructions.get(&(scenario, "rd")),
        ) {
            let _ = writeln!(
                report,
                "{:<30} {o:>14.0} {r:>14.0} {:>12.2}{}",
                format!("{scenario} instr/record"),
                o / r,
                sight(instructions.get(&(scenario, "seen")).copied(), *o)
            );
        }
    }
    if let (Some(o), Some(r)) = (heap.get("ours"), heap.get("rd")) {
        for (name, ours, theirs, seen) in [
            (
                "heap bytes/publish",
                o.0,
                r.0,
                heap.get("seen").map(|s| s.0),
            ),
            (
                "heap allocations/publish",
                o.1,
                r.1,
                heap.get("seen").map(|s| s.1),
            ),
        ] {
            let _ = writeln!(
                report,
                "{name:<30} {ours:>14.1} {theirs:>14.1} {:>12.2}{}",
                ours / theirs,
                sight(seen, ours)
            );
        }
    }
    for (scenario, ..) in &scenarios {
        if let Some(f) = figures.get(&(scenario, "ours")) {
            let r = &figures[&(*scenario, "rd")];
            let rounded = |f: &Figures| f.rates.iter().map(|r| r.round()).collect::<Vec<_>>();
            let _ = writeln!(
                report,
                "rounds {scenario}: ours {:?} rdkafka {:?}{}",
                rounded(f),
                rounded(r),
                figures
                    .get(&(*scenario, "seen"))
                    .map_or_else(String::new, |s| format!(" ours+sight {:?}", rounded(s)))
            );
        }
    }
    print!("{report}");
}
