//! Unit tests of the property table, value parsing, cross-checks, redaction and conversions.

mod checks;
mod conversions;
mod redaction;
mod table;
mod values;

use std::fmt::Debug;

use super::{Properties, PropertyError};

/// Properties of `pairs`, in order.
fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().copied().collect()
}

/// The message of the refusal `result` must be.
#[track_caller]
fn refusal<T: Debug>(result: Result<T, PropertyError>) -> String {
    match result {
        Ok(v) => panic!("accepted: {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// The message a consumer configuration of `pairs` is refused with.
#[track_caller]
fn consumer_refusal(pairs: &[(&str, &str)]) -> String {
    refusal(props(pairs).consumer())
}

/// The message a producer configuration of `pairs` is refused with.
#[track_caller]
fn producer_refusal(pairs: &[(&str, &str)]) -> String {
    refusal(props(pairs).producer())
}

/// The message the value check of `pairs` refuses them with.
#[track_caller]
fn check_refusal(pairs: &[(&str, &str)]) -> String {
    refusal(props(pairs).check())
}
