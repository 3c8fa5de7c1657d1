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
//! - RSS: the child's peak resident set (`VmHWM`) at the end of its measurement.
//! - instructions per consumed record: each adapter reads a topic of M and one of 2M records
//!   under `valgrind --tool=callgrind --collect-atstart=yes` (whole process, every thread,
//!   librdkafka's C threads included); per record = (I(2M) - I(M)) / M.
//!
//! Settings (environment): `KAFKA_TEST_URL` (127.0.0.1:9092), `COMPARE_ROUNDS` (3),
//! `COMPARE_PUBLISH` (300000), `COMPARE_CONSUME` (500000), `COMPARE_WINDOW` (1000),
//! `COMPARE_DEEP_WINDOW` (10000), `COMPARE_CG_M` (20000), `COMPARE_ONLY` (comma list of
//! publish, publish-deep, auto, tracked, callgrind; default all), `VALGRIND` (valgrind).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};

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

/// The same measurement code for both crates: they have the same public API.
macro_rules! adapter {
    ($name:ident, $krate:ident) => {
        mod $name {
            use std::time::Instant;

            use futures::StreamExt;
            use futures::stream::FuturesUnordered;
            use ruststream::{
                Broker, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, Subscriber,
            };
            use $krate::{Commit, KafkaBroker, KafkaPublish, KafkaTopic, StartOffset};

            /// Publishes `records` bodies to `topic`, `window` in flight; records/s.
            pub async fn publish(url: &str, topic: &str, records: usize, window: usize) -> f64 {
                let broker = KafkaBroker::new([url])
                    .producer_config("acks", "all")
                    .connect()
                    .await
                    .expect("connect");
                let publisher = broker.publisher(KafkaPublish::default());
                let body = super::body();
                // Opens the producer and learns the topic's partitions before the clock runs.
                publisher
                    .publish(OutgoingMessage::new(topic, &body[..]), None)
                    .await
                    .expect("first publish");
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

            /// Reads `records` deliveries of `topic` in a fresh group, acking each; records/s
            /// from the first delivery to the last ack, and a checksum of the bodies.
            pub async fn consume(
                url: &str,
                topic: &str,
                group: &str,
                records: usize,
                tracked: bool,
            ) -> (f64, u64) {
                let broker = KafkaBroker::new([url]).connect().await.expect("connect");
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

adapter!(ours, ruststream_kafka);
adapter!(rd, ruststream_rdkafka);

/// Our client, for the topics.
async fn admin() -> Admin {
    let client = Client::connect(ClientConfig::new(&url()))
        .await
        .expect("no broker at KAFKA_TEST_URL: run scripts/kafka up");
    Admin::new(client)
}

async fn create_topic(admin: &Admin, name: &str) {
    admin
        .create_topics(
            &[NewTopic::new(name, PARTITIONS, 1)],
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
    let work = async {
        match (kind.as_str(), side.as_str()) {
            ("publish", "ours") => (ours::publish(&url, topic, records, window).await, 0),
            ("publish", "rd") => (rd::publish(&url, topic, records, window).await, 0),
            ("auto" | "tracked", "ours") => {
                ours::consume(&url, topic, &group, records, kind == "tracked").await
            }
            ("auto" | "tracked", "rd") => {
                rd::consume(&url, topic, &group, records, kind == "tracked").await
            }
            other => panic!("unknown child {other:?}"),
        }
    };
    let (rate, sum) = runtime.block_on(async {
        tokio::time::timeout(CHILD_TIMEOUT, work)
            .await
            .expect("the child timed out")
    });
    println!("RESULT rate={rate} hwm_kib={} sum={sum}", peak_rss_kib());
    // No orderly close: what closing costs is no part of any figure.
    std::process::exit(0);
}

/// Runs a child (under `wrapper` if given) and parses its result line.
fn run_child(wrapper: &[String], args: &[&str]) -> (f64, u64) {
    let exe = std::env::current_exe().expect("current exe");
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
    (
        field("rate").parse().unwrap_or(0.0),
        field("hwm_kib").parse().unwrap_or(0),
    )
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
    let m = env_usize("COMPARE_CG_M", 20_000);
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
            create_topic(&admin, &consume_topic).await;
            let start = Instant::now();
            ours::publish(&url(), &consume_topic, consume_records - 1, window).await;
            eprintln!(
                "compare: filled {consume_topic} with {consume_records} records in {:.1} s",
                start.elapsed().as_secs_f64()
            );
        });
        topics.push(consume_topic.clone());
    }

    let sides = ["ours", "rd"];
    let mut figures: BTreeMap<(&str, &str), Figures> = BTreeMap::new();
    // (name, what the child does, publishes in flight)
    let scenarios: Vec<(&str, &str, usize)> = [
        ("publish", "publish", window),
        ("publish-deep", "publish", deep_window),
        ("auto", "auto", window),
        ("tracked", "tracked", window),
    ]
    .into_iter()
    .filter(|(name, _, _)| wanted(name))
    .collect();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            sides
        } else {
            [sides[1], sides[0]]
        };
        for &(scenario, kind, in_flight) in &scenarios {
            for side in order {
                let (topic, records) = if kind == "publish" {
                    let topic = unique("cmp-publish");
                    runtime.block_on(create_topic(&admin, &topic));
                    topics.push(topic.clone());
                    (topic, publish_records)
                } else {
                    (consume_topic.clone(), consume_records)
                };
                let (rate, hwm) = run_child(
                    &[],
                    &[
                        kind,
                        side,
                        &topic,
                        &records.to_string(),
                        &in_flight.to_string(),
                    ],
                );
                eprintln!(
                    "compare: round {} {scenario:12} {side:4} {rate:>10.0} records/s, peak RSS {:.1} MiB",
                    round + 1,
                    hwm as f64 / 1024.0
                );
                let f = figures.entry((scenario, side)).or_default();
                f.rates.push(rate);
                f.rss_kib.push(hwm as f64);
                if kind == "publish" {
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
                    create_topic(&admin, &topic).await;
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
            for side in sides {
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

    runtime.block_on(async {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let _ = admin.delete_topics(&names, Duration::from_secs(30)).await;
    });

    // --- the report ---
    let mut report = String::new();
    let _ = writeln!(
        report,
        "\n{:<26} {:>14} {:>14} {:>12}",
        "figure (median)", "ours", "rdkafka", "ours/rdkafka"
    );
    for (scenario, _, _) in &scenarios {
        let (Some(o), Some(r)) = (
            figures.get(&(scenario, "ours")),
            figures.get(&(scenario, "rd")),
        ) else {
            continue;
        };
        let (ro, rr) = (median(o.rates.clone()), median(r.rates.clone()));
        let _ = writeln!(
            report,
            "{:<26} {ro:>14.0} {rr:>14.0} {:>12.2}",
            format!("{scenario} records/s"),
            ro / rr
        );
        let (mo, mr) = (
            median(o.rss_kib.clone()) / 1024.0,
            median(r.rss_kib.clone()) / 1024.0,
        );
        let _ = writeln!(
            report,
            "{:<26} {mo:>14.1} {mr:>14.1} {:>12.2}",
            format!("{scenario} peak RSS MiB"),
            mo / mr
        );
    }
    for scenario in ["auto", "tracked"] {
        if let (Some(o), Some(r)) = (
            instructions.get(&(scenario, "ours")),
            instructions.get(&(scenario, "rd")),
        ) {
            let _ = writeln!(
                report,
                "{:<26} {o:>14.0} {r:>14.0} {:>12.2}",
                format!("{scenario} instr/record"),
                o / r
            );
        }
    }
    for (scenario, _, _) in &scenarios {
        if let Some(f) = figures.get(&(scenario, "ours")) {
            let r = &figures[&(*scenario, "rd")];
            let _ = writeln!(
                report,
                "rounds {scenario}: ours {:?} rdkafka {:?}",
                f.rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
                r.rates.iter().map(|r| r.round()).collect::<Vec<_>>()
            );
        }
    }
    print!("{report}");
}
