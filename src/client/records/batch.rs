//! The v2 record batch: the one unit in which records travel and are stored.
//!
//! Layout (all big-endian): base offset i64, batch length i32, partition leader epoch i32,
//! magic i8 (= 2), CRC-32C u32 over everything after it, attributes i16, last offset delta
//! i32, base and max timestamps i64, producer id i64, producer epoch i16, base sequence i32,
//! record count i32, then the records, compressed as a whole when the attributes say so.

use bytes::{BufMut, Bytes, BytesMut};

use super::compression::{self, Codec};
use super::cursor::Cursor;
use super::varint::{put_varint, put_varlong, varint_size, varlong_size};
use crate::client::error::{Error, Result};

/// Bytes of a batch before its first record.
pub const BATCH_HEADER_SIZE: usize = 61;
/// The base sequence of a batch from a producer that is not idempotent.
pub const NO_SEQUENCE: i32 = -1;

const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;

const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;

/// A record header. Kafka allows the same key more than once; order is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header's name (UTF-8 by convention; not enforced on read).
    pub key: Bytes,
    /// Its value; `None` is a null value, distinct from an empty one.
    pub value: Option<Bytes>,
}

impl Header {
    /// A header with `key` and `value`.
    pub fn new(key: impl Into<Bytes>, value: Option<Bytes>) -> Self {
        Header {
            key: key.into(),
            value,
        }
    }
}

/// The headers of a fetched record, read lazily from the batch's bytes (no allocation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    raw: Bytes,
    count: usize,
}

impl Headers {
    /// How many headers there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The headers in wire order.
    #[must_use]
    pub fn iter(&self) -> HeadersIter {
        HeadersIter {
            cursor: Cursor::new(self.raw.clone()),
            left: self.count,
        }
    }

    /// The value of the last header named `key` (Kafka's "last wins" lookup).
    #[must_use]
    pub fn last(&self, key: &[u8]) -> Option<Option<Bytes>> {
        self.iter().filter(|h| h.key == key).last().map(|h| h.value)
    }
}

impl IntoIterator for &Headers {
    type Item = Header;
    type IntoIter = HeadersIter;
    fn into_iter(self) -> HeadersIter {
        self.iter()
    }
}

/// Iterates a record's headers.
#[derive(Debug)]
pub struct HeadersIter {
    cursor: Cursor,
    left: usize,
}

impl Iterator for HeadersIter {
    type Item = Header;
    fn next(&mut self) -> Option<Header> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The bytes were validated when the record was decoded.
        read_header(&mut self.cursor).ok()
    }
}

fn read_header(c: &mut Cursor) -> Result<Header> {
    let key = c
        .nullable_bytes()?
        .ok_or_else(|| Error::protocol("header with a null key"))?;
    let value = c.nullable_bytes()?;
    Ok(Header { key, value })
}

/// A record as fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its offset in the partition.
    pub offset: i64,
    /// Its timestamp in ms (creation or log-append time, per the batch).
    pub timestamp: i64,
    /// The key; `None` is a null key.
    pub key: Option<Bytes>,
    /// The value; `None` is a null value (a tombstone).
    pub value: Option<Bytes>,
    /// The headers.
    pub headers: Headers,
}

/// The fields of a batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// The first offset of the batch.
    pub base_offset: i64,
    /// The leader epoch that wrote it.
    pub partition_leader_epoch: i32,
    /// The attribute bits.
    pub attributes: i16,
    /// The last offset is `base_offset + last_offset_delta`.
    pub last_offset_delta: i32,
    /// The first record's timestamp.
    pub base_timestamp: i64,
    /// The largest timestamp (the log-append time for such batches).
    pub max_timestamp: i64,
    /// The producer id, -1 for a plain producer.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The first record's sequence number.
    pub base_sequence: i32,
    /// How many records the header claims.
    pub record_count: i32,
}

