//! What the examples' live tests read back with the native client: where a topic's partitions
//! end before a test, what landed after that, and what a group has committed.
//!
//! The broker keeps its data between runs, so a test marks the log ends first and reads only
//! what follows the mark.
#![allow(dead_code)]

use std::error::Error;
use std::time::Duration;

use ruststream_kafka::client::consumer::Offsets;
use ruststream_kafka::client::{
    Admin, Client, ClientConfig, IsolationLevel, OffsetSpec, PartitionReader, Record,
};

async fn client() -> Result<Client, Box<dyn Error>> {
    Ok(Client::connect(ClientConfig::new(&crate::live::bootstrap())).await?)
}

/// The log end (high watermark) of each of the first `partitions` partitions of `topic`.
pub async fn log_ends(topic: &str, partitions: i32) -> Result<Vec<i64>, Box<dyn Error>> {
    let client = client().await?;
    let admin = Admin::new(client.clone());
    let mut ends = Vec::new();
    for partition in 0..partitions {
        let (end, _) = admin
            .list_offset(
                topic,
                partition,
                OffsetSpec::Latest,
                IsolationLevel::ReadUncommitted,
            )
            .await?;
        ends.push(end);
    }
    client.close();
    Ok(ends)
}

/// The records of `topic`/`partition` from offset `from` up to its end, as a consumer with
/// `isolation` sees them (`ReadCommitted` stops at the first open transaction and leaves out
/// aborted ones).
pub async fn records_since(
    topic: &str,
    partition: i32,
    from: i64,
    isolation: IsolationLevel,
) -> Result<Vec<Record>, Box<dyn Error>> {
    let client = client().await?;
    let mut reader = PartitionReader::new(client.clone(), topic, partition);
    reader.isolation = isolation;
    reader.max_wait = Duration::from_millis(100);
    let mut records = Vec::new();
    let mut offset = from;
    loop {
        let fetched = reader.fetch(offset).await?;
        if fetched.records.is_empty() && fetched.next_offset <= offset {
            break;
        }
        offset = fetched.next_offset.max(offset + 1);
        records.extend(fetched.records);
    }
    client.close();
    Ok(records)
}

/// The committed records of every partition since `ends` (from [`log_ends`]), one list per
/// partition, each value as text.
pub async fn committed_values_since(
    topic: &str,
    ends: &[i64],
) -> Result<Vec<Vec<String>>, Box<dyn Error>> {
    let mut partitions = Vec::new();
    for (partition, &from) in (0..).zip(ends) {
        let records = records_since(topic, partition, from, IsolationLevel::ReadCommitted).await?;
        partitions.push(records.iter().map(text).collect());
    }
    Ok(partitions)
}

/// A record's value as text.
pub fn text(record: &Record) -> String {
    String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).into_owned()
}

/// The offset `group` has committed for `topic`/`partition`, -1 for none.
pub async fn committed_offset(
    group: &str,
    topic: &str,
    partition: i32,
) -> Result<i64, Box<dyn Error>> {
    let client = client().await?;
    let offsets = Offsets::new(client.clone(), group)
        .fetch(&[(topic, partition)], true)
        .await?;
    client.close();
    Ok(offsets.first().map_or(-1, |o| o.offset))
}
