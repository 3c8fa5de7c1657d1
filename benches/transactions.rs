//! Transactions per second of a loop that commits every 100 records (100-byte records, one per
//! partition in turn over 6 partitions, linger.ms=5): our `TransactionalProducer` side by side
//! with the Java client's `KafkaProducer` doing the same loop (`Interop.java txn-loop`) on the
//! same broker, in one run.
//!
//! ```text
//! scripts/kafka up && eval "$(scripts/kafka env | sed 's/^/export /')"
//! cargo bench --bench transactions   # BENCH_TXNS (default 300), BENCH_TXN_RECORDS (100),
//!                                    # BENCH_ROUNDS (3), BENCH_TXN_GAP_MS (0)
//! ```
//!
//! `BENCH_TXN_GAP_MS` puts that much sleep (work, in a real loop) between a commit and the next
//! transaction, on both sides. It matters with KIP-890 (v2): a transaction's first Produce
//! that reaches the partition leader before the previous transaction's markers are written
//! makes the leader retry its implicit registration after 20 ms
//! (`add.partitions.to.txn.retry.backoff.ms`), so a client quick to start the next transaction
//! pays that more often than a slow one.
//!
//! Both sides run 20 untimed warm-up transactions first (the JVM's JIT; our connections). Rounds
//! alternate between the two clients so that machine noise hits both alike; the figure to quote
//! is the median ratio. CPU is process CPU time over the timed loop on both sides (for Java,
//! measured inside the JVM, so start-up and compiling the source launcher's program are out).

#![allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]

use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ruststream_kafka::client::{Client, ProducerConfig, ProducerRecord, TransactionalProducer};

mod common;
use common::{connect, cpu_seconds, env_usize, java_classpath, median, new_topic};

const PARTITIONS: i32 = 6;
const WARM_UP: usize = 20;

struct Figures {
    transactions_per_sec: f64,
    cpu_ms_per_transaction: f64,
}

async fn run_transactions(
    producer: &TransactionalProducer,
    topic: &str,
    transactions: usize,
    per_transaction: usize,
    value: &Bytes,
) {
    let gap = Duration::from_millis(env_usize("BENCH_TXN_GAP_MS", 0) as u64);
    for _ in 0..transactions {
        producer.begin().expect("begin");
        for i in 0..per_transaction {
            let record = ProducerRecord {
                topic: topic.to_owned(),
                partition: Some(i as i32 % PARTITIONS),
                value: Some(value.clone()),
                ..ProducerRecord::default()
            };
            // The delivery reports are not awaited: commit fails if any record failed.
            drop(producer.send(record).await.expect("send"));
        }
        producer.commit().await.expect("commit");
        if !gap.is_zero() {
            // The thread sleeps as Java's Thread.sleep does (tokio's timer would round up to
            // the next millisecond): the stand-in for the loop's work.
            std::thread::sleep(gap);
        }
    }
}

async fn ours(
    client: &Client,
    topic: &str,
    transactions: usize,
    per_transaction: usize,
) -> Figures {
    let id = format!("bench-txn-{:08x}", fastrand::u32(..));
    let config = ProducerConfig {
        linger: Duration::from_millis(5),
        ..ProducerConfig::transactional(id)
    };
    let producer = TransactionalProducer::new(client.clone(), config).expect("producer");
    producer.init().await.expect("init");
    let value = Bytes::from(vec![b'x'; 100]);
    run_transactions(&producer, topic, WARM_UP, per_transaction, &value).await;
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    run_transactions(&producer, topic, transactions, per_transaction, &value).await;
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    producer.close(Duration::from_secs(10)).await;
    Figures {
        transactions_per_sec: transactions as f64 / elapsed,
        cpu_ms_per_transaction: cpu * 1e3 / transactions as f64,
    }
}

fn java(
    classpath: &str,
    bootstrap: &str,
    topic: &str,
    transactions: usize,
    per_transaction: usize,
) -> Figures {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("java")
        .args(["-cp", classpath])
        .arg(format!("{root}/scripts/interop/Interop.java"))
        .args([
            "txn-loop",
            bootstrap,
            topic,
            &transactions.to_string(),
            &per_transaction.to_string(),
            &env_usize("BENCH_TXN_GAP_MS", 0).to_string(),
        ])
        .output()
        .expect("java");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "txn-loop failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "txn-loop <transactions> <wall ms> <cpu ms>"
    let fields: Vec<f64> = stdout
        .lines()
        .find(|l| l.starts_with("txn-loop "))
        .expect("txn-loop line")
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().expect("number"))
        .collect();
    let (wall_ms, cpu_ms) = (fields[1], fields[2]);
    Figures {
        transactions_per_sec: transactions as f64 * 1e3 / wall_ms,
        cpu_ms_per_transaction: cpu_ms / transactions as f64,
    }
}

fn main() {
    let (bootstrap, runtime, client) = connect();
    let transactions = env_usize("BENCH_TXNS", 300);
    let per_transaction = env_usize("BENCH_TXN_RECORDS", 100);
    let rounds = env_usize("BENCH_ROUNDS", 3).max(1);
    let classpath = java_classpath();
    println!(
        "transactions bench: {transactions} transactions of {per_transaction} records of 100 bytes, linger.ms=5, {PARTITIONS} partitions, {} ms between transactions, {rounds} rounds",
        env_usize("BENCH_TXN_GAP_MS", 0)
    );
    let mut ratios = Vec::new();
    let mut cpu_ratios = Vec::new();
    for round in 0..rounds {
        let topic = new_topic(&runtime, &client, "bench-txn", PARTITIONS);
        let o = runtime.block_on(ours(&client, &topic, transactions, per_transaction));
        let j = java(
            &classpath,
            &bootstrap,
            &topic,
            transactions,
            per_transaction,
        );
        let ratio = o.transactions_per_sec / j.transactions_per_sec;
        let cpu_ratio = o.cpu_ms_per_transaction / j.cpu_ms_per_transaction;
        println!(
            "round {round}: ours {:>7.1} txn/s {:>6.3} ms CPU/txn | java {:>7.1} txn/s {:>6.3} ms CPU/txn | ratio ours/java {ratio:.2}, CPU ratio {cpu_ratio:.2}",
            o.transactions_per_sec,
            o.cpu_ms_per_transaction,
            j.transactions_per_sec,
            j.cpu_ms_per_transaction,
        );
        ratios.push(ratio);
        cpu_ratios.push(cpu_ratio);
    }
    println!(
        "median: transactions per second ours/java {:.2}, CPU per transaction ours/java {:.2}",
        median(ratios),
        median(cpu_ratios)
    );
}