impl BatchHeader {
    /// The batch's compression codec.
    pub fn codec(&self) -> Result<Codec> {
        Codec::from_attributes(self.attributes).map_err(Error::protocol)
    }
    /// Whether it belongs to a transaction.
    #[must_use]
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }
    /// Whether it holds control records (transaction markers).
    #[must_use]
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
    /// Whether timestamps are the broker's log-append time.
    #[must_use]
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }
    /// Whether the base offset is non-negative and the offset after the last one exists.
    #[must_use]
    pub fn offsets_in_range(&self) -> bool {
        self.base_offset >= 0
            && self.last_offset_delta >= 0
            && self
                .base_offset
                .checked_add(i64::from(self.last_offset_delta))
                .is_some_and(|last| last < i64::MAX)
    }

    /// The offset of the batch's last record.
    #[must_use]
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }
}

/// One batch of a fetched record set; its records decode on demand.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The batch header.
    pub header: BatchHeader,
    body: Bytes,
    max_decompressed: usize,
}

impl Batch {
    /// Decodes (and decompresses) the records. Every length is checked; a batch whose records
    /// disagree with its header is an error.
    pub fn records(&self) -> Result<Vec<Record>> {
        let mut records = Vec::new();
        self.records_into(&mut records)?;
        Ok(records)
    }

    /// Decodes the records onto the end of `records` (see [`Batch::records`]); on error,
    /// `records` keeps what it had.
    pub fn records_into(&self, records: &mut Vec<Record>) -> Result<()> {
        self.records_within(records, self.max_decompressed)
            .map(|_| ())
    }

    /// As [`Batch::records_into`], decompressing at most `limit` bytes (and never more than
    /// the limit the batches were read with); returns how many bytes decompression made, `0`
    /// for an uncompressed batch, whose records share the fetched bytes.
    pub fn records_within(&self, records: &mut Vec<Record>, limit: usize) -> Result<usize> {
        let before = records.len();
        let decoded = self.decode_into(records, limit.min(self.max_decompressed));
        if decoded.is_err() {
            records.truncate(before);
        }
        decoded
    }

    fn decode_into(&self, records: &mut Vec<Record>, limit: usize) -> Result<usize> {
        let codec = self.header.codec()?;
        let (body, made) = if codec == Codec::None {
            (self.body.clone(), 0)
        } else {
            let body = compression::decompress(codec, &self.body, limit).map_err(|e| {
                Error::protocol(format_args!("batch at {}: {e}", self.header.base_offset))
            })?;
            let made = body.len();
            (Bytes::from(body), made)
        };
        let count = usize::try_from(self.header.record_count)
            .map_err(|_| Error::protocol("negative record count"))?;
        // Each record takes at least 7 bytes, so the count cannot make us reserve more than
        // the data could hold.
        records.reserve(count.min(body.len() / 7));
        let mut c = Cursor::new(body);
        let log_append = self.header.is_log_append_time();
        for _ in 0..count {
            let length = c.varint()?;
            let length =
                usize::try_from(length).map_err(|_| Error::protocol("negative record length"))?;
            let mut r = Cursor::new(c.take(length)?);
            let _attributes = r.i8()?;
            let timestamp_delta = r.varlong()?;
            let offset_delta = r.varint()?;
            // Within the batch's own range, so no record offset is negative or past the
            // last one the header (checked on read) allows.
            if !(0..=self.header.last_offset_delta).contains(&offset_delta) {
                return Err(Error::protocol(format_args!(
                    "record offset delta {offset_delta} outside batch at {} (last delta {})",
                    self.header.base_offset, self.header.last_offset_delta
                )));
            }
            let key = r.nullable_bytes()?;
            let value = r.nullable_bytes()?;
            let header_count = r.varint()?;
            let header_count = usize::try_from(header_count)
                .map_err(|_| Error::protocol("negative header count"))?;
            let headers_raw = r.clone().rest();
            for _ in 0..header_count {
                read_header(&mut r)?;
            }
            if r.remaining() != 0 {
                return Err(Error::protocol("record longer than its fields"));
            }
            let timestamp = if log_append {
                self.header.max_timestamp
            } else {
                self.header.base_timestamp.wrapping_add(timestamp_delta)
            };
            records.push(Record {
                offset: self.header.base_offset + i64::from(offset_delta),
                timestamp,
                key,
                value,
                headers: Headers {
                    raw: headers_raw,
                    count: header_count,
                },
            });
        }
        Ok(made)
    }
}

