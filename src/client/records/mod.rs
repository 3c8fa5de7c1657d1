//! Record batches (message format v2): encode, decode, compress.
//!
//! Decoding never trusts a length: every count and size is checked against the bytes that are
//! really there before it is used, decompression is bounded, and keys, values and headers are
//! `Bytes` slices of the (decompressed) batch, so a record costs no copy.

mod batch;
pub mod compression;
mod cursor;
mod varint;

pub use batch::{
    BATCH_HEADER_SIZE, Batch, BatchBuilder, BatchHeader, Header, Headers, HeadersIter, NO_SEQUENCE,
    ProducerState, Record, RecordBatches, patch_producer_state, record_size,
};
pub use compression::{Codec, CompressionError};
