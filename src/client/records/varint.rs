//! Zig-zag varints of the v2 record format.

use bytes::BufMut;

/// Appends `v` as a zig-zag varint (at most 5 bytes).
pub fn put_varint(buf: &mut impl BufMut, v: i32) {
    put_varlong(buf, i64::from(v));
}

/// Appends `v` as a zig-zag varlong (at most 10 bytes).
pub fn put_varlong(buf: &mut impl BufMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

/// The encoded size of `v` as a zig-zag varint.
#[must_use]
pub fn varint_size(v: i32) -> usize {
    varlong_size(i64::from(v))
}

/// The encoded size of `v` as a zig-zag varlong.
#[must_use]
pub fn varlong_size(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    let bits = 64 - (z | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_encodings() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_size(v), "{v}");
            out.push(7);
            let mut cursor = super::super::cursor::Cursor::new(out.into());
            assert_eq!(cursor.varlong().ok(), Some(v), "read back");
            assert_eq!(cursor.remaining(), 1, "{v}: only the varlong was read");
        }
        let mut out = Vec::new();
        put_varint(&mut out, -1);
        assert_eq!(out, [1]);
        out.clear();
        put_varint(&mut out, 150);
        assert_eq!(out, [0xac, 0x02]);
    }
}
