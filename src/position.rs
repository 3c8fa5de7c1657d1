//! [`KafkaPosition`]: where a seek moves a subscription. A plain value: this module names
//! nothing else of the crate, so the subscription's core, deliveries and seekers all share it.

/// Where to move a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KafkaPosition {
    /// Every assigned partition to its log start.
    Earliest,
    /// Every assigned partition to its log end as of the seek (records published after the
    /// seek are delivered).
    Latest,
    /// Every assigned partition to its first record at or after this time (ms since the
    /// epoch), or to its end when there is none.
    Timestamp(i64),
    /// One offset of one partition.
    Offset {
        /// The topic; `None` means that partition number of every assigned topic.
        topic: Option<String>,
        /// The partition.
        partition: i32,
        /// The offset of the next record to deliver.
        offset: i64,
    },
}

impl KafkaPosition {
    /// Every assigned partition to its log start.
    #[must_use]
    pub const fn earliest() -> Self {
        Self::Earliest
    }

    /// Every assigned partition to its log end.
    #[must_use]
    pub const fn latest() -> Self {
        Self::Latest
    }

    /// `offset` of partition `partition` of every assigned topic.
    #[must_use]
    pub const fn offset(partition: i32, offset: i64) -> Self {
        Self::Offset {
            topic: None,
            partition,
            offset,
        }
    }

    /// `offset` of one partition of one topic.
    #[must_use]
    pub fn topic_offset(topic: impl Into<String>, partition: i32, offset: i64) -> Self {
        Self::Offset {
            topic: Some(topic.into()),
            partition,
            offset,
        }
    }

    /// The first record at or after `when_millis` (ms since the epoch), per assigned partition.
    #[must_use]
    pub const fn timestamp(when_millis: i64) -> Self {
        Self::Timestamp(when_millis)
    }
}
