//! Produce throughput of 100-byte records (idempotent, acks=all, linger 5 ms): our producer
//! side by side with the Java client's `ProducerPerformance` on the same broker, in one run.
//!
//! ```text
//! scripts/kafka up && eval "$(scripts/kafka env | sed 's/^/export /')"
//! cargo bench --bench produce            # BENCH_RECORDS (default 1000000), BENCH_ROUNDS (3)
//! BENCH_JAVA_PROPS='batch.size=1000000' cargo bench --bench produce   # Java with our batch size
//! ```
//!
//! Rounds alternate between the two clients so that machine noise hits both alike; the
//! figures to quote are the ratios. CPU time is the process's user+system time while ours
//! runs (from /proc/self/stat) and the JVM's as `time` would see it. Our allocations per
//! record are counted by `stats_alloc`'s instrumented system allocator.

#![allow(clippy::cast_precision_loss, reason = "record counts far below 2^52")]

use std::process::Command;
use std::time::{Duration, Instant};

use ruststream_kafka::client::{Client, Producer, ProducerConfig};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

mod common;
use common::{connect, cpu_seconds, env_usize, java_classpath, median, new_topic};

const PARTITIONS: i32 = 6;

struct Figures {
    records_per_sec: f64,
    cpu_us_per_record: f64,
    /// Ours only (0 for Java).
    allocations_per_record: f64,
}

async fn ours(client: &Client, topic: &str, records: usize) -> Figures {
    let config = ProducerConfig {
        enable_idempotence: true,
        linger: Duration::from_millis(5),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client.clone(), config).expect("producer");
    let cpu0 = cpu_seconds();
    let allocations = Region::new(GLOBAL);
    let start = Instant::now();
    common::send_and_wait(&producer, topic, records, 100).await;
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let allocated = allocations.change().allocations;
    producer.close(Duration::from_secs(10)).await;
    Figures {
        records_per_sec: records as f64 / elapsed,
        cpu_us_per_record: cpu * 1e6 / records as f64,
        allocations_per_record: allocated as f64 / records as f64,
    }
}

fn java(classpath: &str, bootstrap: &str, topic: &str, records: usize) -> Figures {
    // Extra producer properties for the Java side, e.g. `batch.size=1000000` to match
    // librdkafka's (and our) default batch size instead of Java's 16 KiB.
    let extra = std::env::var("BENCH_JAVA_PROPS").unwrap_or_default();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "TIMEFORMAT='%U %S'; time java -cp '{classpath}' org.apache.kafka.tools.ProducerPerformance \
             --topic {topic} --num-records {records} --record-size 100 --throughput -1 \
             --producer-props bootstrap.servers={bootstrap} acks=all enable.idempotence=true linger.ms=5 {extra}"
        ))
        .output()
        .expect("java");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "ProducerPerformance failed: {stdout}{stderr}"
    );
    // Final line: "N records sent, X records/sec (Y MB/sec), ..."
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.contains("records sent"))
        .expect("summary line");
    let records_per_sec: f64 = summary
        .split(", ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .expect("records/sec");
    let cpu: f64 = stderr
        .lines()
        .rev()
        .find_map(|l| {
            let mut it = l.split_whitespace().map(str::parse::<f64>);
            match (it.next(), it.next()) {
                (Some(Ok(u)), Some(Ok(s))) => Some(u + s),
                _ => None,
            }
        })
        .unwrap_or(0.0);
    Figures {
        records_per_sec,
        cpu_us_per_record: cpu * 1e6 / records as f64,
        allocations_per_record: 0.0,
    }
}

fn main() {
    let (bootstrap, runtime, client) = connect();
    let records = env_usize("BENCH_RECORDS", 1_000_000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let classpath = java_classpath();
    println!(
        "produce bench: {records} records of 100 bytes, idempotent, acks=all, linger.ms=5, {PARTITIONS} partitions, {rounds} rounds"
    );
    let mut ours_all = Vec::new();
    let mut java_all = Vec::new();
    for round in 0..rounds {
        let topic = new_topic(&runtime, &client, "bench-produce", PARTITIONS);
        let o = runtime.block_on(ours(&client, &topic, records));
        let j = java(&classpath, &bootstrap, &topic, records);
        println!(
            "round {round}: ours {:>10.0} rec/s {:>6.2} us CPU/rec {:.2} allocations/rec | java {:>10.0} rec/s {:>6.2} us CPU/rec | throughput ratio ours/java {:.2}, CPU ratio ours/java {:.2}",
            o.records_per_sec,
            o.cpu_us_per_record,
            o.allocations_per_record,
            j.records_per_sec,
            j.cpu_us_per_record,
            o.records_per_sec / j.records_per_sec,
            o.cpu_us_per_record / j.cpu_us_per_record
        );
        ours_all.push(o);
        java_all.push(j);
    }
    let o_tp = median(ours_all.iter().map(|f| f.records_per_sec).collect());
    let j_tp = median(java_all.iter().map(|f| f.records_per_sec).collect());
    let o_cpu = median(ours_all.iter().map(|f| f.cpu_us_per_record).collect());
    let j_cpu = median(java_all.iter().map(|f| f.cpu_us_per_record).collect());
    println!(
        "median: ours {o_tp:.0} rec/s, java {j_tp:.0} rec/s, throughput ratio {:.2}; CPU per record ours {o_cpu:.2} us, java {j_cpu:.2} us, ratio {:.2}",
        o_tp / j_tp,
        o_cpu / j_cpu
    );
}
