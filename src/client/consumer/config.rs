//! Typed configuration of a consumer, with librdkafka 2.12's defaults.

use std::time::Duration;

use crate::client::error::{Error, Result};
use crate::client::isolation::IsolationLevel;

/// `auto.offset.reset`: where to start when there is no committed offset, or when the
/// position fell out of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// `earliest` (also `smallest`, `beginning`).
    Earliest,
    /// `latest` (also `largest`, `end`): librdkafka's default.
    #[default]
    Latest,
    /// `error`: report the partition to the caller and stop reading it.
    Error,
}

/// Not a librdkafka setting: where a topic that a pattern subscription matches only after its
/// first match (one created since) starts when the group has no committed offset for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LateTopicStart {
    /// At `auto.offset.reset`, as Kafka's clients start any partition (the default).
    #[default]
    Reset,
    /// At its first record: every record of such a topic was written after the subscription
    /// began, so none is skipped.
    Earliest,
}

/// Not a librdkafka setting: what the consumer does with a fetched batch it cannot read (a
/// CRC mismatch, a decompression failure, records that contradict their header) once it
/// failed [`CORRUPT_REFETCHES`](super::CORRUPT_REFETCHES) more fetches. Either way it is
/// reported once, as [`ConsumerEvent::Error`](super::ConsumerEvent::Error), and logged at
/// ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorruptBatch {
    /// The partition stops at the batch: nothing past it is fetched, handed out, stored or
    /// committed until a seek moves it or the partition is reassigned (the default; nothing
    /// is lost).
    #[default]
    Hold,
    /// Fetching goes on after the batch (as librdkafka reports a bad message and reads on),
    /// so its records are never handed out and later positions pass them.
    Skip,
}

/// `group.protocol`: which rebalance protocol a group member speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup/Heartbeat with client-side assignors (the default).
    #[default]
    Classic,
    /// KIP-848: `ConsumerGroupHeartbeat` with server-side assignors.
    Consumer,
}

/// How a consumer reads and, in a group, how it takes part in it.
#[derive(Debug, Clone)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "each flag is a librdkafka boolean property, set independently"
)]
pub struct ConsumerConfig {
    /// `group.id`: needed for subscriptions and commits; a manual assignment may go without.
    pub group_id: Option<String>,
    /// `group.instance.id`: static membership.
    pub group_instance_id: Option<String>,
    /// `group.protocol`.
    pub group_protocol: GroupProtocol,
    /// `group.remote.assignor`: the server-side assignor (KIP-848), broker default when `None`.
    pub group_remote_assignor: Option<String>,
    /// `partition.assignment.strategy`, in preference order (classic protocol).
    pub assignment_strategy: Vec<String>,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`: also the rebalance timeout sent in `JoinGroup`.
    pub max_poll_interval: Duration,
    /// `auto.offset.reset`.
    pub auto_offset_reset: OffsetReset,
    /// `enable.auto.commit`.
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms`.
    pub auto_commit_interval: Duration,
    /// `enable.auto.offset.store`: whether handing a record out stores its offset for the
    /// next commit. When false, only [`ConsumerHandle::store_offset`](super::ConsumerHandle::store_offset)
    /// stores offsets.
    pub enable_auto_offset_store: bool,
    /// Not a librdkafka property: when the group gives this member back a partition it had
    /// before and has no committed offset for it, resume at the start this member was given
    /// then, not at `auto.offset.reset` (with `latest`, records published in between would be
    /// skipped). Nothing is stored or committed for it: the group's offsets change only when
    /// records are settled. Off by default (Kafka's behaviour).
    pub remember_starts: bool,
    /// Not a librdkafka property: where a topic a pattern subscription takes up after its
    /// first match starts when the group has no committed offset for it.
    pub late_topic_start: LateTopicStart,
    /// `isolation.level`.
    pub isolation: IsolationLevel,
    /// `check.crcs`: check the CRC-32C of every fetched batch. A mismatch makes the batch
    /// unreadable, handled per [`ConsumerConfig::corrupt_batches`]. Off by default, as in
    /// librdkafka: TCP and the broker (which checks every produced batch) already guard the
    /// bytes, and the check costs about a fifth of the client's work per small record.
    /// Unchecked, a corrupt batch still decodes within bounds or fails as malformed.
    pub check_crcs: bool,
    /// Not a librdkafka property: what happens to a batch that cannot be read.
    pub corrupt_batches: CorruptBatch,
    /// `fetch.min.bytes`.
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes`.
    pub fetch_max_bytes: i32,
    /// `fetch.wait.max.ms`.
    pub fetch_wait_max: Duration,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_bytes: i32,
    /// `fetch.error.backoff.ms`: the pause of a partition after a fetch error.
    pub fetch_error_backoff: Duration,
    /// `queued.min.messages`: a partition is not fetched while this many of its records wait
    /// for the caller.
    pub queued_min_messages: usize,
    /// `queued.max.messages.kbytes` in bytes: fetched data waiting for the caller, across
    /// partitions. Fetching stops while it is full.
    pub queued_max_bytes: usize,
    /// `client.rack`, sent to the assignors.
    pub client_rack: Option<String>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: None,
            group_instance_id: None,
            group_protocol: GroupProtocol::Classic,
            group_remote_assignor: None,
            assignment_strategy: vec!["range".to_owned(), "roundrobin".to_owned()],
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            max_poll_interval: Duration::from_mins(5),
            auto_offset_reset: OffsetReset::Latest,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            enable_auto_offset_store: true,
            remember_starts: false,
            late_topic_start: LateTopicStart::Reset,
            isolation: IsolationLevel::ReadCommitted,
            check_crcs: false,
            corrupt_batches: CorruptBatch::Hold,
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            fetch_wait_max: Duration::from_millis(500),
            max_partition_fetch_bytes: 1_048_576,
            fetch_error_backoff: Duration::from_millis(500),
            queued_min_messages: 100_000,
            queued_max_bytes: 65_536 * 1024,
            client_rack: None,
        }
    }
}

impl ConsumerConfig {
    /// A configuration for `group`, librdkafka defaults for everything else.
    #[must_use]
    pub fn for_group(group: impl Into<String>) -> Self {
        ConsumerConfig {
            group_id: Some(group.into()),
            ..ConsumerConfig::default()
        }
    }

    /// Checks the settings that depend on each other, with librdkafka's rules.
    pub fn validate(&self) -> Result<()> {
        if self.group_id.as_deref() == Some("") {
            return Err(Error::Config("`group.id` is empty".into()));
        }
        if self.fetch_max_bytes < 1 || self.max_partition_fetch_bytes < 1 {
            return Err(Error::Config(
                "`fetch.max.bytes` and `max.partition.fetch.bytes` must be positive".into(),
            ));
        }
        if self.group_protocol == GroupProtocol::Classic {
            if self.assignment_strategy.is_empty() {
                return Err(Error::Config(
                    "`partition.assignment.strategy` names no assignor".into(),
                ));
            }
            let cooperative = self
                .assignment_strategy
                .iter()
                .filter(|s| s.trim().eq_ignore_ascii_case("cooperative-sticky"))
                .count();
            if cooperative != 0 && cooperative != self.assignment_strategy.len() {
                return Err(Error::Config(
                    "`partition.assignment.strategy`: a mix of COOPERATIVE and EAGER assignors \
                     is not supported"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}
