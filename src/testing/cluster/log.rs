//! One partition's log: record batches as the producer framed them, stamped with offsets.
//!
//! Batches are kept as their wire bytes (the broker rewrites only the base offset, which the
//! batch CRC does not cover), so a fetch hands back exactly what was produced, compression
//! and all. Transactions leave their records in the log while open; the last stable offset
//! stops `read_committed` readers at the first open one, and an abort lists the range a
//! reader must skip, as Kafka's fetch response does.

use std::collections::{BTreeMap, VecDeque};

use bytes::{BufMut, Bytes, BytesMut};

use crate::client::records::{BatchHeader, RecordBatches};

/// The most a stored compressed batch may expand to while its records are searched.
const MAX_DECOMPRESSED: usize = 128 << 20;

/// Size of a v2 batch header (base offset through record count).
const HEADER_SIZE: usize = 61;

/// A batch in the log.
#[derive(Debug, Clone)]
pub(crate) struct StoredBatch {
    pub(crate) header: BatchHeader,
    /// The whole batch as fetched, base offset stamped.
    pub(crate) bytes: Bytes,
    /// When it was appended, across every log of the process: the global produce order.
    pub(crate) sequence: u64,
}

static APPENDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl StoredBatch {
    pub(crate) fn base_offset(&self) -> i64 {
        self.header.base_offset
    }

    pub(crate) fn last_offset(&self) -> i64 {
        self.header.last_offset()
    }
}

/// A transaction that was aborted on this partition: readers with `read_committed` skip the
/// producer's records from `first_offset` up to the abort marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AbortedRange {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
}

/// What a fetch reads from one partition.
#[derive(Debug, Default)]
pub(crate) struct ReadOutcome {
    pub(crate) records: Bytes,
    pub(crate) aborted: Vec<AbortedRange>,
}

/// One partition's log.
#[derive(Debug, Default)]
pub(crate) struct PartitionLog {
    batches: VecDeque<StoredBatch>,
    log_start: i64,
    next_offset: i64,
    /// Open transactions on this partition: producer id -> first offset it wrote here.
    open: BTreeMap<i64, i64>,
    aborted: Vec<AbortedRange>,
    /// Records (not batches) currently held, for retention by count.
    records: u64,
}

impl PartitionLog {
    /// The offset the next record gets (the high watermark: one replica, always in sync).
    pub(crate) fn high_watermark(&self) -> i64 {
        self.next_offset
    }

    /// The first offset still held.
    pub(crate) fn log_start(&self) -> i64 {
        self.log_start
    }

    /// The first offset of an open transaction, else the high watermark.
    pub(crate) fn last_stable_offset(&self) -> i64 {
        self.open
            .values()
            .copied()
            .min()
            .unwrap_or(self.next_offset)
    }

    /// The end a reader of `isolation` sees (`read_committed` or not).
    pub(crate) fn visible_end(&self, read_committed: bool) -> i64 {
        if read_committed {
            self.last_stable_offset()
        } else {
            self.next_offset
        }
    }

    /// Appends a validated batch (`bytes` is the whole batch as produced), stamping its base
    /// offset; returns the base offset. A transactional batch opens the producer's transaction
    /// on this partition if it was not open yet.
    pub(crate) fn append(&mut self, header: BatchHeader, bytes: &[u8]) -> i64 {
        let base = self.next_offset;
        let mut stamped = BytesMut::with_capacity(bytes.len());
        stamped.put_i64(base);
        stamped.extend_from_slice(&bytes[8..]);
        let header = BatchHeader {
            base_offset: base,
            ..header
        };
        if header.is_transactional() && !header.is_control() {
            self.open.entry(header.producer_id).or_insert(base);
        }
        self.next_offset = header.last_offset() + 1;
        if !header.is_control() {
            self.records += u64::try_from(header.record_count).unwrap_or(0);
        }
        self.batches.push_back(StoredBatch {
            header,
            bytes: stamped.freeze(),
            sequence: APPENDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        });
        base
    }

    /// Ends `producer_id`'s transaction on this partition with a control marker (commit or
    /// abort); returns the marker's offset, or `None` when the producer had nothing open here.
    pub(crate) fn end_transaction(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        timestamp: i64,
    ) -> Option<i64> {
        let first = self.open.remove(&producer_id)?;
        let marker = control_batch(producer_id, producer_epoch, commit, timestamp);
        let header = BatchHeader {
            base_offset: 0,
            partition_leader_epoch: 0,
            attributes: 0b0011_0000,
            last_offset_delta: 0,
            base_timestamp: timestamp,
            max_timestamp: timestamp,
            producer_id,
            producer_epoch,
            base_sequence: -1,
            record_count: 1,
        };
        let offset = self.append(header, &marker);
        if !commit {
            self.aborted.push(AbortedRange {
                producer_id,
                first_offset: first,
                last_offset: offset,
            });
        }
        Some(offset)
    }

