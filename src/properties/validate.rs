//! One `(key, value)` pair, looked up and parsed exactly as librdkafka's `rd_kafka_conf_set`
//! does, with its messages.
//!
//! What librdkafka accepts, per type (and so what this module accepts):
//!
//! - Names are case-sensitive. A key is a global property or alias first; failing that, a topic
//!   property or alias, after one leading `topic.` is dropped (the unknown-name message then
//!   quotes the name without it).
//! - An empty value means "no value": a string goes back to its default, while a boolean, an
//!   integer, a float, an enum or a flag set refuses it ("cannot be set to empty value").
//! - Booleans: `true`, `t`, `false`, `f` in any case, `1` and `0`; nothing else, not even with
//!   surrounding spaces.
//! - Integers: C's `strtol` (see [`cnum`](super::cnum)), then the range check; when no digit is
//!   read, a word of the property (`all` for `acks`, any case, the whole value) or an error.
//! - Floats (`linger.ms`): C's `strtod`, then the range check. NaN, which librdkafka's range
//!   check lets through, is refused here: nothing useful can come of a NaN linger.
//! - Strings lose their leading white space (not their trailing); a few have an extra check
//!   (`partitioner`, `sasl.mechanism`, `broker.version.fallback`). Strings sent to Kafka as
//!   they are (`client.rack`, `group.protocol.type`) keep it.
//! - Enums: leading white space dropped, trailing kept, then a case-insensitive match of the
//!   whole rest; a value that is only white space changes nothing.
//! - Flags: comma-separated words, each with its leading white space dropped and an optional
//!   `+` (add, the default) or `-` (remove), matched case-insensitively; empty words are
//!   skipped. The result is applied to the default set.
//! - Pointers, callbacks and internal state cannot be set from a string (librdkafka lets its
//!   one hidden unit-test hook, `ut_handle_ProduceResponse`, take a string as a function
//!   pointer; here it is refused like the others); neither can
//!   librdkafka's two names for Java client settings (`ssl.truststore.location`,
//!   `sasl.jaas.config`), which it refuses with a hint (the hint here is this crate's).
//! - A property or enum value behind a build option this crate does not have is refused with
//!   the reason ([`Gate::unsupported_reason`](super::Gate::unsupported_reason)).
//!
//! The range message of librdkafka ends in a newline; it is left out here.

use super::cnum;
use super::error::PropertyError;
use super::property::{EnumValue, Flag, Kind, Property, StrCheck};
use super::setting::Setting;
use super::table::{global_index, topic_index};

/// The index in [`PROPERTIES`] of the property `key` sets, or the name librdkafka's
/// unknown-property message quotes.
pub(super) fn resolve(key: &str) -> Result<usize, &str> {
    if let Some(i) = global_index(key) {
        return Ok(i);
    }
    let name = key.strip_prefix("topic.").unwrap_or(key);
    topic_index(name).ok_or(name)
}

/// The setting `value` gives `property`, `Ok(None)` for a value librdkafka takes without
/// changing anything, or librdkafka's refusal. `key` is what the caller wrote, for the error.
pub(super) fn parse(
    property: &Property,
    key: &str,
    value: &str,
) -> Result<Option<Setting>, PropertyError> {
    let name = property.rdkafka_name;
    let parsed = if let Some(reason) = property.unsupported_reason() {
        Err(format!(
            "Configuration property \"{name}\" not supported in this build: {reason}"
        ))
    } else {
        match property.kind {
            Kind::Str { default, check } => string(name, value, default, check),
            // Sent to Kafka as written: no trimming, no check.
            Kind::KafkaStr { default } => Ok(Some(Setting::Str(if value.is_empty() {
                default.map(str::to_owned)
            } else {
                Some(value.to_owned())
            }))),
            Kind::Bool { .. } => boolean(name, value),
            Kind::Int {
                min, max, names, ..
            } => integer(name, value, min, max, names),
            Kind::Float { min, max, .. } => float(name, value, min, max),
            Kind::Enum { values, .. } => enumeration(name, value, values),
            Kind::Flags { values, default } => flags(name, value, values, default),
            Kind::Patterns => patterns(value),
            Kind::Pointer => Err(format!(
                "Property \"{name}\" must be set through dedicated .._set_..() function"
            )),
            Kind::Internal => Err(format!("Internal property \"{name}\" not settable")),
            Kind::Foreign => Err(foreign_hint(name).to_owned()),
        }
    };
    parsed.map_err(|message| PropertyError::invalid(key, value, message))
}

