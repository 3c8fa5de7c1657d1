//! `isolation.level`: which records of transactions a reader sees. A leaf: the consumer, the
//! partition reader and the admin's offset lookups all name it.

/// `isolation.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Every record, including those of open and aborted transactions.
    ReadUncommitted,
    /// Only committed records, up to the last stable offset (librdkafka's default).
    #[default]
    ReadCommitted,
}
