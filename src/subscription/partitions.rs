//! [`KafkaPartitions`]: named partitions of one topic, by manual assignment.

use ruststream::runtime::IntoSource;
use ruststream::{NamedCopies, SubscriptionSource};

use super::{Commit, LaneKey, Settings, StartOffset, Target, check_topic_name};
use crate::connection::ConnectedKafkaBroker;
use crate::error::KafkaError;
use crate::subscriber::KafkaSubscriber;

/// Named partitions of one topic read by manual assignment: no group membership and no
/// rebalance. With a [`group`](Self::group) it resumes from and commits into that group's
/// offsets without joining it; without one it reads from a fixed start and commits nothing.
///
/// ```
/// use ruststream_kafka::{KafkaPartitions, StartOffset};
///
/// let audit = KafkaPartitions::new("audit", [0, 2]).start(StartOffset::Earliest);
/// assert_eq!(audit.partitions(), &[0, 2]);
/// ```
#[derive(Debug, Clone)]
pub struct KafkaPartitions {
    topic: String,
    partitions: Vec<i32>,
    settings: Settings,
}

impl KafkaPartitions {
    /// Reads `partitions` of `topic`.
    #[must_use]
    pub fn new(topic: impl Into<String>, partitions: impl IntoIterator<Item = i32>) -> Self {
        Self {
            topic: topic.into(),
            partitions: partitions.into_iter().collect(),
            settings: Settings::default(),
        }
    }

    /// The group whose committed offsets it resumes from and commits into (it never joins);
    /// the broker's `default_group` otherwise.
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.settings.group = Some(group.into());
        self
    }

    /// Where reading starts: `Committed` resumes from the group (and needs one), `Earliest`
    /// and `Latest` pin the log start or end when the subscription opens.
    #[must_use]
    pub fn start(mut self, start: StartOffset) -> Self {
        self.settings.start = start;
        self
    }

    /// When offsets are committed (`Commit::Tracked` needs a group; `Commit::Transactional` is
    /// not available here).
    #[must_use]
    pub fn commit(mut self, commit: Commit) -> Self {
        self.settings.commit = commit;
        self
    }

    /// What `workers(n, by_key)` lanes key on.
    #[must_use]
    pub fn lane_key(mut self, lane_key: LaneKey) -> Self {
        self.settings.lane_key = lane_key;
        self
    }

    /// A librdkafka consumer property for this subscription, applied last.
    #[must_use]
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.config.set(key, value);
        self
    }

    /// The topic (also the subscription's name).
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partitions.
    #[must_use]
    pub fn partitions(&self) -> &[i32] {
        &self.partitions
    }

    fn check(&self, has_group: bool) -> Result<(), KafkaError> {
        if self.partitions.is_empty() {
            return Err(KafkaError::InvalidOptions(format!(
                "KafkaPartitions {:?} names no partition",
                self.topic
            )));
        }
        if let Some(bad) = self.partitions.iter().find(|p| **p < 0) {
            return Err(KafkaError::InvalidOptions(format!(
                "KafkaPartitions {:?}: partition {bad} does not exist",
                self.topic
            )));
        }
        if matches!(self.settings.commit, Commit::Transactional(_)) {
            return Err(KafkaError::InvalidOptions(format!(
                "KafkaPartitions {:?} cannot use Commit::Transactional: exactly-once commits \
                 need a group subscription (KafkaTopic or KafkaTopics)",
                self.topic
            )));
        }
        if !has_group && self.settings.commit == Commit::Tracked {
            return Err(KafkaError::InvalidOptions(format!(
                "KafkaPartitions {:?} with Commit::Tracked needs a consumer group to commit \
                 into: add `.group(..)`",
                self.topic
            )));
        }
        if !has_group && self.settings.start == StartOffset::Committed {
            return Err(KafkaError::InvalidOptions(format!(
                "KafkaPartitions {:?} starts at the committed offset (the default) but has no \
                 consumer group: add `.group(..)` or `.start(StartOffset::Earliest)` / \
                 `.start(StartOffset::Latest)`",
                self.topic
            )));
        }
        if self.topic.starts_with('^') {
            return Err(KafkaError::InvalidOptions(format!(
                "KafkaPartitions reads one literal topic, not the pattern {:?}",
                self.topic
            )));
        }
        check_topic_name(&self.topic).map_err(|e| KafkaError::Subscribe(KafkaError::text(e)))
    }
}

impl IntoSource for KafkaPartitions {
    type Source = Self;

    fn into_source(self) -> Self {
        self
    }
}

impl SubscriptionSource<ConnectedKafkaBroker> for KafkaPartitions {
    type Subscriber = KafkaSubscriber;
    type Copies = NamedCopies;

    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self) -> ruststream::asyncapi::Bindings {
        crate::bindings::channel(&self.topic)
    }

    #[cfg(feature = "asyncapi")]
    fn operation_bindings(&self) -> ruststream::asyncapi::Bindings {
        crate::bindings::operation(self.settings.group.as_deref(), self.settings.config.iter())
    }

    fn name(&self) -> &str {
        &self.topic
    }

    async fn subscribe(
        self,
        connected: &ConnectedKafkaBroker,
    ) -> Result<KafkaSubscriber, KafkaError> {
        // A partition reader never joins its group: it only resumes from and commits into it.
        let has_group =
            self.settings.group.is_some() || connected.state().default_group().is_some();
        self.check(has_group)?;
        let mut partitions = self.partitions.clone();
        partitions.sort_unstable();
        partitions.dedup();
        let target = Target::Partitions {
            topic: self.topic.clone(),
            partitions,
        };
        let plan = self.settings.plan(connected.state(), &self.topic, target)?;
        KafkaSubscriber::open(connected.shared_state(), plan).await
    }
}