type Parsed = Result<Option<Setting>, String>;

fn string(name: &str, value: &str, default: Option<&str>, check: StrCheck) -> Parsed {
    // Emptiness is decided before trimming: only a truly empty value restores the default.
    let given = (!value.is_empty()).then(|| value.trim_start_matches(is_c_space_char));
    let valid = match check {
        StrCheck::Any => true,
        StrCheck::Partitioner => given.is_some_and(is_partitioner),
        StrCheck::SingleToken => given.is_some_and(|v| !v.contains([',', ' '])),
        StrCheck::BrokerVersion => {
            given.is_some_and(|v| !v.starts_with("0.7.") && !v.starts_with("0.6."))
        }
    };
    if !valid {
        return Err(format!(
            "Invalid value for configuration property \"{name}\": {}",
            given.unwrap_or("(null)")
        ));
    }
    Ok(Some(Setting::Str(
        given.map_or(default.map(str::to_owned), |v| Some(v.to_owned())),
    )))
}

fn boolean(name: &str, value: &str) -> Parsed {
    if value.is_empty() {
        return Err(format!(
            "Bool configuration property \"{name}\" cannot be set to empty value"
        ));
    }
    let yes = ["true", "t"].iter().any(|w| value.eq_ignore_ascii_case(w)) || value == "1";
    let no = ["false", "f"].iter().any(|w| value.eq_ignore_ascii_case(w)) || value == "0";
    if yes || no {
        Ok(Some(Setting::Bool(yes)))
    } else {
        Err(format!("Expected bool value for \"{name}\": true or false"))
    }
}

fn integer(name: &str, value: &str, min: i32, max: i32, names: &[(&str, i32)]) -> Parsed {
    if value.is_empty() {
        return Err(format!(
            "Integer configuration property \"{name}\" cannot be set to empty value"
        ));
    }
    let number = cnum::strtol_int(value).or_else(|| {
        names
            .iter()
            .find(|(word, _)| word.eq_ignore_ascii_case(value))
            .map(|&(_, n)| n)
    });
    let Some(number) = number else {
        return Err(format!(
            "Invalid value for configuration property \"{name}\""
        ));
    };
    if !(min..=max).contains(&number) {
        return Err(format!(
            "Configuration property \"{name}\" value {number} is outside allowed range \
             {min}..{max}"
        ));
    }
    Ok(Some(Setting::Int(number)))
}

fn float(name: &str, value: &str, min: f64, max: f64) -> Parsed {
    if value.is_empty() {
        return Err(format!(
            "Float configuration property \"{name}\" cannot be set to empty value"
        ));
    }
    let Some(number) = cnum::strtod(value).filter(|n| !n.is_nan()) else {
        return Err(format!(
            "Invalid value for configuration property \"{name}\""
        ));
    };
    if number < min || number > max {
        return Err(format!(
            "Configuration property \"{name}\" value {} is outside allowed range {}..{}",
            cnum::format_g(number),
            cnum::format_g(min),
            cnum::format_g(max)
        ));
    }
    Ok(Some(Setting::Float(number)))
}

fn enumeration(name: &str, value: &str, values: &[EnumValue]) -> Parsed {
    if value.is_empty() {
        return Err(empty_enum(name));
    }
    let word = value.trim_start_matches(is_c_space_char);
    if word.is_empty() {
        return Ok(None);
    }
    Ok(Some(Setting::Enum(enum_word(values, word, name)?)))
}