/// Iterates the batches of a fetched record set.
///
/// A trailing partial batch (the broker cuts record sets at the fetch size limit) ends the
/// iteration quietly; a corrupt batch is an error.
#[derive(Debug)]
pub struct RecordBatches {
    data: Cursor,
    max_decompressed: usize,
    verify_crc: bool,
    failed: Option<BatchHeader>,
}

impl RecordBatches {
    /// Batches of `data`, decompressing at most `max_decompressed` bytes per batch.
    #[must_use]
    pub fn new(data: Bytes, max_decompressed: usize) -> Self {
        RecordBatches {
            data: Cursor::new(data),
            max_decompressed,
            verify_crc: true,
            failed: None,
        }
    }

    /// The header of the batch whose CRC failed, as read (unverified), once iteration
    /// stopped at it.
    #[must_use]
    pub fn failed_header(&self) -> Option<BatchHeader> {
        self.failed
    }

    /// Whether each batch's CRC-32C is checked (on by default). A batch that fails it is an
    /// error; unchecked, a corrupt batch still decodes within bounds or fails as malformed.
    #[must_use]
    pub fn check_crc(mut self, check: bool) -> Self {
        self.verify_crc = check;
        self
    }

    fn next_batch(&mut self) -> Result<Option<Batch>> {
        if self.data.remaining() < BATCH_HEADER_SIZE {
            return Ok(None);
        }
        let mut peek = self.data.clone();
        let base_offset = peek.i64()?;
        let length = peek.i32()?;
        let length = usize::try_from(length)
            .ok()
            .filter(|l| *l >= BATCH_HEADER_SIZE - 12)
            .ok_or_else(|| {
                Error::protocol(format_args!("batch at {base_offset} has length {length}"))
            })?;
        if peek.remaining() < length {
            return Ok(None);
        }
        let mut whole = Cursor::new(self.data.take(12 + length)?);
        whole.skip(12)?;
        let partition_leader_epoch = whole.i32()?;
        let magic = whole.i8()?;
        if magic != 2 {
            return Err(Error::protocol(format_args!(
                "batch at {base_offset} uses message format v{magic}; only v2 is supported"
            )));
        }
        let crc = whole.u32()?;
        let checked = whole.clone().rest();
        let header = BatchHeader {
            base_offset,
            partition_leader_epoch,
            attributes: whole.i16()?,
            last_offset_delta: whole.i32()?,
            base_timestamp: whole.i64()?,
            max_timestamp: whole.i64()?,
            producer_id: whole.i64()?,
            producer_epoch: whole.i16()?,
            base_sequence: whole.i32()?,
            record_count: whole.i32()?,
        };
        if self.verify_crc && crc32c::crc32c(&checked) != crc {
            // Kept for the caller: where the batch claims to end, unverified.
            self.failed = Some(header).filter(BatchHeader::offsets_in_range);
            return Err(Error::protocol(format_args!(
                "batch at {base_offset} fails its CRC"
            )));
        }
        // Kafka's offsets are non-negative and the offset after a batch must exist: with
        // this held, `last_offset() + 1` is never out of range anywhere downstream.
        if !header.offsets_in_range() {
            return Err(Error::protocol(format_args!(
                "batch at {base_offset} with last offset delta {} is outside Kafka's offsets",
                header.last_offset_delta
            )));
        }
        Ok(Some(Batch {
            header,
            body: whole.rest(),
            max_decompressed: self.max_decompressed,
        }))
    }
}

impl Iterator for RecordBatches {
    type Item = Result<Batch>;
    fn next(&mut self) -> Option<Result<Batch>> {
        match self.next_batch() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => None,
            Err(e) => {
                // Nothing after a corrupt batch can be trusted.
                self.data = Cursor::new(Bytes::new());
                Some(Err(e))
            }
        }
    }
}

/// The exact encoded size of one record inside a batch, its length prefix included.
#[must_use]
pub fn record_size(
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header],
) -> usize {
    let body = record_body_size(offset_delta, timestamp_delta, key, value, headers);
    varint_size(body as i32) + body
}

