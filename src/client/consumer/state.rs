//! What a consumer knows of each partition it reads: positions, buffered data, pauses, seeks,
//! stored offsets; and the queue of events for the caller.
//!
//! Every change goes through one mutex, so that the fetcher, the group membership and the
//! caller agree on a single order. Each partition has a generation, bumped by every seek,
//! reset and reassignment: data fetched or positions resolved under an older generation are
//! dropped, which is how a seek takes effect before the next record is handed out.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::time::Instant;

use crate::client::cluster::{NIL_TOPIC_ID, TopicId};
use crate::client::error::Error;
use crate::client::hashing::PartitionHasher;
use crate::client::records::Record;

use super::{ConsumerEvent, PartitionRecords, StartAt, TopicPartition};

/// Data fetched for one partition, waiting for the caller.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub generation: u64,
    pub records: Vec<Record>,
    /// The position after these records.
    pub next_offset: i64,
    pub leader_epoch: i32,
    /// The leader epoch of the last batch read (from its header), if one was.
    pub batch_epoch: Option<i32>,
    pub high_watermark: i64,
    /// What it counts against `queued.max.messages.kbytes`.
    pub bytes: usize,
}

/// One assigned partition.
// The flags are independent conditions that each stop fetching, not a state enum in disguise.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug)]
pub(crate) struct Part {
    pub generation: u64,
    /// The next offset to hand out; `None` until the start is resolved.
    pub position: Option<i64>,
    /// The next offset to fetch.
    pub fetch_offset: Option<i64>,
    /// How to find the start while `position` is `None`.
    pub start: StartAt,
    /// A resolution of `start` is under way.
    pub resolving: bool,
    pub paused: bool,
    /// Being revoked: neither fetched nor handed out.
    pub revoking: bool,
    /// A fetch for it is on the wire.
    pub in_flight: bool,
    /// Not fetched before this instant (after an error).
    pub backoff_until: Option<Instant>,
    pub queue: VecDeque<Chunk>,
    /// The leader epoch of the last records handed out (-1 when unknown).
    pub leader_epoch: i32,
    pub high_watermark: i64,
    /// The offset the next commit sends, with its leader epoch.
    pub stored: Option<(i64, i32)>,
    /// The offset the group last accepted from us.
    pub committed: Option<i64>,
    /// A batch at this offset could not be read and was not yet given up on: (offset,
    /// fetches that failed at it).
    pub corrupt: Option<(i64, u32)>,
    /// Given up on the batch at this offset under `CorruptBatch::Hold`: not fetched until a
    /// seek or a new assignment.
    pub held: Option<i64>,
    /// The leader epoch of the last batch fetched since the partition (re)started; -1 when
    /// none was.
    pub fetched_epoch: i32,
    /// The leader epoch the next fetch offset is known to be valid under (KIP-320); -1 before
    /// the first fetch.
    pub validated_epoch: i32,
    /// An `OffsetForLeaderEpoch` check of the position is under way: not fetched meanwhile.
    pub validating: bool,
    /// The id of the topic its position is in (nil until known, or when the broker has none).
    pub topic_id: TopicId,
}

impl Part {
    /// Whether the position can be in the topic whose id the metadata now gives (`current`):
    /// it is, or one of the two ids is unknown.
    pub(crate) fn in_topic_of(&self, current: Option<TopicId>) -> bool {
        current.is_none_or(|id| self.topic_id == NIL_TOPIC_ID || self.topic_id == id)
    }

    /// Whether the position is in the topic whose id the metadata now gives (`id`); learns
    /// the id the first time. `false` when the topic was deleted and created again.
    pub(crate) fn in_topic(&mut self, id: TopicId) -> bool {
        if self.topic_id != id && self.topic_id != NIL_TOPIC_ID && id != NIL_TOPIC_ID {
            return false;
        }
        if id != NIL_TOPIC_ID {
            self.topic_id = id;
        }
        true
    }

    fn new(start: StartAt) -> Self {
        Part {
            generation: 0,
            position: None,
            fetch_offset: None,
            start,
            resolving: false,
            paused: false,
            revoking: false,
            in_flight: false,
            backoff_until: None,
            queue: VecDeque::new(),
            leader_epoch: -1,
            high_watermark: -1,
            stored: None,
            committed: None,
            corrupt: None,
            held: None,
            fetched_epoch: -1,
            validated_epoch: -1,
            validating: false,
            topic_id: NIL_TOPIC_ID,
        }
    }
}

