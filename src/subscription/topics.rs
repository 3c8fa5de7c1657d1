//! [`KafkaTopics`]: several literal topics and `^` patterns through one consumer and group.

use ruststream::runtime::IntoSource;
use ruststream::{NamedCopies, SubscriptionSource};

use super::{Assignment, Commit, LaneKey, Settings, StartOffset, Target, check_topic_name};
use crate::connection::ConnectedKafkaBroker;
use crate::error::KafkaError;
use crate::subscriber::KafkaSubscriber;

/// Literal topics and `^`-anchored regular expressions read through one consumer and one group;
/// each delivery reports the topic it came from. Topics created later that match a pattern are
/// picked up at the next metadata refresh (`topic.metadata.refresh.interval.ms`).
///
/// A registration over it names where retry copies go (`.out_retry(..).to(..)`), as it reads
/// more than one destination.
///
/// ```
/// use ruststream_kafka::KafkaTopics;
///
/// let all = KafkaTopics::new(["orders", "cancellations"]).and_pattern("^audit\\..*");
/// assert_eq!(all.topics(), "orders,cancellations,^audit\\..*");
/// ```
#[derive(Debug, Clone)]
pub struct KafkaTopics {
    entries: Vec<Entry>,
    /// The entries joined with `,`: the subscription's name.
    joined: String,
    settings: Settings,
}

#[derive(Debug, Clone)]
enum Entry {
    Literal(String),
    Pattern(String),
}

impl Entry {
    fn text(&self) -> &str {
        match self {
            Self::Literal(t) | Self::Pattern(t) => t,
        }
    }
}

impl KafkaTopics {
    /// These literal topics.
    #[must_use]
    pub fn new<I, S>(topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut set = Self {
            entries: Vec::new(),
            joined: String::new(),
            settings: Settings::default(),
        };
        for topic in topics {
            set.push(Entry::Literal(topic.into()));
        }
        set
    }

    /// One regular expression; it must start with `^` (syntax: see
    /// [`and_pattern`](Self::and_pattern)).
    #[must_use]
    pub fn pattern(pattern: impl Into<String>) -> Self {
        Self::new(Vec::<String>::new()).and_pattern(pattern)
    }

    /// Adds a literal topic.
    #[must_use]
    pub fn and_topic(mut self, topic: impl Into<String>) -> Self {
        self.push(Entry::Literal(topic.into()));
        self
    }

    /// Adds a regular expression; it must start with `^`.
    ///
    /// The syntax is the `regex` crate's (`RE2`-style: no look-around, no back-references);
    /// librdkafka's own engine differs from it in corner cases. A topic matches when the
    /// expression matches from the start of its name, as in librdkafka. Under
    /// `group.protocol=consumer` the broker does the matching (`RE2/J`), with the same result.
    #[must_use]
    pub fn and_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.push(Entry::Pattern(pattern.into()));
        self
    }

    fn push(&mut self, entry: Entry) {
        if !self.entries.is_empty() {
            self.joined.push(',');
        }
        self.joined.push_str(entry.text());
        self.entries.push(entry);
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

    /// A librdkafka consumer property for this subscription, applied last.
    #[must_use]
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.config.set(key, value);
        self
    }

    /// The entries joined with `,` (also the subscription's name).
    #[must_use]
    pub fn topics(&self) -> &str {
        &self.joined
    }

    fn target(&self) -> Result<Target, KafkaError> {
        if self.entries.is_empty() {
            return Err(KafkaError::InvalidOptions(
                "KafkaTopics needs at least one topic or pattern".into(),
            ));
        }
        let mut topics = Vec::new();
        let mut patterns = Vec::new();
        for entry in &self.entries {
            match entry {
                Entry::Literal(t) | Entry::Pattern(t) if t.is_empty() => {
                    return Err(KafkaError::InvalidOptions(format!(
                        "KafkaTopics {:?} has an empty entry",
                        self.joined
                    )));
                }
                Entry::Literal(t) if t.starts_with('^') => {
                    return Err(KafkaError::InvalidOptions(format!(
                        "{t:?} is a pattern; add it with `and_pattern` (or `KafkaTopics::pattern`)"
                    )));
                }
                Entry::Pattern(p) if !p.starts_with('^') => {
                    return Err(KafkaError::InvalidOptions(format!(
                        "pattern {p:?} must start with `^` (librdkafka reads a topic starting \
                         with `^` as a regex); anchor it, or add a literal topic with `and_topic`"
                    )));
                }
                Entry::Literal(t) => {
                    check_topic_name(t).map_err(|e| KafkaError::Subscribe(KafkaError::text(e)))?;
                    topics.push(t.clone());
                }
                Entry::Pattern(p) => {
                    regex::Regex::new(p).map_err(|e| {
                        KafkaError::Subscribe(KafkaError::text(format!(
                            "invalid topic regex {p:?}: {e}"
                        )))
                    })?;
                    patterns.push(p.clone());
                }
            }
        }
        Ok(Target::Group { topics, patterns })
    }
}

impl IntoSource for KafkaTopics {
    type Source = Self;

    fn into_source(self) -> Self {
        self
    }
}

impl SubscriptionSource<ConnectedKafkaBroker> for KafkaTopics {
    type Subscriber = KafkaSubscriber;
    type Copies = NamedCopies;

    #[cfg(feature = "asyncapi")]
    fn operation_bindings(&self) -> ruststream::asyncapi::Bindings {
        crate::bindings::operation(self.settings.group.as_deref(), self.settings.config.iter())
    }

    fn name(&self) -> &str {
        &self.joined
    }

    async fn subscribe(
        self,
        connected: &ConnectedKafkaBroker,
    ) -> Result<KafkaSubscriber, KafkaError> {
        let target = self.target()?;
        let plan = self
            .settings
            .plan(connected.state(), &self.joined, target)?;
        KafkaSubscriber::open(connected.shared_state(), plan).await
    }
}
