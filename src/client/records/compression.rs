//! Compression codecs of Kafka record batches (magic v2), in pure Rust.
//!
//! A v2 record batch compresses its records section as one unit with the codec named by the low
//! three bits of the batch attributes. [`compress`] and [`decompress`] convert that section.
//!
//! What this module guarantees:
//!
//! - **Bounded output.** [`decompress`] never returns more than `max_len` bytes and fails with
//!   [`CompressionError::TooLarge`] as soon as the data would decompress to more. The output
//!   buffer grows only as real output appears (or to a length the data declares, after checking
//!   that length against `max_len`) and never past `max_len`, so a zip bomb or a lying length
//!   costs at most `max_len` bytes of output buffer plus the decoder's fixed scratch space (a
//!   32 KiB read buffer, the inflate state). The zstd decoder also keeps a history window,
//!   capped here at `max(min(max_len, declared content size), 128 KiB)` whatever window the
//!   frame header asks for; its ring buffer rounds that up and holds the frame's output until
//!   the frame ends, so zstd decoding peaks at about three times `max_len` (measured), where the
//!   other codecs peak at one to two times (while the output buffer is reallocated).
//! - **No panics on input data**: corrupt, truncated or hostile input is an error.
//! - **Formats read and written**, the same as the Java client and librdkafka:
//!   - gzip: writes one RFC 1952 member; reads one or more concatenated members (as Java's
//!     `GZIPInputStream` does). CRC-32 and length trailers are checked.
//!   - snappy: writes the xerial snappy-java framing that the Java client writes (16-byte
//!     header `\x82SNAPPY\0`, version 1, compatible version 1, then big-endian
//!     length-prefixed raw snappy blocks of 32 KiB input each); reads that framing
//!     (concatenated streams too) and also a bare raw snappy block, which is what librdkafka
//!     writes.
//!   - lz4: writes one LZ4 frame as the Java client does (independent 64 KiB blocks, no block
//!     or content checksum, no content size, correct header checksum); reads LZ4 frames with
//!     any block size, independent or linked blocks, optional block checksums, content size and
//!     content checksum (all checked), concatenated frames and skippable frames.
//!   - zstd: writes one zstd frame with a content checksum (ruzstd's encoder); reads one or
//!     more frames made by any conforming encoder at any level (skippable frames are skipped,
//!     checksums are checked).
//!
//! Levels follow librdkafka's `compression.level` where the encoder has them: `-1` is the codec
//! default (gzip 6), a level above the codec maximum is clamped to it (gzip 9); snappy ignores
//! the level, lz4 always uses the fast compressor (the level only selects the slower
//! high-compression mode in the reference clients, which read either output the same way), and
//! zstd always uses ruzstd's one compressing level, about zstd's level 1.

use std::fmt;
use std::io::{self, Read, Write};

/// The compression codec of a record batch: the low 3 bits of the batch attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Codec {
    /// No compression (id 0).
    #[default]
    None,
    /// gzip, RFC 1952 (id 1).
    Gzip,
    /// Snappy, in the xerial snappy-java framing or as a raw block (id 2).
    Snappy,
    /// LZ4 frame format (id 3).
    Lz4,
    /// Zstandard (id 4).
    Zstd,
}

impl Codec {
    /// Every codec, in id order.
    pub const ALL: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    /// The bits of the batch attributes that hold the codec id.
    const ATTRIBUTES_MASK: i16 = 0x07;

    /// The codec named by the low 3 bits of record batch `attributes`; ids 5 to 7 are an error.
    pub fn from_attributes(attributes: i16) -> Result<Codec, CompressionError> {
        match attributes & Self::ATTRIBUTES_MASK {
            0 => Ok(Codec::None),
            1 => Ok(Codec::Gzip),
            2 => Ok(Codec::Snappy),
            3 => Ok(Codec::Lz4),
            4 => Ok(Codec::Zstd),
            id => Err(CompressionError::UnknownCodec { id }),
        }
    }

    /// The codec id written in the batch attributes (0 to 4).
    #[must_use]
    pub const fn id(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    /// The codec of a librdkafka `compression.type` value: `none`, `gzip`, `snappy`, `lz4` or
    /// `zstd`, in lower case as librdkafka spells them.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Codec> {
        match name {
            "none" => Some(Codec::None),
            "gzip" => Some(Codec::Gzip),
            "snappy" => Some(Codec::Snappy),
            "lz4" => Some(Codec::Lz4),
            "zstd" => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// The librdkafka `compression.type` name of this codec.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a codec could not be chosen, or data could not be compressed or decompressed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompressionError {
    /// The batch attributes name a codec id this client does not know (5 to 7).
    #[error("unknown compression codec id {id} in the record batch attributes")]
    UnknownCodec {
        /// The codec id found in the attributes.
        id: i16,
    },
    /// The compression level is below -1.
    #[error("invalid {codec} compression level {level}: the lowest is -1 (the codec default)")]
    InvalidLevel {
        /// The codec the level was given for.
        codec: Codec,
        /// The level given.
        level: i32,
    },
    /// The data decompresses to more than the allowed number of bytes.
    #[error("{codec} data decompresses to more than the limit of {max_len} bytes")]
    TooLarge {
        /// The codec of the data.
        codec: Codec,
        /// The limit that would have been exceeded.
        max_len: usize,
    },
    /// The compressed data ends before its format says it does.
    #[error("{codec} data is truncated")]
    Truncated {
        /// The codec of the data.
        codec: Codec,
    },
    /// The compressed data is not valid for its codec.
    #[error("corrupt {codec} data: {detail}")]
    Corrupt {
        /// The codec of the data.
        codec: Codec,
        /// What is wrong with it.
        detail: String,
    },
    /// The compressor failed.
    #[error("{codec} compression failed: {detail}")]
    Compress {
        /// The codec that failed.
        codec: Codec,
        /// What went wrong.
        detail: String,
    },
}

impl CompressionError {
    fn corrupt(codec: Codec, detail: impl fmt::Display) -> Self {
        CompressionError::Corrupt {
            codec,
            detail: detail.to_string(),
        }
    }

    fn compress(codec: Codec, detail: impl fmt::Display) -> Self {
        CompressionError::Compress {
            codec,
            detail: detail.to_string(),
        }
    }

    /// Maps an error of a decompressing reader: an unexpected end of input is truncation.
    fn from_read(codec: Codec, err: &io::Error) -> Self {
        if err.kind() == io::ErrorKind::UnexpectedEof {
            CompressionError::Truncated { codec }
        } else {
            CompressionError::corrupt(codec, err)
        }
    }
}

/// Appends the compressed form of `input` to `out`. `level` is librdkafka's compression.level
/// (-1 = codec default).
///
/// Levels above a codec's maximum are clamped to it; a level below -1 is an error. With
/// [`Codec::None`] the input is appended as it is.
pub fn compress(
    codec: Codec,
    level: i32,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    if level < -1 {
        return Err(CompressionError::InvalidLevel { codec, level });
    }
    match codec {
        Codec::None => {
            out.extend_from_slice(input);
            Ok(())
        }
        Codec::Gzip => gzip::compress(level, input, out),
        Codec::Snappy => snappy::compress(input, out),
        Codec::Lz4 => lz4::compress(input, out),
        Codec::Zstd => {
            zstd::compress(input, out);
            Ok(())
        }
    }
}

/// Decompresses `input`; fails (never allocates past it) if the output would exceed `max_len`
/// bytes.
///
/// Empty input is an error for every codec but [`Codec::None`]: each format has a header.
pub fn decompress(codec: Codec, input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
    match codec {
        Codec::None => {
            if input.len() > max_len {
                return Err(CompressionError::TooLarge { codec, max_len });
            }
            Ok(input.to_vec())
        }
        Codec::Gzip => gzip::decompress(input, max_len),
        Codec::Snappy => snappy::decompress(input, max_len),
        Codec::Lz4 => lz4::decompress(input, max_len),
        Codec::Zstd => zstd::decompress(input, max_len),
    }
}

/// A first capacity for the output of decompressing `input_len` bytes: a guess at a typical
/// ratio, never above `max_len`.
fn initial_capacity(input_len: usize, max_len: usize) -> usize {
    input_len.saturating_mul(4).min(max_len)
}

/// Makes room for `additional` more bytes in `out`, growing by doubling but never past
/// `max_len` (the caller has checked that `out.len() + additional <= max_len`).
fn reserve_bounded(out: &mut Vec<u8>, additional: usize, max_len: usize) {
    let needed = out.len().saturating_add(additional);
    if needed > out.capacity() {
        let target = out.capacity().saturating_mul(2).min(max_len).max(needed);
        out.reserve_exact(target - out.len());
    }
}

/// Why [`read_bounded`] stopped early.
enum ReadError {
    /// More than `max_len` bytes of output.
    TooLarge,
    /// The reader failed.
    Io(io::Error),
}

/// The size of the scratch buffer that streaming decoders fill.
const READ_CHUNK: usize = 32 * 1024;

/// Appends everything `reader` yields to `out`, failing once `out` would exceed `max_len` bytes.
fn read_bounded<R: Read>(
    reader: &mut R,
    out: &mut Vec<u8>,
    max_len: usize,
) -> Result<(), ReadError> {
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let budget = max_len.saturating_sub(out.len());
        // Ask for one byte past the budget, so that output beyond it is seen.
        let want = budget.saturating_add(1).min(READ_CHUNK);
        let n = match reader.read(&mut chunk[..want]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(ReadError::Io(err)),
        };
        if n > budget {
            return Err(ReadError::TooLarge);
        }
        reserve_bounded(out, n, max_len);
        out.extend_from_slice(&chunk[..n]);
    }
}

/// gzip (RFC 1952) through flate2 and its zlib-rs backend (pure Rust).
mod gzip {
    use super::{Codec, CompressionError, ReadError, Write, initial_capacity, read_bounded};

