//! A partition of a topic: the name the events, the consumer and the admin calls share.
//!
//! A leaf: it imports nothing of the client, so every module may name a partition.

use std::sync::Arc;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`/`partition`.
    pub fn new(topic: impl AsRef<str>, partition: i32) -> Self {
        TopicPartition {
            topic: Arc::from(topic.as_ref()),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
