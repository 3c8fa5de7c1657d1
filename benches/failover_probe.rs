//! Our side of `scripts/failover-compare`: the time from a partition leader's kill to the first
//! acknowledged produce and the first fetched record written after the kill, on the native
//! client with its (librdkafka's) defaults, idempotence on as the Java client has it.
//!
//! ```text
//! failover_probe setup    BOOTSTRAP TOPIC            # 1 partition, 3 replicas, min.insync.replicas 2
//! failover_probe wait-isr BOOTSTRAP TOPIC            # until the partition has a leader and 3 in sync
//! failover_probe probe    BOOTSTRAP TOPIC INTERVAL_MS KILL_COMMAND
//! ```
//!
//! `probe` writes one record every `INTERVAL_MS` (acks=all, idempotent, `linger.ms` 5) and reads
//! the partition from its end (assigned, no group); once both have run for two seconds it asks
//! its own metadata for the leader, runs `KILL_COMMAND N` (`sh -c`, N the leader's node id)
//! and counts from the moment that command returns. Records carry their sequence number, so
//! "written after the kill" means sent after it. It prints one line,
//! `leader=N produce_ms=X fetch_ms=Y`, and exits 1 when either has not happened in 120 s.
//! Java's side is `scripts/interop/FailoverProbe.java`, with the same arguments and output.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use ruststream_kafka::client::{
    Admin, Client, ClientConfig, Consumer, ConsumerConfig, ConsumerEvent, NewTopic, Producer,
    ProducerConfig, ProducerRecord, StartAt, TopicPartition,
};
use tokio::time::Instant;

/// How long each side runs before the kill, and how long it may take to recover.
const WARM_UP: Duration = Duration::from_secs(2);
const LIMIT: Duration = Duration::from_mins(2);

/// When the leader died, and the first sequence number sent after it.
#[derive(Clone, Copy)]
struct Kill {
    at: Instant,
    first_after: u64,
}

#[derive(Default)]
struct Seen {
    kill: Option<Kill>,
    produced: Option<Duration>,
    fetched: Option<Duration>,
    acked_at_warm_up: bool,
}

type Shared = Arc<Mutex<Seen>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Seen> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn connect(bootstrap: &str) -> Result<Client, String> {
    Client::connect(ClientConfig::new(bootstrap))
        .await
        .map_err(|e| format!("connect to {bootstrap}: {e}"))
}

async fn setup(client: &Client, topic: &str) -> Result<(), String> {
    let new = NewTopic::new(topic, 1, 3).config("min.insync.replicas", "2");
    // An existing topic is fine: the script reuses one per run.
    let _ = Admin::new(client.clone())
        .create_topics(&[new], Duration::from_secs(30))
        .await;
    wait_isr(client, topic).await
}

async fn wait_isr(client: &Client, topic: &str) -> Result<(), String> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let _ = client.refresh_metadata(&[topic]).await;
        let ok = client.with_metadata(|m| {
            m.topics.get(topic).is_some_and(|t| {
                t.partitions
                    .first()
                    .is_some_and(|p| p.leader >= 0 && p.isr.len() == 3)
            })
        });
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{topic}-0 has no leader with 3 in sync after {LIMIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes one record every `interval`, its sequence number as its value; notes the first
/// acknowledgement of a record sent after the kill.
fn spawn_writer(
    producer: Producer,
    topic: String,
    interval: Duration,
    seen: Shared,
    next: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let seq = next.fetch_add(1, Ordering::SeqCst);
            let record =
                ProducerRecord::new(topic.clone(), Bytes::from(seq.to_string())).partition(0);
            let Ok(delivery) = producer.send(record).await else {
                continue;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                if delivery.await.is_err() {
                    return;
                }
                let mut s = lock(&seen);
                s.acked_at_warm_up = true;
                if let Some(k) = s.kill
                    && seq >= k.first_after
                    && s.produced.is_none()
                {
                    s.produced = Some(k.at.elapsed());
                }
            });
        }
    })
}