fn bytes_size(b: Option<&[u8]>) -> usize {
    match b {
        None => varint_size(-1),
        Some(b) => varint_size(b.len() as i32) + b.len(),
    }
}

fn record_body_size(
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header],
) -> usize {
    let mut n = 1
        + varlong_size(timestamp_delta)
        + varint_size(offset_delta)
        + bytes_size(key)
        + bytes_size(value);
    n += varint_size(headers.len() as i32);
    for h in headers {
        n += bytes_size(Some(&h.key)) + bytes_size(h.value.as_deref());
    }
    n
}

/// Builds one batch on the producer side, record by record.
///
/// The records are written after room for the batch header, so that
/// [`finish`](Self::finish) of an uncompressed batch writes the header in place and hands the
/// same buffer on: a batch is held once in memory, not once as records and again encoded.
#[derive(Debug)]
pub struct BatchBuilder {
    /// The header's room (zeros until encoded), then the records; empty once finished.
    buf: BytesMut,
    /// The size of the records alone, which stays known after `finish` took the buffer.
    body: usize,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    finished: bool,
}

impl BatchBuilder {
    /// An empty batch with room for about `capacity` bytes of records.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        let mut buf = BytesMut::with_capacity(BATCH_HEADER_SIZE + capacity);
        buf.resize(BATCH_HEADER_SIZE, 0);
        BatchBuilder {
            buf,
            body: 0,
            count: 0,
            base_timestamp: 0,
            max_timestamp: i64::MIN,
            finished: false,
        }
    }

    /// The records so far.
    #[must_use]
    pub fn count(&self) -> i32 {
        self.count
    }

    /// The uncompressed size of the batch so far, header included.
    #[must_use]
    pub fn size(&self) -> usize {
        BATCH_HEADER_SIZE + self.body
    }

    /// What appending this record would add to [`size`](Self::size).
    #[must_use]
    pub fn size_of_next(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> usize {
        let delta = if self.count == 0 {
            0
        } else {
            timestamp.wrapping_sub(self.base_timestamp)
        };
        record_size(self.count, delta, key, value, headers)
    }

    /// Appends a record; its offset delta is its position in the batch. A finished batch
    /// takes no more records (the call is ignored).
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        if self.finished {
            return;
        }
        if self.count == 0 {
            self.base_timestamp = timestamp;
        }
        let delta = timestamp.wrapping_sub(self.base_timestamp);
        let body = record_body_size(self.count, delta, key, value, headers);
        self.write(body, delta, timestamp, key, value, headers);
    }

    /// Appends a record if the batch stays within `max_bytes` (its [`size`](Self::size)) and
    /// `max_records` with it, and gives its place in the batch; `None`, and nothing appended,
    /// when it would not, or the batch is finished. The record's size is computed once, for
    /// the check and the append alike.
    pub fn push_within(
        &mut self,
        (max_bytes, max_records): (usize, usize),
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> Option<u32> {
        let place = u32::try_from(self.count).ok()?;
        if self.finished || place as usize >= max_records {
            return None;
        }
        let delta = if self.count == 0 {
            0
        } else {
            timestamp.wrapping_sub(self.base_timestamp)
        };
        let body = record_body_size(self.count, delta, key, value, headers);
        if self.size() + varint_size(body as i32) + body > max_bytes {
            return None;
        }
        if self.count == 0 {
            self.base_timestamp = timestamp;
        }
        self.write(body, delta, timestamp, key, value, headers);
        Some(place)
    }

    /// Writes a record whose body is `body` bytes at `delta` from the base timestamp.
    fn write(
        &mut self,
        body: usize,
        delta: i64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        let b = &mut self.buf;
        let before = b.len();
        b.reserve(varint_size(body as i32) + body);
        put_varint(b, body as i32);
        b.put_i8(0);
        put_varlong(b, delta);
        put_varint(b, self.count);
        put_bytes(b, key);
        put_bytes(b, value);
        put_varint(b, headers.len() as i32);
        for h in headers {
            put_bytes(b, Some(&h.key));
            put_bytes(b, h.value.as_deref());
        }
        self.body += b.len() - before;
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }

    /// Encodes the batch (header, (compressed) records, CRC) into a new buffer, leaving the
    /// builder as it was.
    pub fn build(&self, codec: Codec, level: i32, producer: ProducerState) -> Result<Bytes> {
        if self.finished {
            return Err(Error::InvalidRecord("the batch was already encoded".into()));
        }
        let mut out = BytesMut::with_capacity(self.buf.len());
        out.resize(BATCH_HEADER_SIZE, 0);
        self.encode_into(
            &mut out,
            &self.buf[BATCH_HEADER_SIZE..],
            codec,
            level,
            producer,
        )?;
        Ok(out.freeze())
    }

    /// Encodes the batch and hands its buffer on: without compression the header is written in
    /// front of the records where they lie, so nothing is copied. The builder keeps its count
    /// and size and takes no more records; finishing it again is an error.
    pub fn finish(&mut self, codec: Codec, level: i32, producer: ProducerState) -> Result<Bytes> {
        if self.finished {
            return Err(Error::InvalidRecord("the batch was already encoded".into()));
        }
        let mut buf = std::mem::take(&mut self.buf);
        self.finished = true;
        if codec == Codec::None {
            self.write_header(&mut buf, codec, producer)?;
            return Ok(buf.freeze());
        }
        let mut out = BytesMut::with_capacity(BATCH_HEADER_SIZE + self.body / 2);
        out.resize(BATCH_HEADER_SIZE, 0);
        self.encode_into(&mut out, &buf[BATCH_HEADER_SIZE..], codec, level, producer)?;
        Ok(out.freeze())
    }

    /// Appends `records` (compressed as `codec` says) to `out`, which holds the header's room,
    /// and writes the header.
    fn encode_into(
        &self,
        out: &mut BytesMut,
        records: &[u8],
        codec: Codec,
        level: i32,
        producer: ProducerState,
    ) -> Result<()> {
        if codec == Codec::None {
            out.extend_from_slice(records);
        } else {
            let mut compressed = Vec::with_capacity(records.len() / 2);
            compression::compress(codec, level, records, &mut compressed)
                .map_err(|e| Error::InvalidRecord(format!("compressing a batch: {e}")))?;
            out.extend_from_slice(&compressed);
        }
        self.write_header(out, codec, producer)
    }

    /// Writes the header over the first [`BATCH_HEADER_SIZE`] bytes of `out`, whose rest is
    /// the (compressed) records.
    fn write_header(
        &self,
        out: &mut BytesMut,
        codec: Codec,
        producer: ProducerState,
    ) -> Result<()> {
        let length = i32::try_from(out.len() - 12)
            .map_err(|_| Error::InvalidRecord("batch over 2 GiB".into()))?;
        let mut attributes = codec.id();
        if producer.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        let mut header = &mut out[..BATCH_HEADER_SIZE];
        header.put_i64(0);
        header.put_i32(length);
        header.put_i32(-1);
        header.put_i8(2);
        header.put_u32(0); // CRC, written below
        header.put_i16(attributes);
        header.put_i32(self.count - 1);
        header.put_i64(self.base_timestamp);
        header.put_i64(if self.count == 0 {
            self.base_timestamp
        } else {
            self.max_timestamp
        });
        header.put_i64(producer.producer_id);
        header.put_i16(producer.producer_epoch);
        header.put_i32(producer.base_sequence);
        header.put_i32(self.count);
        let crc = crc32c::crc32c(&out[ATTRIBUTES_AT..]);
        out[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
        Ok(())
    }
}

fn put_bytes(b: &mut BytesMut, v: Option<&[u8]>) {
    match v {
        None => put_varint(b, -1),
        Some(v) => {
            put_varint(b, v.len() as i32);
            b.extend_from_slice(v);
        }
    }
}

/// The idempotence fields of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    /// Producer id, -1 when not idempotent.
    pub producer_id: i64,
    /// Producer epoch, -1 when not idempotent.
    pub producer_epoch: i16,
    /// First sequence, [`NO_SEQUENCE`] when not idempotent.
    pub base_sequence: i32,
    /// Whether the batch is part of a transaction.
    pub transactional: bool,
}

