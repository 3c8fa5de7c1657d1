//! The one error type of the native client.
//!
//! Every error says what failed and whether trying again can help ([`Error::is_retriable`]):
//! the producer and metadata layers retry exactly the errors that say so, and surface the rest.

use std::sync::Arc;

pub use kafka_protocol::error::ResponseError;

pub use crate::client::producer::TransactionError;

/// What went wrong in the client.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The broker answered with a Kafka error code.
    #[error("{context}: broker error {code:?} ({})", code.code())]
    Broker {
        /// The error code the broker sent.
        code: ResponseError,
        /// What the client was doing.
        context: String,
    },
    /// A socket could not be opened, or broke while in use.
    #[error("connection to {broker}: {source}")]
    Io {
        /// The broker's address.
        broker: String,
        /// The underlying I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The broker sent bytes that do not decode as the expected message.
    #[error("malformed data from the broker: {0}")]
    Protocol(String),
    /// No answer came within the allowed time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The configuration is invalid; the text names the setting.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A record cannot be sent as it is (too large, unknown partition, ...).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// The broker supports no version of an API that the client needs.
    #[error("the broker does not support {0}")]
    Unsupported(String),
    /// The client, connection or producer has been closed.
    #[error("closed: {0}")]
    Closed(String),
    /// The idempotent or transactional producer hit an error it cannot recover from.
    #[error("fatal producer error: {0}")]
    Fatal(String),
    /// SASL authentication failed: wrong credentials, unknown user, a mechanism the broker
    /// does not enable, or a server that could not prove it knows the password.
    #[error("authentication failed with {broker}: {reason}")]
    Authentication {
        /// The broker's address.
        broker: String,
        /// What failed, in the broker's words where it gave some.
        reason: String,
    },
    /// The TLS handshake failed: the broker's certificate is not trusted or does not name the
    /// host, or the TLS settings (CA, certificate, key) cannot be used.
    #[error("TLS with {broker}: {reason}")]
    Tls {
        /// The broker's address (empty for a settings error found before dialling).
        broker: String,
        /// What failed.
        reason: String,
    },
    /// A transactional call was refused or its transaction failed; the error's
    /// [`kind`](TransactionError::kind) says what the caller can do next.
    #[error(transparent)]
    Transaction(#[from] TransactionError),
}

impl Error {
    /// Whether trying the same operation again later can succeed.
    #[must_use]
    pub fn is_retriable(&self) -> bool {
        match self {
            // Kafka's own clients retry CONCURRENT_TRANSACTIONS (the previous transaction of
            // the producer is still completing); kafka-protocol's table does not say so.
            Error::Broker { code, .. } => {
                *code == ResponseError::ConcurrentTransactions || code.is_retriable()
            }
            Error::Io { .. } | Error::Timeout(_) => true,
            Error::Protocol(_)
            | Error::Config(_)
            | Error::InvalidRecord(_)
            | Error::Unsupported(_)
            | Error::Closed(_)
            | Error::Fatal(_)
            | Error::Authentication { .. }
            | Error::Tls { .. }
            | Error::Transaction(_) => false,
        }
    }

    /// The Kafka error code, when the broker sent one.
    #[must_use]
    pub fn code(&self) -> Option<ResponseError> {
        match self {
            Error::Broker { code, .. } => Some(*code),
            Error::Transaction(e) => e.code(),
            _ => None,
        }
    }

    /// Turns a response error code into a result; `0` is success.
    pub fn check(code: i16, context: impl FnOnce() -> String) -> Result<(), Error> {
        match ResponseError::try_from_code(code) {
            None => Ok(()),
            Some(code) => Err(Error::Broker {
                code,
                context: context(),
            }),
        }
    }

    pub(crate) fn io(broker: &str, source: std::io::Error) -> Error {
        Error::Io {
            broker: broker.to_owned(),
            source: Arc::new(source),
        }
    }

    pub(crate) fn protocol(what: impl std::fmt::Display) -> Error {
        Error::Protocol(what.to_string())
    }
}

/// The client's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
