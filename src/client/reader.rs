//! A partition reader: fetch one partition from an offset, from its leader.
//!
//! The building block for tests and tools that read back what was produced; the group
//! consumer builds on the same decoding. Control batches are skipped, and under
//! `read_committed` the records of aborted transactions are left out using the aborted
//! transaction list the broker sends with each answer.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::client::Client;
use crate::client::consumer::{Budget, decode_partition};
use crate::client::error::{Error, Result};
use crate::client::isolation::IsolationLevel;
use crate::client::records::Record;

/// Fetch versions with topic names (v13 moved to topic ids).
const FETCH_VERSIONS: VersionRange = VersionRange { min: 4, max: 12 };

/// What one fetch of a partition returned.
#[derive(Debug, Clone)]
pub struct FetchedPartition {
    /// The records at or after the requested offset, in offset order.
    pub records: Vec<Record>,
    /// The offset to fetch next.
    pub next_offset: i64,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The last stable offset (`read_committed`'s end).
    pub last_stable_offset: i64,
    /// The first offset still in the log.
    pub log_start_offset: i64,
}

/// Reads one partition.
#[derive(Debug, Clone)]
pub struct PartitionReader {
    client: Client,
    topic: String,
    partition: i32,
    /// The isolation level.
    pub isolation: IsolationLevel,
    /// `fetch.wait.max.ms`: how long the broker may wait for data.
    pub max_wait: Duration,
    /// `max.partition.fetch.bytes` (also the total for the request).
    pub max_bytes: i32,
    /// `check.crcs`: whether each fetched batch's CRC-32C is checked.
    pub check_crcs: bool,
}

impl PartitionReader {
    /// A reader of `topic`/`partition` with librdkafka's defaults.
    pub fn new(client: Client, topic: impl Into<String>, partition: i32) -> Self {
        PartitionReader {
            client,
            topic: topic.into(),
            partition,
            isolation: IsolationLevel::ReadCommitted,
            max_wait: Duration::from_millis(500),
            max_bytes: 1_048_576,
            check_crcs: false,
        }
    }

    /// Fetches from `offset`, following leader moves. An empty answer after `max_wait` is not
    /// an error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the reader keeps no position (the offset is the caller's), so a dropped fetch
    /// loses nothing; fetch the same offset again.
    pub async fn fetch(&self, offset: i64) -> Result<FetchedPartition> {
        self.client
            .retry_at_leader(&self.topic, || self.fetch_once(offset))
            .await
    }

    async fn fetch_once(&self, offset: i64) -> Result<FetchedPartition> {
        let (leader, epoch) = self.client.leader_of(&self.topic, self.partition).await?;
        let conn = self.client.connection(leader).await?;
        let version = conn.version_of::<FetchRequest>(FETCH_VERSIONS)?;
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(i32::try_from(self.max_wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(1)
            .with_max_bytes(self.max_bytes)
            .with_isolation_level(match self.isolation {
                IsolationLevel::ReadUncommitted => 0,
                IsolationLevel::ReadCommitted => 1,
            })
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(self.topic.clone())))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(self.partition)
                            .with_current_leader_epoch(epoch)
                            .with_fetch_offset(offset)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes(self.max_bytes),
                    ]),
            ]);
        let response = conn
            .send(
                &request,
                version,
                self.client.socket_timeout() + self.max_wait,
            )
            .await?;
        Error::check(response.error_code, || {
            format!("fetching {}-{}", self.topic, self.partition)
        })?;
        let data = response
            .responses
            .into_iter()
            .filter(|t| t.topic.0.as_str() == self.topic)
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == self.partition)
            .ok_or_else(|| Error::protocol("fetch response lacks the partition asked for"))?;
        if let Some(code) = ResponseError::try_from_code(data.error_code) {
            return Err(Error::Broker {
                code,
                context: format!("fetching {}-{} at {offset}", self.topic, self.partition),
            });
        }
        let decoded = decode_partition(
            data.records.unwrap_or_default(),
            data.aborted_transactions,
            offset,
            self.isolation,
            &mut Budget::new(self.client.config().max_response_size),
            self.check_crcs,
        );
        // What came before an unreadable batch is returned; the batch itself is the error
        // once it is the first thing left to read.
        if let Some(corrupt) = decoded.corrupt
            && decoded.records.is_empty()
            && decoded.next_offset == offset
        {
            return Err(corrupt.error);
        }
        Ok(FetchedPartition {
            records: decoded.records,
            next_offset: decoded.next_offset,
            high_watermark: data.high_watermark,
            last_stable_offset: data.last_stable_offset,
            log_start_offset: data.log_start_offset,
        })
    }

    /// Reads every record from `from` until `until` (exclusive), waiting up to `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the records read so far are dropped with the future and nothing else changes;
    /// read the same range again.
    pub async fn read_range(
        &self,
        from: i64,
        until: i64,
        timeout: Duration,
    ) -> Result<Vec<Record>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut out = Vec::new();
        let mut offset = from;
        while offset < until {
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout(format!(
                    "reading {}-{}: at offset {offset} of {until}",
                    self.topic, self.partition
                )));
            }
            let fetched = self.fetch(offset).await?;
            for r in fetched.records {
                if r.offset < until {
                    out.push(r);
                }
            }
            offset = fetched.next_offset.max(offset);
        }
        Ok(out)
    }
}
