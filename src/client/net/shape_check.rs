//! A structural pre-check of every response body against Kafka's own message schemas.
//!
//! `kafka-protocol` decodes an array with `Vec::with_capacity(n)`, `n` straight from the wire,
//! so one hostile or corrupt count of 2^31 would make it ask for hundreds of gigabytes and
//! abort the process. [`check_response`] walks the body first, exactly as Kafka's wire format
//! lays it out for that API and version (the shapes in [`super::shapes`], generated from
//! Kafka's JSON specs), without allocating and without recursing deeper than the schema nests:
//!
//! * non-flexible versions: `int16` string lengths, `int32` byte, record and array lengths,
//!   `-1` for null; flexible versions: unsigned-varint lengths plus one (`0` for null) and a
//!   tagged-field buffer after every struct;
//! * every length must fit in the bytes left, and every array count must fit too, at the
//!   smallest size its element can encode to (at least one byte each);
//! * a varint may take at most 5 bytes, a length may be negative only as null, and null only
//!   where the field is nullable in that version;
//! * a nullable struct's presence byte must be `1` or `-1`;
//! * a known tagged field is checked inside its declared size, and must fill it exactly;
//!   an unknown tag is skipped by its size.
//!
//! A body that passes decodes in `kafka-protocol` with every `Vec` no longer than the elements
//! actually present, so what it allocates is proportional to the body: at most 51 bytes of
//! `Vec` per body byte (`ListGroupsResponse` v3 `Groups`, 152-byte elements of 3 bytes; the
//! tests hold every array of every version under 64), plus, for each struct carrying tagged
//! fields unknown to it, one `BTreeMap` node of about 400 bytes. Bytes after the body are
//! tolerated, as Kafka's Java client and librdkafka tolerate them; the check does not look
//! inside strings (UTF-8) or record batches, which `kafka-protocol` and the record reader check.
//!
//! An API key or version without a schema is an error: `kafka-protocol` only speaks the
//! versions in the table (a test holds the two to the same ranges), so such a response could
//! not decode anyway, and failing closed keeps a future `kafka-protocol` upgrade from
//! decoding unchecked bodies until the table is regenerated.
//!
//! The same walk checks request bodies against the request shapes ([`check_request`],
//! [`super::request_shapes`]): the embedded test cluster runs it on every request before
//! `kafka-protocol` decodes it, so that a hostile client cannot make it allocate without bound
//! either. Only the table differs; the rules above are the same for both.

#[cfg(any(test, feature = "testing"))]
use super::request_shapes;
use super::shape::{Field, Message, Struct, Ty};
use super::shapes;

/// Checks that `body`, the response to API `api_key` at `version` (after its header), has the
/// shape Kafka defines for it, so that decoding it allocates only in proportion to its size.
pub fn check_response(api_key: i16, version: i16, body: &[u8]) -> Result<(), String> {
    walk(api_key, version, body, &mut ()).map(|_| ())
}

#[cfg(any(test, feature = "testing"))]
/// Checks that `body`, a request of API `api_key` at `version` (after its header), has the
/// shape Kafka defines for it, so that decoding it allocates only in proportion to its size.
pub(crate) fn check_request(api_key: i16, version: i16, body: &[u8]) -> Result<(), String> {
    walk_in(&REQUESTS, api_key, version, body, &mut ()).map(|_| ())
}

/// One table of shapes: the responses' or the requests'.
struct Table {
    /// `"response to"` or `"request of"`, for the error message.
    what: &'static str,
    message: fn(i16) -> Option<&'static Message>,
}

static RESPONSES: Table = Table {
    what: "response to",
    message: shapes::message,
};

#[cfg(any(test, feature = "testing"))]
static REQUESTS: Table = Table {
    what: "request of",
    message: request_shapes::message,
};

/// What a walk reports besides success, for the tests' allocation accounting.
trait Visit {
    /// An array of `count` elements of `ty` (not null).
    fn array(&mut self, _ty: Ty, _count: usize) {}
    /// A tagged field the schema does not know, skipped.
    fn unknown_tag(&mut self) {}
}

impl Visit for () {}

/// Walks the response `body`; returns how many bytes the response took.
fn walk<V: Visit>(api_key: i16, version: i16, body: &[u8], visit: &mut V) -> Result<usize, String> {
    walk_in(&RESPONSES, api_key, version, body, visit)
}