/// Kills the partition's leader as the client's own metadata names it; returns its node id.
async fn kill_leader(
    client: &Client,
    topic: &str,
    kill: &str,
    seen: &Shared,
    next: &AtomicU64,
) -> Result<i32, String> {
    client
        .refresh_metadata(&[topic])
        .await
        .map_err(|e| e.to_string())?;
    let leader = client
        .leader_of(topic, 0)
        .await
        .map_err(|e| e.to_string())?
        .0;
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("{kill} {leader}")])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("{kill}: {e}"))?;
    let at = Instant::now();
    if !status.success() {
        return Err(format!("`{kill} {leader}` failed: {status}"));
    }
    lock(seen).kill = Some(Kill {
        at,
        first_after: next.load(Ordering::SeqCst),
    });
    Ok(leader)
}

/// Whether `records` hold one sent at or after sequence number `first`.
fn any_after(records: &[ruststream_kafka::client::Record], first: u64) -> bool {
    records.iter().any(|r| {
        r.value
            .as_deref()
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|seq| seq >= first)
    })
}

async fn probe(
    client: &Client,
    topic: &str,
    interval: Duration,
    kill: &str,
) -> Result<String, String> {
    let producer = Producer::new(
        client.clone(),
        ProducerConfig {
            enable_idempotence: true,
            ..ProducerConfig::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut consumer =
        Consumer::new(client.clone(), ConsumerConfig::default()).map_err(|e| e.to_string())?;
    consumer
        .assign(&[(TopicPartition::new(topic, 0), StartAt::Latest)])
        .map_err(|e| e.to_string())?;
    let seen: Shared = Arc::default();
    let next = Arc::new(AtomicU64::new(0));
    let writer = spawn_writer(
        producer,
        topic.to_owned(),
        interval,
        seen.clone(),
        next.clone(),
    );

    let started = Instant::now();
    let mut fetched = 0u64;
    let mut leader = -1;
    loop {
        if started.elapsed() > WARM_UP + LIMIT {
            writer.abort();
            return Err(format!("leader={leader}: no recovery within {LIMIT:?}"));
        }
        let warm = {
            let s = lock(&seen);
            s.kill.is_none() && s.acked_at_warm_up
        };
        if warm && started.elapsed() >= WARM_UP && fetched > 0 {
            leader = kill_leader(client, topic, kill, &seen, &next).await?;
        }
        if let (Some(p), Some(f)) = {
            let s = lock(&seen);
            (s.produced, s.fetched)
        } {
            writer.abort();
            return Ok(format!(
                "leader={leader} produce_ms={} fetch_ms={}",
                p.as_millis(),
                f.as_millis()
            ));
        }
        let event = match tokio::time::timeout(Duration::from_millis(100), consumer.poll()).await {
            Err(_) => continue,
            Ok(Err(e)) => return Err(format!("poll: {e}")),
            Ok(Ok(event)) => event,
        };
        if let ConsumerEvent::Records(batch) = event {
            fetched += batch.records.len() as u64;
            let mut s = lock(&seen);
            if let Some(k) = s.kill
                && s.fetched.is_none()
                && any_after(&batch.records, k.first_after)
            {
                s.fetched = Some(k.at.elapsed());
            }
        }
    }
}

fn main() -> ExitCode {
    // `cargo bench` adds `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("failover_probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["setup", bootstrap, topic] => setup(&connect(bootstrap).await?, topic).await.map(|()| "ready".to_owned()),
            ["wait-isr", bootstrap, topic] => wait_isr(&connect(bootstrap).await?, topic).await.map(|()| "ready".to_owned()),
            ["probe", bootstrap, topic, interval, kill] => {
                let interval = interval
                    .parse::<u64>()
                    .map_err(|e| format!("INTERVAL_MS {interval}: {e}"))?;
                probe(&connect(bootstrap).await?, topic, Duration::from_millis(interval.max(1)), kill).await
            }
            _ => Err("usage: failover_probe setup|wait-isr BOOTSTRAP TOPIC | probe BOOTSTRAP TOPIC INTERVAL_MS KILL_COMMAND".to_owned()),
        }
    });
    // Nothing is closed gracefully: the producer's queue may hold records for the dead node.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("failover_probe: {e}");
            ExitCode::FAILURE
        }
    }
}
