//! Compression codecs of Kafka record batches (temporary shim until the real module lands).
#![allow(missing_docs, clippy::missing_errors_doc)]

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Codec {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}
impl Codec {
    pub fn from_attributes(attributes: i16) -> Result<Codec, CompressionError> {
        match attributes & 7 {
            0 => Ok(Codec::None),
            1 => Ok(Codec::Gzip),
            2 => Ok(Codec::Snappy),
            3 => Ok(Codec::Lz4),
            4 => Ok(Codec::Zstd),
            n => Err(CompressionError(format!("codec {n}"))),
        }
    }
    #[must_use]
    pub fn id(self) -> i16 {
        self as i16
    }
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
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CompressionError(String);
pub fn compress(
    codec: Codec,
    _level: i32,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    if codec == Codec::None {
        out.extend_from_slice(input);
        Ok(())
    } else {
        Err(CompressionError("shim".into()))
    }
}
pub fn decompress(
    codec: Codec,
    input: &[u8],
    _max_len: usize,
) -> Result<Vec<u8>, CompressionError> {
    if codec == Codec::None {
        Ok(input.to_vec())
    } else {
        Err(CompressionError("shim".into()))
    }
}