/// Walks `body` as the message of `table` for `api_key`; returns how many bytes it took.
fn walk_in<V: Visit>(
    table: &Table,
    api_key: i16,
    version: i16,
    body: &[u8],
    visit: &mut V,
) -> Result<usize, String> {
    let message = (table.message)(api_key)
        .filter(|m| m.api_key == api_key && m.valid.contains(version))
        .ok_or_else(|| {
            format!(
                "no schema for the {} API key {api_key} v{version}",
                table.what
            )
        })?;
    walk_message(message, version, body, visit)
}

/// Walks `body` as `message` at `version` (a version it has).
fn walk_message<V: Visit>(
    message: &'static Message,
    version: i16,
    body: &[u8],
    visit: &mut V,
) -> Result<usize, String> {
    let mut walker = Walker {
        buf: body,
        pos: 0,
        end: body.len(),
        version,
        flexible: message.flexible.contains(version),
        visit,
    };
    walker
        .fields(message.body)
        .map_err(|e| format!("{}{e}", message.body.name))?;
    Ok(walker.pos)
}

/// A cursor over `buf[pos..end]`, with the version being walked.
struct Walker<'a, 'v, V> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    version: i16,
    flexible: bool,
    visit: &'v mut V,
}

impl<V: Visit> Walker<'_, '_, V> {
    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        if n > self.remaining() {
            return Err(format!(
                ": {n} bytes needed at offset {}, {} left",
                self.pos,
                self.remaining()
            ));
        }
        self.pos += n;
        Ok(())
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let start = self.pos;
        self.skip(N)?;
        let mut out = [0; N];
        out.copy_from_slice(&self.buf[start..self.pos]);
        Ok(out)
    }

    fn uvarint(&mut self) -> Result<u32, String> {
        let start = self.pos;
        let mut value = 0u32;
        for shift in [0, 7, 14, 21, 28] {
            let [b] = self
                .bytes::<1>()
                .map_err(|_| format!(": truncated varint at offset {start}"))?;
            // Bits past the 32nd are dropped, as Kafka and kafka-protocol drop them.
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!(": varint longer than 5 bytes at offset {start}"))
    }

    /// A length or count prefix; `None` is null. `wide`: `int32` rather than `int16` when
    /// not flexible.
    fn length(&mut self, wide: bool) -> Result<Option<usize>, String> {
        let start = self.pos;
        let n = if self.flexible {
            i64::from(self.uvarint()?) - 1
        } else if wide {
            i64::from(i32::from_be_bytes(self.bytes()?))
        } else {
            i64::from(i16::from_be_bytes(self.bytes()?))
        };
        match n {
            -1 => Ok(None),
            n => usize::try_from(n)
                .map(Some)
                .map_err(|_| format!(": negative length {n} at offset {start}")),
        }
    }

    /// The fields of `s` present in this version, then (flexible) its tagged fields.
    fn fields(&mut self, s: &'static Struct) -> Result<(), String> {
        let version = self.version;
        for field in s.fields {
            if !field.versions.contains(version) || field.tagged.contains(version) {
                continue;
            }
            // The common case, a fixed-size scalar, without the call.
            let outcome = match fixed_size(field.ty) {
                Some(n) if !field.array => self.skip(n),
                _ => self.field(field),
            };
            outcome.map_err(|e| format!(".{}{e}", field.name))?;
        }
        if self.flexible {
            self.tagged_fields(s)?;
        }
        Ok(())
    }

    fn tagged_fields(&mut self, s: &'static Struct) -> Result<(), String> {
        let start = self.pos;
        let count = self.uvarint()? as usize;
        // Each tagged field takes at least two bytes: its tag and its size.
        if count.saturating_mul(2) > self.remaining() {
            return Err(format!(
                ": {count} tagged fields at offset {start}, {} bytes left",
                self.remaining()
            ));
        }
        let version = self.version;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let value_start = self.pos;
            self.skip(size)
                .map_err(|e| format!(" (tagged field {tag}){e}"))?;
            let known = s.fields.iter().find(|f| {
                f.tag == tag && f.tagged.contains(version) && f.versions.contains(version)
            });
            let Some(field) = known else {
                self.visit.unknown_tag();
                continue;
            };
            // kafka-protocol decodes a known tagged field in place, ignoring its size: the
            // value must fill its size exactly for the two readings to agree.
            let (outer_pos, outer_end) = (self.pos, self.end);
            self.pos = value_start;
            self.end = outer_pos;
            let inner = self.field(field);
            let used = self.pos - value_start;
            self.pos = outer_pos;
            self.end = outer_end;
            inner.map_err(|e| format!(".{}{e}", field.name))?;
            if used != size {
                return Err(format!(
                    ".{}: tagged field of {size} bytes holds a value of {used}",
                    field.name
                ));
            }
        }
        Ok(())
    }

    fn field(&mut self, field: &'static Field) -> Result<(), String> {
        let nullable = field.nullable.contains(self.version);
        if !field.array {
            return self.value(field.ty, nullable);
        }
        let start = self.pos;
        let Some(count) = self.length(true)? else {
            return null(nullable, start);
        };
        let min = min_size(field.ty, self.version, self.flexible).max(1);
        if count.saturating_mul(min) > self.remaining() {
            return Err(format!(
                ": {count} elements of at least {min} bytes at offset {start}, {} bytes left",
                self.remaining()
            ));
        }
        self.visit.array(field.ty, count);
        if fixed_size(field.ty).is_some() {
            // Fixed-size elements: `min` is their size, and the bound above covers them all.
            self.pos += count * min;
            return Ok(());
        }
        for i in 0..count {
            self.value(field.ty, false)
                .map_err(|e| format!("[{i}]{e}"))?;
        }
        Ok(())
    }

    fn value(&mut self, ty: Ty, nullable: bool) -> Result<(), String> {
        match ty {
            Ty::Str | Ty::Bytes | Ty::Records => {
                let start = self.pos;
                match self.length(!matches!(ty, Ty::Str))? {
                    Some(n) => self.skip(n),
                    None => null(nullable, start),
                }
            }
            Ty::Struct(s) if nullable => {
                // kafka-protocol reads the struct only after a presence byte of 1, and
                // Kafka writes -1 for null: anything else would be read differently.
                let start = self.pos;
                match i8::from_be_bytes(self.bytes()?) {
                    1 => self.fields(s),
                    -1 => Ok(()),
                    p => Err(format!(": presence byte {p} at offset {start}")),
                }
            }
            Ty::Struct(s) => self.fields(s),
            scalar => self.skip(fixed_size(scalar).unwrap_or_default()),
        }
    }
}

