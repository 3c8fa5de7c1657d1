//! [`KafkaError`]: the one error type of every surface of the crate.
//!
//! Errors of the native client, of property validation and of the crate's own checks are boxed
//! as the variant's source, so no client type leaks into the public API; the variant says which
//! surface failed (connecting, publishing, subscribing, consuming).

use std::error::Error as StdError;

use thiserror::Error;

/// What went wrong, by the surface that failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum KafkaError {
    /// Connecting failed: the client configuration was refused, or the cluster did not answer
    /// the connect probe within `connect_timeout`.
    #[error("kafka connection error: {0}")]
    Connect(#[source] Box<dyn StdError + Send + Sync>),

    /// A record was not delivered: refused, too large, timed out, the local queue stayed full,
    /// or a transaction call or the shutdown flush failed.
    #[error("kafka publish error: {0}")]
    Publish(#[source] Box<dyn StdError + Send + Sync>),

    /// A subscription could not be opened: an illegal topic name, a refused consumer
    /// configuration, a refused join, or no assignment within `assignment_timeout`.
    #[error("kafka subscribe error: {0}")]
    Subscribe(#[source] Box<dyn StdError + Send + Sync>),

    /// A running subscription reported an error (the stream goes on), or a seek failed.
    #[error("kafka consume error: {0}")]
    Consume(#[source] Box<dyn StdError + Send + Sync>),

    /// A handle was used after the broker it came from was shut down.
    #[error("kafka connection is closed; cannot reach {topic}")]
    Closed {
        /// The topic, subscription or transactional id the call was for.
        topic: String,
    },

    /// Options that do not go together, or a value the crate itself refuses.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// `begin_transaction` while a transaction of the same publisher is open.
    #[error(
        "transactional publisher {id} already has an open transaction: commit or abort it \
         first; for transactions that run side by side, use one publisher per flow (the \
         per-partition set gives each partition its own)"
    )]
    TransactionBusy {
        /// The transactional id.
        id: String,
    },

    /// `commit` or `abort` with no transaction open.
    #[error("no transaction is open on publisher {id}; `begin_transaction` opens one")]
    NoTransaction {
        /// The transactional id.
        id: String,
    },

    /// The schema registry failed a request, does not hold a subject or id a codec needs, or
    /// judged a schema incompatible with the subject's versions.
    #[cfg(feature = "schema-registry")]
    #[error("schema registry error: {0}")]
    SchemaRegistry(#[source] Box<dyn StdError + Send + Sync>),

    /// A schema registry request got no answer within the registry's `request_timeout`.
    #[cfg(feature = "schema-registry")]
    #[error("schema registry request {request} did not answer within {timeout:?}")]
    SchemaRegistryTimeout {
        /// The request path, e.g. `/schemas/ids/7`.
        request: String,
        /// The bound that elapsed.
        timeout: std::time::Duration,
    },

    /// An Avro or Protobuf value could not be written or read, or a payload's Confluent
    /// envelope is malformed.
    #[cfg(feature = "schema-registry")]
    #[error("wire format error: {0}")]
    WireFormat(#[source] Box<dyn StdError + Send + Sync>),
}

impl KafkaError {
    pub(crate) fn connect(err: impl StdError + Send + Sync + 'static) -> Self {
        Self::Connect(Box::new(err))
    }

    pub(crate) fn publish(err: impl StdError + Send + Sync + 'static) -> Self {
        Self::Publish(Box::new(err))
    }

    pub(crate) fn subscribe(err: impl StdError + Send + Sync + 'static) -> Self {
        Self::Subscribe(Box::new(err))
    }

    pub(crate) fn consume(err: impl StdError + Send + Sync + 'static) -> Self {
        Self::Consume(Box::new(err))
    }

    /// A plain message as an error source.
    pub(crate) fn text(message: impl Into<String>) -> Box<dyn StdError + Send + Sync> {
        message.into().into()
    }

    #[cfg(feature = "schema-registry")]
    pub(crate) fn registry(err: impl StdError + Send + Sync + 'static) -> Self {
        Self::SchemaRegistry(Box::new(err))
    }

    #[cfg(feature = "schema-registry")]
    pub(crate) fn registry_text(message: impl Into<String>) -> Self {
        Self::SchemaRegistry(Self::text(message))
    }

    #[cfg(feature = "schema-registry")]
    #[cfg_attr(
        not(any(feature = "avro", feature = "protobuf")),
        allow(dead_code, reason = "the Avro and Protobuf codecs report through it")
    )]
    pub(crate) fn wire(err: impl StdError + Send + Sync + 'static) -> Self {
        Self::WireFormat(Box::new(err))
    }

    #[cfg(feature = "schema-registry")]
    pub(crate) fn wire_text(message: impl Into<String>) -> Self {
        Self::WireFormat(Self::text(message))
    }

    pub(crate) fn closed(topic: impl Into<String>) -> Self {
        Self::Closed {
            topic: topic.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KafkaError;

    #[test]
    fn variants_say_which_surface_failed() {
        let err = KafkaError::Publish(KafkaError::text("too large"));
        assert_eq!(err.to_string(), "kafka publish error: too large");
        let err = KafkaError::closed("orders");
        assert_eq!(
            err.to_string(),
            "kafka connection is closed; cannot reach orders"
        );
        let err = KafkaError::InvalidOptions("x".into());
        assert_eq!(err.to_string(), "invalid options: x");
        let busy = KafkaError::TransactionBusy { id: "tx".into() }.to_string();
        assert!(busy.contains("tx"), "{busy}");
    }
}