impl ProducerState {
    /// The fields of a producer that is neither idempotent nor transactional.
    pub const NONE: ProducerState = ProducerState {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: NO_SEQUENCE,
        transactional: false,
    };
}

/// Rewrites the producer id, epoch and base sequence of an encoded batch (after an epoch
/// bump), fixing its CRC. The records are untouched, so compression is not redone.
pub fn patch_producer_state(
    batch: &Bytes,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Result<Bytes> {
    if batch.len() < BATCH_HEADER_SIZE {
        return Err(Error::InvalidRecord("batch shorter than its header".into()));
    }
    let mut out = BytesMut::from(&batch[..]);
    out[PRODUCER_ID_AT..PRODUCER_EPOCH_AT].copy_from_slice(&producer_id.to_be_bytes());
    out[PRODUCER_EPOCH_AT..BASE_SEQUENCE_AT].copy_from_slice(&producer_epoch.to_be_bytes());
    out[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_AT..]);
    out[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(codec: Codec) -> Bytes {
        let mut b = BatchBuilder::new(1024);
        b.push(1000, Some(b"k0"), Some(b"v0"), &[]);
        b.push(
            999,
            None,
            Some(b"v1"),
            &[
                Header::new("h", Some(Bytes::from_static(b"1"))),
                Header::new("h", None),
            ],
        );
        b.push(1005, Some(b""), None, &[]);
        let state = ProducerState {
            producer_id: 7,
            producer_epoch: 1,
            base_sequence: 42,
            transactional: false,
        };
        match b.build(codec, -1, state) {
            Ok(bytes) => bytes,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn round_trips_every_field() {
        for codec in Codec::ALL {
            let data = sample(codec);
            let batches: Vec<Batch> = RecordBatches::new(data, 1 << 20)
                .collect::<Result<_>>()
                .unwrap_or_default();
            assert_eq!(batches.len(), 1, "{codec:?}");
            let h = batches[0].header;
            assert_eq!(
                (
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.record_count
                ),
                (7, 1, 42, 3)
            );
            assert_eq!(
                (h.base_timestamp, h.max_timestamp, h.last_offset_delta),
                (1000, 1005, 2)
            );
            assert_eq!(h.codec().ok(), Some(codec));
            let records = batches[0].records().unwrap_or_default();
            assert_eq!(records.len(), 3);
            assert_eq!(records[0].key.as_deref(), Some(&b"k0"[..]));
            assert_eq!(records[1].timestamp, 999);
            assert_eq!(records[1].key, None);
            let headers: Vec<Header> = records[1].headers.iter().collect();
            assert_eq!(headers.len(), 2);
            assert_eq!(headers[1], Header::new("h", None));
            assert_eq!(records[1].headers.last(b"h"), Some(None));
            assert_eq!(records[2].key.as_deref(), Some(&b""[..]));
            assert_eq!(records[2].value, None);
            assert_eq!(records[2].offset, 2);
        }
    }

    #[test]
    fn finishing_gives_the_bytes_building_gives_and_only_once() {
        for codec in [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ] {
            let mut b = BatchBuilder::new(16);
            for i in 0..50i64 {
                b.push(1_000 + i, Some(b"key"), Some(&[i as u8; 100]), &[]);
            }
            let producer = ProducerState {
                producer_id: 7,
                producer_epoch: 2,
                base_sequence: 40,
                transactional: true,
            };
            let built = b.build(codec, -1, producer).unwrap_or_default();
            let size = b.size();
            let finished = b.finish(codec, -1, producer).unwrap_or_default();
            assert_eq!(finished, built, "{codec:?}");
            assert_eq!(
                (b.size(), b.count()),
                (size, 50),
                "still known after finish"
            );
            assert!(b.finish(codec, -1, producer).is_err(), "finished twice");
            assert!(b.build(codec, -1, producer).is_err(), "built after finish");
            b.push(0, None, None, &[]);
            assert_eq!(b.count(), 50, "a finished batch takes no record");
            let Some(Ok(batch)) = RecordBatches::new(finished, 1 << 20).next() else {
                panic!("{codec:?}: the finished batch does not decode")
            };
            assert_eq!(batch.header.base_sequence, 40);
        }
    }

    #[test]
    fn sizes_are_exact() {
        let mut b = BatchBuilder::new(0);
        let headers = [Header::new("name", Some(Bytes::from_static(b"value")))];
        let predicted = b.size_of_next(5, Some(b"key"), Some(&[0u8; 300]), &headers);
        b.push(5, Some(b"key"), Some(&[0u8; 300]), &headers);
        assert_eq!(b.size(), BATCH_HEADER_SIZE + predicted);
    }

    #[test]
    fn pushing_within_limits_writes_what_push_writes_and_stops_at_either_limit() {
        let headers = [Header::new("h", Some(Bytes::from_static(b"v")))];
        let (mut within, mut plain) = (BatchBuilder::new(0), BatchBuilder::new(0));
        for i in 0..3_i64 {
            let value = vec![b'x'; 100 + i as usize];
            let place = within.push_within(
                (usize::MAX, 3),
                1_000 + 7 * i,
                Some(b"k"),
                Some(&value),
                &headers,
            );
            assert_eq!(place, Some(i as u32), "its place in the batch");
            plain.push(1_000 + 7 * i, Some(b"k"), Some(&value), &headers);
        }
        assert_eq!(
            within.push_within((usize::MAX, 3), 1_030, None, Some(b"4th"), &[]),
            None,
            "a fourth record is over max_records"
        );
        let encode = |b: &mut BatchBuilder| {
            b.finish(Codec::None, -1, ProducerState::NONE)
                .unwrap_or_default()
        };
        assert_eq!(
            encode(&mut within),
            encode(&mut plain),
            "the same bytes as push"
        );

        let mut bounded = BatchBuilder::new(0);
        let one = record_size(0, 0, None, Some(&[0u8; 50]), &[]);
        let max_bytes = BATCH_HEADER_SIZE + one;
        assert_eq!(
            bounded.push_within((max_bytes, 10), 5, None, Some(&[0u8; 50]), &[]),
            Some(0),
            "exactly at the byte limit fits"
        );
        assert_eq!(
            bounded.push_within((max_bytes, 10), 5, None, Some(&[0u8; 1]), &[]),
            None,
            "one byte more does not"
        );
        assert_eq!(
            (bounded.count(), bounded.size()),
            (1, max_bytes),
            "nothing appended"
        );
    }

    #[test]
    fn patching_keeps_the_batch_valid() {
        let data = sample(Codec::Lz4);
        let patched = patch_producer_state(&data, 9, 3, 0).unwrap_or_default();
        let batch = RecordBatches::new(patched, 1 << 20).next();
        let Some(Ok(batch)) = batch else {
            panic!("patched batch does not decode")
        };
        assert_eq!(
            (
                batch.header.producer_id,
                batch.header.producer_epoch,
                batch.header.base_sequence
            ),
            (9, 3, 0)
        );
        assert_eq!(batch.records().map(|r| r.len()).ok(), Some(3));
    }

    #[test]
    fn corruption_is_an_error_and_truncation_ends_quietly() {
        let data = sample(Codec::None);
        let mut bad = BytesMut::from(&data[..]);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            RecordBatches::new(bad.freeze(), 1 << 20).next(),
            Some(Err(_))
        ));
        let cut = data.slice(..data.len() - 1);
        assert!(RecordBatches::new(cut, 1 << 20).next().is_none());
        let mut lying = BytesMut::from(&data[..]);
        lying[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&lying[ATTRIBUTES_AT..]);
        lying[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
        let batch = RecordBatches::new(lying.freeze(), 1 << 20).next();
        let Some(Ok(batch)) = batch else {
            panic!("header should decode")
        };
        assert!(batch.records().is_err());
    }

    #[test]
    fn an_unchecked_crc_lets_the_bytes_through_as_they_came() {
        let data = sample(Codec::None);
        let mut flipped = BytesMut::from(&data[..]);
        // The second record's value "v1" becomes "v0" (one bit); the CRC no longer fits.
        let at = data
            .windows(2)
            .rposition(|w| w == b"v1")
            .map(|i| i + 1)
            .expect("the sample holds v1");
        flipped[at] ^= 1;
        let flipped = flipped.freeze();
        assert!(matches!(
            RecordBatches::new(flipped.clone(), 1 << 20).next(),
            Some(Err(_))
        ));
        let batch = RecordBatches::new(flipped, 1 << 20)
            .check_crc(false)
            .next()
            .and_then(Result::ok)
            .expect("the header decodes");
        let records = batch.records().expect("the records decode");
        assert_eq!(records[1].value.as_deref(), Some(&b"v0"[..]));
    }

    /// `data` with its base offset and last offset delta replaced and its CRC made to fit.
    fn with_offsets(data: &Bytes, base: i64, last_delta: i32) -> Bytes {
        let mut b = BytesMut::from(&data[..]);
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[ATTRIBUTES_AT + 2..ATTRIBUTES_AT + 6].copy_from_slice(&last_delta.to_be_bytes());
        let crc = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        b.freeze()
    }

    #[test]
    fn a_batch_outside_kafkas_offsets_is_refused_not_wrapped() {
        let data = sample(Codec::None);
        // The sample's records have deltas 0..=2.
        for (base, delta) in [(i64::MAX - 2, 2), (i64::MAX, 0), (-5, 2), (0, -1)] {
            let batch = RecordBatches::new(with_offsets(&data, base, delta), 1 << 20).next();
            assert!(
                matches!(&batch, Some(Err(e)) if e.to_string().contains("outside Kafka's offsets")),
                "base {base}, last delta {delta}: {batch:?}"
            );
        }
        // The last offset that leaves room for the next one is fine.
        let batch = RecordBatches::new(with_offsets(&data, i64::MAX - 3, 2), 1 << 20)
            .next()
            .and_then(Result::ok)
            .expect("in range");
        assert_eq!(batch.header.last_offset(), i64::MAX - 1);
        assert_eq!(
            batch.records().expect("decodes").last().map(|r| r.offset),
            Some(i64::MAX - 1)
        );
    }

    #[test]
    fn a_record_past_its_batch_header_is_malformed() {
        // The header says the batch ends at delta 1; its third record has delta 2.
        let data = with_offsets(&sample(Codec::None), 10, 1);
        let batch = RecordBatches::new(data, 1 << 20)
            .next()
            .and_then(Result::ok)
            .expect("the header decodes");
        let err = batch
            .records()
            .expect_err("delta 2 is past the header's last");
        assert!(err.to_string().contains("outside batch at 10"), "{err}");
    }

    #[test]
    fn a_failed_crc_leaves_the_header_for_the_caller() {
        let mut flipped = BytesMut::from(&with_offsets(&sample(Codec::None), 40, 2)[..]);
        let last = flipped.len() - 1;
        flipped[last] ^= 0x10;
        let mut batches = RecordBatches::new(flipped.freeze(), 1 << 20);
        assert!(matches!(batches.next(), Some(Err(_))));
        let header = batches.failed_header().expect("the header was read");
        assert_eq!((header.base_offset, header.last_offset()), (40, 42));
    }

    #[test]
    fn decompression_stops_at_the_callers_limit() {
        let data = sample(Codec::Gzip);
        let batch = RecordBatches::new(data, 1 << 20)
            .next()
            .and_then(Result::ok)
            .expect("decodes");
        let mut records = Vec::new();
        let made = batch
            .records_within(&mut records, 1 << 20)
            .expect("fits a MiB");
        assert!(made > 0 && records.len() == 3, "{made} bytes, {records:?}");
        let mut none = Vec::new();
        assert!(batch.records_within(&mut none, made - 1).is_err());
        assert!(none.is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut rng = fastrand::Rng::with_seed(7);
        let base = sample(Codec::None);
        for _ in 0..2000 {
            let mut data = BytesMut::from(&base[..]);
            for _ in 0..rng.usize(1..4) {
                let i = rng.usize(..data.len());
                data[i] = rng.u8(..);
            }
            let batches = RecordBatches::new(data.freeze(), 1 << 16).check_crc(false);
            for batch in batches.flatten() {
                let _ = batch.records();
            }
        }
    }
}
