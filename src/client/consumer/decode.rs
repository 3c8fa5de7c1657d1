//! Turning a partition's fetched record set into records: control batches skipped, and under
//! `read_committed` the batches of aborted transactions left out.
//!
//! The broker sends, with each answer, the aborted transactions whose first offset falls in
//! the returned range: `(producer id, first offset)`. A producer's batches from that offset
//! on are aborted until its abort marker (a control batch) ends the transaction.

use std::collections::HashSet;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::AbortedTransaction;

use crate::client::error::Result;
use crate::client::reader::IsolationLevel;
use crate::client::records::{Record, RecordBatches};

/// What a record set held at or after the offset asked for.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    /// The records to hand out, in offset order.
    pub records: Vec<Record>,
    /// The offset to fetch next: past every complete batch, filtered or not.
    pub next_offset: i64,
}

/// Decodes `data`, fetched from offset `from`.
pub(crate) fn decode_partition(
    data: Bytes,
    aborted: Option<Vec<AbortedTransaction>>,
    from: i64,
    isolation: IsolationLevel,
    max_decompressed: usize,
    check_crcs: bool,
) -> Result<Decoded> {
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
    };
    for batch in RecordBatches::new(data, max_decompressed).check_crc(check_crcs) {
        let batch = batch?;
        let h = batch.header;
        while let Some(&(first, pid)) = aborted.peek() {
            if first > h.last_offset() {
                break;
            }
            aborting.insert(pid);
            aborted.next();
        }
        out.next_offset = out.next_offset.max(h.last_offset() + 1);
        if h.is_control() {
            // The marker ends the producer's transaction: its later batches are new.
            aborting.remove(&h.producer_id);
            continue;
        }
        if isolation == IsolationLevel::ReadCommitted
            && h.is_transactional()
            && aborting.contains(&h.producer_id)
        {
            continue;
        }
        if h.last_offset() < from {
            continue;
        }
        batch.records_into(&mut out.records)?;
        if out.records.first().is_some_and(|r| r.offset < from) {
            out.records.retain(|r| r.offset >= from);
        }
    }
    Ok(out)
}
