//! Produce throughput over TLS as a ratio to plaintext: the same producer settings against the
//! PLAINTEXT and SSL listeners of one broker, in one run, rounds alternating.
//!
//! ```text
//! scripts/kafka up && eval "$(scripts/kafka env | sed 's/^/export /')"
//! cargo bench --features ssl --bench tls_produce    # BENCH_RECORDS (500000), BENCH_SIZE (100), BENCH_ROUNDS (3)
//! ```

#![allow(clippy::cast_precision_loss, reason = "record counts far below 2^52")]

use std::time::{Duration, Instant};

use ruststream_kafka::client::{
    CaSource, Client, ClientConfig, Producer, ProducerConfig, SecurityConfig, SecurityProtocol,
    TlsConfig,
};

mod common;
use common::{cpu_seconds, env_usize, median, new_topic};

fn client(runtime: &tokio::runtime::Runtime, url: &str, tls: bool) -> Client {
    let mut config = ClientConfig::new(url);
    if tls {
        let ca = std::env::var("KAFKA_CA_PEM").expect("KAFKA_CA_PEM (scripts/kafka env)");
        config.security = SecurityConfig {
            protocol: SecurityProtocol::Ssl,
            tls: TlsConfig {
                ca: CaSource::Location(ca.into()),
                ..TlsConfig::default()
            },
            sasl: None,
        };
    }
    runtime
        .block_on(Client::connect(config))
        .expect("no broker: run scripts/kafka up")
}

/// Records per second and CPU microseconds per record of one run.
fn run(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    topic: &str,
    records: usize,
    size: usize,
) -> (f64, f64) {
    // The produce bench's settings: idempotent, acks=all, 5 ms linger.
    let producer = Producer::new(
        client.clone(),
        ProducerConfig {
            linger: Duration::from_millis(5),
            enable_idempotence: true,
            ..ProducerConfig::default()
        },
    )
    .expect("producer");
    let (cpu0, start) = (cpu_seconds(), Instant::now());
    runtime.block_on(common::send_and_wait(&producer, topic, records, size));
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    runtime.block_on(producer.close(Duration::from_secs(10)));
    (records as f64 / elapsed, cpu * 1e6 / records as f64)
}

fn main() {
    let records = env_usize("BENCH_RECORDS", 500_000);
    let size = env_usize("BENCH_SIZE", 100);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let plain_url = std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "127.0.0.1:9092".into());
    let tls_url = std::env::var("KAFKA_SSL_URL").unwrap_or_else(|_| "127.0.0.1:9094".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // Producers spawn their sender task on the runtime they are created in.
    let _entered = runtime.enter();
    let plain = client(&runtime, &plain_url, false);
    let tls = client(&runtime, &tls_url, true);
    let topic = new_topic(&runtime, &plain, "bench-tls-produce", 6);
    let (mut plain_rates, mut tls_rates, mut plain_cpu, mut tls_cpu) =
        (vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        let (rate, cpu) = run(&runtime, &plain, &topic, records, size);
        println!("round {round} plaintext: {rate:>10.0} records/s, {cpu:.2} us CPU/record");
        plain_rates.push(rate);
        plain_cpu.push(cpu);
        let (rate, cpu) = run(&runtime, &tls, &topic, records, size);
        println!("round {round} TLS:       {rate:>10.0} records/s, {cpu:.2} us CPU/record");
        tls_rates.push(rate);
        tls_cpu.push(cpu);
    }
    let (p, t) = (median(plain_rates), median(tls_rates));
    let (pc, tc) = (median(plain_cpu), median(tls_cpu));
    println!(
        "median of {rounds} rounds, {records} records of {size} bytes: plaintext {p:.0}/s, \
         TLS {t:.0}/s; TLS/plaintext throughput {:.2}, CPU per record {:.2}x",
        t / p,
        tc / pc
    );
}
