//! [`KafkaTopic`]: one topic through one consumer group.

use ruststream::runtime::IntoSource;
use ruststream::{AddressedCopies, RedeliveryAddress, RedeliveryAddressed, SubscriptionSource};

use super::{Assignment, Commit, LaneKey, Settings, StartOffset, Target, check_topic_name};
use crate::connection::ConnectedKafkaBroker;
use crate::error::KafkaError;
use crate::subscriber::KafkaSubscriber;

/// One topic read through one consumer group: the descriptor a bare name becomes, and the only
/// one whose retry copies have an address of their own (the topic).
///
/// ```
/// use ruststream_kafka::{Commit, KafkaTopic, StartOffset};
///
/// let orders = KafkaTopic::new("orders")
///     .group("billing")
///     .start(StartOffset::Earliest)
///     .commit(Commit::Tracked);
/// assert_eq!(orders.topic(), "orders");
/// ```
#[derive(Debug, Clone)]
pub struct KafkaTopic {
    topic: String,
    settings: Settings,
}

impl KafkaTopic {
    /// Reads `topic`; every other setting is librdkafka's default.
    #[must_use]
    pub fn new(topic: impl Into<String>) -> Self {
        Self {
            topic: topic.into(),
            settings: Settings::default(),
        }
    }

    /// The consumer group, instead of the broker's `default_group`.
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.settings.group = Some(group.into());
        self
    }

    /// Where the group starts on partitions it has no committed offset for.
    #[must_use]
    pub fn start(mut self, start: StartOffset) -> Self {
        self.settings.start = start;
        self
    }

    /// When offsets are committed.
    #[must_use]
    pub fn commit(mut self, commit: Commit) -> Self {
        self.settings.commit = commit;
        self
    }

    /// The group's assignment strategy.
    #[must_use]
    pub fn assignment(mut self, assignment: Assignment) -> Self {
        self.settings.assignment = Some(assignment);
        self
    }

    /// What `workers(n, by_key)` lanes key on.
    #[must_use]
    pub fn lane_key(mut self, lane_key: LaneKey) -> Self {
        self.settings.lane_key = lane_key;
        self
    }

    /// A librdkafka consumer property for this subscription, applied last (it wins over the
    /// typed settings and the broker's `config`).
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

    fn check(&self) -> Result<(), KafkaError> {
        if self.topic.is_empty() {
            return Err(KafkaError::InvalidOptions(
                "KafkaTopic needs a topic name; it is empty".into(),
            ));
        }
        if self.topic.starts_with('^') {
            return Err(KafkaError::InvalidOptions(format!(
                "{:?} is a pattern; KafkaTopic reads one literal topic, use \
                 `KafkaTopics::pattern({:?})` for a regex",
                self.topic, self.topic
            )));
        }
        check_topic_name(&self.topic).map_err(|e| KafkaError::Subscribe(KafkaError::text(e)))
    }
}

impl IntoSource for KafkaTopic {
    type Source = Self;

    fn into_source(self) -> Self {
        self
    }
}

impl SubscriptionSource<ConnectedKafkaBroker> for KafkaTopic {
    type Subscriber = KafkaSubscriber;
    type Copies = AddressedCopies;

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
        self.check()?;
        let target = Target::Group {
            topics: vec![self.topic.clone()],
            patterns: Vec::new(),
        };
        let plan = self.settings.plan(connected.state(), &self.topic, target)?;
        KafkaSubscriber::open(connected.shared_state(), plan).await
    }
}

impl RedeliveryAddressed<ConnectedKafkaBroker> for KafkaTopic {
    fn redelivery_address(
        &self,
        _connected: &ConnectedKafkaBroker,
    ) -> impl Future<Output = Result<RedeliveryAddress, KafkaError>> + Send {
        std::future::ready(Ok(RedeliveryAddress::new(self.topic.clone())))
    }
}
