//! Seeking: [`KafkaSeeker`] moves a running subscription to a [`KafkaPosition`].
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
use crate::position::KafkaPosition;
use crate::subscriber::shared::SubCore;
use ruststream::Seeker;

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