    /// Whether `producer_id` has a transaction open here.
    pub(crate) fn has_open(&self, producer_id: i64) -> bool {
        self.open.contains_key(&producer_id)
    }

    /// Reads batches from `offset` up to the reader's visible end, at most about `max_bytes`
    /// (the first batch is returned whole even when larger, as Kafka does).
    pub(crate) fn read(&self, offset: i64, max_bytes: usize, read_committed: bool) -> ReadOutcome {
        self.read_limited(offset, max_bytes, read_committed, true)
    }

    /// Reads as [`read`](Self::read) does; the first batch is returned whole even when larger
    /// than `max_bytes` only if `min_one` (a fetch grants that to its first partition with
    /// data, so later partitions keep to what is left of the response's budget).
    pub(crate) fn read_limited(
        &self,
        offset: i64,
        max_bytes: usize,
        read_committed: bool,
        min_one: bool,
    ) -> ReadOutcome {
        let end = self.visible_end(read_committed);
        let mut out = BytesMut::new();
        let mut first_offset = None;
        let mut last_offset = offset;
        for batch in self.batches_from(offset) {
            if batch.base_offset() >= end {
                break;
            }
            // A batch straddling the end is held back until all of it is visible.
            if batch.last_offset() >= end {
                break;
            }
            if (!out.is_empty() || !min_one) && out.len() + batch.bytes.len() > max_bytes {
                break;
            }
            first_offset.get_or_insert(batch.base_offset());
            last_offset = batch.last_offset();
            out.extend_from_slice(&batch.bytes);
        }
        let aborted = match (read_committed, first_offset) {
            (true, Some(first)) => self
                .aborted
                .iter()
                .filter(|a| a.last_offset >= first && a.first_offset <= last_offset)
                .copied()
                .collect(),
            _ => Vec::new(),
        };
        ReadOutcome {
            records: out.freeze(),
            aborted,
        }
    }

    /// Batches holding `offset` and after.
    pub(crate) fn batches_from(&self, offset: i64) -> impl Iterator<Item = &StoredBatch> {
        let start = self.batches.partition_point(|b| b.last_offset() < offset);
        self.batches.range(start..)
    }

    /// The offset and timestamp of the first record (not batch) at or after `timestamp`, as
    /// Kafka's time index lookup finds it (transaction markers included); `None` when every
    /// record is older.
    pub(crate) fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        self.batches
            .iter()
            .filter(|b| b.header.max_timestamp >= timestamp)
            .find_map(|b| {
                record_times(&b.bytes)
                    .into_iter()
                    .find(|(_, ts)| *ts >= timestamp)
            })
    }

    /// The offset and timestamp of the first record holding the log's largest timestamp
    /// (the earliest batch with it, markers included, as Kafka tracks it per segment).
    pub(crate) fn max_timestamp(&self) -> Option<(i64, i64)> {
        let mut best: Option<&StoredBatch> = None;
        for batch in &self.batches {
            if best.is_none_or(|b| batch.header.max_timestamp > b.header.max_timestamp) {
                best = Some(batch);
            }
        }
        let batch = best?;
        let max = batch.header.max_timestamp;
        record_times(&batch.bytes)
            .into_iter()
            .find(|(_, ts)| *ts == max)
            .or(Some((batch.last_offset(), max)))
    }

    /// Data records in `from..to` a reader of `isolation` is handed: control markers never,
    /// and under `read_committed` not the aborted ones.
    pub(crate) fn deliverable(&self, from: i64, to: i64, read_committed: bool) -> u64 {
        let mut count = 0u64;
        for batch in self.batches_from(from) {
            if batch.base_offset() >= to {
                break;
            }
            let h = &batch.header;
            if h.is_control() {
                continue;
            }
            if read_committed
                && h.is_transactional()
                && self.is_aborted(h.producer_id, batch.base_offset())
            {
                continue;
            }
            let lo = batch.base_offset().max(from);
            let hi = batch.last_offset().min(to - 1);
            if hi >= lo {
                // Offsets inside a batch are dense (compaction is not modelled).
                count += u64::try_from(hi - lo + 1).unwrap_or(0);
            }
        }
        count
    }

    fn is_aborted(&self, producer_id: i64, offset: i64) -> bool {
        self.aborted.iter().any(|a| {
            a.producer_id == producer_id && a.first_offset <= offset && offset <= a.last_offset
        })
    }

    /// Drops the oldest batches while more than `keep` records remain (whole batches only, as
    /// Kafka deletes whole segments), never past an open transaction.
    pub(crate) fn retain(&mut self, keep: u64) {
        let stable = self.last_stable_offset();
        while self.records > keep {
            let Some(front) = self.batches.front() else {
                break;
            };
            if front.last_offset() >= stable {
                break;
            }
            let gone = if front.header.is_control() {
                0
            } else {
                u64::try_from(front.header.record_count).unwrap_or(0)
            };
            if self.records - gone < keep {
                break;
            }
            self.records -= gone;
            self.log_start = front.last_offset() + 1;
            self.batches.pop_front();
        }
        let start = self.log_start;
        self.aborted.retain(|a| a.last_offset >= start);
    }

    /// Moves the log start to `offset` (`DeleteRecords`), dropping the batches wholly before it.
    pub(crate) fn delete_before(&mut self, offset: i64) {
        let offset = offset.clamp(self.log_start, self.next_offset);
        while let Some(front) = self.batches.front() {
            if front.last_offset() >= offset {
                break;
            }
            if !front.header.is_control() {
                self.records = self
                    .records
                    .saturating_sub(u64::try_from(front.header.record_count).unwrap_or(0));
            }
            self.batches.pop_front();
        }
        self.log_start = offset;
    }
}

