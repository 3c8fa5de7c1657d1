//! What a transactional call can fail with, sorted by what the caller may do next.
//!
//! Every failure of a transaction lands in one [`TransactionErrorKind`]: the caller's misuse
//! (`Busy`, `NoTransaction`, `Uninitialized`) changes nothing; `Abortable` leaves the transaction
//! to be aborted and the producer usable; `Fenced` and `Fatal` leave the producer unusable until
//! [`init`](super::TransactionalProducer::init) runs again.

use std::sync::Arc;

use crate::client::error::{Error, ResponseError};

/// What a [`TransactionError`] means for the producer and its open transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionErrorKind {
    /// `begin` while a transaction is open or completing, or a transactional call while
    /// another one runs. Nothing changed.
    Busy,
    /// `commit`, `abort`, `send` or `send_offsets` with no transaction open. Nothing changed.
    NoTransaction,
    /// The producer has no producer id yet: `init` first.
    Uninitialized,
    /// The open transaction cannot commit: abort it; the producer goes on with the next one.
    Abortable,
    /// A newer producer with the same transactional id took over, or (classic protocol) the
    /// coordinator aborted a transaction that stayed open past `transaction.timeout.ms` and
    /// bumped the epoch: the producer is unusable until `init` again. The message says
    /// `fenced`.
    Fenced,
    /// An error the producer cannot recover from by itself (authorization, an invalid
    /// transaction state, a broker without the needed API): unusable until `init` again. With
    /// the v2 protocol a commit after the coordinator aborted the transaction for its timeout
    /// ends here (`INVALID_TXN_STATE`); the message then names the timeout.
    Fatal,
}

/// A transactional call refused, or a transaction that failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("transactional id `{transactional_id}`: {message}")]
pub struct TransactionError {
    kind: TransactionErrorKind,
    transactional_id: Arc<str>,
    message: String,
    #[source]
    cause: Option<Box<Error>>,
}

impl TransactionError {
    pub(crate) fn new(
        kind: TransactionErrorKind,
        transactional_id: &Arc<str>,
        message: impl Into<String>,
    ) -> Self {
        TransactionError {
            kind,
            transactional_id: transactional_id.clone(),
            message: message.into(),
            cause: None,
        }
    }

    /// `kind`, with `cause`'s text after `doing`.
    pub(crate) fn caused(
        kind: TransactionErrorKind,
        transactional_id: &Arc<str>,
        doing: &str,
        cause: Error,
    ) -> Self {
        let what = match kind {
            TransactionErrorKind::Fenced => "fenced",
            TransactionErrorKind::Fatal => "fatal error",
            TransactionErrorKind::Abortable => "the transaction must be aborted",
            _ => "refused",
        };
        TransactionError {
            kind,
            transactional_id: transactional_id.clone(),
            message: format!("{what}: {doing}: {cause}"),
            cause: Some(Box::new(cause)),
        }
    }

    /// What the error means for the producer.
    #[must_use]
    pub fn kind(&self) -> TransactionErrorKind {
        self.kind
    }

    /// The producer's transactional id.
    #[must_use]
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// Whether the producer is unusable until re-initialized.
    #[must_use]
    pub fn is_fatal(&self) -> bool {
        matches!(
            self.kind,
            TransactionErrorKind::Fenced | TransactionErrorKind::Fatal
        )
    }

    /// The Kafka error code behind it, if a broker sent one.
    #[must_use]
    pub fn code(&self) -> Option<ResponseError> {
        self.cause.as_ref().and_then(|c| c.code())
    }

    /// Adds a sentence to the message (e.g. the likely cause of a fence).
    pub(crate) fn explained(mut self, why: &str) -> Self {
        self.message.push_str(" (");
        self.message.push_str(why);
        self.message.push(')');
        self
    }
}

/// Where a failure came from: a partition leader answers some codes differently from the
/// coordinators (`INVALID_TXN_STATE` from a Produce only dooms the transaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Produce,
    Coordinator,
}

/// Sorts a failure that ended a transactional request (retries exhausted or not retriable).
pub(crate) fn classify(
    transactional_id: &Arc<str>,
    origin: Origin,
    doing: &str,
    error: Error,
) -> TransactionError {
    if let Error::Transaction(e) = error {
        return e;
    }
    let kind = match error.code() {
        Some(ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch) => {
            TransactionErrorKind::Fenced
        }
        Some(
            ResponseError::TransactionalIdAuthorizationFailed
            | ResponseError::ClusterAuthorizationFailed
            | ResponseError::InvalidProducerIdMapping
            | ResponseError::InvalidTransactionTimeout
            | ResponseError::UnsupportedVersion
            | ResponseError::UnsupportedForMessageFormat,
        ) => TransactionErrorKind::Fatal,
        Some(ResponseError::InvalidTxnState) if origin == Origin::Coordinator => {
            TransactionErrorKind::Fatal
        }
        _ if matches!(
            error,
            Error::Unsupported(_) | Error::Protocol(_) | Error::Fatal(_)
        ) =>
        {
            TransactionErrorKind::Fatal
        }
        _ => TransactionErrorKind::Abortable,
    };
    TransactionError::caused(kind, transactional_id, doing, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(code: ResponseError) -> Error {
        Error::Broker {
            code,
            context: "test".into(),
        }
    }

    #[test]
    fn fences_and_authorization_are_fatal_other_errors_abortable() {
        use ResponseError as R;
        use TransactionErrorKind as K;
        let id: Arc<str> = Arc::from("t");
        let kind = |origin, code| classify(&id, origin, "x", broker(code)).kind();
        assert_eq!(kind(Origin::Produce, R::InvalidProducerEpoch), K::Fenced);
        assert_eq!(kind(Origin::Coordinator, R::ProducerFenced), K::Fenced);
        assert_eq!(
            kind(Origin::Coordinator, R::TransactionalIdAuthorizationFailed),
            K::Fatal
        );
        assert_eq!(kind(Origin::Coordinator, R::InvalidTxnState), K::Fatal);
        assert_eq!(kind(Origin::Produce, R::InvalidTxnState), K::Abortable);
        assert_eq!(kind(Origin::Produce, R::TransactionAbortable), K::Abortable);
        assert_eq!(
            kind(Origin::Coordinator, R::UnknownProducerId),
            K::Abortable
        );
        let e = classify(
            &id,
            Origin::Coordinator,
            "ending",
            broker(R::ProducerFenced),
        );
        assert!(e.to_string().contains("fenced"), "{e}");
        assert!(e.is_fatal());
        assert_eq!(e.code(), Some(R::ProducerFenced));
    }
}