/// The consumer's partitions by topic and number.
pub(crate) type PartitionMap<V> = HashMap<TopicPartition, V, BuildHasherDefault<PartitionHasher>>;

/// The consumer's state.
#[derive(Debug)]
pub(crate) struct State {
    pub parts: PartitionMap<Part>,
    /// Partitions that may have a chunk to hand out, in arrival order.
    ready: VecDeque<TopicPartition>,
    pub events: VecDeque<ConsumerEvent>,
    /// Bytes of all queued chunks.
    pub buffered: usize,
    pub last_poll: Instant,
    /// A `poll` is waiting for something to hand out: the caller is there.
    pub polling: bool,
    pub auto_store: bool,
    /// The start each partition of the group was last given at its assignment (the committed
    /// offset, or where the reset put it), kept across revocations: a partition handed back
    /// with nothing committed resumes there (`ConsumerConfig::remember_starts`).
    given_starts: HashMap<TopicPartition, i64>,
}

impl State {
    pub(crate) fn new(auto_store: bool) -> Self {
        State {
            parts: PartitionMap::default(),
            ready: VecDeque::new(),
            events: VecDeque::new(),
            buffered: 0,
            last_poll: Instant::now(),
            polling: false,
            auto_store,
            given_starts: HashMap::new(),
        }
    }

    /// Adds partitions (those already held keep their state).
    pub(crate) fn add(&mut self, partitions: &[TopicPartition], start: StartAt) {
        for tp in partitions {
            self.parts
                .entry(tp.clone())
                .or_insert_with(|| Part::new(start));
        }
    }

    /// Those of `partitions` that are assigned.
    pub(crate) fn owned_of(&self, partitions: &[TopicPartition]) -> Vec<TopicPartition> {
        partitions
            .iter()
            .filter(|tp| self.parts.contains_key(*tp))
            .cloned()
            .collect()
    }

