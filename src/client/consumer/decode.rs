//! Turning a partition's fetched record set into records: control batches skipped, and under
//! `read_committed` the batches of aborted transactions left out.
//!
//! The broker sends, with each answer, the aborted transactions whose first offset falls in
//! the returned range: `(producer id, first offset)`. A producer's batches from that offset
//! on are aborted until its abort marker (a control batch) ends the transaction.

use std::collections::HashSet;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::AbortedTransaction;

use crate::client::error::Error;
use crate::client::isolation::IsolationLevel;
use crate::client::records::{Record, RecordBatches};

/// What a record set held at or after the offset asked for.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    /// The records to hand out, in offset order.
    pub records: Vec<Record>,
    /// The offset to fetch next: past every complete batch read, filtered or not.
    pub next_offset: i64,
    /// The batch at `next_offset` could not be read; the records before it are kept.
    pub corrupt: Option<Corrupt>,
    /// The leader epoch of the last batch read, for truncation detection (KIP-320).
    pub last_epoch: Option<i32>,
}

/// A batch that could not be read.
#[derive(Debug)]
pub(crate) struct Corrupt {
    pub error: Error,
    /// The offset after it, from its header, when the header could be read and is in range.
    pub skip_to: Option<i64>,
}

/// What decompression may still make for one response: every partition of it draws on the
/// same allowance, so a response of many compressed batches cannot expand without bound.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    left: usize,
    full: usize,
}

impl Budget {
    /// An allowance of `bytes` for one response.
    pub(crate) fn new(bytes: usize) -> Self {
        Budget {
            left: bytes,
            full: bytes,
        }
    }
}

