//! Consume throughput of 100-byte records: our consumer side by side with the Java client's
//! `ConsumerPerformance` on the same broker, in one run.
//!
//! ```text
//! scripts/kafka up && eval "$(scripts/kafka env | sed 's/^/export /')" && cargo bench --bench consume
//! # BENCH_RECORDS (default 1000000), BENCH_ROUNDS (3), BENCH_CODEC (none; gzip, snappy, lz4, zstd)
//! ```
//!
//! Our producer fills one 6-partition topic once; then each round reads it all, first with
//! ours, then with Java. Ours assigns the 6 partitions at the log start (no group, so no
//! rebalance); its time runs from `assign` to the last record, and every value is read (its
//! bytes summed). Java joins a fresh group each round; it reports its fetch time without the
//! rebalance and its total time, and both are compared.
//!
//! CPU time is the process's user+system time while ours consumes (from `/proc/self/stat`) and
//! the whole JVM's as `time` sees it, start-up included. A JVM reading a single record
//! measures that fixed cost once per run; "net" figures subtract it. Memory is peak RSS:
//! ours from `VmHWM` in `/proc/self/status` (reset before each round through
//! `/proc/self/clear_refs`), the JVM's from `/usr/bin/time`. Our allocations are counted by
//! `stats_alloc`'s instrumented system allocator (the JVM's cannot be compared: it allocates
//! in its own heap).

#![allow(clippy::cast_precision_loss, reason = "record counts far below 2^52")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ruststream_kafka::client::{
    Client, Codec, Consumer, ConsumerConfig, ConsumerEvent, Producer, ProducerConfig, StartAt,
    TopicPartition,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

mod common;
use common::{connect, cpu_seconds, env_usize, java_classpath, median, new_topic};

const PARTITIONS: i32 = 6;
const RECORD_SIZE: usize = 100;
const MIB: f64 = 1024.0 * 1024.0;

/// Starts a new peak-RSS measurement (Linux 4.0+: writing 5 to `clear_refs` resets `VmHWM`).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak RSS in MiB since the last reset (`VmHWM`), 0 if unknown.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Fills `topic` with `records` values of `RECORD_SIZE` bytes; returns the records/s.
async fn fill(client: &Client, topic: &str, records: usize, codec: Codec) -> f64 {
    let config = ProducerConfig {
        linger: Duration::from_millis(5),
        compression: codec,
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client.clone(), config).expect("producer");
    let start = Instant::now();
    common::send_and_wait(&producer, topic, records, RECORD_SIZE).await;
    let rate = records as f64 / start.elapsed().as_secs_f64();
    producer.close(Duration::from_secs(10)).await;
    rate
}

struct Ours {
    records_per_sec: f64,
    mib_per_sec: f64,
    cpu_us_per_record: f64,
    peak_rss_mib: f64,
    allocations_per_record: f64,
}

async fn ours(client: &Client, topic: &str, records: usize) -> Ours {
    let mut consumer = Consumer::new(client.clone(), ConsumerConfig::default()).expect("consumer");
    let partitions: Vec<(TopicPartition, StartAt)> = (0..PARTITIONS)
        .map(|p| (TopicPartition::new(topic, p), StartAt::Earliest))
        .collect();
    reset_peak_rss();
    let cpu0 = cpu_seconds();
    let allocations = Region::new(GLOBAL);
    let start = Instant::now();
    consumer.assign(&partitions).expect("assign");
    let mut count = 0usize;
    let mut bytes = 0usize;
    let mut sum = 0u64;
    while count < records {
        let event = tokio::time::timeout(Duration::from_mins(1), consumer.poll())
            .await
            .expect("no record for a minute")
            .expect("poll");
        match event {
            ConsumerEvent::Records(batch) => {
                for r in &batch.records {
                    if let Some(v) = &r.value {
                        bytes += v.len();
                        sum = v.iter().fold(sum, |a, &b| a.wrapping_add(u64::from(b)));
                    }
                }
                count += batch.records.len();
            }
            ConsumerEvent::Error(e) => panic!("consumer error: {e}"),
            _ => {}
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let allocated = allocations.change().allocations;
    let peak_rss_mib = peak_rss_mib();
    std::hint::black_box(sum);
    assert_eq!(count, records, "records read");
    assert_eq!(bytes, records * RECORD_SIZE, "value bytes read");
    consumer.close().await.expect("close");
    Ours {
        records_per_sec: records as f64 / elapsed,
        mib_per_sec: bytes as f64 / MIB / elapsed,
        cpu_us_per_record: cpu * 1e6 / records as f64,
        peak_rss_mib,
        allocations_per_record: allocated as f64 / records as f64,
    }
}

struct Java {
    /// Over the fetch time (the total minus the group join).
    fetch_records_per_sec: f64,
    fetch_mib_per_sec: f64,
    /// Over the total time, group join included.
    total_records_per_sec: f64,
    rebalance_ms: f64,
    fetch_ms: f64,
    /// User + system seconds of the whole JVM.
    cpu_seconds: f64,
    peak_rss_mib: f64,
}

fn java(classpath: &str, bootstrap: &str, topic: &str, records: usize) -> Java {
    let group = format!("bench-consume-{:08x}", fastrand::u32(..));
    // GNU time also gives the peak RSS; bash's `time` keyword is the fallback.
    let mut command = if Path::new("/usr/bin/time").exists() {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-f", "cpu %U %S %M", "java"]);
        c
    } else {
        let mut c = Command::new("bash");
        c.args(["-c", "TIMEFORMAT='cpu %U %S'; time \"$@\"", "bash", "java"]);
        c
    };
    let out = command
        .args(["-cp", classpath])
        .arg("org.apache.kafka.tools.ConsumerPerformance")
        .args(["--bootstrap-server", bootstrap, "--topic", topic])
        .args(["--messages", &records.to_string(), "--timeout", "60000"])
        .args(["--group", &group])
        .output()
        .expect("java");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "ConsumerPerformance failed: {stdout}{stderr}"
    );
    // A header line naming the columns, then one line of values.
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("start.time"));
    let names: Vec<&str> = lines
        .next()
        .expect("ConsumerPerformance header")
        .split(',')
        .map(str::trim)
        .collect();
    let values: Vec<&str> = lines
        .find(|l| l.split(',').count() == names.len())
        .expect("ConsumerPerformance figures")
        .split(',')
        .map(str::trim)
        .collect();
    let column = |name: &str| -> f64 {
        names
            .iter()
            .position(|n| *n == name)
            .and_then(|i| values[i].parse().ok())
            .unwrap_or_else(|| panic!("column {name} in {stdout}"))
    };
    let consumed = column("data.consumed.in.nMsg");
    assert!(
        consumed >= records as f64,
        "Java read {consumed} of {records} records"
    );
    let timed: Vec<f64> = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("cpu "))
        .expect("time output")
        .split_whitespace()
        .map(|v| v.parse().expect("time figure"))
        .collect();
    Java {
        fetch_records_per_sec: column("fetch.nMsg.sec"),
        fetch_mib_per_sec: column("fetch.MB.sec"),
        total_records_per_sec: column("nMsg.sec"),
        rebalance_ms: column("rebalance.time.ms"),
        fetch_ms: column("fetch.time.ms"),
        cpu_seconds: timed[0] + timed[1],
        peak_rss_mib: timed.get(2).map_or(0.0, |kb| kb / 1024.0),
    }
}