    /// Removes partitions and their buffered data.
    pub(crate) fn remove(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if let Some(part) = self.parts.remove(tp) {
                self.buffered -= part.queue.iter().map(|c| c.bytes).sum::<usize>();
            }
        }
    }

    /// Drops what was fetched for `tp` and restarts it from `start`; returns the new
    /// generation, or `None` when `tp` is not assigned.
    pub(crate) fn restart(&mut self, tp: &TopicPartition, start: StartAt) -> Option<u64> {
        let part = self.parts.get_mut(tp)?;
        part.generation += 1;
        self.buffered -= part.queue.drain(..).map(|c| c.bytes).sum::<usize>();
        match start {
            StartAt::Offset(offset) if offset >= 0 => {
                part.position = Some(offset);
                part.fetch_offset = Some(offset);
            }
            _ => {
                part.position = None;
                part.fetch_offset = None;
            }
        }
        part.start = start;
        part.resolving = false;
        part.backoff_until = None;
        part.corrupt = None;
        part.held = None;
        part.fetched_epoch = -1;
        part.validated_epoch = -1;
        part.validating = false;
        Some(part.generation)
    }

    /// `tp`'s topic was deleted and created again under its name (its id is now `id`): the
    /// position, the offset stored for the next commit and the start remembered for it belong
    /// to the old topic. The partition starts again per `auto.offset.reset`, and nothing of the
    /// old topic is committed for the new one.
    pub(crate) fn topic_recreated(&mut self, tp: &TopicPartition, id: TopicId) {
        tracing::warn!(partition = %tp, "the topic was deleted and created again; the \
            partition starts again per auto.offset.reset");
        self.restart(tp, StartAt::Reset);
        self.given_starts.remove(tp);
        if let Some(part) = self.parts.get_mut(tp) {
            part.stored = None;
            part.committed = None;
            part.topic_id = id;
        }
    }

    /// Sets the start of `tp` found for `generation` (ignored if a seek came in between).
    pub(crate) fn resolved(&mut self, tp: &TopicPartition, generation: u64, offset: i64) {
        if let Some(part) = self.parts.get_mut(tp)
            && part.generation == generation
        {
            part.resolving = false;
            part.position = Some(offset);
            part.fetch_offset = Some(offset);
        }
    }

    /// Remembers `offset` as the start `tp` was given at its assignment.
    pub(crate) fn remember_start(&mut self, tp: &TopicPartition, offset: i64) {
        self.given_starts.insert(tp.clone(), offset);
    }

    /// The start `tp` was given at its last assignment, if it had one.
    pub(crate) fn given_start(&self, tp: &TopicPartition) -> Option<i64> {
        self.given_starts.get(tp).copied()
    }

    /// Every start remembered so far.
    #[cfg(feature = "testing")]
    pub(crate) fn given_starts(&self) -> Vec<(TopicPartition, i64)> {
        self.given_starts
            .iter()
            .map(|(tp, start)| (tp.clone(), *start))
            .collect()
    }

    /// Forgets the offset stored for `tp`: the next commit carries nothing for it until
    /// something is stored again.
    pub(crate) fn clear_stored(&mut self, tp: &TopicPartition) -> bool {
        self.parts
            .get_mut(tp)
            .map(|part| part.stored = None)
            .is_some()
    }

    /// Queues fetched data for `tp` if it is still wanted.
    pub(crate) fn push(&mut self, tp: &TopicPartition, chunk: Chunk) {
        let Some(part) = self.parts.get_mut(tp) else {
            return;
        };
        if part.generation != chunk.generation {
            return;
        }
        part.fetch_offset = Some(chunk.next_offset);
        part.high_watermark = chunk.high_watermark;
        if let Some(epoch) = chunk.batch_epoch {
            part.fetched_epoch = epoch;
        }
        if chunk.records.is_empty() {
            // Nothing to hand out (control batches, aborted data): the position moves on
            // now, so that commits do not lag behind skipped ranges.
            if part.queue.is_empty() {
                part.position = Some(chunk.next_offset.max(part.position.unwrap_or(0)));
                if self.auto_store {
                    part.stored = part.position.map(|p| (p, part.leader_epoch));
                }
            }
            return;
        }
        self.buffered += chunk.bytes;
        part.queue.push_back(chunk);
        self.ready.push_back(tp.clone());
    }

    /// The next batch of records for the caller, if any is ready.
    pub(crate) fn take_records(&mut self) -> Option<PartitionRecords> {
        let mut skipped = Vec::new();
        let mut found = None;
        while let Some(tp) = self.ready.pop_front() {
            let Some(part) = self.parts.get_mut(&tp) else {
                continue;
            };
            if part.revoking {
                continue;
            }
            if part.paused {
                skipped.push(tp);
                continue;
            }
            let Some(chunk) = part.queue.pop_front() else {
                continue;
            };
            self.buffered -= chunk.bytes;
            let position = part.position.unwrap_or(i64::MIN);
            let mut records = chunk.records;
            if records.first().is_some_and(|r| r.offset < position) {
                records.retain(|r| r.offset >= position);
            }
            part.position = Some(chunk.next_offset.max(position));
            part.leader_epoch = chunk.leader_epoch;
            if self.auto_store {
                part.stored = part.position.map(|p| (p, part.leader_epoch));
            }
            if !part.queue.is_empty() {
                self.ready.push_back(tp.clone());
            }
            if records.is_empty() {
                continue;
            }
            found = Some(PartitionRecords {
                topic: tp.topic.clone(),
                partition: tp.partition,
                records,
                high_watermark: chunk.high_watermark,
                leader_epoch: chunk.leader_epoch,
            });
            break;
        }
        // Paused partitions keep their data and their place for when they resume.
        for tp in skipped.into_iter().rev() {
            self.ready.push_front(tp);
        }
        found
    }

    /// Marks partitions paused or resumed.
    pub(crate) fn set_paused(&mut self, partitions: &[TopicPartition], paused: bool) {
        for tp in partitions {
            if let Some(part) = self.parts.get_mut(tp) {
                part.paused = paused;
                if !paused && !part.queue.is_empty() && !self.ready.contains(tp) {
                    self.ready.push_back(tp.clone());
                }
            }
        }
    }

    /// Queues an error for the caller.
    pub(crate) fn report(&mut self, error: Error) {
        self.events.push_back(ConsumerEvent::Error(error));
    }

    /// The assigned partitions, sorted.
    pub(crate) fn assignment(&self) -> Vec<TopicPartition> {
        let mut out: Vec<TopicPartition> = self.parts.keys().cloned().collect();
        out.sort();
        out
    }

    /// Stored offsets that differ from what was committed, for `only` (or every partition).
    pub(crate) fn to_commit(
        &self,
        only: Option<&[TopicPartition]>,
    ) -> Vec<(TopicPartition, i64, i32)> {
        let mut out: Vec<_> = self
            .parts
            .iter()
            .filter(|(tp, _)| only.is_none_or(|o| o.contains(tp)))
            .filter_map(|(tp, p)| {
                let (offset, epoch) = p.stored?;
                (p.committed != Some(offset)).then(|| (tp.clone(), offset, epoch))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Notes offsets the group accepted.
    pub(crate) fn committed(&mut self, offsets: &[(TopicPartition, i64)]) {
        for (tp, offset) in offsets {
            if let Some(part) = self.parts.get_mut(tp) {
                part.committed = Some(*offset);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::records::Headers;

    fn record(offset: i64) -> Record {
        Record {
            offset,
            timestamp: 0,
            key: None,
            value: None,
            headers: Headers::default(),
        }
    }

    fn chunk(generation: u64, offsets: std::ops::Range<i64>) -> Chunk {
        Chunk {
            generation,
            next_offset: offsets.end,
            records: offsets.map(record).collect(),
            leader_epoch: 0,
            batch_epoch: Some(0),
            high_watermark: 100,
            bytes: 10,
        }
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn a_seek_drops_buffered_data_and_stale_fetches() {
        let mut s = State::new(true);
        s.add(&[tp(0)], StartAt::Committed);
        s.restart(&tp(0), StartAt::Offset(0));
        s.push(&tp(0), chunk(1, 0..5));
        assert_eq!(s.buffered, 10);
        let g = s.restart(&tp(0), StartAt::Offset(3)).unwrap();
        assert_eq!(s.buffered, 0);
        assert!(s.take_records().is_none());
        // A fetch that left before the seek lands after it: dropped.
        s.push(&tp(0), chunk(g - 1, 5..9));
        assert!(s.take_records().is_none());
        s.push(&tp(0), chunk(g, 3..6));
        let got = s.take_records().unwrap();
        assert_eq!(
            got.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        assert_eq!(s.parts[&tp(0)].stored, Some((6, 0)));
    }

    #[test]
    fn records_before_the_position_are_not_handed_out() {
        let mut s = State::new(true);
        s.add(&[tp(0)], StartAt::Committed);
        s.restart(&tp(0), StartAt::Offset(3));
        s.push(&tp(0), chunk(1, 0..5));
        let got = s.take_records().unwrap();
        assert_eq!(got.records.len(), 2);
        assert_eq!(s.parts[&tp(0)].position, Some(5));
    }

    #[test]
    fn paused_partitions_keep_their_data() {
        let mut s = State::new(false);
        s.add(&[tp(0), tp(1)], StartAt::Committed);
        s.restart(&tp(0), StartAt::Offset(0));
        s.restart(&tp(1), StartAt::Offset(0));
        s.push(&tp(0), chunk(1, 0..2));
        s.push(&tp(1), chunk(1, 0..2));
        s.set_paused(&[tp(0)], true);
        assert_eq!(s.take_records().unwrap().partition, 1);
        assert!(s.take_records().is_none());
        s.set_paused(&[tp(0)], false);
        assert_eq!(s.take_records().unwrap().partition, 0);
        // Without auto-store nothing is stored for commit.
        assert!(s.to_commit(None).is_empty());
    }

    #[test]
    fn commits_send_only_changed_offsets() {
        let mut s = State::new(true);
        s.add(&[tp(0)], StartAt::Committed);
        s.restart(&tp(0), StartAt::Offset(0));
        s.push(&tp(0), chunk(1, 0..2));
        s.take_records();
        assert_eq!(s.to_commit(None), vec![(tp(0), 2, 0)]);
        s.committed(&[(tp(0), 2)]);
        assert!(s.to_commit(None).is_empty());
    }

    #[test]
    fn a_cleared_store_commits_nothing_until_something_is_stored_again() {
        let mut s = State::new(true);
        s.add(&[tp(0)], StartAt::Committed);
        s.restart(&tp(0), StartAt::Offset(0));
        s.push(&tp(0), chunk(1, 0..5));
        s.take_records();
        assert_eq!(s.to_commit(None), vec![(tp(0), 5, 0)]);
        assert!(s.clear_stored(&tp(0)));
        assert!(
            s.to_commit(None).is_empty(),
            "a cleared store carries nothing"
        );
        // A seek back replays 0..5: the store follows what is handed out from then on.
        let g = s.restart(&tp(0), StartAt::Offset(0)).unwrap();
        s.push(&tp(0), chunk(g, 0..2));
        s.take_records();
        assert_eq!(s.to_commit(None), vec![(tp(0), 2, 0)]);
        assert!(
            !s.clear_stored(&tp(9)),
            "an unassigned partition has no store"
        );
    }

    #[test]
    fn a_given_start_outlives_the_partition_and_is_never_stored() {
        let mut s = State::new(false);
        s.add(&[tp(0)], StartAt::Committed);
        s.remember_start(&tp(0), 10);
        s.resolved(&tp(0), 0, 10);
        assert!(
            s.to_commit(None).is_empty(),
            "a start is not stored for commit"
        );
        s.remove(&[tp(0)]);
        assert_eq!(s.given_start(&tp(0)), Some(10));
        assert_eq!(s.given_start(&tp(1)), None);
    }

    #[test]
    fn removal_releases_the_budget() {
        let mut s = State::new(true);
        s.add(&[tp(0)], StartAt::Committed);
        s.restart(&tp(0), StartAt::Offset(0));
        s.push(&tp(0), chunk(1, 0..2));
        s.remove(&[tp(0)]);
        assert_eq!(s.buffered, 0);
        assert!(s.take_records().is_none());
    }

    /// A topic deleted and created again: its partitions start again per the reset policy,
    /// and neither the old position nor its stored offset is committed for the new topic.
    #[test]
    fn a_topic_created_again_drops_the_old_position_and_its_commit() {
        let mut s = State::new(true);
        s.add(&[tp(0)], StartAt::Committed);
        s.restart(&tp(0), StartAt::Offset(0));
        s.push(&tp(0), chunk(1, 0..5));
        assert!(s.take_records().is_some());
        let part = s.parts.get_mut(&tp(0)).expect("assigned");
        assert!(part.in_topic([1; 16]));
        assert!(part.in_topic([0; 16]), "an unknown id is not a new topic");
        assert!(!part.in_topic([2; 16]));
        assert!(!part.in_topic_of(Some([2; 16])));
        assert!(part.in_topic_of(None));
        assert_eq!(s.to_commit(None).len(), 1);
        s.topic_recreated(&tp(0), [2; 16]);
        let part = &s.parts[&tp(0)];
        assert_eq!((part.position, part.stored), (None, None));
        assert!(matches!(part.start, StartAt::Reset));
        assert!(part.in_topic_of(Some([2; 16])));
        assert!(s.to_commit(None).is_empty());
    }
}

#[cfg(test)]
mod partition_hasher_tests {
    use std::hash::BuildHasher;

    use super::{PartitionMap, TopicPartition};

    #[test]
    fn partitions_hash_apart_and_are_found() {
        let mut map: PartitionMap<i32> = PartitionMap::default();
        let hasher = map.hasher().clone();
        let a = hasher.hash_one(TopicPartition::new("orders", 0));
        let b = hasher.hash_one(TopicPartition::new("orders", 1));
        let c = hasher.hash_one(TopicPartition::new("orders-", 0));
        assert!(a != b && a != c && b != c);
        for p in 0..64 {
            map.insert(TopicPartition::new("a-topic-name-longer-than-a-word", p), p);
        }
        assert_eq!(map.len(), 64);
        for p in 0..64 {
            assert_eq!(
                map.get(&TopicPartition::new("a-topic-name-longer-than-a-word", p)),
                Some(&p)
            );
        }
    }
}
