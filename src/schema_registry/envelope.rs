//! The Confluent wire envelope: a zero magic byte, the schema id as a big-endian `u32`, then
//! the datum. Every registry-aware producer and consumer agrees on these five bytes.

/// The first byte of every framed payload.
pub(crate) const MAGIC: u8 = 0;

/// The envelope's length in front of the datum.
pub(crate) const HEADER_LEN: usize = 5;

/// Splits a framed payload into its schema id and datum.
///
/// `None` when the payload is not framed: it is shorter than the five envelope bytes or does
/// not start with the zero magic byte.
#[must_use]
pub fn parse_envelope(payload: &[u8]) -> Option<(u32, &[u8])> {
    if payload.len() < HEADER_LEN || payload[0] != MAGIC {
        return None;
    }
    let id = u32::from_be_bytes([payload[1], payload[2], payload[3], payload[4]]);
    Some((id, &payload[HEADER_LEN..]))
}

/// Frames `datum` under `schema_id`; [`parse_envelope`] takes it apart again.
#[must_use]
pub fn encode_envelope(schema_id: u32, datum: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + datum.len());
    push_header(&mut out, schema_id);
    out.extend_from_slice(datum);
    out
}

/// Writes the five envelope bytes for `schema_id`.
pub(crate) fn push_header(out: &mut impl Extend<u8>, schema_id: u32) {
    out.extend(std::iter::once(MAGIC).chain(schema_id.to_be_bytes()));
}

/// The first bytes of a payload, for an error message about it.
pub(crate) fn preview(payload: &[u8]) -> String {
    format!("{:02x?}", &payload[..payload.len().min(8)])
}

#[cfg(test)]
mod tests {
    use super::{encode_envelope, parse_envelope};

    #[test]
    fn framing_then_parsing_gives_back_id_and_datum() {
        let framed = encode_envelope(0x0102_0304, b"datum");
        assert_eq!(framed[..5], [0, 1, 2, 3, 4]);
        assert_eq!(parse_envelope(&framed), Some((0x0102_0304, &b"datum"[..])));
        assert_eq!(
            parse_envelope(&encode_envelope(9, b"")),
            Some((9, &b""[..]))
        );
    }

    #[test]
    fn short_or_unmarked_payloads_are_not_framed() {
        assert_eq!(parse_envelope(b""), None);
        assert_eq!(parse_envelope(&[0, 0, 0, 7]), None);
        assert_eq!(parse_envelope(b"{\"id\":1}"), None);
        assert_eq!(parse_envelope(&[1, 0, 0, 0, 7, 9]), None);
    }
}
