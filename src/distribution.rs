//! [`RoundRobin`]: spreads records that carry neither a key nor a pinned partition over a fixed
//! number of partitions.

use std::sync::atomic::{AtomicU64, Ordering};

use ruststream::runtime::{ContextKind, Outgoing, PublishTransform, Reads};

use crate::message::PARTITION_KEY_HEADER;
use crate::produce::KafkaOptions;

/// A publish transform cycling records over partitions `0..count`, from a counter starting at
/// 0 shared by this instance. Records with a `kafka-partition-key` header or a pinned
/// partition are left alone.
///
/// ```
/// use ruststream_kafka::RoundRobin;
///
/// let spread = RoundRobin::partitions(8);
/// ```
#[derive(Debug)]
pub struct RoundRobin {
    count: u64,
    next: AtomicU64,
}

impl RoundRobin {
    /// Cycles over partitions `0..count`.
    ///
    /// # Panics
    /// When `count` is zero or negative: there would be no partition to place a record on.
    #[must_use]
    pub fn partitions(count: i32) -> Self {
        assert!(
            count > 0,
            "RoundRobin::partitions needs at least one partition, got {count}"
        );
        Self {
            count: u64::from(count.unsigned_abs()),
            next: AtomicU64::new(0),
        }
    }
}

impl<K: ContextKind> PublishTransform<K, KafkaOptions> for RoundRobin {
    type Destination = Reads;

    fn apply(&self, out: &mut Outgoing<'_>, options: &mut Option<KafkaOptions>, _cx: &K::View<'_>) {
        if out.headers().contains(PARTITION_KEY_HEADER)
            || options.is_some_and(|o| o.partition_setting().is_some())
        {
            return;
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.count;
        let partition = i32::try_from(turn).unwrap_or(0);
        *options = Some(options.unwrap_or_default().partition(partition));
    }
}