/// Decodes `data`, fetched from offset `from`.
///
/// A compressed batch that does not fit what is left of `budget` ends the partition's
/// records there without an error (the next fetch, with a fresh allowance, reads it) unless
/// the whole allowance was left: then it is too large for any response and is `corrupt`.
pub(crate) fn decode_partition(
    data: Bytes,
    aborted: Option<Vec<AbortedTransaction>>,
    from: i64,
    isolation: IsolationLevel,
    budget: &mut Budget,
    check_crcs: bool,
) -> Decoded {
    let mut aborted: Vec<(i64, i64)> = aborted
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.first_offset, a.producer_id.0))
        .collect();
    aborted.sort_unstable();
    let mut aborted = aborted.into_iter().peekable();
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut out = Decoded {
        records: Vec::new(),
        next_offset: from,
        corrupt: None,
        last_epoch: None,
    };
    let mut batches = RecordBatches::new(data, budget.full).check_crc(check_crcs);
    while let Some(batch) = batches.next() {
        let batch = match batch {
            Ok(batch) => batch,
            Err(error) => {
                out.corrupt = Some(Corrupt {
                    error,
                    skip_to: batches.failed_header().map(|h| h.last_offset() + 1),
                });
                break;
            }
        };
        let h = batch.header;
        while let Some(&(first, pid)) = aborted.peek() {
            if first > h.last_offset() {
                break;
            }
            aborting.insert(pid);
            aborted.next();
        }
        // The batch's offsets were checked on read: the offset after it exists.
        let after = h.last_offset() + 1;
        if h.is_control() {
            // The marker ends the producer's transaction: its later batches are new.
            aborting.remove(&h.producer_id);
            out.next_offset = out.next_offset.max(after);
            out.last_epoch = Some(h.partition_leader_epoch);
            continue;
        }
        if (isolation == IsolationLevel::ReadCommitted
            && h.is_transactional()
            && aborting.contains(&h.producer_id))
            || h.last_offset() < from
        {
            out.next_offset = out.next_offset.max(after);
            out.last_epoch = Some(h.partition_leader_epoch);
            continue;
        }
        match batch.records_within(&mut out.records, budget.left) {
            Ok(made) => budget.left = budget.left.saturating_sub(made),
            // Part of the allowance went to batches before it: read it with a fresh one.
            Err(_) if budget.left < budget.full => break,
            Err(error) => {
                out.corrupt = Some(Corrupt {
                    error,
                    skip_to: Some(after),
                });
                break;
            }
        }
        out.next_offset = out.next_offset.max(after);
        out.last_epoch = Some(h.partition_leader_epoch);
        if out.records.first().is_some_and(|r| r.offset < from) {
            out.records.retain(|r| r.offset >= from);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::client::records::{BatchBuilder, Codec, ProducerState};

    /// A batch at `base` of `n` records of `size` bytes of zeros (so that it compresses well).
    fn batch(base: i64, n: usize, size: usize, codec: Codec) -> Bytes {
        let mut b = BatchBuilder::new(1024);
        let value = vec![0_u8; size];
        for _ in 0..n {
            b.push(0, None, Some(&value), &[]);
        }
        let state = ProducerState {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
        };
        let mut bytes = BytesMut::from(&b.build(codec, -1, state).expect("builds")[..]);
        bytes[0..8].copy_from_slice(&base.to_be_bytes());
        bytes.freeze()
    }

    fn joined(parts: &[Bytes]) -> Bytes {
        let mut all = BytesMut::new();
        for p in parts {
            all.extend_from_slice(p);
        }
        all.freeze()
    }

    fn decode(data: Bytes, from: i64, budget: &mut Budget) -> Decoded {
        decode_partition(
            data,
            None,
            from,
            IsolationLevel::ReadCommitted,
            budget,
            true,
        )
    }

    #[test]
    fn a_batch_ending_at_the_last_offset_is_an_error_not_an_overflow() {
        // Before the batch reader checked offsets, `last_offset() + 1` overflowed here.
        let mut data = BytesMut::from(&batch(0, 1, 10, Codec::None)[..]);
        data[0..8].copy_from_slice(&i64::MAX.to_be_bytes());
        let decoded = decode(data.freeze(), i64::MAX, &mut Budget::new(1 << 20));
        assert!(decoded.records.is_empty());
        assert_eq!(decoded.next_offset, i64::MAX);
        assert!(decoded.corrupt.is_some());
    }

    #[test]
    fn decompression_draws_on_one_allowance_for_the_whole_response() {
        // Three batches of 64 KiB each once decompressed, an allowance of 150 KiB.
        let one = batch(0, 64, 1024, Codec::Gzip);
        let two = batch(64, 64, 1024, Codec::Gzip);
        let three = batch(0, 64, 1024, Codec::Gzip);
        let mut budget = Budget::new(150 * 1024);
        let first = decode(joined(&[one, two]), 0, &mut budget);
        assert_eq!(first.records.len(), 128);
        assert_eq!(first.next_offset, 128);
        assert!(first.corrupt.is_none());
        // Another partition of the same response: the third batch no longer fits. It is
        // left for the next fetch, not reported.
        let second = decode(three.clone(), 0, &mut budget);
        assert!(second.records.is_empty() && second.corrupt.is_none());
        assert_eq!(second.next_offset, 0);
        // With the whole allowance it decodes.
        let again = decode(three, 0, &mut Budget::new(150 * 1024));
        assert_eq!(again.records.len(), 64);
    }

    #[test]
    fn a_batch_too_large_for_a_whole_response_is_corrupt_with_its_end() {
        let big = batch(7, 64, 1024, Codec::Gzip);
        let decoded = decode(big, 7, &mut Budget::new(16 * 1024));
        let corrupt = decoded.corrupt.expect("cannot fit any response");
        assert_eq!(corrupt.skip_to, Some(71));
        assert_eq!(decoded.next_offset, 7);
    }

    #[test]
    fn records_before_an_unreadable_batch_are_kept() {
        let good = batch(0, 3, 10, Codec::None);
        let mut bad = BytesMut::from(&batch(3, 2, 10, Codec::None)[..]);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let decoded = decode(joined(&[good, bad.freeze()]), 0, &mut Budget::new(1 << 20));
        assert_eq!(decoded.records.len(), 3);
        assert_eq!(decoded.next_offset, 3);
        let corrupt = decoded.corrupt.expect("the CRC fails");
        assert_eq!(corrupt.skip_to, Some(5));
    }
}
