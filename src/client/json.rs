//! JSON text the client writes by hand (no JSON library in the client): string literals,
//! escaped so that any text, control characters included, round-trips.

use std::fmt::Write as _;

/// Appends `s` to `out` as a JSON string literal.
pub(crate) fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
