//! Everything the cluster keeps, behind one lock.

use super::ClusterOptions;
use super::fetch::Sessions;
use super::groups::Groups;
use super::producers::Producers;
use super::topics::Topics;
use super::txn::Transactions;

/// The cluster's state. Handlers lock it, act, and unlock before they await anything.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) topics: Topics,
    pub(crate) producers: Producers,
    pub(crate) transactions: Transactions,
    pub(crate) groups: Groups,
    /// Fetch sessions (KIP-227) of every node.
    pub(crate) fetch_sessions: Sessions,
}

impl State {
    pub(crate) fn new(_options: &ClusterOptions) -> Self {
        State {
            topics: Topics::default(),
            producers: Producers::default(),
            transactions: Transactions::default(),
            groups: Groups::default(),
            fetch_sessions: Sessions::default(),
        }
    }
}

impl State {
    /// Deliverable records of `topic`/`partition` from `from` to the end a reader of that
    /// isolation sees; 0 for a partition that does not exist.
    pub(crate) fn deliverable(
        &self,
        topic: &str,
        partition: i32,
        from: i64,
        read_committed: bool,
    ) -> u64 {
        self.topics.partition(topic, partition).map_or(0, |p| {
            let end = p.log.visible_end(read_committed);
            p.log
                .deliverable(from.max(p.log.log_start()), end, read_committed)
        })
    }

    /// Every topic with its partition count.
    pub(crate) fn topic_partitions(&self) -> impl Iterator<Item = (&str, i32)> {
        self.topics.by_name.iter().map(|(name, t)| {
            (
                name.as_str(),
                i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            )
        })
    }

    /// Data records written inside transactions that are still open.
    pub(crate) fn open_transaction_records(&self) -> u64 {
        let mut total = 0;
        for topic in self.topics.by_name.values() {
            for partition in &topic.partitions {
                let log = &partition.log;
                let stable = log.last_stable_offset();
                if stable == log.high_watermark() {
                    continue;
                }
                for batch in log.batches_from(stable) {
                    let h = &batch.header;
                    if h.is_transactional() && !h.is_control() && log.has_open(h.producer_id) {
                        total += u64::try_from(h.record_count).unwrap_or(0);
                    }
                }
            }
        }
        total
    }
}