    const CODEC: Codec = Codec::Gzip;
    /// zlib's `Z_DEFAULT_COMPRESSION`, which librdkafka and the Java client use by default.
    const DEFAULT_LEVEL: u32 = 6;
    const MAX_LEVEL: u32 = 9;

    pub(super) fn compress(
        level: i32,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), CompressionError> {
        let level = u32::try_from(level).map_or(DEFAULT_LEVEL, |level| level.min(MAX_LEVEL));
        let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::new(level));
        encoder
            .write_all(input)
            .map_err(|err| CompressionError::compress(CODEC, err))?;
        encoder
            .finish()
            .map_err(|err| CompressionError::compress(CODEC, err))?;
        Ok(())
    }

    pub(super) fn decompress(input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
        if input.is_empty() {
            return Err(CompressionError::Truncated { codec: CODEC });
        }
        let mut out = Vec::with_capacity(initial_capacity(input.len(), max_len));
        // Java's GZIPInputStream reads concatenated members, so this does too.
        let mut decoder = flate2::bufread::MultiGzDecoder::new(input);
        match read_bounded(&mut decoder, &mut out, max_len) {
            Ok(()) => Ok(out),
            Err(ReadError::TooLarge) => Err(CompressionError::TooLarge {
                codec: CODEC,
                max_len,
            }),
            Err(ReadError::Io(err)) => Err(CompressionError::from_read(CODEC, &err)),
        }
    }
}

/// Snappy: the xerial snappy-java framing, or a raw block.
mod snappy {
    use super::{Codec, CompressionError, initial_capacity, reserve_bounded};

    const CODEC: Codec = Codec::Snappy;
    /// The first 8 bytes of a snappy-java stream.
    pub(super) const XERIAL_MAGIC: [u8; 8] = *b"\x82SNAPPY\0";
    /// Magic, version and minimum compatible version.
    const XERIAL_HEADER_LEN: usize = 16;
    /// The version snappy-java writes, which is also the lowest it reads.
    const XERIAL_VERSION: i32 = 1;
    /// The uncompressed size of a block, as the Java client writes them (snappy-java's default).
    const XERIAL_BLOCK_LEN: usize = 32 * 1024;

    pub(super) fn compress(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
        out.reserve(XERIAL_HEADER_LEN + snap::raw::max_compress_len(input.len()));
        out.extend_from_slice(&XERIAL_MAGIC);
        out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
        out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
        let mut encoder = snap::raw::Encoder::new();
        let mut block = vec![0u8; snap::raw::max_compress_len(XERIAL_BLOCK_LEN.min(input.len()))];
        for chunk in input.chunks(XERIAL_BLOCK_LEN) {
            let len = encoder
                .compress(chunk, &mut block)
                .map_err(|err| CompressionError::compress(CODEC, err))?;
            let prefix =
                u32::try_from(len).map_err(|err| CompressionError::compress(CODEC, err))?;
            out.extend_from_slice(&prefix.to_be_bytes());
            out.extend_from_slice(&block[..len]);
        }
        Ok(())
    }

    pub(super) fn decompress(input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
        let mut out = Vec::with_capacity(initial_capacity(input.len(), max_len));
        if input.len() >= XERIAL_HEADER_LEN && input[..XERIAL_MAGIC.len()] == XERIAL_MAGIC {
            decompress_xerial(input, &mut out, max_len)?;
        } else {
            // librdkafka writes one raw block; snappy-java reads anything without its magic as one.
            decompress_block(input, &mut out, max_len)?;
        }
        Ok(out)
    }

