//! Subscription descriptors: [`KafkaTopic`], [`KafkaTopics`], [`KafkaPartitions`], and the
//! settings they share ([`StartOffset`], [`Commit`], [`Assignment`], [`LaneKey`]).
//!
//! A descriptor is configuration only. At subscribe it becomes a [`Plan`]: the checked names,
//! the group, and the complete consumer properties, built in a fixed order so that a later
//! layer wins (bootstrap servers, the broker's `config`, the group, the start, the strategy,
//! what the commit mode owns, then the descriptor's own `config`), and validated like
//! librdkafka validates a consumer configuration.

mod partitions;
mod topic;
mod topics;

pub use partitions::KafkaPartitions;
pub use topic::KafkaTopic;
pub use topics::KafkaTopics;

use std::fmt;

use crate::connection::BrokerState;
use crate::error::KafkaError;
use crate::properties::Properties;

/// Where a group starts reading a partition it has no committed offset for
/// (librdkafka's `auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StartOffset {
    /// Sets nothing: the consumer's `auto.offset.reset` applies (librdkafka's default is the
    /// end of the log).
    #[default]
    Committed,
    /// The start of the log (`auto.offset.reset=earliest`).
    Earliest,
    /// The end of the log (`auto.offset.reset=latest`).
    Latest,
}

/// How a group spreads partitions over its members (`partition.assignment.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Assignment {
    /// Contiguous ranges of each topic's partitions (`range`).
    Range,
    /// All partitions dealt in turn (`roundrobin`).
    RoundRobin,
    /// Sticky placement with incremental, cooperative rebalances (`cooperative-sticky`).
    CooperativeSticky,
}

impl Assignment {
    /// The strategy's librdkafka name.
    pub(crate) const fn strategy(self) -> &'static str {
        match self {
            Self::Range => "range",
            Self::RoundRobin => "roundrobin",
            Self::CooperativeSticky => "cooperative-sticky",
        }
    }
}

/// What `workers(n, by_key)` lanes key a delivery on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LaneKey {
    /// The partition number as decimal text: a partition's records stay in order whatever
    /// their keys.
    #[default]
    Partition,
    /// The record key: records of one key stay in order, different keys of a partition run
    /// side by side; keyless records have no lane key.
    RecordKey,
}

/// When a delivery's offset may be committed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Commit {
    /// The consumer stores a record's offset when it is handed over and commits on its timer
    /// (`auto.commit.interval.ms`) and at close. `ack` and `nack(false)` do nothing;
    /// `nack(true)` is unsupported.
    #[default]
    Auto,
    /// Every delivery is outstanding until settled; the committed position never passes an
    /// unsettled delivery. `nack(true)` hands the delivery back to the subscription.
    Tracked,
    /// Offsets are committed by the exactly-once pipeline with this id (a
    /// [`KafkaEosPublish`](crate::KafkaEosPublish) of the same id), inside its transactions.
    Transactional(String),
}

impl Commit {
    fn name(&self) -> &'static str {
        match self {
            Self::Auto => "Commit::Auto",
            Self::Tracked => "Commit::Tracked",
            Self::Transactional(_) => "Commit::Transactional",
        }
    }
}

/// The settings every descriptor has.
#[derive(Clone, Default)]
pub(crate) struct Settings {
    pub group: Option<String>,
    pub start: StartOffset,
    pub commit: Commit,
    pub assignment: Option<Assignment>,
    pub lane_key: LaneKey,
    pub config: Properties,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("group", &self.group)
            .field("start", &self.start)
            .field("commit", &self.commit)
            .field("assignment", &self.assignment)
            .field("lane_key", &self.lane_key)
            // `Properties` prints its keys and redacts secret values.
            .field("config", &self.config)
            .finish()
    }
}

/// What a subscription reads.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// Literal topics and `^` patterns, through a group.
    Group {
        topics: Vec<String>,
        patterns: Vec<String>,
    },
    /// Named partitions of one topic, by manual assignment.
    Partitions { topic: String, partitions: Vec<i32> },
}

/// A descriptor made ready to open.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The subscription's name (metadata and error messages).
    pub name: String,
    /// The group it joins or commits into; `None` for a group-less partition reader.
    pub group: Option<String>,
    pub target: Target,
    pub start: StartOffset,
    pub commit: Commit,
    pub lane_key: LaneKey,
    /// The complete consumer configuration.
    pub properties: Properties,
}