/// Offsets and timestamps of a stored batch's records (none when it cannot be decoded,
/// which an appended batch always can).
fn record_times(bytes: &Bytes) -> Vec<(i64, i64)> {
    RecordBatches::new(bytes.clone(), MAX_DECOMPRESSED)
        .filter_map(Result::ok)
        .filter_map(|batch| batch.records().ok())
        .flatten()
        .map(|r| (r.offset, r.timestamp))
        .collect()
}

/// A control batch holding one transaction marker (commit or abort), framed as Kafka frames
/// it: key = version 0 + type, value = version 0 + coordinator epoch.
fn control_batch(producer_id: i64, producer_epoch: i16, commit: bool, timestamp: i64) -> Vec<u8> {
    let mut key = BytesMut::new();
    key.put_i16(0);
    key.put_i16(i16::from(commit));
    let mut value = BytesMut::new();
    value.put_i16(0);
    value.put_i32(0);
    let mut record = BytesMut::new();
    record.put_i8(0); // attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, key.len() as i64);
    record.extend_from_slice(&key);
    put_varint(&mut record, value.len() as i64);
    record.extend_from_slice(&value);
    put_varint(&mut record, 0); // headers
    let mut body = BytesMut::new();
    body.put_i16(0b0011_0000); // transactional + control
    body.put_i32(0); // last offset delta
    body.put_i64(timestamp);
    body.put_i64(timestamp);
    body.put_i64(producer_id);
    body.put_i16(producer_epoch);
    body.put_i32(-1);
    body.put_i32(1);
    put_varint(&mut body, record.len() as i64);
    body.extend_from_slice(&record);
    let crc = crc32c::crc32c(&body);
    let mut batch = Vec::with_capacity(HEADER_SIZE + record.len() + 1);
    batch.put_i64(0);
    batch.put_i32((4 + 1 + 4 + body.len()) as i32);
    batch.put_i32(0); // partition leader epoch
    batch.put_i8(2); // magic
    batch.put_u32(crc);
    batch.extend_from_slice(&body);
    batch
}

fn put_varint(out: &mut BytesMut, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.put_u8((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.put_u8(zigzag as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::records::RecordBatches;

    #[test]
    fn a_marker_is_a_valid_control_batch() {
        let bytes = Bytes::from(control_batch(7, 2, true, 1_000));
        let batch = RecordBatches::new(bytes, 1 << 20)
            .next()
            .expect("one batch")
            .expect("decodes with a valid CRC");
        assert!(batch.header.is_control());
        assert!(batch.header.is_transactional());
        assert_eq!(batch.header.producer_id, 7);
        assert_eq!(batch.records().expect("records").len(), 1);
    }

    #[test]
    fn an_aborted_transaction_is_not_deliverable_to_committed_readers() {
        let mut log = PartitionLog::default();
        let data = control_batch(9, 0, true, 5);
        // Use the marker framing as a stand-in transactional data batch of one record.
        let header = BatchHeader {
            base_offset: 0,
            partition_leader_epoch: 0,
            attributes: 0b0001_0000,
            last_offset_delta: 0,
            base_timestamp: 5,
            max_timestamp: 5,
            producer_id: 9,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: 1,
        };
        log.append(header, &data);
        assert_eq!(log.last_stable_offset(), 0);
        assert_eq!(log.visible_end(true), 0);
        let marker = log.end_transaction(9, 0, false, 6).expect("open");
        assert_eq!(marker, 1);
        assert_eq!(log.last_stable_offset(), 2);
        assert_eq!(log.deliverable(0, 2, true), 0);
        assert_eq!(log.deliverable(0, 2, false), 1);
        let read = log.read(0, 1 << 20, true);
        assert_eq!(read.aborted.len(), 1);
    }
}
