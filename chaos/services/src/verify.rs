//! The verifier: reads every partition of the given topics with `read_committed`, from the
//! run's baseline offsets to the end, and logs each record it sees (`rec`: topic, partition,
//! offset, key and the decoded value) and each partition's end (`end`).
//!
//! It finishes a partition only when it has read up to the high watermark, so a transaction
//! still open (a killed producer's, until the coordinator aborts it) is waited for rather than
//! read past; the wait is bounded by `--timeout-secs`, and a partition left unfinished is logged
//! as `incomplete` (the checker fails the run).

use std::collections::HashMap;
use std::time::Duration;

use ruststream_kafka::client::{Client, ClientConfig, IsolationLevel, PartitionReader};
use serde_json::{Value, json};

use crate::args::{Args, BoxError};
use crate::history::History;

/// Reads the topics to their ends.
pub async fn run(args: &Args) -> Result<(), BoxError> {
    let bootstrap = args.need("bootstrap")?;
    let history = History::open(args.need("history")?, "verify")?;
    let timeout = Duration::from_secs(args.num("timeout-secs", 240)?);
    let baseline: HashMap<String, Vec<i64>> = match args.get("baseline") {
        Some(path) => serde_json::from_str(&std::fs::read_to_string(path)?)?,
        None => HashMap::new(),
    };
    let client = Client::connect(ClientConfig::new(bootstrap)).await?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut incomplete = 0;
    for topic in args.list("topics") {
        client.refresh_metadata(&[&topic]).await?;
        let info = client.topic(&topic).await?;
        for p in &info.partitions {
            let partition = p.partition;
            let mut reader = PartitionReader::new(client.clone(), topic.clone(), partition);
            reader.isolation = IsolationLevel::ReadCommitted;
            let mut offset = baseline
                .get(&topic)
                .and_then(|ends| ends.get(usize::try_from(partition).ok()?).copied())
                .unwrap_or(0);
            let mut count = 0u64;
            loop {
                if tokio::time::Instant::now() >= deadline {
                    history.log(
                        "incomplete",
                        json!({"topic": topic, "p": partition, "o": offset}),
                    );
                    incomplete += 1;
                    break;
                }
                let fetched = match reader.fetch(offset).await {
                    Ok(fetched) => fetched,
                    Err(e) => {
                        history.log(
                            "fetch-error",
                            json!({"topic": topic, "p": partition, "err": e.to_string()}),
                        );
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                };
                for record in &fetched.records {
                    let value: Value = record
                        .value
                        .as_deref()
                        .and_then(|v| serde_json::from_slice(v).ok())
                        .unwrap_or(Value::Null);
                    let key = record
                        .key
                        .as_deref()
                        .map(|k| String::from_utf8_lossy(k).into_owned());
                    history.log(
                        "rec",
                        json!({"topic": topic, "p": partition, "o": record.offset,
                               "ts": record.timestamp, "key": key, "v": value}),
                    );
                    count += 1;
                }
                offset = fetched.next_offset.max(offset);
                if offset >= fetched.high_watermark && fetched.records.is_empty() {
                    history.log(
                        "end",
                        json!({"topic": topic, "p": partition, "o": offset, "records": count}),
                    );
                    break;
                }
                if fetched.records.is_empty() {
                    // Behind an open transaction: its coordinator aborts or commits it soon.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
    client.close();
    if incomplete > 0 {
        return Err(format!("{incomplete} partitions not read to their end").into());
    }
    Ok(())
}