/// The group name a standalone partition reader gives the client (it never joins or commits).
const STANDALONE_GROUP: &str = "ruststream.standalone";

impl Settings {
    /// Checks the mode clash (B6) and builds the plan's properties.
    pub(crate) fn plan(
        &self,
        state: &BrokerState,
        name: &str,
        target: Target,
    ) -> Result<Plan, KafkaError> {
        self.refuse_mode_clash()?;
        let group = self
            .group
            .clone()
            .or_else(|| state.default_group().map(str::to_owned));
        let mut properties = state.base_properties().clone();
        match (&group, &target) {
            (Some(group), _) => {
                properties.set("group.id", group.as_str());
            }
            (None, Target::Partitions { .. }) => {
                properties.set("group.id", STANDALONE_GROUP);
                properties.set("enable.auto.commit", "false");
            }
            (None, Target::Group { .. }) => {
                return Err(KafkaError::InvalidOptions(format!(
                    "subscription {name:?} has no consumer group: name one with `.group(..)` on \
                     the descriptor or set `KafkaBroker::default_group`"
                )));
            }
        }
        match self.start {
            StartOffset::Committed => {}
            StartOffset::Earliest => {
                properties.set("auto.offset.reset", "earliest");
            }
            StartOffset::Latest => {
                properties.set("auto.offset.reset", "latest");
            }
        }
        if let Some(assignment) = self.assignment {
            properties.set("partition.assignment.strategy", assignment.strategy());
        }
        match self.commit {
            Commit::Auto => {}
            Commit::Tracked => {
                properties.set("enable.auto.offset.store", "false");
            }
            Commit::Transactional(_) => {
                properties.set("enable.auto.offset.store", "false");
                properties.set("enable.auto.commit", "false");
            }
        }
        for (key, value) in &self.config {
            properties.set(key, value);
        }
        Ok(Plan {
            name: name.to_owned(),
            group,
            target,
            start: self.start,
            commit: self.commit.clone(),
            lane_key: self.lane_key,
            properties,
        })
    }

    /// A passthrough of a property the commit mode owns is refused, whatever its value.
    fn refuse_mode_clash(&self) -> Result<(), KafkaError> {
        if self.commit == Commit::Auto {
            return Ok(());
        }
        for (key, _) in &self.config {
            let lower = key.to_ascii_lowercase();
            if lower == "enable.auto.offset.store" || lower == "enable.auto.commit" {
                return Err(KafkaError::InvalidOptions(format!(
                    "`{key}` is set by {}: the commit mode decides when offsets are stored and \
                     committed; remove the `{key}` passthrough or use `Commit::Auto`",
                    self.commit.name()
                )));
            }
        }
        Ok(())
    }
}

/// Checks a literal topic name against Kafka's grammar: 1 to 249 characters of
/// `[A-Za-z0-9._-]`, and not `.` or `..`.
pub(crate) fn check_topic_name(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("a topic name cannot be empty".into());
    }
    if topic.len() > 249 {
        return Err(format!(
            "topic name {topic:?} is {} bytes long; Kafka allows at most 249",
            topic.len()
        ));
    }
    if topic == "." || topic == ".." {
        return Err(format!("topic name {topic:?} is not allowed"));
    }
    // Checked on every publish: bytes first (a legal name is ASCII), the character only to
    // name it in the error.
    let legal = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if topic.bytes().all(legal) {
        return Ok(());
    }
    if let Some(bad) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name {topic:?} contains {bad:?}; Kafka allows only ASCII letters, digits, \
             '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_topic_name;

    #[test]
    fn topic_grammar() {
        assert!(check_topic_name("orders.v1_x-y").is_ok());
        assert!(check_topic_name("").is_err());
        assert!(check_topic_name(".").is_err());
        assert!(check_topic_name("..").is_err());
        assert!(check_topic_name("conformance refused topic").is_err());
        assert!(check_topic_name(&"a".repeat(249)).is_ok());
        assert!(check_topic_name(&"a".repeat(250)).is_err());
        assert!(check_topic_name("ordérs").is_err());
    }
}
