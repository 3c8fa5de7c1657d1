//! Why librdkafka, and so this crate, refuses a configuration.

use std::fmt;

use super::is_redacted;

/// A refused configuration, with librdkafka's message.
///
/// librdkafka refuses a configuration at two moments, and rdkafka reports them as two errors:
/// when one property is set (an unknown name, or a value of the wrong type, out of range, or not
/// supported by the build: rdkafka's `ClientConfig` error, which also names the key and value
/// that were set) and when the client is created from the whole configuration (properties that
/// contradict each other: rdkafka's `ClientCreation` error). The variants follow that split, and
/// `Display` prints librdkafka's own text, without rdkafka's prefixes (`Client config error: `,
/// `Client creation error: `), which the adapter adds where it reproduces rdkafka's errors.
///
/// `Debug` hides the value of a secret (the keys [`Properties`](super::Properties) redacts).
#[derive(Clone, PartialEq, Eq)]
pub enum PropertyError {
    /// No property has this name (librdkafka's `RD_KAFKA_CONF_UNKNOWN`).
    Unknown {
        /// The key as it was set.
        key: String,
        /// The value it was set to.
        value: String,
        /// librdkafka's message: `No such configuration property: "..."`.
        message: String,
    },
    /// The property exists but refuses the value (librdkafka's `RD_KAFKA_CONF_INVALID`),
    /// including a property or value this build does not support.
    Invalid {
        /// The key as it was set.
        key: String,
        /// The value it was set to.
        value: String,
        /// librdkafka's message, which names the property by librdkafka's own name
        /// (`request.required.acks` for a bad `acks`).
        message: String,
    },
    /// Every property was accepted, but together they do not make a client.
    Conflict {
        /// librdkafka's message, such as `` `acks` must be set to `all` when
        /// `enable.idempotence` is true ``.
        message: String,
    },
}

impl PropertyError {
    /// librdkafka's message.
    #[must_use]
    pub fn message(&self) -> &str {
        match self {
            PropertyError::Unknown { message, .. }
            | PropertyError::Invalid { message, .. }
            | PropertyError::Conflict { message } => message,
        }
    }

    /// The key that was refused, for the errors about one property.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        match self {
            PropertyError::Unknown { key, .. } | PropertyError::Invalid { key, .. } => Some(key),
            PropertyError::Conflict { .. } => None,
        }
    }

    /// The value that was refused, for the errors about one property.
    #[must_use]
    pub fn value(&self) -> Option<&str> {
        match self {
            PropertyError::Unknown { value, .. } | PropertyError::Invalid { value, .. } => {
                Some(value)
            }
            PropertyError::Conflict { .. } => None,
        }
    }

    pub(super) fn unknown(key: &str, value: &str, name: &str) -> Self {
        PropertyError::Unknown {
            key: key.to_owned(),
            value: value.to_owned(),
            message: format!("No such configuration property: \"{name}\""),
        }
    }

    pub(super) fn invalid(key: &str, value: &str, message: String) -> Self {
        PropertyError::Invalid {
            key: key.to_owned(),
            value: value.to_owned(),
            message,
        }
    }

    pub(super) fn conflict(message: impl Into<String>) -> Self {
        PropertyError::Conflict {
            message: message.into(),
        }
    }
}

impl fmt::Display for PropertyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl fmt::Debug for PropertyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |key: &str, value: &str| {
            if is_redacted(key) {
                "[redacted]".to_owned()
            } else {
                format!("{value:?}")
            }
        };
        match self {
            PropertyError::Unknown {
                key,
                value,
                message,
            } => write!(
                f,
                "Unknown {{ key: {key:?}, value: {}, message: {message:?} }}",
                shown(key, value)
            ),
            PropertyError::Invalid {
                key,
                value,
                message,
            } => write!(
                f,
                "Invalid {{ key: {key:?}, value: {}, message: {message:?} }}",
                shown(key, value)
            ),
            PropertyError::Conflict { message } => {
                write!(f, "Conflict {{ message: {message:?} }}")
            }
        }
    }
}

impl std::error::Error for PropertyError {}