fn main() {
    let (bootstrap, runtime, client) = connect();
    let records = env_usize("BENCH_RECORDS", 1_000_000);
    let rounds = env_usize("BENCH_ROUNDS", 3).max(1);
    let codec_name = std::env::var("BENCH_CODEC").unwrap_or_else(|_| "none".to_owned());
    let codec = Codec::from_name(&codec_name).expect("BENCH_CODEC: none, gzip, snappy, lz4, zstd");
    let classpath = java_classpath();
    println!(
        "consume bench: {records} records of {RECORD_SIZE} bytes, codec {codec_name}, {PARTITIONS} partitions, {rounds} rounds"
    );
    let topic = new_topic(&runtime, &client, "bench-consume", PARTITIONS);
    let filled = runtime.block_on(fill(&client, &topic, records, codec));
    println!("filled {topic} at {filled:.0} rec/s");
    let fixed = java(&classpath, &bootstrap, &topic, 1).cpu_seconds;
    println!("JVM fixed cost (ConsumerPerformance reading 1 record): {fixed:.2} s CPU");
    let per_record = |cpu: f64| cpu * 1e6 / records as f64;
    let mut ours_all = Vec::new();
    let mut java_all = Vec::new();
    for round in 0..rounds {
        let o = runtime.block_on(ours(&client, &topic, records));
        let j = java(&classpath, &bootstrap, &topic, records);
        println!(
            "round {round}: ours {:>9.0} rec/s {:>6.1} MiB/s {:>5.2} us CPU/rec {:>5.0} MiB peak RSS \
             {:.3} allocations/rec",
            o.records_per_sec,
            o.mib_per_sec,
            o.cpu_us_per_record,
            o.peak_rss_mib,
            o.allocations_per_record
        );
        println!(
            "         java {:>9.0} rec/s {:>6.1} MiB/s {:>5.2} us CPU/rec {:>5.0} MiB peak RSS \
             (fetch {:.0} ms + rebalance {:.0} ms; total {:.0} rec/s; net of start-up {:.2} us CPU/rec)",
            j.fetch_records_per_sec,
            j.fetch_mib_per_sec,
            per_record(j.cpu_seconds),
            j.peak_rss_mib,
            j.fetch_ms,
            j.rebalance_ms,
            j.total_records_per_sec,
            per_record(j.cpu_seconds - fixed)
        );
        println!(
            "         ours/java: throughput {:.2} (fetch) {:.2} (total), CPU {:.3} ({:.3} net)",
            o.records_per_sec / j.fetch_records_per_sec,
            o.records_per_sec / j.total_records_per_sec,
            o.cpu_us_per_record / per_record(j.cpu_seconds),
            o.cpu_us_per_record / per_record(j.cpu_seconds - fixed)
        );
        ours_all.push(o);
        java_all.push(j);
    }
    let o_tp = median(ours_all.iter().map(|f| f.records_per_sec).collect());
    let j_fetch = median(java_all.iter().map(|f| f.fetch_records_per_sec).collect());
    let j_total = median(java_all.iter().map(|f| f.total_records_per_sec).collect());
    let o_cpu = median(ours_all.iter().map(|f| f.cpu_us_per_record).collect());
    let j_cpu = median(java_all.iter().map(|f| per_record(f.cpu_seconds)).collect());
    let j_net = median(
        java_all
            .iter()
            .map(|f| per_record(f.cpu_seconds - fixed))
            .collect(),
    );
    println!(
        "median: ours {o_tp:.0} rec/s, java {j_fetch:.0} rec/s fetching ({j_total:.0} in total); \
         throughput ratio ours/java {:.2} (fetch) {:.2} (total)",
        o_tp / j_fetch,
        o_tp / j_total
    );
    println!(
        "median CPU per record: ours {o_cpu:.2} us, java {j_cpu:.2} us ({j_net:.2} us net of start-up); \
         ratio ours/java {:.3} ({:.3} net)",
        o_cpu / j_cpu,
        o_cpu / j_net
    );
}
