//! Numbers read and printed the way librdkafka's C library calls do, so that a value librdkafka
//! accepts is accepted here with the same meaning, and an error prints the same number.
//!
//! librdkafka reads integers with `strtol(value, &end, 0)` and floats with `strtod`, and only
//! asks that at least one character was consumed: leading white space, a sign, `0x` (hex) and
//! `0` (octal) prefixes are honoured and anything after the number is ignored (`"10ms"` is 10).
//! An integer beyond the C `long` range saturates and is then narrowed to 32 bits (as librdkafka
//! casts to `int`); this follows 64-bit Linux, where `long` has 64 bits. Floats print with
//! `%g`.

/// C's `isspace` in the "C" locale.
pub(super) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `(int)strtol(s, &end, 0)`, or `None` when `strtol` consumes nothing (`end == s`).
pub(super) fn strtol_int(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let negative = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let (radix, start) = if b.get(i) == Some(&b'0') {
        if matches!(b.get(i + 1), Some(b'x' | b'X'))
            && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            (16, i + 2)
        } else {
            // A lone `0`, or `0x` without hex digits, which reads as the `0`.
            (8, i)
        }
    } else {
        (10, i)
    };
    let mut magnitude: i128 = 0;
    let mut digits = 0;
    for &c in &b[start..] {
        let Some(d) = char::from(c).to_digit(radix) else {
            break;
        };
        // Saturating at a bound past i64's is enough: the result is clamped to i64 below.
        magnitude = (magnitude * i128::from(radix) + i128::from(d)).min(i128::from(u64::MAX));
        digits += 1;
    }
    if digits == 0 {
        return None;
    }
    let value = if negative { -magnitude } else { magnitude };
    let long = value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    // `(int)` of a `long`: the low 32 bits.
    Some(long as i32)
}

/// `strtod(s, &end)`, or `None` when it consumes nothing.
pub(super) fn strtod(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let sign_at = i;
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let negative = b.get(sign_at) == Some(&b'-');
    let rest = &s[i..];
    let hex = (rest.starts_with("0x") || rest.starts_with("0X"))
        .then(|| hex_float(&rest[2..]))
        .flatten();
    let magnitude = if starts_with_ignore_case(rest, "inf") {
        f64::INFINITY
    } else if starts_with_ignore_case(rest, "nan") {
        f64::NAN
    } else if let Some(hex) = hex {
        hex
    } else {
        // Also `0x` without hex digits, which reads as the `0`.
        decimal_float(rest)?
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// The longest decimal floating-point prefix of `s` (`digits[.digits][e[sign]digits]`, at
/// least one mantissa digit), as a number.
fn decimal_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut mantissa_digits = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        mantissa_digits += 1;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            mantissa_digits += 1;
        }
    }
    if mantissa_digits == 0 {
        return None;
    }
    let mut end = i;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exponent_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exponent_start {
            end = j;
        }
    }
    s[..end].parse().ok()
}

/// The longest hexadecimal floating-point prefix of `s` (after `0x`): `hex[.hex][p[sign]dec]`.
fn hex_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut value = 0f64;
    let mut digits = 0;
    let mut scale = 0i32;
    while let Some(d) = b.get(i).and_then(|&c| char::from(c).to_digit(16)) {
        value = value * 16.0 + f64::from(d);
        digits += 1;
        i += 1;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while let Some(d) = b.get(i).and_then(|&c| char::from(c).to_digit(16)) {
            value = value * 16.0 + f64::from(d);
            scale -= 4;
            digits += 1;
            i += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'p' | b'P')) {
        let mut j = i + 1;
        let negative = b.get(j) == Some(&b'-');
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let mut exponent = 0i32;
        let start = j;
        while let Some(d) = b.get(j).and_then(|&c| char::from(c).to_digit(10)) {
            exponent = exponent.saturating_mul(10).saturating_add(d as i32);
            j += 1;
        }
        if j > start {
            scale = scale.saturating_add(if negative { -exponent } else { exponent });
        }
    }
    Some(value * 2f64.powi(scale))
}