fn flags(name: &str, value: &str, values: &[Flag], default: u32) -> Parsed {
    if value.is_empty() {
        return Err(empty_enum(name));
    }
    let mut set = default;
    let mut changed = false;
    for part in value.split(',') {
        let part = part.trim_start_matches(is_c_space_char);
        let (add, word) = match part.as_bytes().first() {
            Some(b'+') => (true, &part[1..]),
            Some(b'-') => (false, &part[1..]),
            _ => (true, part),
        };
        if word.is_empty() {
            continue;
        }
        let Some(flag) = values.iter().find(|f| f.name.eq_ignore_ascii_case(word)) else {
            return Err(invalid_word(word, name));
        };
        if let Some(reason) = flag.gate.and_then(super::Gate::unsupported_reason) {
            return Err(unsupported_word(word, name, reason));
        }
        if add {
            set |= flag.bits;
        } else {
            set &= !flag.bits;
        }
        changed = true;
    }
    Ok(changed.then_some(Setting::Flags(set)))
}

fn patterns(value: &str) -> Parsed {
    if value.is_empty() {
        return Ok(Some(Setting::Str(None)));
    }
    for pattern in split_patterns(value) {
        if let Err(e) = regex::Regex::new(pattern) {
            return Err(format!("Failed to parse pattern \"{pattern}\": {e}"));
        }
    }
    Ok(Some(Setting::Str(Some(value.to_owned()))))
}

fn is_c_space_char(c: char) -> bool {
    c.is_ascii() && cnum::is_c_space(c as u8)
}

fn empty_enum(name: &str) -> String {
    format!("Configuration property \"{name}\" cannot be set to empty value")
}

/// The index of `word` among `values`, or librdkafka's message for a word it does not know or
/// that needs a build option this crate lacks.
fn enum_word(values: &[EnumValue], word: &str, name: &str) -> Result<usize, String> {
    let Some(index) = values
        .iter()
        .position(|v| v.name.eq_ignore_ascii_case(word))
    else {
        return Err(invalid_word(word, name));
    };
    if let Some(reason) = values[index].gate.and_then(super::Gate::unsupported_reason) {
        return Err(unsupported_word(word, name, reason));
    }
    // TLS needs the `ssl` feature: without it the TLS protocols are refused as librdkafka built
    // without OpenSSL refuses them (the `ssl.*` settings stay accepted, and unused).
    if values[index].gate == Some(super::Gate::Ssl) && !cfg!(feature = "ssl") {
        return Err(unsupported_word(
            word,
            name,
            "OpenSSL not available at build time",
        ));
    }
    Ok(index)
}

fn invalid_word(word: &str, name: &str) -> String {
    format!("Invalid value \"{word}\" for configuration property \"{name}\"")
}

fn unsupported_word(word: &str, name: &str, reason: &str) -> String {
    format!("Unsupported value \"{word}\" for configuration property \"{name}\": {reason}")
}

fn is_partitioner(name: &str) -> bool {
    matches!(
        name,
        "random"
            | "consistent"
            | "consistent_random"
            | "murmur2"
            | "murmur2_random"
            | "fnv1a"
            | "fnv1a_random"
    )
}

/// librdkafka's split of a pattern list: at every comma, with nothing after a final comma.
///
/// librdkafka means a doubled comma to stand for a comma inside a pattern, but its scan ends a
/// pattern at the first comma it meets, so the escape never applies: `a,,b` is `a`, the empty
/// pattern, and `b`. This follows what it does.
pub(super) fn split_patterns(list: &str) -> Vec<&str> {
    let mut patterns: Vec<&str> = list.split(',').collect();
    if list.ends_with(',') {
        patterns.pop();
    }
    patterns
}

/// This crate's hint for a Java client property librdkafka refuses by name.
fn foreign_hint(name: &str) -> &'static str {
    if name == "sasl.jaas.config" {
        "`sasl.jaas.config` is a Java client setting: set `sasl.mechanism`, `sasl.username` \
         and `sasl.password` (or the `sasl.oauthbearer.*` properties) instead"
    } else {
        "`ssl.truststore.location` is a Java client setting: give the CA certificates in PEM \
         form with `ssl.ca.location` or `ssl.ca.pem` instead"
    }
}