    /// Reads snappy-java streams: a header, then blocks of a 4-byte big-endian length and a raw
    /// block. A header may appear again between blocks (concatenated streams).
    fn decompress_xerial(
        mut rest: &[u8],
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<(), CompressionError> {
        while !rest.is_empty() {
            if rest.len() >= XERIAL_HEADER_LEN && rest[..XERIAL_MAGIC.len()] == XERIAL_MAGIC {
                let version = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
                if version < XERIAL_VERSION {
                    return Err(CompressionError::corrupt(
                        CODEC,
                        format_args!("unsupported snappy-java version {version}"),
                    ));
                }
                rest = &rest[XERIAL_HEADER_LEN..];
                continue;
            }
            let Some((len, after)) = rest.split_first_chunk::<4>() else {
                return Err(CompressionError::Truncated { codec: CODEC });
            };
            let len = i32::from_be_bytes(*len);
            let len = usize::try_from(len).map_err(|_| {
                CompressionError::corrupt(CODEC, format_args!("negative block length {len}"))
            })?;
            if after.len() < len {
                return Err(CompressionError::Truncated { codec: CODEC });
            }
            let (block, after) = after.split_at(len);
            decompress_block(block, out, max_len)?;
            rest = after;
        }
        Ok(())
    }

    /// Appends the content of one raw snappy block to `out`, checking its declared length
    /// against `max_len` before making room for it.
    fn decompress_block(
        block: &[u8],
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<(), CompressionError> {
        if block.is_empty() {
            return Err(CompressionError::Truncated { codec: CODEC });
        }
        let len = snap::raw::decompress_len(block)
            .map_err(|err| CompressionError::corrupt(CODEC, err))?;
        if len > max_len.saturating_sub(out.len()) {
            return Err(CompressionError::TooLarge {
                codec: CODEC,
                max_len,
            });
        }
        let start = out.len();
        reserve_bounded(out, len, max_len);
        out.resize(start + len, 0);
        match snap::raw::Decoder::new().decompress(block, &mut out[start..]) {
            Ok(written) if written == len => Ok(()),
            Ok(written) => {
                out.truncate(start);
                Err(CompressionError::corrupt(
                    CODEC,
                    format_args!("block declares {len} bytes but holds {written}"),
                ))
            }
            Err(err) => {
                out.truncate(start);
                Err(CompressionError::corrupt(CODEC, err))
            }
        }
    }
}

/// LZ4 frames (<https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md>): written with
/// `lz4_flex`'s frame encoder, read with a frame parser here around `lz4_flex`'s block decoder (so
/// that truncation is always an error and output is bounded block by block).
mod lz4 {
    use super::{Codec, CompressionError, Write, initial_capacity, reserve_bounded, xxh32};

    const CODEC: Codec = Codec::Lz4;
    const MAGIC: u32 = 0x184D_2204;
    /// Skippable frames have magics 0x184D2A50 to 0x184D2A5F.
    const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
    const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
    /// The version bits (7-6) of FLG must be 01.
    const FLG_VERSION: u8 = 0b0100_0000;
    const FLG_VERSION_MASK: u8 = 0b1100_0000;
    const FLG_INDEPENDENT: u8 = 0b0010_0000;
    const FLG_BLOCK_CHECKSUM: u8 = 0b0001_0000;
    const FLG_CONTENT_SIZE: u8 = 0b0000_1000;
    const FLG_CONTENT_CHECKSUM: u8 = 0b0000_0100;
    const FLG_RESERVED: u8 = 0b0000_0010;
    const FLG_DICT_ID: u8 = 0b0000_0001;
    const BD_RESERVED: u8 = 0b1000_1111;
    /// Set in a block length when the block is stored uncompressed.
    const UNCOMPRESSED_BIT: u32 = 0x8000_0000;
    /// How far back a linked block may reach into earlier output.
    const WINDOW: usize = 64 * 1024;

    pub(super) fn compress(input: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
        // What the Java client writes: independent 64 KiB blocks, no checksums, no content size.
        let info = lz4_flex::frame::FrameInfo::new()
            .block_size(lz4_flex::frame::BlockSize::Max64KB)
            .block_mode(lz4_flex::frame::BlockMode::Independent);
        let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
        encoder
            .write_all(input)
            .map_err(|err| CompressionError::compress(CODEC, err))?;
        encoder
            .finish()
            .map_err(|err| CompressionError::compress(CODEC, err))?;
        Ok(())
    }

    /// Takes `n` bytes off the front of `rest`, or fails as truncated.
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], CompressionError> {
        if rest.len() < n {
            return Err(CompressionError::Truncated { codec: CODEC });
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head)
    }

    fn take_u32(rest: &mut &[u8]) -> Result<u32, CompressionError> {
        let bytes = take(rest, 4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    pub(super) fn decompress(input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
        if input.is_empty() {
            return Err(CompressionError::Truncated { codec: CODEC });
        }
        let mut out = Vec::with_capacity(initial_capacity(input.len(), max_len));
        let mut rest = input;
        while !rest.is_empty() {
            let magic = take_u32(&mut rest)?;
            if magic & SKIPPABLE_MASK == SKIPPABLE_MAGIC {
                let len = take_u32(&mut rest)?;
                take(&mut rest, len as usize)?;
            } else if magic == MAGIC {
                decompress_frame(&mut rest, &mut out, max_len)?;
            } else {
                return Err(CompressionError::corrupt(
                    CODEC,
                    format_args!("bad frame magic {magic:#010x}"),
                ));
            }
        }
        Ok(out)
    }

    /// What a frame descriptor says.
    struct Descriptor {
        /// The FLG byte.
        flg: u8,
        /// The largest uncompressed size of a block.
        block_max: usize,
        /// The declared content size.
        content_size: Option<u64>,
    }

    /// Reads and checks the frame descriptor that follows the magic.
    fn read_descriptor(rest: &mut &[u8]) -> Result<Descriptor, CompressionError> {
        let start = *rest;
        let &[flg, bd] = take(rest, 2)? else {
            return Err(CompressionError::Truncated { codec: CODEC });
        };
        if flg & FLG_VERSION_MASK != FLG_VERSION {
            return Err(CompressionError::corrupt(
                CODEC,
                format_args!("unsupported frame version in FLG {flg:#04x}"),
            ));
        }
        if flg & FLG_RESERVED != 0 || bd & BD_RESERVED != 0 {
            return Err(CompressionError::corrupt(
                CODEC,
                "reserved frame descriptor bits are set",
            ));
        }
        if flg & FLG_DICT_ID != 0 {
            return Err(CompressionError::corrupt(
                CODEC,
                "frames that need a dictionary are not supported",
            ));
        }
        let block_max = match (bd >> 4) & 0x07 {
            4 => 64 * 1024,
            5 => 256 * 1024,
            6 => 1024 * 1024,
            7 => 4 * 1024 * 1024,
            id => {
                return Err(CompressionError::corrupt(
                    CODEC,
                    format_args!("invalid block size id {id}"),
                ));
            }
        };
        let content_size = if flg & FLG_CONTENT_SIZE != 0 {
            let mut size = [0u8; 8];
            size.copy_from_slice(take(rest, 8)?);
            Some(u64::from_le_bytes(size))
        } else {
            None
        };
        let len = start.len() - rest.len();
        let &[checksum] = take(rest, 1)? else {
            return Err(CompressionError::Truncated { codec: CODEC });
        };
        if checksum != (xxh32(&start[..len], 0) >> 8) as u8 {
            return Err(CompressionError::corrupt(
                CODEC,
                "frame descriptor checksum mismatch",
            ));
        }
        Ok(Descriptor {
            flg,
            block_max,
            content_size,
        })
    }

    /// Decodes one frame after its magic, appending its content to `out`.
    fn decompress_frame(
        rest: &mut &[u8],
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<(), CompressionError> {
        let Descriptor {
            flg,
            block_max,
            content_size,
        } = read_descriptor(rest)?;
        let frame_start = out.len();
        if let Some(size) = content_size
            && !usize::try_from(size).is_ok_and(|size| size <= max_len - frame_start)
        {
            return Err(CompressionError::TooLarge {
                codec: CODEC,
                max_len,
            });
        }
        let linked = flg & FLG_INDEPENDENT == 0;
        loop {
            let header = take_u32(rest)?;
            if header == 0 {
                break;
            }
            let len = (header & !UNCOMPRESSED_BIT) as usize;
            if len > block_max {
                return Err(CompressionError::corrupt(
                    CODEC,
                    format_args!("block of {len} bytes exceeds the frame's maximum of {block_max}"),
                ));
            }
            let data = take(rest, len)?;
            if flg & FLG_BLOCK_CHECKSUM != 0 && take_u32(rest)? != xxh32(data, 0) {
                return Err(CompressionError::corrupt(CODEC, "block checksum mismatch"));
            }
            let budget = max_len - out.len();
            if header & UNCOMPRESSED_BIT != 0 {
                if len > budget {
                    return Err(CompressionError::TooLarge {
                        codec: CODEC,
                        max_len,
                    });
                }
                reserve_bounded(out, len, max_len);
                out.extend_from_slice(data);
            } else {
                decompress_block(
                    data,
                    out,
                    frame_start,
                    linked,
                    block_max.min(budget),
                    block_max,
                    max_len,
                )?;
            }
        }
        if let Some(size) = content_size
            && size != (out.len() - frame_start) as u64
        {
            return Err(CompressionError::corrupt(
                CODEC,
                format_args!(
                    "frame declares {size} bytes of content but holds {}",
                    out.len() - frame_start
                ),
            ));
        }
        if flg & FLG_CONTENT_CHECKSUM != 0 && take_u32(rest)? != xxh32(&out[frame_start..], 0) {
            return Err(CompressionError::corrupt(
                CODEC,
                "content checksum mismatch",
            ));
        }
        Ok(())
    }

    /// Appends one compressed block to `out`, in at most `space` bytes. Linked blocks may copy
    /// from the last 64 KiB of the frame's earlier output.
    fn decompress_block(
        data: &[u8],
        out: &mut Vec<u8>,
        frame_start: usize,
        linked: bool,
        space: usize,
        block_max: usize,
        max_len: usize,
    ) -> Result<(), CompressionError> {
        let start = out.len();
        reserve_bounded(out, space, max_len);
        out.resize(start + space, 0);
        let (history, target) = out.split_at_mut(start);
        let result = if linked {
            let history = &history[frame_start..];
            let dict = &history[history.len().saturating_sub(WINDOW)..];
            lz4_flex::block::decompress_into_with_dict(data, target, dict)
        } else {
            lz4_flex::block::decompress_into(data, target)
        };
        match result {
            Ok(written) => {
                out.truncate(start + written);
                Ok(())
            }
            Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) if space < block_max => {
                out.truncate(start);
                Err(CompressionError::TooLarge {
                    codec: CODEC,
                    max_len,
                })
            }
            Err(err) => {
                out.truncate(start);
                Err(CompressionError::corrupt(CODEC, err))
            }
        }
    }
}

/// XXH32, the checksum of LZ4 frames (<https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md>).
fn xxh32(data: &[u8], seed: u32) -> u32 {
    const P1: u32 = 0x9E37_79B1;
    const P2: u32 = 0x85EB_CA77;
    const P3: u32 = 0xC2B2_AE3D;
    const P4: u32 = 0x27D4_EB2F;
    const P5: u32 = 0x1656_67B1;
    fn le(bytes: &[u8]) -> u32 {
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }
    fn round(acc: u32, lane: u32) -> u32 {
        acc.wrapping_add(lane.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    }
    let mut stripes = data.chunks_exact(16);
    let mut hash = if data.len() >= 16 {
        let mut acc = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        for stripe in &mut stripes {
            for (lane, acc) in stripe.chunks_exact(4).zip(acc.iter_mut()) {
                *acc = round(*acc, le(lane));
            }
        }
        acc[0]
            .rotate_left(1)
            .wrapping_add(acc[1].rotate_left(7))
            .wrapping_add(acc[2].rotate_left(12))
            .wrapping_add(acc[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    // The length is added modulo 2^32, as the specification says.
    hash = hash.wrapping_add(data.len() as u32);
    let mut words = stripes.remainder().chunks_exact(4);
    for word in &mut words {
        hash = hash
            .wrapping_add(le(word).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
    }
    for &byte in words.remainder() {
        hash = hash
            .wrapping_add(u32::from(byte).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    hash ^= hash >> 15;
    hash = hash.wrapping_mul(P2);
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(P3);
    hash ^ (hash >> 16)
}

/// Zstandard: encoded and decoded with ruzstd (safe Rust), one frame at a time, with the frame
/// header checked here first.
///
/// ruzstd's encoder has one compressing level, its `Fastest`, about zstd's level 1: every
/// `compression.level` gives it (`docs/migrating.md` compares it with librdkafka's level 3).
/// The frame carries a checksum of its content, which decoders check. The encoder used before
/// was a machine translation of libzstd with several hundred `unsafe` blocks; a wrong encoding
/// would have been written, acknowledged and found only by a consumer, so safe code encodes.
mod zstd {
    use super::{
        Codec, CompressionError, Read, ReadError, initial_capacity, read_bounded, reserve_bounded,
    };
    use ruzstd::encoding::{CompressionLevel, FrameCompressor};

    const CODEC: Codec = Codec::Zstd;
    const MAGIC: u32 = 0xFD2F_B528;
    /// Skippable frames have magics 0x184D2A50 to 0x184D2A5F.
    const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
    const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
    /// The largest block of a frame (and so the least window that keeps every block legal).
    const BLOCK_MAX: u64 = 128 * 1024;

    /// Appends one frame of `input` to `out`; every level is ruzstd's one compressing level.
    pub(super) fn compress(input: &[u8], out: &mut Vec<u8>) {
        // Reading a slice and writing a vector cannot fail: the encoder's own unwraps of
        // them never fire. `Fastest` is the one level ruzstd implements; it panics on the
        // others, which are never asked for here.
        let mut compressor = FrameCompressor::new(CompressionLevel::Fastest);
        compressor.set_source(input);
        compressor.set_drain(&mut *out);
        compressor.compress();
    }

    pub(super) fn decompress(input: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
        if input.is_empty() {
            return Err(CompressionError::Truncated { codec: CODEC });
        }
        // Each frame makes room for itself (its declared size, when it declares one).
        let mut out = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            let Some((magic, after)) = rest.split_first_chunk::<4>() else {
                return Err(CompressionError::Truncated { codec: CODEC });
            };
            let magic = u32::from_le_bytes(*magic);
            if magic & SKIPPABLE_MASK == SKIPPABLE_MAGIC {
                let Some((len, after)) = after.split_first_chunk::<4>() else {
                    return Err(CompressionError::Truncated { codec: CODEC });
                };
                let len = u32::from_le_bytes(*len) as usize;
                if after.len() < len {
                    return Err(CompressionError::Truncated { codec: CODEC });
                }
                rest = &after[len..];
            } else if magic == MAGIC {
                rest = decompress_frame(rest, &mut out, max_len)?;
            } else {
                return Err(CompressionError::corrupt(
                    CODEC,
                    format_args!("bad frame magic {magic:#010x}"),
                ));
            }
        }
        Ok(out)
    }

    /// What the frame header says, as far as bounding the output is concerned.
    struct FrameHeader {
        /// The header's length in bytes, magic included.
        len: usize,
        /// Where the window descriptor byte is, if the frame has one.
        window_descriptor_at: Option<usize>,
        /// The window size it asks for (the content size for single-segment frames).
        window: u64,
        /// The declared content size.
        content_size: Option<u64>,
    }

    /// Parses the header of the frame at the start of `frame` (magic checked by the caller).
    fn parse_header(frame: &[u8]) -> Result<FrameHeader, CompressionError> {
        let Some(&descriptor) = frame.get(4) else {
            return Err(CompressionError::Truncated { codec: CODEC });
        };
        if descriptor & 0x08 != 0 {
            return Err(CompressionError::corrupt(
                CODEC,
                "reserved frame header bit is set",
            ));
        }
        let single_segment = descriptor & 0x20 != 0;
        let dict_id_len = [0, 1, 2, 4][usize::from(descriptor & 0x03)];
        let content_size_len = match descriptor >> 6 {
            0 if single_segment => 1,
            0 => 0,
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let window_descriptor_at = (!single_segment).then_some(5);
        let len = 5 + usize::from(!single_segment) + dict_id_len + content_size_len;
        let Some(header) = frame.get(..len) else {
            return Err(CompressionError::Truncated { codec: CODEC });
        };
        let content_size = (content_size_len > 0).then(|| {
            let mut size = [0u8; 8];
            size[..content_size_len].copy_from_slice(&header[len - content_size_len..]);
            let size = u64::from_le_bytes(size);
            // A 2-byte field stores the size minus 256.
            if content_size_len == 2 {
                size + 256
            } else {
                size
            }
        });
        let window = match window_descriptor_at {
            Some(at) => window_size(header[at]),
            None => content_size.unwrap_or(0),
        };
        Ok(FrameHeader {
            len,
            window_descriptor_at,
            window,
            content_size,
        })
    }

    /// The window size a window descriptor byte stands for.
    fn window_size(descriptor: u8) -> u64 {
        let base = 1u64 << (10 + (descriptor >> 3));
        base + (base / 8) * u64::from(descriptor & 0x07)
    }

    /// The smallest window descriptor byte whose window is at least `window`.
    fn window_descriptor_for(window: u64) -> u8 {
        (0..=u8::MAX)
            .find(|&descriptor| window_size(descriptor) >= window)
            .unwrap_or(u8::MAX)
    }

    /// Decodes the frame at the start of `frame`, appending its content to `out`, and returns
    /// the input after it.
    fn decompress_frame<'a>(
        frame: &'a [u8],
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<&'a [u8], CompressionError> {
        let header = parse_header(frame)?;
        let budget = max_len - out.len();
        if header.content_size.is_some_and(|size| size > budget as u64) {
            return Err(CompressionError::TooLarge {
                codec: CODEC,
                max_len,
            });
        }
        let expected = header.content_size.map_or_else(
            || initial_capacity(frame.len(), budget),
            |size| size as usize,
        );
        reserve_bounded(out, expected, max_len);
        // The decoder reserves the whole window up front. A frame cannot refer further back than
        // its own output, which may exceed neither the budget nor the declared content size, so
        // a window larger than those (but at least a block) is lowered in a copy of the header:
        // every valid frame decodes the same, and a hostile header cannot make the decoder
        // reserve more.
        let mut header_bytes = [0u8; 18];
        header_bytes[..header.len].copy_from_slice(&frame[..header.len]);
        let window_cap = header
            .content_size
            .unwrap_or(u64::MAX)
            .min(budget as u64)
            .max(BLOCK_MAX);
        let max_window = match header.window_descriptor_at {
            Some(at) => {
                if header.window > window_cap {
                    header_bytes[at] = window_descriptor_for(window_cap);
                }
                window_size(header_bytes[at])
            }
            None => header.window,
        };
        let mut source = (&header_bytes[..header.len]).chain(&frame[header.len..]);
        let mut decoder = ruzstd::decoding::FrameDecoder::new();
        decoder.set_max_window_size(max_window);
        let frame_start = out.len();
        let result =
            match ruzstd::decoding::StreamingDecoder::new_with_decoder(&mut source, &mut decoder) {
                Ok(mut reader) => read_bounded(&mut reader, out, max_len),
                Err(err) => {
                    let detail = err.to_string();
                    return Err(error_at(&detail, source_exhausted(&source)));
                }
            };
        match result {
            Ok(()) => {}
            Err(ReadError::TooLarge) => {
                return Err(CompressionError::TooLarge {
                    codec: CODEC,
                    max_len,
                });
            }
            Err(ReadError::Io(err)) => return Err(error_at(&err, source_exhausted(&source))),
        }
        if let (Some(expected), Some(actual)) = (
            decoder.get_checksum_from_data(),
            decoder.get_calculated_checksum(),
        ) && expected != actual
        {
            return Err(CompressionError::corrupt(
                CODEC,
                "content checksum mismatch",
            ));
        }
        let produced = (out.len() - frame_start) as u64;
        if let Some(size) = header.content_size
            && size != produced
        {
            return Err(CompressionError::corrupt(
                CODEC,
                format_args!("frame declares {size} bytes of content but holds {produced}"),
            ));
        }
        Ok(source.into_inner().1)
    }

    fn source_exhausted(source: &std::io::Chain<&[u8], &[u8]>) -> bool {
        let (header, body) = source.get_ref();
        header.is_empty() && body.is_empty()
    }

    /// Maps a decoder error: one that happens with all input consumed is truncation.
    fn error_at(err: &dyn std::fmt::Display, exhausted: bool) -> CompressionError {
        if exhausted {
            CompressionError::Truncated { codec: CODEC }
        } else {
            CompressionError::corrupt(CODEC, err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;
    const COMPRESSED: [Codec; 4] = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];

    /// JSON lines like the values of a small record batch (the reference vectors below were
    /// made from `sample(6)` and `repeat()`).
    fn sample(records: usize) -> Vec<u8> {
        const EVENTS: [&str; 5] = ["click", "view", "purchase", "login", "search"];
        let mut out = Vec::new();
        for i in 0..records {
            out.extend_from_slice(
                format!(
                    "{{\"id\":{},\"user\":\"user-{:03}\",\"event\":\"{}\",\"amount\":{}.{:02},\"ok\":{}}}\n",
                    1000 + i,
                    i * 37 % 1000,
                    EVENTS[i % EVENTS.len()],
                    i * 7 % 500,
                    i % 100,
                    i % 3 == 0
                )
                .as_bytes(),
            );
        }
        out
    }

    /// 68,960 bytes: more than one block of every codec, yet small once compressed.
    fn repeat() -> Vec<u8> {
        sample(6).repeat(160)
    }

    /// Incompressible bytes (xorshift).
    fn noise(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed.to_le_bytes()[3]
            })
            .collect()
    }

    fn unhex(hex: &str) -> Vec<u8> {
        let digits: Vec<u8> = hex.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| {
                let text = std::str::from_utf8(pair).expect("hex digits are ASCII");
                u8::from_str_radix(text, 16).expect("two hex digits")
            })
            .collect()
    }

    /// Every encoder at every level writes what its decoder reads back to the byte, for
    /// empty, small, repetitive, incompressible and block-crossing inputs (the fuzz target
    /// `codec_roundtrip` does the same on arbitrary inputs).
    #[test]
    fn every_encoder_at_every_level_round_trips() {
        let inputs = [
            Vec::new(),
            b"x".to_vec(),
            sample(6),
            repeat(),
            noise(70_000, 7),
            [sample(40), noise(200_000, 3), repeat()].concat(),
        ];
        for codec in COMPRESSED {
            for level in [-1, 0, 1, 3, 9, 12, 22, 40] {
                for input in &inputs {
                    let mut out = Vec::new();
                    compress(codec, level, input, &mut out).expect("compresses");
                    let back = decompress(codec, &out, input.len()).expect("decompresses");
                    assert!(
                        back == *input,
                        "{codec:?} at level {level}: {} bytes came back as {}",
                        input.len(),
                        back.len()
                    );
                }
            }
        }
    }

    fn compressed(codec: Codec, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        compress(codec, -1, input, &mut out).expect("compresses");
        out
    }

    fn assert_too_large(result: Result<Vec<u8>, CompressionError>, codec: Codec) {
        match result {
            Err(CompressionError::TooLarge { codec: got, .. }) => assert_eq!(got, codec),
            other => panic!("{codec}: expected TooLarge, got {other:?}"),
        }
    }

    fn assert_corrupt(result: Result<Vec<u8>, CompressionError>, codec: Codec) {
        match result {
            Err(
                CompressionError::Corrupt { codec: got, .. }
                | CompressionError::Truncated { codec: got },
            ) => {
                assert_eq!(got, codec);
            }
            other => panic!("{codec}: expected a corrupt or truncated error, got {other:?}"),
        }
    }

    // Made by the Java client's own codecs (kafka-clients 4.3.1 `Compression.*().build()
    // .wrapForOutput(.., magic 2)`: snappy-java 1.1.10.7, lz4-java 1.10.2, zstd-jni 1.5.6-10,
    // java.util.zip), from an empty input, `sample(6)` and `repeat()`.
    const JAVA_EMPTY_GZIP: &str = "1f8b08000000000000ff03000000000000000000";
    const JAVA_EMPTY_SNAPPY: &str = "82534e41505059000000000100000001";
    const JAVA_EMPTY_LZ4: &str = "04224d1860408200000000";
    const JAVA_EMPTY_ZSTD: &str = "28b52ffd2000010000";
    const JAVA_SMALL_GZIP: &str = concat!(
        "1f8b08000000000000ff7dd0c10a83300c06e0fb1e2367571aad28be4de9b2ade87458ab07d9bbaf190cb222",
        "3b95fee4ff48bb83bf40875aeb0262a019bacf714e0114402b8d4b8adce05d9feef631450eb4e2f9a9876e99",
        "23bd4efb57c14ca91aa1ac9e3681348ac719b9da2148a5cc94c608e5196777b78184844671e788aa7e294414",
        "d430ddfc289c1215170ede6532c6b4820964d34ad26915378ef6a933a8adff7c73552b2e08e70db146a6adaf",
        "010000",
    );
    const JAVA_SMALL_SNAPPY: &str = concat!(
        "82534e41505059000000000100000001000000e1af03447b226964223a313030302c2275736572223a050768",
        "2d303030222c226576656e74223a22636c69636b222c22616d6f75011104302e0130246f6b223a747275657d",
        "0a154600313a46000433371d460c766965771d4504372e012f01450c66616c732e460000323a46000437341d",
        "461c70757263686173651d4a0831342e01344e4b000033364b00083131311d4b106c6f67696e1d480832312e",
        "013101483ad80000343a47000434381d47147365617263682e480004382e013201483edb0000353a49000438",
        "351d493e67014433352e30352c226f6b223a66616c73657d0a",
    );
    const JAVA_SMALL_LZ4: &str = concat!(
        "04224d18604082d5000000f1037b226964223a313030302c2275736572223a0700f00c2d303030222c226576",
        "656e74223a22636c69636b222c22616d6f75110020302e3000a56f6b223a747275657d0a46001b3146002733",
        "3746004776696577450042372e303145004866616c7346001b32460027373446008770757263686173654a00",
        "5f31342e30324b00031a334b00373131314b00576c6f67696e48005232312e303348000bd8001b3447002734",
        "38470068736561726368480042382e303448000cdb001b35490027383549000c67015433352e30354800506c",
        "73657d0a00000000",
    );
    const JAVA_SMALL_ZSTD: &str = concat!(
        "28b52ffd00584c050052081b1b80b73ad8f17c727c8bbf6428249181299d2fdbb6c83ad098228301ec882966",
        "285b47c6f1a25b692c5dea489302094ba2aa2a1d2d5de98e17a7611549266ea047c56161532805247646a619",
        "597c7ef46646994bc1f9187930796e66946dd6c7ff03cd71e5f4f9afcd02684419005b3b546da1008c01f9bc",
        "060518c8127801c6807c5bd3030cbd04a38131205f27946e82e1c040e8581278864190600830103a7b124ad3",
        "55ec010000",
    );
    const JAVA_REPEAT_GZIP: &str = concat!(
        "1f8b08000000000000ffedd1c14ac3401440d1bd9f31eb1a326d4a4bff26d451436b2b4d5317c57f37230863",
        "08ae5d9c55c863de6592730fdd53d8c5baae1761e8d325ecbe1f8fe3202c42baa5d3751ced8fddfe30beb76f",
        "e7210fea2a9f3f1fc2ee7a19d2e7c3fda7122795d5a6a8dcbaf4514436553e9e23cfedb12f2bcb4965d31495",
        "f7e1b27f6dfb54946253e59db9d4ea772ac658a48ee797ee547496b1ca0b33dfd54c32cdb6c8f4a91daf5476",
        "b655de98bbcf7a12daaefff8cdab759517e63ab870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b17",
        "2e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b",
        "172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c285",
        "0b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2",
        "850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1",
        "c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870",
        "e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb870e1c2850b172e5cb8",
        "70e1c2850b172e5cb8fe27d71765e8b7aa600d0100",
    );
    const JAVA_REPEAT_SNAPPY: &str = concat!(
        "82534e41505059000000000100000001000006c5808002447b226964223a313030302c2275736572223a0507",
        "682d303030222c226576656e74223a22636c69636b222c22616d6f75011104302e0130246f6b223a74727565",
        "7d0a154600313a46000433371d460c766965771d4504372e012f01450c66616c732e460000323a4600043734",
        "1d461c70757263686173651d4a0831342e01344e4b000033364b00083131311d4b106c6f67696e1d48083231",
        "2e013101483ad80000343a47000434381d47147365617263682e480004382e013201483edb0000353a490004",
        "38351d493e67010833352e01314e4800feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf0131af000006c8808002",
        "1875736572223a220107682d303030222c226576656e74223a22636c69636b222c22616d6f75011168302e30",
        "302c226f6b223a747275657d0a7b226964223a313030312c053f15460433371d460c766965771d4504372e01",
        "2f01450c66616c732e460000323a46000437341d461c70757263686173651d4a0831342e01344e4b00003336",
        "4b00083131311d4b106c6f67696e1d480832312e013101483ad80000343a47000434381d4714736561726368",
        "2e480004382e013201483edb0000353a49000438351d493e67010833352e01314e48000030364800feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf0125af00000164e01a64303030222c226576656e74223a22636c69636b22",
        "2c22616d6f75011188302e30302c226f6b223a747275657d0a7b226964223a313030312c2275736572223a22",
        "01070c2d3033371d460c766965771d4504372e012f01450c66616c732e460000323a46000437341d461c7075",
        "7263686173651d4a0831342e01344e4b000033364b00083131311d4b106c6f67696e1d480832312e01310148",
        "3ad80000343a47000434381d47147365617263682e480004382e013201483edb0000353a49000438351d493e",
        "67010833352e01314e48000030364800feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01fe",
        "af01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01",
        "feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf01feaf",
        "01feaf01feaf01feaf01feaf01feaf01feaf01feaf01c2af01",
    );
    const JAVA_REPEAT_LZ4: &str = concat!(
        "04224d18604082d9010000f1037b226964223a313030302c2275736572223a0700f00c2d303030222c226576",
        "656e74223a22636c69636b222c22616d6f75110020302e3000a56f6b223a747275657d0a46001b3146002733",
        "3746004776696577450042372e303145004866616c7346001b32460027373446008770757263686173654a00",
        "5f31342e30324b00031a334b00373131314b00576c6f67696e48005232312e303348000bd8001b3447002734",
        "38470068736561726368480042382e303448000cdb001b35490027383549000c67015f33352e30354800030f",
        "af01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff2f50757365722d",
        "e5000000f00b303030222c226576656e74223a22636c69636b222c22616d6f751100f113302e30302c226f6b",
        "223a747275657d0a7b226964223a313030312c2275736572223a0700472d3033374600477669657745002037",
        "2e2f000045004866616c7346001b32460027373446008770757263686173654a005f31342e30324b00031a33",
        "4b00373131314b00576c6f67696e48005232312e303348000bd8001b34470027343847006873656172636848",
        "0042382e303448000cdb001b35490027383549000c67015f33352e30354800031a3048000faf01ffffffffff",
        "ffffffffffffa4506c73657d0a00000000",
    );
    const JAVA_REPEAT_ZSTD: &str = concat!(
        "28b52ffd00588c050062481b1b80b73ad8f17c727c8bbf6428249181299d2fdbb6c83ad09822830167474c31",
        "43d93a328e17dd4a63e952479a144858125555e968e94a77bc380dab483271033d2a0e0b9b422920b13332cd",
        "c8e2f3a33733ca5c0acec7c883c97333a36cb33efe1f688e2ba7cf7f6d164023021b00960bb22b0790efd614",
        "555b280063403eaf410106b2045e803120dfd6f400432fc168600cc8d709a59b603830103a96049e61102418",
        "020c84ce9e84d274153b010000",
    );
    // RAW_SMALL_SNAPPY: the C snappy library's raw block (the format librdkafka writes).
    // CLI_SMALL_GZIP: `gzip -9` (with a file name in the header).
    // CLI_SMALL_LZ4: `lz4 -BX --content-size` (block checksums, content size and checksum).
    // CLI_REPEAT_LINKED_LZ4: `lz4 -B4 -BD -BX` (linked 64 KiB blocks, block and content checksums).
    // CLI_SMALL_ZSTD_19, CLI_REPEAT_ZSTD_22: `zstd -19`, `zstd --ultra -22` (zstd 1.5.4).
    const RAW_SMALL_SNAPPY: &str = concat!(
        "af03447b226964223a313030302c2275736572223a0507682d303030222c226576656e74223a22636c69636b",
        "222c22616d6f75011104302e0130246f6b223a747275657d0a154600313a46000433371d460c766965771d45",
        "04372e012f01450c66616c732e460000323a46000437341d461c70757263686173651d4a0831342e01344e4b",
        "000033364b00083131311d4b106c6f67696e1d480832312e013101483ad80000343a47000434381d47147365",
        "617263682e480004382e013201483edb0000353a49000438351d493e67014433352e30352c226f6b223a6661",
        "6c73657d0a",
    );
    const CLI_SMALL_GZIP: &str = concat!(
        "1f8b0808ce1f0c6b0203736d616c6c2e62696e007dd0c10a83300c06e0fb1e2367571aad28be4de9b2ade874",
        "58ab07d9bbaf190cb2223b95fee4ff48bb83bf40875aeb0262a019bacf714e0114402b8d4b8adce05d9feef6",
        "31450eb4e2f9a9876e9923bd4efb57c14ca91aa1ac9e3681348ac719b9da2148a5cc94c608e5196777b78184",
        "844671e788aa7e294414d430ddfc289c1215170ede6532c6b4820964d34ad26915378ef6a933a8adff7c7355",
        "2b2e08e70db146a6adaf010000",
    );
    const CLI_SMALL_LZ4: &str = concat!(
        "04224d187c40af010000000000008ad5000000f1037b226964223a313030302c2275736572223a0700f00c2d",
        "303030222c226576656e74223a22636c69636b222c22616d6f75110020302e3000a56f6b223a747275657d0a",
        "46001b31460027333746004776696577450042372e303145004866616c7346001b3246002737344600877075",
        "7263686173654a005f31342e30324b00031a334b00373131314b00576c6f67696e48005232312e303348000b",
        "d8001b344700273438470068736561726368480042382e303448000cdb001b35490027383549000c67015433",
        "352e30354800506c73657d0a158279a2000000007f4bd357",
    );
    const CLI_REPEAT_LINKED_LZ4: &str = concat!(
        "04224d185440aedb010000f1037b226964223a313030302c2275736572223a0700f5202d303030222c226576",
        "656e74223a22636c69636b222c22616d6f756e74223a302e30302c226f6b223a747275657d0a46001b314600",
        "27333746004776696577450042372e303145004866616c7346001b3246002737344600877075726368617365",
        "4a005f31342e30324b00031a334b00373131314b00576c6f67696e48005232312e303348000bd8001b344700",
        "273438470068736561726368480042382e303448000cdb001b35490027383549000c67015f33352e30354800",
        "030faf01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff2f50757365",
        "722d36084ca1170000000fe8ffffffffffffffffffffffffffff55506c73657d0a422d7f250000000098c0d8",
        "67",
    );
    const CLI_SMALL_ZSTD_19: &str = concat!(
        "28b52ffd64af00fd040002c8191870ad0e9289162e7b88be25a3aa0a3cb823565e56f0ff2eb0eecb3147b8f6",
        "452071c2a644e3c6be5860e4d128cccc84afc64d21126775da2050051afc35442da1813130759dcfdba459f5",
        "afd76681ab36895289fbf6611aea55fb3f783b9bd655fff96d21570a1720e0289809da01e5d06a439c8e4da8",
        "6479c118c877dbd78b463346f93a28dd683803dd3179661064431a6867122b307960baa01df286263f",
    );
    const CLI_REPEAT_ZSTD_22: &str = concat!(
        "28b52ffda4600d01001d050042881a1870ad0e9289162e7b88be25a3aa0a3cb823565e56f0ff2eb0eecb3147",
        "b8f6452071c2a644e3c6be5860e4d128cccc84afc64d21126775da2050051afc35442da1813130759dcfdba4",
        "59f5afbf7d98da2c70d526512a71df3e4c43bd6aff076f67d3baea3fbf2de44a011720f02a98a41dae0bb2c9",
        "c13bb4da10ddb1c9942c5e1853f96efb7a6174c6245f07a59b8637b01d13cf0c8230848174f6e44bd3e5ed2a",
        "05edfa",
    );

    #[test]
    fn codec_ids_names_and_attributes() {
        for (id, codec) in (0i16..).zip(Codec::ALL) {
            assert_eq!(codec.id(), id);
            assert_eq!(Codec::from_attributes(id).expect("known id"), codec);
            // Only the low 3 bits name the codec (timestamp type, transactional, control follow).
            assert_eq!(
                Codec::from_attributes(id | 0x0078).expect("known id"),
                codec
            );
            assert_eq!(Codec::from_name(codec.name()), Some(codec));
            assert_eq!(codec.to_string(), codec.name());
        }
        assert_eq!(Codec::default(), Codec::None);
        for id in 5..=7 {
            assert!(
                matches!(Codec::from_attributes(id), Err(CompressionError::UnknownCodec { id: got }) if got == id)
            );
        }
        for name in [
            "", "GZIP", "Snappy", "lz4hc", "zstd ", "inherit", "producer",
        ] {
            assert_eq!(Codec::from_name(name), None, "{name}");
        }
    }

    #[test]
    fn round_trips_empty_small_and_one_mib_inputs() {
        let one_mib_json: Vec<u8> = sample(20_000).into_iter().cycle().take(MIB).collect();
        let inputs = [Vec::new(), sample(6), one_mib_json, noise(MIB, 7)];
        for codec in Codec::ALL {
            for input in &inputs {
                let packed = compressed(codec, input);
                let unpacked = decompress(codec, &packed, input.len()).expect("decompresses");
                assert!(
                    unpacked == *input,
                    "{codec}: {} bytes do not round-trip",
                    input.len()
                );
                assert!(
                    unpacked.capacity() <= input.len().max(1),
                    "{codec}: capacity {}",
                    unpacked.capacity()
                );
                if !input.is_empty() {
                    assert_too_large(decompress(codec, &packed, input.len() - 1), codec);
                }
            }
        }
    }

    #[test]
    fn every_level_round_trips_and_low_levels_are_rejected() {
        let input = sample(300);
        for codec in Codec::ALL {
            for level in (-1..=12).chain([19, 22, 100]) {
                let mut packed = Vec::new();
                compress(codec, level, &input, &mut packed).expect("compresses");
                assert_eq!(
                    decompress(codec, &packed, input.len()).expect("decompresses"),
                    input,
                    "{codec} level {level}"
                );
            }
            let mut packed = Vec::new();
            assert!(matches!(
                compress(codec, -2, &input, &mut packed),
                Err(CompressionError::InvalidLevel { level: -2, .. })
            ));
        }
    }

    #[test]
    fn compress_appends_to_what_out_holds() {
        let input = sample(50);
        for codec in Codec::ALL {
            let mut out = b"prefix".to_vec();
            compress(codec, -1, &input, &mut out).expect("compresses");
            assert_eq!(&out[..6], b"prefix");
            assert_eq!(
                decompress(codec, &out[6..], input.len()).expect("decompresses"),
                input
            );
        }
    }

    #[test]
    fn writes_the_formats_the_java_client_writes() {
        let input = repeat();
        let gzip = compressed(Codec::Gzip, &input);
        assert_eq!(gzip[..3], [0x1f, 0x8b, 0x08]);
        // snappy-java framing: magic, version 1, compatible version 1, 32 KiB blocks.
        let snappy = compressed(Codec::Snappy, &input);
        assert_eq!(snappy[..16], unhex(JAVA_EMPTY_SNAPPY));
        let mut rest = &snappy[16..];
        let mut blocks = Vec::new();
        while let Some((len, after)) = rest.split_first_chunk::<4>() {
            let len = u32::from_be_bytes(*len) as usize;
            blocks.push(snap::raw::decompress_len(&after[..len]).expect("raw block"));
            rest = &after[len..];
        }
        assert_eq!(blocks, [32 * 1024, 32 * 1024, input.len() - 64 * 1024]);
        // LZ4: FLG 0x60 (version 1, independent blocks), BD 0x40 (64 KiB), as lz4-java writes.
        let lz4 = compressed(Codec::Lz4, &input);
        assert_eq!(lz4[..7], unhex(JAVA_EMPTY_LZ4)[..7]);
        let zstd = compressed(Codec::Zstd, &input);
        assert_eq!(zstd[..4], [0x28, 0xb5, 0x2f, 0xfd]);
        // Empty input: the same bytes as the Java client, but zstd (content size and checksum).
        assert_eq!(compressed(Codec::Snappy, &[]), unhex(JAVA_EMPTY_SNAPPY));
        assert_eq!(compressed(Codec::Lz4, &[]), unhex(JAVA_EMPTY_LZ4));
    }

    #[test]
    fn reads_what_the_java_client_writes() {
        let cases = [
            (Codec::Gzip, JAVA_EMPTY_GZIP, Vec::new()),
            (Codec::Snappy, JAVA_EMPTY_SNAPPY, Vec::new()),
            (Codec::Lz4, JAVA_EMPTY_LZ4, Vec::new()),
            (Codec::Zstd, JAVA_EMPTY_ZSTD, Vec::new()),
            (Codec::Gzip, JAVA_SMALL_GZIP, sample(6)),
            (Codec::Snappy, JAVA_SMALL_SNAPPY, sample(6)),
            (Codec::Lz4, JAVA_SMALL_LZ4, sample(6)),
            (Codec::Zstd, JAVA_SMALL_ZSTD, sample(6)),
            (Codec::Gzip, JAVA_REPEAT_GZIP, repeat()),
            (Codec::Snappy, JAVA_REPEAT_SNAPPY, repeat()),
            (Codec::Lz4, JAVA_REPEAT_LZ4, repeat()),
            (Codec::Zstd, JAVA_REPEAT_ZSTD, repeat()),
        ];
        for (codec, hex, expected) in cases {
            let packed = unhex(hex);
            assert_eq!(
                decompress(codec, &packed, expected.len()).expect("decompresses"),
                expected,
                "{codec}"
            );
            if !expected.is_empty() {
                assert_too_large(decompress(codec, &packed, expected.len() - 1), codec);
            }
        }
    }

    #[test]
    fn reads_what_librdkafka_and_the_reference_tools_write() {
        let cases = [
            (Codec::Snappy, RAW_SMALL_SNAPPY, sample(6)),
            (Codec::Gzip, CLI_SMALL_GZIP, sample(6)),
            (Codec::Lz4, CLI_SMALL_LZ4, sample(6)),
            (Codec::Lz4, CLI_REPEAT_LINKED_LZ4, repeat()),
            (Codec::Zstd, CLI_SMALL_ZSTD_19, sample(6)),
            (Codec::Zstd, CLI_REPEAT_ZSTD_22, repeat()),
        ];
        for (codec, hex, expected) in cases {
            let packed = unhex(hex);
            assert_eq!(
                decompress(codec, &packed, expected.len()).expect("decompresses"),
                expected,
                "{codec}"
            );
            assert_too_large(decompress(codec, &packed, expected.len() - 1), codec);
        }
        // A raw snappy block of any size (librdkafka writes one for the whole batch).
        let big = sample(3000);
        let raw = snap::raw::Encoder::new()
            .compress_vec(&big)
            .expect("compresses");
        assert_eq!(
            decompress(Codec::Snappy, &raw, big.len()).expect("decompresses"),
            big
        );
    }

    #[test]
    fn reads_concatenated_gzip_members_snappy_streams_and_frames() {
        let (first, second) = (sample(10), repeat());
        let mut expected = first.clone();
        expected.extend_from_slice(&second);
        for codec in COMPRESSED {
            let mut packed = compressed(codec, &first);
            packed.extend_from_slice(&compressed(codec, &second));
            assert_eq!(
                decompress(codec, &packed, expected.len()).expect("decompresses"),
                expected,
                "{codec}"
            );
            assert_too_large(decompress(codec, &packed, expected.len() - 1), codec);
        }
        // Skippable frames (LZ4 and zstd share the magic range), before, between and after.
        let skippable = unhex("5a2a4d1803000000616263");
        for codec in [Codec::Lz4, Codec::Zstd] {
            let mut packed = skippable.clone();
            packed.extend_from_slice(&compressed(codec, &first));
            packed.extend_from_slice(&skippable);
            packed.extend_from_slice(&compressed(codec, &second));
            packed.extend_from_slice(&skippable);
            assert_eq!(
                decompress(codec, &packed, expected.len()).expect("decompresses"),
                expected,
                "{codec}"
            );
            // A skippable frame that claims more bytes than there are.
            assert_corrupt(
                decompress(codec, &packed[..packed.len() - 1], expected.len()),
                codec,
            );
        }
    }

    #[test]
    fn zip_bombs_fail_once_output_passes_max_len() {
        let zeros = vec![0u8; 16 * MIB];
        for codec in Codec::ALL {
            let bomb = compressed(codec, &zeros);
            assert_too_large(decompress(codec, &bomb, MIB), codec);
            assert_too_large(decompress(codec, &bomb, 0), codec);
        }
        // A raw snappy block declaring 4 GiB (varint ff ff ff ff 0f) and holding nothing.
        assert_too_large(
            decompress(Codec::Snappy, &unhex("ffffffff0f00"), MIB),
            Codec::Snappy,
        );
        let mut xerial = unhex(JAVA_EMPTY_SNAPPY);
        xerial.extend_from_slice(&unhex("00000006ffffffff0f00"));
        assert_too_large(decompress(Codec::Snappy, &xerial, MIB), Codec::Snappy);
        // An LZ4 frame whose header declares a content size of 2^64 - 1.
        let mut descriptor = unhex("68 40 ffffffffffffffff");
        descriptor.push((xxh32(&descriptor, 0) >> 8) as u8);
        let mut lz4 = unhex("04224d18");
        lz4.extend_from_slice(&descriptor);
        lz4.extend_from_slice(&[0; 4]);
        assert_too_large(decompress(Codec::Lz4, &lz4, MIB), Codec::Lz4);
        // A zstd frame whose header declares 2^40 bytes of content.
        assert_too_large(
            decompress(
                Codec::Zstd,
                &unhex("28b52ffde0 0000000000010000 290000"),
                MIB,
            ),
            Codec::Zstd,
        );
    }

    #[test]
    fn zstd_windows_beyond_max_len_cost_nothing_but_still_decode() {
        // A frame asking for a 1 TiB window (descriptor 0xf0), holding one raw block "hello".
        let frame = unhex("28b52ffd00f0 290000 68656c6c6f");
        assert_eq!(
            decompress(Codec::Zstd, &frame, 5).expect("decompresses"),
            b"hello"
        );
        assert_too_large(decompress(Codec::Zstd, &frame, 4), Codec::Zstd);
        // Java's frames ask for a 2 MiB window (descriptor 0x58) whatever the batch size.
        let java = unhex(JAVA_REPEAT_ZSTD);
        assert_eq!(java[5], 0x58);
        assert_eq!(
            decompress(Codec::Zstd, &java, repeat().len()).expect("decompresses"),
            repeat()
        );
    }

    #[test]
    fn truncated_input_fails() {
        let input = repeat();
        for codec in COMPRESSED {
            let packed = compressed(codec, &input);
            for len in (0..packed.len()).step_by(7).chain([packed.len() - 1]) {
                match decompress(codec, &packed[..len], input.len()) {
                    Err(CompressionError::Truncated { .. } | CompressionError::Corrupt { .. }) => {}
                    // snappy-java streams have no end marker: a cut between blocks is a shorter
                    // valid stream, for snappy-java as here.
                    Ok(prefix) if codec == Codec::Snappy => assert!(input.starts_with(&prefix)),
                    other => panic!("{codec}: {len} of {} bytes gave {other:?}", packed.len()),
                }
            }
        }
        for (codec, hex) in [
            (Codec::Gzip, JAVA_SMALL_GZIP),
            (Codec::Lz4, JAVA_SMALL_LZ4),
            (Codec::Zstd, JAVA_SMALL_ZSTD),
            (Codec::Lz4, CLI_SMALL_LZ4),
            (Codec::Zstd, CLI_SMALL_ZSTD_19),
        ] {
            let packed = unhex(hex);
            for len in 0..packed.len() {
                assert_corrupt(decompress(codec, &packed[..len], MIB), codec);
            }
        }
        assert!(matches!(
            decompress(Codec::Snappy, &[], MIB),
            Err(CompressionError::Truncated { .. })
        ));
    }

    #[test]
    fn garbage_and_corruption_fail_without_panicking() {
        for codec in COMPRESSED {
            for seed in 1..50 {
                let garbage = noise(usize::try_from(seed).expect("small") * 13, seed);
                assert!(
                    decompress(codec, &garbage, MIB).is_err(),
                    "{codec}: garbage {seed} decoded"
                );
            }
        }
        // Bit flips anywhere must give an error or some output, never a panic or more than max_len.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for (codec, hex) in [
            (Codec::Gzip, JAVA_REPEAT_GZIP),
            (Codec::Snappy, JAVA_REPEAT_SNAPPY),
            (Codec::Lz4, JAVA_REPEAT_LZ4),
            (Codec::Lz4, CLI_REPEAT_LINKED_LZ4),
            (Codec::Zstd, JAVA_REPEAT_ZSTD),
            (Codec::Zstd, CLI_REPEAT_ZSTD_22),
        ] {
            let packed = unhex(hex);
            for _ in 0..300 {
                let mut mutated = packed.clone();
                for _ in 0..3 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let at = usize::try_from(seed % mutated.len() as u64).expect("in range");
                    mutated[at] ^= 1 << (seed >> 61);
                }
                if let Ok(out) = decompress(codec, &mutated, 2 * MIB) {
                    assert!(out.len() <= 2 * MIB);
                }
            }
        }
        // Checked fields: magic numbers, gzip's CRC-32, the LZ4 header checksum, content checksums.
        // Flips the lowest bit of byte `at` (counted from the end when `from_end`).
        let flip = |hex: &str, at: usize, from_end: bool| {
            let mut packed = unhex(hex);
            let at = if from_end { packed.len() - 1 - at } else { at };
            packed[at] ^= 0x01;
            packed
        };
        let len = 1usize << 20;
        assert_corrupt(
            decompress(Codec::Gzip, &flip(JAVA_SMALL_GZIP, 0, false), len),
            Codec::Gzip,
        );
        assert_corrupt(
            decompress(Codec::Gzip, &flip(JAVA_SMALL_GZIP, 7, true), len),
            Codec::Gzip,
        );
        assert_corrupt(
            decompress(Codec::Lz4, &flip(JAVA_SMALL_LZ4, 0, false), len),
            Codec::Lz4,
        );
        assert_corrupt(
            decompress(Codec::Lz4, &flip(JAVA_SMALL_LZ4, 6, false), len),
            Codec::Lz4,
        );
        assert_corrupt(
            decompress(Codec::Zstd, &flip(JAVA_SMALL_ZSTD, 0, false), len),
            Codec::Zstd,
        );
        for (codec, hex) in [
            (Codec::Gzip, JAVA_SMALL_GZIP),
            (Codec::Lz4, CLI_SMALL_LZ4),
            (Codec::Zstd, CLI_SMALL_ZSTD_19),
        ] {
            // The last byte of the trailer: gzip's length, LZ4's and zstd's content checksums.
            let mut packed = unhex(hex);
            if let Some(last) = packed.last_mut() {
                *last ^= 0x80;
            }
            assert_corrupt(decompress(codec, &packed, len), codec);
        }
        let mut ours = compressed(Codec::Zstd, &sample(6));
        if let Some(last) = ours.last_mut() {
            *last ^= 0x80;
        }
        assert_corrupt(decompress(Codec::Zstd, &ours, len), Codec::Zstd);
        // Trailing garbage after a complete stream.
        for codec in [Codec::Gzip, Codec::Lz4, Codec::Zstd] {
            let mut packed = compressed(codec, &sample(6));
            packed.extend_from_slice(b"trailing");
            assert_corrupt(decompress(codec, &packed, len), codec);
        }
    }

    #[test]
    fn xxh32_matches_the_reference() {
        // Values from the xxHash reference implementation.
        assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
        assert_eq!(xxh32(b"a", 0), 0x550D_7456);
        assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
        assert_eq!(
            xxh32(b"Nobody inspects the spammish repetition", 0),
            0xE229_3B2F
        );
        // The LZ4 header checksums written by lz4-java and by the lz4 tool.
        for hex in [JAVA_EMPTY_LZ4, CLI_SMALL_LZ4] {
            let frame = unhex(hex);
            let descriptor_len = if frame[4] & 0x08 != 0 { 10 } else { 2 };
            assert_eq!(
                (xxh32(&frame[4..4 + descriptor_len], 0) >> 8) as u8,
                frame[4 + descriptor_len]
            );
        }
    }
}
