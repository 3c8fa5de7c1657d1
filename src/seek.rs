//! Positions and seeking: [`KafkaPosition`] and [`KafkaSeeker`].
//!
//! A seek moves only this consumer's assigned partitions (other group members are untouched)
//! and commits nothing by itself. Before a partition moves, its tracked state starts over, and
//! the position stored for the next commit becomes the seek's target, so a commit can never
//! carry the group past records the seek replays. A consumer that holds no partitions yet
//! keeps the position for its first assignment. The next rebalance discards a seek: whoever
//! gets a partition next resumes from the group's committed offset.

use std::fmt;
use std::sync::Arc;

use crate::error::KafkaError;
use crate::subscriber::SubCore;
use ruststream::Seeker;

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

/// Repositions a running subscription. Holding one keeps the subscription's consumer open.
#[derive(Clone)]
pub struct KafkaSeeker {
    core: Arc<SubCore>,
}

impl fmt::Debug for KafkaSeeker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaSeeker")
            .field("subscription", &self.core.name)
            .finish()
    }
}

impl KafkaSeeker {
    pub(crate) fn new(core: Arc<SubCore>) -> Self {
        Self { core }
    }

    /// The subscription it seeks in.
    pub(crate) fn core(&self) -> &SubCore {
        &self.core
    }
}

impl Seeker for KafkaSeeker {
    type Position = KafkaPosition;
    type Error = KafkaError;

    /// Moves the subscription; returns once the next delivery reflects the position. Fails
    /// with [`KafkaError::InvalidOptions`] when the position names no assigned partition
    /// (nothing moves), with [`KafkaError::Closed`] after the broker shut down. Not
    /// cancel-safe: a dropped call may or may not have moved the subscription.
    async fn seek(&self, to: KafkaPosition) -> Result<(), KafkaError> {
        self.core.state.ensure_open(&self.core.name)?;
        self.core.seek(to).await
    }
}