/// `printf("%g", v)`: six significant digits, trailing zeros dropped, exponent form outside
/// `1e-4 <= |v| < 1e6`.
pub(super) fn format_g(v: f64) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // The exponent after rounding to six significant digits decides the form.
    let scientific = format!("{v:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        let decimals = (5 - exponent) as usize;
        strip_zeros(&format!("{v:.decimals$}")).to_owned()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_zeros(mantissa), exponent.abs())
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtol_reads_like_c() {
        assert_eq!(strtol_int("42"), Some(42));
        assert_eq!(strtol_int("  \t-17"), Some(-17));
        assert_eq!(strtol_int("+5"), Some(5));
        assert_eq!(strtol_int("0x1A"), Some(26));
        assert_eq!(strtol_int("0X1a"), Some(26));
        assert_eq!(strtol_int("010"), Some(8));
        assert_eq!(strtol_int("08"), Some(0));
        assert_eq!(strtol_int("0x"), Some(0));
        assert_eq!(strtol_int("0xg"), Some(0));
        assert_eq!(strtol_int("10ms"), Some(10));
        assert_eq!(strtol_int("1e3"), Some(1));
        assert_eq!(strtol_int("1.9"), Some(1));
        assert_eq!(strtol_int(""), None);
        assert_eq!(strtol_int("   "), None);
        assert_eq!(strtol_int("-"), None);
        assert_eq!(strtol_int("+x"), None);
        assert_eq!(strtol_int("all"), None);
        assert_eq!(strtol_int(" 2147483647"), Some(i32::MAX));
        // Past `int`: the low 32 bits of the `long`.
        assert_eq!(strtol_int("2147483648"), Some(i32::MIN));
        assert_eq!(strtol_int("4294967296"), Some(0));
        assert_eq!(strtol_int("4294967297"), Some(1));
        // Past `long`: LONG_MAX, whose low 32 bits are -1; LONG_MIN's are 0.
        assert_eq!(strtol_int("99999999999999999999999"), Some(-1));
        assert_eq!(strtol_int("-99999999999999999999999"), Some(0));
    }

    #[test]
    fn strtod_reads_like_c() {
        assert_eq!(strtod("5"), Some(5.0));
        assert_eq!(strtod(" 0.5"), Some(0.5));
        assert_eq!(strtod(".5"), Some(0.5));
        assert_eq!(strtod("5."), Some(5.0));
        assert_eq!(strtod("-1.5e3"), Some(-1500.0));
        assert_eq!(strtod("1e"), Some(1.0));
        assert_eq!(strtod("1e+"), Some(1.0));
        assert_eq!(strtod("2.5ms"), Some(2.5));
        assert_eq!(strtod("0x10"), Some(16.0));
        assert_eq!(strtod("0x1p4"), Some(16.0));
        assert_eq!(strtod("0x.8"), Some(0.5));
        assert_eq!(strtod("0xz"), Some(0.0));
        assert_eq!(strtod("INF"), Some(f64::INFINITY));
        assert_eq!(strtod("-infinity"), Some(f64::NEG_INFINITY));
        assert!(strtod("nan").is_some_and(f64::is_nan));
        assert_eq!(strtod("1e999"), Some(f64::INFINITY));
        assert_eq!(strtod(""), None);
        assert_eq!(strtod("."), None);
        assert_eq!(strtod("e5"), None);
        assert_eq!(strtod("-"), None);
        assert_eq!(strtod("abc"), None);
    }

    #[test]
    fn format_g_prints_like_printf() {
        assert_eq!(format_g(0.0), "0");
        assert_eq!(format_g(5.0), "5");
        assert_eq!(format_g(900_000.0), "900000");
        assert_eq!(format_g(1_000_000.0), "1e+06");
        assert_eq!(format_g(900_001.5), "900002");
        assert_eq!(format_g(-0.5), "-0.5");
        assert_eq!(format_g(0.0001), "0.0001");
        assert_eq!(format_g(0.00001), "1e-05");
        assert_eq!(format_g(123_456_789.0), "1.23457e+08");
        assert_eq!(format_g(1.5e300), "1.5e+300");
        assert_eq!(format_g(f64::INFINITY), "inf");
        assert_eq!(format_g(999_999.5), "1e+06");
    }
}
