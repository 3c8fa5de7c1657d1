//! Writing to and reading from the cluster without a client: what the test harness uses to
//! inject a record as an external producer would, and to list what a topic holds.

use std::sync::atomic::Ordering;

use super::EmbeddedCluster;
use super::topics::valid_name;
use crate::client::records::{BatchBuilder, Codec, ProducerState, RecordBatches};
use crate::client::{Header, Partitioner, Record};

/// Why the cluster refused a record written directly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The topic name is not a legal Kafka topic name.
    #[error("Broker: Invalid topic: {0:?}")]
    InvalidTopic(String),
    /// The record is larger than the cluster's `message.max.bytes`.
    #[error("Message size too large ({size} bytes; message.max.bytes is {limit})")]
    TooLarge {
        /// The record's size as librdkafka counts it.
        size: usize,
        /// The cluster's limit.
        limit: usize,
    },
    /// The topic does not exist and the cluster does not create topics on demand.
    #[error("Broker: Unknown topic or partition: {0:?}")]
    UnknownTopic(String),
}

impl EmbeddedCluster {
    /// Creates `topic` with `partitions` partitions; `false` when it already existed or the
    /// name is not a legal topic name.
    #[must_use = "false when the topic already existed or its name is illegal"]
    pub fn create_topic(&self, topic: &str, partitions: i32) -> bool {
        if !valid_name(topic) {
            return false;
        }
        let created = {
            let mut state = self.shared().state();
            if state.topics.by_name.contains_key(topic) {
                false
            } else {
                state
                    .topics
                    .create(topic, partitions.max(1), self.shared().options.nodes);
                true
            }
        };
        if created {
            self.shared().changed.notify_waiters();
            self.shared().after_change();
        }
        created
    }

    /// Writes one record as a plain external producer would (no transaction, no producer
    /// id): a keyed record goes where librdkafka's default partitioner puts it, a keyless
    /// one to the topic's partitions in turn. A missing topic is created when the cluster
    /// creates topics on demand. Returns the partition and offset.
    pub fn produce(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[Header],
    ) -> Result<(i32, i64), Refusal> {
        self.append(topic, None, key, value, headers)
    }

    /// Like [`produce`](Self::produce), but onto `partition` whatever the key: how a test
    /// places records on the partitions a service reads before or while it runs. A partition
    /// the topic does not have is refused as unknown.
    pub fn produce_to(
        &self,
        topic: &str,
        partition: i32,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[Header],
    ) -> Result<(i32, i64), Refusal> {
        self.append(topic, Some(partition), key, value, headers)
    }

    fn append(
        &self,
        topic: &str,
        pinned: Option<i32>,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[Header],
    ) -> Result<(i32, i64), Refusal> {
        if !valid_name(topic) {
            return Err(Refusal::InvalidTopic(topic.to_owned()));
        }
        let shared = self.shared();
        // librdkafka's count, the one the client's producer checks too.
        let size = crate::client::producer::message_size(key, Some(value), headers);
        let limit = shared.options.message_max_bytes;
        if size > limit {
            return Err(Refusal::TooLarge { size, limit });
        }
        let timestamp = now_millis();
        let mut builder = BatchBuilder::new(size + 64);
        builder.push(timestamp, key, Some(value), headers);
        let batch = builder
            .build(Codec::None, 0, ProducerState::NONE)
            .map_err(|_| Refusal::TooLarge { size, limit })?;
        let header = RecordBatches::new(batch.clone(), batch.len())
            .next()
            .and_then(Result::ok)
            .map(|b| b.header)
            .ok_or(Refusal::TooLarge { size, limit })?;
        let placed = {
            let mut state = shared.state();
            if !state.topics.by_name.contains_key(topic) {
                if !shared.options.auto_create_topics {
                    return Err(Refusal::UnknownTopic(topic.to_owned()));
                }
                state
                    .topics
                    .create(topic, shared.options.num_partitions, shared.options.nodes);
            }
            let count = state
                .topics
                .by_name
                .get(topic)
                .map_or(1, |t| i32::try_from(t.partitions.len()).unwrap_or(1));
            let partition = pinned.unwrap_or_else(|| {
                Partitioner::ConsistentRandom
                    .partition_for(key, count)
                    .unwrap_or_else(|| {
                        let turn = shared.round_robin.fetch_add(1, Ordering::Relaxed);
                        i32::try_from(turn % u64::try_from(count).unwrap_or(1)).unwrap_or(0)
                    })
            });
            let retention = shared.options.retention_records;
            let Some(target) = state.topics.partition_mut(topic, partition) else {
                return Err(Refusal::UnknownTopic(topic.to_owned()));
            };
            let offset = target.log.append(header, &batch);
            if let Some(keep) = retention {
                target.log.retain(keep);
            }
            (partition, offset)
        };
        shared.changed.notify_waiters();
        shared.after_change();
        Ok(placed)
    }

    /// Every record of `topic` a `read_committed` reader sees (committed transactions and
    /// plain records; never markers or aborted records), partition by partition in offset
    /// order, with the partition each came from.
    #[must_use]
    pub fn records(&self, topic: &str) -> Vec<(i32, Record)> {
        self.visible(topic)
            .into_iter()
            .map(|(_, partition, record)| (partition, record))
            .collect()
    }

    /// The records of [`records`](Self::records) in the order they were produced, across
    /// partitions.
    #[must_use]
    pub fn records_in_order(&self, topic: &str) -> Vec<Record> {
        let mut all = self.visible(topic);
        all.sort_by_key(|(sequence, _, record)| (*sequence, record.offset));
        all.into_iter().map(|(_, _, record)| record).collect()
    }

    /// Visible records with their batch's append sequence and their partition.
    fn visible(&self, topic: &str) -> Vec<(u64, i32, Record)> {
        let state = self.shared().state();
        let Some(found) = state.topics.by_name.get(topic) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (index, partition) in found.partitions.iter().enumerate() {
            let number = i32::try_from(index).unwrap_or(i32::MAX);
            let read = partition
                .log
                .read(partition.log.log_start(), usize::MAX, true);
            let sequences: Vec<(i64, u64)> = partition
                .log
                .batches_from(partition.log.log_start())
                .map(|b| (b.base_offset(), b.sequence))
                .collect();
            for batch in RecordBatches::new(read.records, usize::MAX).flatten() {
                let h = batch.header;
                if h.is_control() {
                    continue;
                }
                let aborted = h.is_transactional()
                    && read.aborted.iter().any(|a| {
                        a.producer_id == h.producer_id
                            && a.first_offset <= h.base_offset
                            && h.base_offset <= a.last_offset
                    });
                if aborted {
                    continue;
                }
                let sequence = sequences
                    .iter()
                    .find(|(base, _)| *base == h.base_offset)
                    .map_or(u64::MAX, |(_, s)| *s);
                if let Ok(records) = batch.records() {
                    out.extend(records.into_iter().map(|r| (sequence, number, r)));
                }
            }
        }
        out
    }
}

/// Wall-clock milliseconds, as a producer stamps `CreateTime`.
pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
