//! The two ways AWS writes a time: `SigV4`'s basic form (`20150830T123600Z`) and ISO 8601 as IMDS
//! and STS give an expiry (`2015-08-30T12:36:00Z`, fractions and `+00:00` allowed). Only UTC
//! is read; a time that does not name a real instant is `None`, never a guess.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `t` as `SigV4`'s `X-Amz-Date`: `YYYYMMDDTHHMMSSZ`, UTC.
pub(crate) fn amz_date(t: SystemTime) -> String {
    let (year, month, day, rest) = civil(t);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// `t`'s civil date in UTC and the seconds of its day.
fn civil(t: SystemTime) -> (i64, u32, u32, i64) {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2));
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    (year, month, day, secs.rem_euclid(86_400))
}

fn number(digits: &str) -> Option<u32> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn instant(
    year: u32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
) -> Option<SystemTime> {
    let year = i64::from(year);
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

/// Reads ISO 8601 UTC: `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `+00:00`.
pub(crate) fn parse_iso8601(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    if !text.is_ascii() {
        return None;
    }
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let zone = &text[19..];
    let zone = match zone.strip_prefix('.') {
        Some(fraction) => {
            let end = fraction.find(|c: char| !c.is_ascii_digit())?;
            if end == 0 {
                return None;
            }
            &fraction[end..]
        }
        None => zone,
    };
    if !matches!(zone, "Z" | "+00:00" | "+0000") {
        return None;
    }
    instant(
        number(&text[0..4])?,
        number(&text[5..7])?,
        number(&text[8..10])?,
        number(&text[11..13])?,
        number(&text[14..16])?,
        number(&text[17..19])?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msk_iam_dates_round_trip_through_both_forms() {
        let t = parse_iso8601("2015-08-30T12:36:00Z").expect("valid");
        assert_eq!(amz_date(t), "20150830T123600Z");
        assert_eq!(parse_iso8601("2015-08-30T12:36:00.123+00:00"), Some(t));
        let leap = parse_iso8601("2024-02-29T23:59:59Z").expect("a leap day");
        assert_eq!(amz_date(leap), "20240229T235959Z");
        assert_eq!(amz_date(leap + Duration::from_secs(1)), "20240301T000000Z");
        assert_eq!(amz_date(UNIX_EPOCH), "19700101T000000Z");
    }

    #[test]
    fn msk_iam_impossible_or_foreign_times_are_refused() {
        for bad in [
            "2023-02-29T00:00:00Z",
            "2015-13-01T00:00:00Z",
            "2015-08-30T24:00:00Z",
            "2015-08-30T12:36:00+02:00",
            "2015-08-30 12:36:00Z",
            "2015-08-30T12:36:00.Z",
            "",
            "+015-08-30T12:36:00Z",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }
}
