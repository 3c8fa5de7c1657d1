//! Entry points for the fuzz targets of `fuzz/` (`scripts/fuzz`), compiled only with
//! `--cfg fuzzing`: one function per target, each taking the fuzzer's bytes.
//!
//! The invariant every target checks: whatever the bytes, the decoder returns (an error is
//! fine) without a panic, an abort, a hang or an allocation out of proportion to its input.
//! Each function runs exactly the path production code runs on bytes from outside: a
//! response body through the shape check and `kafka-protocol`, a fetched record set through
//! the batch reader and the consumer's filtering, compressed data through the bounded
//! decompressors, SASL server messages through their parsers, a request frame through the
//! embedded broker's header reading, shape check and decoding. Nothing here changes what a
//! normal build compiles.
//!
//! Where the code a target needs is private to its module, the module itself implements
//! [`Entry`] for the target's marker type (under `cfg(fuzzing)` too), so no visibility changes.

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::AbortedTransaction;
use kafka_protocol::messages::{ApiKey, ResponseKind};

use crate::client::IsolationLevel;
use crate::client::consumer::decode;
use crate::client::records::{Codec, RecordBatches, compression};

/// The decompression bound of the record-batch targets (`fetch.max.bytes` is larger in
/// production; a smaller bound keeps executions fast and still exercises the limit).
const MAX_DECOMPRESSED: usize = 1 << 20;

/// A target whose code is private to another module: that module implements it.
pub(crate) trait Entry {
    /// Runs the target on the fuzzer's bytes.
    fn run(data: &[u8]);
}

/// Marker for [`broker_requests`]; `src/testing/cluster/server.rs` implements [`Entry`].
pub(crate) struct BrokerRequests;

/// Marker for the SCRAM half of [`sasl`]; `src/client/net/sasl/scram.rs` implements [`Entry`].
pub(crate) struct SaslScram;

/// Marker for the `AWS_MSK_IAM` part of [`sasl`]; `src/client/net/sasl/msk_iam.rs` implements
/// [`Entry`].
pub(crate) struct SaslMskIam;

/// Marker for the HTTP answers of the AWS credential sources (part of [`sasl`]);
/// `src/client/aws/http.rs` implements [`Entry`].
pub(crate) struct AwsHttp;

/// The names of the targets, as `scripts/fuzz --list` prints them.
pub const TARGETS: &[&str] = &[
    "responses",
    "record_batches",
    "fetch_decode",
    "gzip",
    "snappy",
    "lz4",
    "zstd",
    "codec_roundtrip",
    "sasl",
    "broker_requests",
];

/// Runs the target called `name` on `data`; an unknown name does nothing.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "responses" => responses(data),
        "record_batches" => record_batches(data),
        "fetch_decode" => fetch_decode(data),
        "gzip" => decompress(Codec::Gzip, data),
        "snappy" => decompress(Codec::Snappy, data),
        "lz4" => decompress(Codec::Lz4, data),
        "zstd" => decompress(Codec::Zstd, data),
        "codec_roundtrip" => codec_roundtrip(data),
        "sasl" => sasl(data),
        "broker_requests" => broker_requests(data),
        _ => {}
    }
}

/// A response body as `InFlight::response` handles it: byte 0 picks the API (of every key
/// `kafka-protocol` knows), byte 1 the version (from its lowest to one past its highest, so
/// that an unknown version is tried too), the rest is the body; the shape check runs first
/// and, if it passes, `kafka-protocol` decodes the body.
pub fn responses(data: &[u8]) {
    let [key, version, body @ ..] = data else {
        return;
    };
    let count = ApiKey::iter().count();
    let Some(api) = ApiKey::iter().nth(usize::from(*key) % count) else {
        return;
    };
    let range = api.valid_versions();
    let span = range.max - range.min + 2;
    let version = range.min + i16::from(*version) % span;
    if crate::client::check_response(api as i16, version, body).is_err() {
        return;
    }
    let mut body = Bytes::copy_from_slice(body);
    let _ = ResponseKind::decode(api, &mut body, version);
}

/// A fetched record set through the batch reader: byte 0 bit 0 turns the CRC check on (off,
/// the fuzzer reaches the records; on, the check itself is fuzzed); every batch read is
/// decoded to its records.
pub fn record_batches(data: &[u8]) {
    let [flags, rest @ ..] = data else {
        return;
    };
    let batches = RecordBatches::new(Bytes::copy_from_slice(rest), MAX_DECOMPRESSED)
        .check_crc(flags & 1 == 1);
    for batch in batches {
        let Ok(batch) = batch else {
            break;
        };
        let header = batch.header;
        let _ = (header.codec(), header.is_control(), header.last_offset());
        let _ = batch.records();
    }
}