/// The size of every value of `ty`, for the types whose values all take the same.
fn fixed_size(ty: Ty) -> Option<usize> {
    match ty {
        Ty::Bool | Ty::Int8 => Some(1),
        Ty::Int16 | Ty::Uint16 => Some(2),
        Ty::Int32 | Ty::Uint32 => Some(4),
        Ty::Int64 | Ty::Float64 => Some(8),
        Ty::Uuid => Some(16),
        Ty::Str | Ty::Bytes | Ty::Records | Ty::Struct(_) => None,
    }
}

/// The fewest bytes a value of `ty` takes in `version`.
fn min_size(ty: Ty, version: i16, flexible: bool) -> usize {
    match ty {
        Ty::Str | Ty::Bytes | Ty::Records if flexible => 1,
        Ty::Str => 2,
        Ty::Bytes | Ty::Records => 4,
        Ty::Struct(s) => {
            let mut total = usize::from(flexible);
            for field in s.fields {
                if !field.versions.contains(version) || field.tagged.contains(version) {
                    continue;
                }
                total += if field.array {
                    if flexible { 1 } else { 4 }
                } else if matches!(field.ty, Ty::Struct(_)) && field.nullable.contains(version) {
                    1
                } else {
                    min_size(field.ty, version, flexible)
                };
            }
            total
        }
        scalar => fixed_size(scalar).unwrap_or(1),
    }
}