/// A partition's fetched data through the consumer's `decode_partition`: byte 0 bit 0 picks
/// `read_committed` (else `read_uncommitted`), bit 1 the CRC check; byte 1 the offset fetched
/// from; byte 2 how many aborted transactions follow (up to 7), each a producer id byte and a
/// first-offset byte (bit 2 set: no aborted-transaction list at all); the rest is the record
/// set, decoded with a decompression budget of 1 MiB.
pub fn fetch_decode(data: &[u8]) {
    let [flags, from, aborted, rest @ ..] = data else {
        return;
    };
    let isolation = if flags & 1 == 1 {
        IsolationLevel::ReadCommitted
    } else {
        IsolationLevel::ReadUncommitted
    };
    let pairs = usize::from(aborted % 8).min(rest.len() / 2);
    let (list, records) = rest.split_at(pairs * 2);
    let aborted: Vec<AbortedTransaction> = list
        .chunks_exact(2)
        .map(|pair| {
            AbortedTransaction::default()
                .with_producer_id(i64::from(pair[0]).into())
                .with_first_offset(i64::from(pair[1]))
        })
        .collect();
    let mut budget = decode::Budget::new(MAX_DECOMPRESSED);
    let _ = decode::decode_partition(
        Bytes::copy_from_slice(records),
        (flags & 4 == 0).then_some(aborted),
        i64::from(*from),
        isolation,
        &mut budget,
        flags & 2 == 2,
    );
}

/// One decompressor: byte 0 picks the output bound (0 bytes to 1 MiB), the rest is the
/// compressed input; the output must never exceed the bound.
fn decompress(codec: Codec, data: &[u8]) {
    const BOUNDS: [usize; 6] = [0, 1, 100, 4096, 65_536, MAX_DECOMPRESSED];
    let [bound, input @ ..] = data else {
        return;
    };
    let max_len = BOUNDS[usize::from(*bound) % BOUNDS.len()];
    if let Ok(out) = compression::decompress(codec, input, max_len) {
        assert!(
            out.len() <= max_len,
            "{codec:?}: {} bytes out, bound {max_len}",
            out.len()
        );
    }
}

/// gzip through [`compression::decompress`] (see [`run`] for the byte layout).
pub fn gzip(data: &[u8]) {
    decompress(Codec::Gzip, data);
}

/// snappy, raw and xerial-framed, through [`compression::decompress`].
pub fn snappy(data: &[u8]) {
    decompress(Codec::Snappy, data);
}

/// lz4 frames through [`compression::decompress`].
pub fn lz4(data: &[u8]) {
    decompress(Codec::Lz4, data);
}

/// zstd frames through [`compression::decompress`].
pub fn zstd(data: &[u8]) {
    decompress(Codec::Zstd, data);
}

/// Every encoder and its decoder: byte 0 picks the codec (of gzip, snappy, lz4, zstd) and,
/// through its high bits, the `compression.level` (-1 to 12), the rest is the input; what the
/// encoder writes must decode to the input exactly (a wrong encoding would be acknowledged by
/// the broker and found only by a consumer).
pub fn codec_roundtrip(data: &[u8]) {
    let Some((&pick, input)) = data.split_first() else {
        return;
    };
    let codec = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd][usize::from(pick & 3)];
    let level = i32::from(pick >> 4) - 1;
    let mut encoded = Vec::new();
    if compression::compress(codec, level, input, &mut encoded).is_err() {
        panic!("{codec:?} at level {level} refused {} bytes", input.len());
    }
    match compression::decompress(codec, &encoded, input.len()) {
        Ok(decoded) => assert!(
            decoded == input,
            "{codec:?} at level {level} changed the input"
        ),
        Err(e) => panic!("{codec:?} at level {level} wrote what it cannot read: {e}"),
    }
}

/// What the SASL mechanisms read: byte 0 even, a SCRAM exchange (byte 0 bit 1 picks SHA-512)
/// whose server-first and server-final messages are the rest split at its first NUL byte;
/// byte 0 odd with bit 1 clear, the rest as `sasl.oauthbearer.config` for librdkafka's
/// unsecured tokens, and the token message built from it; byte 0 odd with bit 1 set, the rest
/// as the broker's `AWS_MSK_IAM` answer and as an HTTP answer of IMDS or STS (with the JSON
/// and XML read from it). PLAIN reads nothing from the server, and OAUTHBEARER only shows the
/// server's refusal (`String::from_utf8_lossy`).
pub fn sasl(data: &[u8]) {
    let [selector, rest @ ..] = data else {
        return;
    };
    if selector & 1 == 0 {
        <SaslScram as Entry>::run(data);
        return;
    }
    if selector & 2 != 0 {
        <SaslMskIam as Entry>::run(rest);
        <AwsHttp as Entry>::run(rest);
        return;
    }
    let Ok(config) = std::str::from_utf8(rest) else {
        return;
    };
    let _ = crate::client::unsecured_token_now(config);
}

/// A request frame, without its length prefix, as the embedded broker reads it: API key and
/// version, the header, the shape check, then the body decoded as its handler decodes it.
pub fn broker_requests(data: &[u8]) {
    <BrokerRequests as Entry>::run(data);
}