fn null(nullable: bool, at: usize) -> Result<(), String> {
    if nullable {
        Ok(())
    } else {
        Err(format!(
            ": null at offset {at} in a field that is not nullable"
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::{ApiKey, MetadataResponse};
    use kafka_protocol::protocol::{Decodable, Encodable, Message as KpMessage, StrBytes};

    use super::*;
    use crate::client::error::Error;

    // ---- the schema-driven encoder: a body with every field present ----

    /// Encodes a response of `version` with one element in every array, every nullable
    /// value present, every known tagged field set (to a value that is not its default), and
    /// one unknown tagged field (tag 999) in every tagged-field buffer.
    struct Synth {
        out: Vec<u8>,
        version: i16,
        flexible: bool,
    }

    const UNKNOWN_TAG: u32 = 999;

    /// A table of shapes with the sizes of `kafka-protocol`'s Rust types for its structs.
    struct Kinds {
        table: &'static Table,
        rust_size_of: fn(&str, &str) -> Option<usize>,
        /// Whether the spec's versions must be exactly `kafka-protocol`'s. For requests its
        /// `ApiKey` table may name a version its type does not decode (`OffsetCommitRequest`
        /// v10 in 0.18); the type's versions must then lie inside the spec's.
        exact_versions: bool,
    }

    const RESPONSE_KINDS: Kinds = Kinds {
        table: &RESPONSES,
        rust_size_of: shapes::rust_size_of,
        exact_versions: true,
    };

    const REQUEST_KINDS: Kinds = Kinds {
        table: &REQUESTS,
        rust_size_of: request_shapes::rust_size_of,
        exact_versions: false,
    };

    impl Synth {
        fn body(kinds: &Kinds, api_key: i16, version: i16) -> Vec<u8> {
            let message = (kinds.table.message)(api_key).expect("a schema");
            let mut s = Synth {
                out: Vec::new(),
                version,
                flexible: message.flexible.contains(version),
            };
            s.fields(message.body);
            s.out
        }

        fn uvarint(&mut self, mut v: u32) {
            while v >= 0x80 {
                self.out.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.out.push(v as u8);
        }

        fn length(&mut self, n: usize, wide: bool) {
            if self.flexible {
                self.uvarint(u32::try_from(n + 1).expect("small"));
            } else if wide {
                self.out
                    .extend_from_slice(&i32::try_from(n).expect("small").to_be_bytes());
            } else {
                self.out
                    .extend_from_slice(&i16::try_from(n).expect("small").to_be_bytes());
            }
        }

        fn fields(&mut self, s: &'static Struct) {
            let v = self.version;
            for field in s.fields {
                if field.versions.contains(v) && !field.tagged.contains(v) {
                    self.field(field);
                }
            }
            if !self.flexible {
                return;
            }
            let mut tagged: Vec<&Field> = s
                .fields
                .iter()
                .filter(|f| f.versions.contains(v) && f.tagged.contains(v))
                .collect();
            tagged.sort_by_key(|f| f.tag);
            self.uvarint(u32::try_from(tagged.len() + 1).expect("small"));
            for field in tagged {
                let mut inner = Synth {
                    out: Vec::new(),
                    version: v,
                    flexible: true,
                };
                inner.field(field);
                self.uvarint(field.tag);
                self.uvarint(u32::try_from(inner.out.len()).expect("small"));
                self.out.extend_from_slice(&inner.out);
            }
            self.uvarint(UNKNOWN_TAG);
            self.uvarint(1);
            self.out.push(0x5a);
        }

        fn field(&mut self, field: &'static Field) {
            if field.array {
                self.length(1, true);
                self.value(field.ty, false);
            } else {
                self.value(field.ty, field.nullable.contains(self.version));
            }
        }

        fn value(&mut self, ty: Ty, nullable: bool) {
            match ty {
                Ty::Bool => self.out.push(1),
                Ty::Int8 => self.out.push(5),
                Ty::Int16 | Ty::Uint16 => self.out.extend_from_slice(&[1, 2]),
                Ty::Int32 | Ty::Uint32 => self.out.extend_from_slice(&[1, 2, 3, 4]),
                Ty::Int64 => self.out.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]),
                Ty::Float64 => self.out.extend_from_slice(&1.5f64.to_be_bytes()),
                Ty::Uuid => self.out.extend_from_slice(&[0x11; 16]),
                Ty::Str => {
                    self.length(2, false);
                    self.out.extend_from_slice(b"ab");
                }
                Ty::Bytes | Ty::Records => {
                    self.length(3, true);
                    self.out.extend_from_slice(&[1, 2, 3]);
                }
                Ty::Struct(s) => {
                    if nullable {
                        self.out.push(1);
                    }
                    self.fields(s);
                }
            }
        }
    }

    // ---- the allocation model of kafka-protocol's decode ----

    /// What one `BTreeMap<i32, Bytes>` leaf node takes: an unknown tagged field costs at
    /// most that (the first one in a struct allocates the node, later ones share it).
    const BTREE_NODE: usize = 8 + 2 + 2 + 11 * (4 + size_of::<Bytes>());

    /// The bytes `kafka-protocol` allocates for a body the check walked: decoding from a
    /// `Bytes` is zero-copy for strings, bytes and records, so what it allocates is each
    /// array's `Vec::with_capacity(count)` and the maps of unknown tagged fields.
    struct Alloc {
        sizes: fn(&str, &str) -> Option<usize>,
        message: &'static str,
        vecs: usize,
        unknown_tags: usize,
    }

    fn rust_size(sizes: fn(&str, &str) -> Option<usize>, message: &str, ty: Ty) -> usize {
        match ty {
            Ty::Bool | Ty::Int8 => 1,
            Ty::Int16 | Ty::Uint16 => 2,
            Ty::Int32 | Ty::Uint32 => 4,
            Ty::Int64 | Ty::Float64 => 8,
            Ty::Uuid => 16,
            Ty::Str => size_of::<StrBytes>(),
            Ty::Bytes | Ty::Records => size_of::<Bytes>(),
            Ty::Struct(s) => sizes(message, s.name)
                .unwrap_or_else(|| panic!("no Rust type for {message}.{}", s.name)),
        }
    }

    impl Visit for Alloc {
        fn array(&mut self, ty: Ty, count: usize) {
            self.vecs += count * rust_size(self.sizes, self.message, ty);
        }
        fn unknown_tag(&mut self) {
            self.unknown_tags += 1;
        }
    }

    /// The most kafka-protocol may allocate per body byte once the check passed.
    const ALLOCATION_PER_BYTE: usize = 64;

    // ---- mutation ----

    #[derive(Default)]
    struct Stats {
        probes: usize,
        accepted: usize,
        accepted_but_undecodable: BTreeMap<String, usize>,
        worst_vecs_per_byte: f64,
        worst_with_tags_per_byte: f64,
    }

    fn probe<T: Decodable>(
        kinds: &Kinds,
        api_key: i16,
        version: i16,
        name: &'static str,
        bytes: &[u8],
        stats: &mut Stats,
    ) {
        stats.probes += 1;
        let mut model = Alloc {
            sizes: kinds.rust_size_of,
            message: name,
            vecs: 0,
            unknown_tags: 0,
        };
        let Ok(used) = walk_in(kinds.table, api_key, version, bytes, &mut model) else {
            return;
        };
        stats.accepted += 1;
        let len = bytes.len().max(1);
        assert!(
            model.vecs <= ALLOCATION_PER_BYTE * len,
            "{name} v{version}: {} bytes of Vecs for a body of {len}",
            model.vecs
        );
        // Each unknown tag takes at least 2 bytes of the body.
        assert!(model.unknown_tags * 2 <= len);
        #[allow(clippy::cast_precision_loss)]
        {
            stats.worst_vecs_per_byte = stats
                .worst_vecs_per_byte
                .max(model.vecs as f64 / len as f64);
            stats.worst_with_tags_per_byte = stats
                .worst_with_tags_per_byte
                .max((model.vecs + model.unknown_tags * BTREE_NODE) as f64 / len as f64);
        }
        // The check vouched for the counts: decoding is safe, and must read what it walked.
        let mut buf = Bytes::copy_from_slice(bytes);
        match T::decode(&mut buf, version) {
            Ok(_) => assert_eq!(
                bytes.len() - buf.len(),
                used,
                "{name} v{version}: kafka-protocol read another length than the check"
            ),
            Err(e) => {
                let kind = e.to_string();
                let kind = kind
                    .split(['(', ':'])
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                *stats.accepted_but_undecodable.entry(kind).or_default() += 1;
            }
        }
    }

    fn mutate<T: Decodable>(
        kinds: &Kinds,
        api_key: i16,
        version: i16,
        name: &'static str,
        body: &[u8],
        stats: &mut Stats,
    ) {
        let len = body.len();
        let mut scratch = body.to_vec();
        // Every 4-byte window set to i32::MAX.
        for i in 0..len.saturating_sub(3) {
            scratch.copy_from_slice(body);
            scratch[i..i + 4].copy_from_slice(&i32::MAX.to_be_bytes());
            probe::<T>(kinds, api_key, version, name, &scratch, stats);
        }
        // Every 1..5-byte varint position: all continuation bits, or a large terminated value.
        for i in 0..len {
            for k in 1..=5.min(len - i) {
                scratch.copy_from_slice(body);
                scratch[i..i + k].fill(0xff);
                probe::<T>(kinds, api_key, version, name, &scratch, stats);
                scratch[i + k - 1] = 0x0f;
                probe::<T>(kinds, api_key, version, name, &scratch, stats);
            }
        }
        // Every truncation.
        for n in 0..len {
            probe::<T>(kinds, api_key, version, name, &body[..n], stats);
        }
        // Random byte flips, with a fixed seed.
        let mut rng = fastrand::Rng::with_seed(
            u64::from(api_key.unsigned_abs()) << 16 | u64::from(version.unsigned_abs()),
        );
        for _ in 0..64 {
            scratch.copy_from_slice(body);
            for _ in 0..rng.usize(1..=3) {
                if len > 0 {
                    scratch[rng.usize(..len)] = rng.u8(..);
                }
            }
            probe::<T>(kinds, api_key, version, name, &scratch, stats);
        }
    }

    fn exercise<T: Encodable + Decodable + Default + KpMessage>(
        kinds: &Kinds,
        api_key: i16,
        stats: &mut Stats,
    ) {
        let message = (kinds.table.message)(api_key).expect("a schema");
        let name = message.body.name;
        let kp = ApiKey::try_from(api_key)
            .expect("kafka-protocol knows the key")
            .valid_versions();
        if kinds.exact_versions {
            assert_eq!((kp.min, kp.max), (T::VERSIONS.min, T::VERSIONS.max));
            assert_eq!(
                (message.valid.lo, message.valid.hi),
                (kp.min, kp.max),
                "{name}: the spec's versions and kafka-protocol's differ"
            );
        } else {
            assert!(
                message.valid.lo <= T::VERSIONS.min && T::VERSIONS.max <= message.valid.hi,
                "{name}: kafka-protocol decodes versions the spec does not have"
            );
        }
        let kp = T::VERSIONS;
        for version in kp.min..=kp.max {
            // The default value, as kafka-protocol encodes it.
            let mut buf = BytesMut::new();
            T::default().encode(&mut buf, version).expect("encodes");
            let default = buf.to_vec();
            assert_eq!(
                walk_in(kinds.table, api_key, version, &default, &mut ()),
                Ok(default.len()),
                "{name} v{version} default"
            );

            // Every field present: kafka-protocol must read it all and write it back the same.
            let full = Synth::body(kinds, api_key, version);
            assert_eq!(
                walk_in(kinds.table, api_key, version, &full, &mut ()),
                Ok(full.len()),
                "{name} v{version} full"
            );
            let mut bytes = Bytes::from(full.clone());
            let decoded = T::decode(&mut bytes, version).unwrap_or_else(|e| {
                panic!("{name} v{version}: kafka-protocol cannot decode {full:02x?}: {e:#}")
            });
            assert!(
                bytes.is_empty(),
                "{name} v{version}: {} bytes left",
                bytes.len()
            );
            let mut again = BytesMut::new();
            decoded.encode(&mut again, version).expect("encodes");
            assert_eq!(again.to_vec(), full, "{name} v{version}: round trip");

            mutate::<T>(kinds, api_key, version, name, &default, stats);
            mutate::<T>(kinds, api_key, version, name, &full, stats);
        }
    }

    #[test]
    fn every_response_of_every_version_passes_and_mutants_never_overallocate() {
        let mut stats = Stats::default();
        let mut keys = Vec::new();
        macro_rules! one {
            ($key:expr, $ty:ident) => {
                keys.push($key);
                exercise::<kafka_protocol::messages::$ty>(&RESPONSE_KINDS, $key, &mut stats);
            };
        }
        shapes::for_each_response!(one);
        let all: Vec<i16> = ApiKey::iter().map(|k| k as i16).collect();
        assert_eq!(keys, all, "every response kafka-protocol has is exercised");
        println!(
            "{} mutants, {} accepted; worst Vec bytes per body byte {:.1}, with unknown-tag maps {:.1}",
            stats.probes, stats.accepted, stats.worst_vecs_per_byte, stats.worst_with_tags_per_byte
        );
        println!(
            "accepted but not decoded by kafka-protocol: {:?}",
            stats.accepted_but_undecodable
        );
    }

    #[test]
    fn every_request_of_every_version_passes_and_mutants_never_overallocate() {
        let mut stats = Stats::default();
        let mut keys = Vec::new();
        macro_rules! one {
            ($key:expr, $ty:ident) => {
                keys.push($key);
                exercise::<kafka_protocol::messages::$ty>(&REQUEST_KINDS, $key, &mut stats);
            };
        }
        request_shapes::for_each_request!(one);
        let all: Vec<i16> = ApiKey::iter().map(|k| k as i16).collect();
        assert_eq!(keys, all, "every request kafka-protocol has is exercised");
        println!(
            "{} mutants, {} accepted; worst Vec bytes per body byte {:.1}, with unknown-tag maps {:.1}",
            stats.probes, stats.accepted, stats.worst_vecs_per_byte, stats.worst_with_tags_per_byte
        );
    }

    #[test]
    fn a_request_array_count_of_i32_max_is_rejected() {
        // Metadata v1 request: the topics array is the whole body.
        assert_eq!(check_request(3, 1, &[0, 0, 0, 0]), Ok(()));
        let error = check_request(3, 1, &i32::MAX.to_be_bytes()).expect_err("rejected");
        assert!(error.starts_with("MetadataRequest.Topics: "), "{error}");
        // The same count in a flexible version (v12): a 5-byte varint.
        let error =
            check_request(3, 12, &[0xff, 0xff, 0xff, 0xff, 0x07, 0, 0, 0]).expect_err("rejected");
        assert!(error.starts_with("MetadataRequest.Topics: "), "{error}");
        assert!(
            check_request(3, 99, &[0, 0, 0, 0])
                .unwrap_err()
                .contains("request of API key 3 v99")
        );
    }

    #[test]
    fn array_allocation_per_body_byte_is_bounded_for_every_array_of_every_version() {
        // Every array element owns at least `min_size` bytes that no other element owns, so a
        // body that passes makes kafka-protocol allocate at most `len * max(size / min_size)`
        // in Vecs, whatever the counts: the bound the mutation test measures holds for all.
        fn visit(
            kinds: &Kinds,
            s: &'static Struct,
            message: &str,
            v: i16,
            flex: bool,
            worst: &mut (f64, String),
        ) {
            for field in s.fields.iter().filter(|f| f.versions.contains(v)) {
                if field.array {
                    let min = min_size(field.ty, v, flex);
                    assert!(
                        min >= 1,
                        "{message} v{v}: {} elements can be empty",
                        field.name
                    );
                    #[allow(clippy::cast_precision_loss)]
                    let ratio =
                        rust_size(kinds.rust_size_of, message, field.ty) as f64 / min as f64;
                    if ratio > worst.0 {
                        *worst = (ratio, format!("{message} v{v} {}", field.name));
                    }
                }
                if let Ty::Struct(inner) = field.ty {
                    visit(kinds, inner, message, v, flex, worst);
                }
            }
        }
        let mut worst = (0.0, String::new());
        // The responses, and the requests the embedded cluster decodes.
        for kinds in [&RESPONSE_KINDS, &REQUEST_KINDS] {
            for key in ApiKey::iter() {
                let message = (kinds.table.message)(key as i16).expect("a schema");
                for v in message.valid.lo..=message.valid.hi {
                    let flex = message.flexible.contains(v);
                    visit(kinds, message.body, message.body.name, v, flex, &mut worst);
                }
            }
        }
        println!(
            "worst Vec bytes per element byte: {:.1} ({})",
            worst.0, worst.1
        );
        #[allow(clippy::cast_precision_loss)]
        let limit = ALLOCATION_PER_BYTE as f64;
        assert!(worst.0 <= limit, "{worst:?}");
    }

    #[test]
    fn a_metadata_array_count_of_i32_max_is_rejected() {
        let response = MetadataResponse::default();
        for version in [1, 12] {
            let mut buf = BytesMut::new();
            response.encode(&mut buf, version).expect("encodes");
            let mut body = buf.to_vec();
            assert_eq!(check_response(3, version, &body), Ok(()));
            // v1: brokers is the first field; v12: after the throttle time.
            if version == 1 {
                body[..4].copy_from_slice(&i32::MAX.to_be_bytes());
            } else {
                body.splice(4..5, [0xff, 0xff, 0xff, 0xff, 0x07]);
            }
            let error = check_response(3, version, &body).expect_err("rejected");
            assert!(error.starts_with("MetadataResponse.Brokers: "), "{error}");
        }
    }

    #[test]
    fn lengths_varints_tags_and_unknown_schemas() {
        // ApiVersions v3 (flexible): error code, api keys, throttle time, tagged fields.
        let ok = [0, 0, 1, 0, 0, 0, 0, 0];
        assert_eq!(walk(18, 3, &ok, &mut ()), Ok(ok.len()));
        // Trailing bytes are tolerated.
        assert_eq!(check_response(18, 3, &[0, 0, 1, 0, 0, 0, 0, 0, 9]), Ok(()));
        // A 6-byte varint.
        let long = [0, 0, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 0, 0, 0, 0];
        assert!(
            check_response(18, 3, &long)
                .unwrap_err()
                .contains("longer than 5 bytes")
        );
        // A null array where it is not nullable.
        let null = [0, 0, 0, 0, 0, 0, 0, 0];
        assert!(check_response(18, 3, &null).unwrap_err().contains("null"));
        // An unknown tag is skipped by its size, a truncated one is not.
        assert_eq!(
            check_response(18, 3, &[0, 0, 1, 0, 0, 0, 0, 1, 99, 2, 7, 7]),
            Ok(())
        );
        assert!(check_response(18, 3, &[0, 0, 1, 0, 0, 0, 0, 1, 99, 3, 7, 7]).is_err());
        // Tag 1 (FinalizedFeaturesEpoch, int64) must fill its declared size exactly.
        let mut epoch = vec![0, 0, 1, 0, 0, 0, 0, 1, 1, 8];
        epoch.extend_from_slice(&7i64.to_be_bytes());
        assert_eq!(check_response(18, 3, &epoch), Ok(()));
        epoch[9] = 9;
        epoch.push(0);
        assert!(
            check_response(18, 3, &epoch)
                .unwrap_err()
                .contains("FinalizedFeaturesEpoch")
        );
        // ApiVersions v0 (not flexible): a negative count other than -1.
        assert!(
            check_response(18, 0, &[0, 0, 0xff, 0xff, 0xff, 0xfe])
                .unwrap_err()
                .contains("negative")
        );
        // Unknown API keys and versions are errors.
        assert!(check_response(18, 5, &ok).is_err());
        assert!(check_response(-1, 0, &ok).is_err());
        assert!(check_response(7, 0, &ok).is_err()); // ControlledShutdown, removed in Kafka 4.0
    }

    #[test]
    fn the_response_header_shape() {
        let header = &shapes::RESPONSE_HEADER;
        assert_eq!(walk_message(header, 0, &[0, 0, 0, 7], &mut ()), Ok(4));
        assert_eq!(walk_message(header, 1, &[0, 0, 0, 7, 0], &mut ()), Ok(5));
        assert_eq!(
            walk_message(header, 1, &[0, 0, 0, 7, 1, 5, 1, 0xaa], &mut ()),
            Ok(8)
        );
        assert!(walk_message(header, 1, &[0, 0, 0, 7, 1, 5, 2, 0xaa], &mut ()).is_err());
    }

    async fn read_request(server: &mut tokio::io::DuplexStream) -> [u8; 4] {
        use tokio::io::AsyncReadExt;
        let length = server.read_i32().await.expect("length");
        let mut request = vec![0; usize::try_from(length).expect("positive")];
        server.read_exact(&mut request).await.expect("request");
        // Request header: api key, api version, correlation id, ...
        request[4..8].try_into().expect("4 bytes")
    }

    async fn answer(
        server: &mut tokio::io::DuplexStream,
        correlation: [u8; 4],
        header_tags: &[u8],
        body: &[u8],
    ) {
        use tokio::io::AsyncWriteExt;
        let length = i32::try_from(4 + header_tags.len() + body.len()).expect("small");
        let mut frame = length.to_be_bytes().to_vec();
        frame.extend_from_slice(&correlation);
        frame.extend_from_slice(header_tags);
        frame.extend_from_slice(body);
        server.write_all(&frame).await.expect("write");
    }

    #[tokio::test]
    async fn a_hostile_metadata_response_is_a_protocol_error_through_a_connection() {
        use kafka_protocol::messages::api_versions_response::ApiVersion;
        use kafka_protocol::messages::{ApiVersionsResponse, MetadataRequest};

        use super::super::{Connection, ConnectionOptions};

        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let broker = tokio::spawn(async move {
            let correlation = read_request(&mut server).await;
            let mut versions = ApiVersionsResponse::default();
            for (key, max) in [(18, 3), (3, 12)] {
                versions.api_keys.push(
                    ApiVersion::default()
                        .with_api_key(key)
                        .with_min_version(0)
                        .with_max_version(max),
                );
            }
            let mut body = BytesMut::new();
            versions.encode(&mut body, 3).expect("encodes");
            // ApiVersions answers with header v0: no tagged fields.
            answer(&mut server, correlation, &[], &body).await;
            // Metadata v12 (header v1, an empty tagged-field buffer): throttle time, then a
            // brokers count of 2^31 - 2.
            let correlation = read_request(&mut server).await;
            answer(
                &mut server,
                correlation,
                &[0],
                &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07],
            )
            .await;
            // Metadata v1: a brokers count of i32::MAX.
            let correlation = read_request(&mut server).await;
            answer(&mut server, correlation, &[], &i32::MAX.to_be_bytes()).await;
            server
        });
        let options = ConnectionOptions {
            connect_timeout: Duration::from_secs(5),
            ..ConnectionOptions::default()
        };
        let connection = Connection::over(client, "hostile", &options)
            .await
            .expect("the handshake succeeds");
        for version in [12, 1] {
            let outcome = connection
                .send(&MetadataRequest::default(), version, Duration::from_secs(5))
                .await;
            assert!(
                matches!(&outcome, Err(Error::Protocol(m)) if m.contains("Brokers")),
                "v{version}: {outcome:?}"
            );
        }
        assert!(!connection.is_closed());
        drop(broker.await);
    }
}
