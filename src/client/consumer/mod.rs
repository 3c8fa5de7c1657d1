//! Consuming: a [`Consumer`] reads partitions it is given (manual assignment) or that its
//! group gives it (subscription), with committed offsets kept in the group.
//!
//! # Offsets
//! Kafka's convention holds throughout: a committed offset is the offset of the next record
//! to read. librdkafka's `store_offset` takes the offset of the last record processed and
//! stores that offset + 1; here [`ConsumerHandle::store_offset`] takes the next offset directly, so
//! an adapter keeping librdkafka's semantics passes `offset + 1`. With
//! `enable.auto.offset.store` (the default) handing a record out stores the offset after it;
//! `enable.auto.commit` then commits the stored offsets on a timer, when partitions are
//! revoked, and on close.
//!
//! # Rebalances
//! Assignment changes reach the caller as events from [`Consumer::poll`] before they take
//! effect: [`ConsumerEvent::Assigned`] before any record of the new partitions,
//! [`ConsumerEvent::Revoked`] while the partitions are still owned (the group waits until the
//! [`Revocation`] is dropped, so the caller can commit what it processed), and
//! [`ConsumerEvent::Lost`] when the group already gave them away (a commit would be refused).

mod config;
pub(crate) mod decode;
mod fetch_session;
mod fetcher;
pub mod group;
mod offsets;
mod positions;
mod rebalance;
mod state;
mod validation;

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;

pub use config::{ConsumerConfig, CorruptBatch, GroupProtocol, LateTopicStart, OffsetReset};
pub(crate) use decode::{Budget, decode_partition};
pub use fetcher::CORRUPT_REFETCHES;
pub(crate) use offsets::by_topic;
pub use offsets::{CommittedOffset, GroupMember, GroupMetadata, OffsetToCommit, Offsets};

use crate::client::Client;
use crate::client::error::{Error, Result};
use crate::client::observe::{Event as Observed, Interest};
use crate::client::outlined::Outlined;
use crate::client::records::Record;
use state::State;

pub use crate::client::topic_partition::TopicPartition;

/// Where reading a partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The group's committed offset, else `auto.offset.reset`.
    Committed,
    /// This offset (a negative one means `auto.offset.reset`).
    Offset(i64),
    /// The log start.
    Earliest,
    /// The end (the last stable offset under `read_committed`).
    Latest,
    /// The first record at or after this timestamp (ms), else the end.
    Timestamp(i64),
    /// `auto.offset.reset`.
    Reset,
}

/// Records of one partition, in offset order.
#[derive(Debug, Clone)]
pub struct PartitionRecords {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The records; keys, values and headers share the fetched buffer.
    pub records: Vec<Record>,
    /// The partition's high watermark when fetched.
    pub high_watermark: i64,
    /// The leader epoch they were fetched at.
    pub leader_epoch: i32,
}

/// Partitions being revoked; the group waits until this is dropped (or
/// [`done`](Revocation::done) is called).
#[derive(Debug)]
pub struct Revocation {
    /// The partitions leaving.
    pub partitions: Vec<TopicPartition>,
    done: Option<oneshot::Sender<()>>,
}

impl Revocation {
    /// Lets the rebalance go on.
    pub fn done(mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

impl Drop for Revocation {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

/// What [`Consumer::poll`] returns.
#[derive(Debug)]
pub enum ConsumerEvent {
    /// Records of one partition.
    Records(PartitionRecords),
    /// Partitions added to the assignment; their records follow.
    Assigned(Vec<TopicPartition>),
    /// Partitions about to leave the assignment; none of their records follow.
    Revoked(Revocation),
    /// Partitions already taken away (the member was expelled or timed out).
    Lost(Vec<TopicPartition>),
    /// A partition stopped (`auto.offset.reset=error`, no access) or the group failed; the
    /// consumer keeps running.
    Error(Error),
}

/// What a consumer reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    /// These topics.
    Topics(Vec<String>),
    /// Every topic whose name matches this regular expression (librdkafka's `^` prefix is
    /// optional here), re-evaluated on each metadata refresh.
    Pattern(String),
}

/// Counts of the fetcher's requests, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FetchStats {
    /// Fetch requests that named every partition (opening a session, or without one).
    pub full: u64,
    /// Incremental fetch requests within a session (KIP-227).
    pub incremental: u64,
    /// Sessions the broker no longer knew (`FETCH_SESSION_ID_NOT_FOUND`,
    /// `INVALID_FETCH_SESSION_EPOCH`), after which the fetcher started over.
    pub session_errors: u64,
    /// Requests that failed (connection lost, timeout).
    pub failed: u64,
}

/// State shared by the consumer handle, its fetcher and its group membership.
#[derive(Debug)]
pub(crate) struct Shared {
    pub client: Client,
    pub config: ConsumerConfig,
    pub state: Mutex<State>,
    /// Wakes `poll`.
    pub poll_wake: Notify,
    /// Wakes the fetcher.
    pub fetch_wake: Notify,
    pub offsets: Option<Offsets>,
    /// The membership the group gave (for commits).
    pub member: Mutex<Option<GroupMember>>,
    /// True once the consumer closes.
    pub closing: watch::Sender<bool>,
    /// The connections fetches go on.
    pub fetch_lane: u64,
    /// The connections of the group membership.
    pub group_lane: u64,
    pub stats: Mutex<FetchStats>,
    /// True once the group completed a first assignment for this member (even an empty one).
    pub assigned_once: watch::Sender<bool>,
    /// The topics the subscription covered when the group first resolved it.
    pub first_topics: OnceLock<Vec<String>>,
    /// Asks the group membership to heartbeat and match its subscription now.
    pub act_now: Notify,
}

impl Shared {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn member(&self) -> Option<GroupMember> {
        self.member
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_member(&self, member: Option<GroupMember>) {
        *self.member.lock().unwrap_or_else(PoisonError::into_inner) = member;
    }

    /// Notes the topics a resolution of the subscription found; the first one is kept.
    pub(crate) fn note_topics(&self, topics: &[String]) {
        let _ = self.first_topics.set(topics.to_vec());
    }

    /// Whether `topic` joined the subscription after its first resolution.
    pub(crate) fn is_late_topic(&self, topic: &str) -> bool {
        self.first_topics
            .get()
            .is_some_and(|first| !first.iter().any(|t| t == topic))
    }

    pub(crate) fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }
}

/// A Kafka consumer.
///
/// It derefs to its [`ConsumerHandle`], which holds everything but polling, assigning and
/// subscribing.
#[derive(Debug)]
pub struct Consumer {
    handle: ConsumerHandle,
    tasks: Vec<JoinHandle<()>>,
    membership: Option<JoinHandle<()>>,
}

/// A cloneable handle on a [`Consumer`]: positions, pausing, seeking, storing and committing
/// offsets from other tasks while one task polls. It does not keep the consumer open: once
/// the consumer is closed or dropped, calls that need it fail or do nothing.
#[derive(Debug, Clone)]
pub struct ConsumerHandle {
    shared: Arc<Shared>,
}

impl std::ops::Deref for Consumer {
    type Target = ConsumerHandle;
    fn deref(&self) -> &ConsumerHandle {
        &self.handle
    }
}

impl Consumer {
    /// A consumer on `client`; it reads nothing until [`assign`](Self::assign) or
    /// [`subscribe`](Self::subscribe).
    pub fn new(client: Client, config: ConsumerConfig) -> Result<Consumer> {
        config.validate()?;
        let offsets = config
            .group_id
            .as_ref()
            .map(|g| Offsets::new(client.clone(), g.clone()));
        let fetch_lane = client.new_lane();
        let group_lane = client.new_lane();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(config.enable_auto_offset_store)),
            client,
            config,
            poll_wake: Notify::new(),
            fetch_wake: Notify::new(),
            offsets,
            member: Mutex::new(None),
            closing: watch::Sender::new(false),
            fetch_lane,
            group_lane,
            stats: Mutex::new(FetchStats::default()),
            assigned_once: watch::Sender::new(false),
            first_topics: OnceLock::new(),
            act_now: Notify::new(),
        });
        let mut tasks = vec![crate::client::outlined::spawn(fetcher::run(shared.clone()))];
        if shared.config.enable_auto_commit && shared.offsets.is_some() {
            tasks.push(crate::client::outlined::spawn(auto_commit(shared.clone())));
        }
        Ok(Consumer {
            handle: ConsumerHandle { shared },
            tasks,
            membership: None,
        })
    }

    /// The client this consumer reads through.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// Reads `partitions` without joining a group, each from where `start` says
    /// ([`StartAt::Committed`] needs a `group.id`). Replaces any earlier assignment.
    pub fn assign(&mut self, partitions: &[(TopicPartition, StartAt)]) -> Result<()> {
        if self.membership.is_some() {
            return Err(Error::Config(
                "this consumer is subscribed: unsubscribe before assigning".into(),
            ));
        }
        if self.shared.offsets.is_none() && partitions.iter().any(|(_, s)| *s == StartAt::Committed)
        {
            return Err(Error::Config(
                "starting at the committed offset needs a `group.id`".into(),
            ));
        }
        let mut state = self.shared.lock();
        let old = state.assignment();
        state.remove(&old);
        for (tp, start) in partitions {
            state.add(std::slice::from_ref(tp), *start);
            state.restart(tp, *start);
        }
        drop(state);
        self.shared.fetch_wake.notify_one();
        Ok(())
    }

    /// Joins the group with `subscription`; the assignment arrives as
    /// [`ConsumerEvent::Assigned`].
    pub fn subscribe(&mut self, subscription: Subscription) -> Result<()> {
        if self.shared.config.group_id.is_none() {
            return Err(Error::Config("subscribing needs a `group.id`".into()));
        }
        if self.membership.is_some() {
            return Err(Error::Config(
                "this consumer is already subscribed; close it and subscribe a new one".into(),
            ));
        }
        let matcher = group::TopicMatcher::new(subscription)?;
        self.membership = Some(crate::client::outlined::spawn(group::run(
            self.shared.clone(),
            matcher,
        )));
        Ok(())
    }

    /// The next event: records, an assignment change or an error. Waits until there is one.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an event or a batch of records leaves the queue only in the poll that returns
    /// it, so a dropped `poll` loses nothing.
    pub async fn poll(&mut self) -> Result<ConsumerEvent> {
        let _waiting = Waiting::new(&self.shared);
        loop {
            let wake = self.shared.poll_wake.notified();
            {
                let mut state = self.shared.lock();
                state.last_poll = Instant::now();
                if let Some(event) = state.events.pop_front() {
                    return Ok(event);
                }
                if let Some(records) = state.take_records() {
                    drop(state);
                    self.shared.fetch_wake.notify_one();
                    return Ok(ConsumerEvent::Records(records));
                }
            }
            if self.shared.is_closing() {
                return Err(Error::Closed("the consumer is closed".into()));
            }
            wake.await;
        }
    }
}

impl ConsumerHandle {
    /// The consumer's `group.id`, if it has one.
    #[must_use]
    pub fn group_id(&self) -> Option<&str> {
        self.shared.config.group_id.as_deref()
    }

    /// Its client's `client.id`.
    #[must_use]
    pub fn client_id(&self) -> &str {
        &self.shared.client.config().client_id
    }

    /// Waits until the group has given this member its first assignment (possibly empty).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn first_assignment(&self) {
        let mut seen = self.shared.assigned_once.subscribe();
        let _ = seen.wait_for(|assigned| *assigned).await;
    }

    /// Has the group membership act now rather than at its next interval: heartbeat (so a
    /// rebalance the coordinator started is joined at once) and match the subscription
    /// against the cluster's topics (so a pattern takes up a topic created since). Meant for
    /// a caller that knows the group or the topics just changed; a no-op for a manual
    /// assignment.
    pub fn check_membership_now(&self) {
        self.shared.act_now.notify_one();
    }

    /// Whether `topic` was not among the topics the subscription covered when the group first
    /// resolved it (a topic a pattern matched later). False before that first resolution.
    #[must_use]
    pub fn is_late_topic(&self, topic: &str) -> bool {
        self.shared.is_late_topic(topic)
    }

    /// Whether the group has given this member an assignment yet.
    #[must_use]
    pub fn has_assignment(&self) -> bool {
        *self.shared.assigned_once.borrow()
    }

    /// Stops handing out and fetching records of `partitions` (their buffered records stay).
    pub fn pause(&self, partitions: &[TopicPartition]) {
        self.shared.lock().set_paused(partitions, true);
    }

    /// Undoes [`pause`](Self::pause).
    pub fn resume(&self, partitions: &[TopicPartition]) {
        self.shared.lock().set_paused(partitions, false);
        self.shared.fetch_wake.notify_one();
        self.shared.poll_wake.notify_one();
    }

    /// Moves the position of `partition`: no record before the new position is handed out
    /// after this returns. Fails if the partition is not assigned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the new position takes effect in the first poll (what was buffered is dropped,
    /// nothing before it is handed out). Dropped while the offset of the start is looked up, the
    /// fetcher looks that start up itself.
    pub async fn seek(&self, partition: &TopicPartition, to: StartAt) -> Result<()> {
        let generation = self
            .shared
            .lock()
            .restart(partition, to)
            .ok_or_else(|| Error::Config(format!("seek: {partition} is not assigned")))?;
        if !matches!(to, StartAt::Offset(o) if o >= 0) {
            let offset = positions::resolve_one(&self.shared, partition, to).await?;
            self.shared.lock().resolved(partition, generation, offset);
        }
        self.shared.fetch_wake.notify_one();
        Ok(())
    }

    /// The next offset to hand out for `partition`, if known.
    #[must_use]
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.shared.lock().parts.get(partition)?.position
    }

    /// What the fetcher has done so far.
    #[must_use]
    pub fn fetch_stats(&self) -> FetchStats {
        *self
            .shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes fetched and waiting to be handed out (bounded by `queued.max.messages.kbytes`
    /// plus one response).
    #[must_use]
    pub fn buffered_bytes(&self) -> usize {
        self.shared.lock().buffered
    }

    /// The partitions assigned now.
    #[must_use]
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.shared.lock().assignment()
    }

    /// The group membership (generation or member epoch, member id), while in a group.
    #[must_use]
    pub fn member(&self) -> Option<GroupMember> {
        self.shared.member()
    }

    /// The group and membership to hand a transactional producer with the offsets it commits
    /// for this consumer ([`TransactionalProducer::send_offsets`]); `None` without a
    /// `group.id`.
    ///
    /// [`TransactionalProducer::send_offsets`]: crate::client::TransactionalProducer::send_offsets
    #[must_use]
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        Some(GroupMetadata {
            group_id: self.shared.config.group_id.clone()?,
            member: self.shared.member(),
        })
    }

    /// Stores `next_offset` (the offset of the next record to read) as what the next commit
    /// of `partition` sends.
    pub fn store_offset(&self, partition: &TopicPartition, next_offset: i64) -> Result<()> {
        let mut state = self.shared.lock();
        let part = state
            .parts
            .get_mut(partition)
            .ok_or_else(|| Error::Config(format!("store_offset: {partition} is not assigned")))?;
        part.stored = Some((next_offset, part.leader_epoch));
        Ok(())
    }

    /// The starts this consumer's partitions were given at their assignments (see
    /// [`ConsumerConfig::remember_starts`]), for the in-process count.
    #[cfg(feature = "testing")]
    pub(crate) fn given_starts(&self) -> Vec<(TopicPartition, i64)> {
        self.shared.lock().given_starts()
    }

    /// Forgets the offset stored for `partition`: the next commit carries nothing for it until
    /// an offset is stored again (as librdkafka's store of an invalid offset). A caller that
    /// seeks back clears it, so that no commit carries the group past records the seek replays.
    pub fn clear_stored_offset(&self, partition: &TopicPartition) -> Result<()> {
        if self.shared.lock().clear_stored(partition) {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "clear_stored_offset: {partition} is not assigned"
            )))
        }
    }

    /// Commits the stored offsets that changed since the last commit, and waits for the
    /// group's answer.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an `OffsetCommit` already sent may still be applied, but the offsets count as
    /// committed only once the group accepts them, so the next commit sends them again (committing
    /// the same offsets twice is harmless).
    pub async fn commit(&self) -> Result<()> {
        commit_stored(&self.shared, None).await
    }

    /// Starts [`commit`](Self::commit) in the background; await the handle for its outcome.
    #[must_use]
    pub fn commit_async(&self) -> JoinHandle<Result<()>> {
        let shared = self.shared.clone();
        crate::client::outlined::spawn(async move { commit_stored(&shared, None).await })
    }

    /// Commits `offsets` as they are (next offsets to read), as this consumer's member.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an `OffsetCommit` already sent may still be applied, and committing the same
    /// offsets again is harmless; the consumer notes them as committed only once the group accepts
    /// them.
    pub async fn commit_offsets(&self, offsets: &[OffsetToCommit]) -> Result<()> {
        let group = self.offsets()?;
        commit_as_member(&self.shared, group, offsets).await?;
        let accepted: Vec<(TopicPartition, i64)> = offsets
            .iter()
            .map(|o| (TopicPartition::new(&o.topic, o.partition), o.offset))
            .collect();
        self.shared.lock().committed(&accepted);
        Ok(())
    }

    /// The group's committed offsets of `partitions`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn committed(&self, partitions: &[TopicPartition]) -> Result<Vec<CommittedOffset>> {
        let wanted: Vec<(&str, i32)> = partitions
            .iter()
            .map(|tp| (&*tp.topic, tp.partition))
            .collect();
        self.offsets()?.fetch(&wanted, true).await
    }

    fn offsets(&self) -> Result<&Offsets> {
        self.shared
            .offsets
            .as_ref()
            .ok_or_else(|| Error::Config("committing needs a `group.id`".into()))
    }
}

impl Consumer {
    /// A handle for other tasks.
    #[must_use]
    pub fn handle(&self) -> ConsumerHandle {
        self.handle.clone()
    }

    /// Leaves the group (after committing the stored offsets when `enable.auto.commit` is
    /// on) and stops fetching.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the consumer is dropped with the future. Dropped during the commit, the
    /// commit may or may not apply and the member does not leave the group (the coordinator drops
    /// it after the session timeout); dropped afterwards, the leave goes on in the background but
    /// the group's connections are released, so it may not get through. Await it to the end.
    pub async fn close(mut self) -> Result<()> {
        let committed = if self.shared.config.enable_auto_commit && self.shared.offsets.is_some() {
            commit_stored(&self.shared, None).await
        } else {
            Ok(())
        };
        self.shared.closing.send_replace(true);
        if let Some(membership) = self.membership.take() {
            // The membership leaves the group when it sees `closing`.
            let _ = tokio::time::timeout(self.shared.client.socket_timeout(), membership).await;
        }
        self.shared.poll_wake.notify_one();
        committed
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.shared.closing.send_replace(true);
        for task in &self.tasks {
            task.abort();
        }
        if let Some(m) = &self.membership {
            m.abort();
        }
        self.shared.client.release_lane(self.shared.fetch_lane);
        self.shared.client.release_lane(self.shared.group_lane);
    }
}

/// Marks the caller as present for as long as a `poll` runs, dropped or not.
struct Waiting<'a>(&'a Shared);

impl<'a> Waiting<'a> {
    fn new(shared: &'a Shared) -> Self {
        shared.lock().polling = true;
        Waiting(shared)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.polling = false;
        state.last_poll = Instant::now();
    }
}

/// Commits stored offsets that changed (of `only`, or of every partition).
pub(crate) async fn commit_stored(shared: &Shared, only: Option<&[TopicPartition]>) -> Result<()> {
    let Some(group) = &shared.offsets else {
        return Ok(());
    };
    let pending = {
        let state = shared.lock();
        let mut pending = state.to_commit(only);
        // A position in a topic deleted since and created again under its name is not the new
        // topic's: committing it would start the group there.
        pending.retain(|(tp, _, _)| {
            let current = shared.client.with_metadata(|m| m.topic_id(&tp.topic));
            state.parts.get(tp).is_none_or(|p| p.in_topic_of(current))
        });
        pending
    };
    if pending.is_empty() {
        return Ok(());
    }
    let offsets: Vec<OffsetToCommit> = pending
        .iter()
        .map(|(tp, offset, epoch)| OffsetToCommit {
            topic: tp.topic.to_string(),
            partition: tp.partition,
            offset: *offset,
            leader_epoch: *epoch,
            metadata: None,
        })
        .collect();
    commit_as_member(shared, group, &offsets).await?;
    let accepted: Vec<(TopicPartition, i64)> =
        pending.into_iter().map(|(tp, o, _)| (tp, o)).collect();
    shared.lock().committed(&accepted);
    Ok(())
}

/// Commits as the current member. A KIP-848 member's epoch can move while a commit is on its
/// way (`STALE_MEMBER_EPOCH`): the commit is sent again with the new epoch, as long as the
/// member still owns the partitions.
async fn commit_as_member(
    shared: &Shared,
    group: &Offsets,
    offsets: &[OffsetToCommit],
) -> Result<()> {
    let observers = &shared.client.config().observers;
    if !observers.wants(Interest::GROUP) {
        return commit_retrying_epoch(shared, group, offsets).await;
    }
    let started = Instant::now();
    let result = commit_retrying_epoch(shared, group, offsets).await;
    observers.emit(&Observed::Commit {
        group: group.group(),
        partitions: offsets.len(),
        latency: started.elapsed(),
        error: result.as_ref().err(),
    });
    result
}

#[inline(never)]
fn commit_retrying_epoch<'a>(
    shared: &'a Shared,
    group: &'a Offsets,
    offsets: &'a [OffsetToCommit],
) -> Outlined<'a, Result<()>> {
    Box::pin(async move {
        let mut attempt = 0;
        loop {
            let member = shared.member();
            match group.commit(member.as_ref(), offsets).await {
                Err(e)
                    if attempt < 3
                        && e.code() == Some(crate::client::ResponseError::StaleMemberEpoch) =>
                {
                    attempt += 1;
                    if shared.member() == member {
                        // The new epoch has not arrived yet.
                        tokio::time::sleep(shared.client.config().retry_backoff).await;
                    }
                }
                other => return other,
            }
        }
    })
}

async fn auto_commit(shared: Arc<Shared>) {
    let mut closing = shared.closing.subscribe();
    loop {
        tokio::select! {
            () = tokio::time::sleep(shared.config.auto_commit_interval) => {}
            _ = closing.wait_for(|c| *c) => return,
        }
        if let Err(e) = commit_stored(&shared, None).await {
            tracing::warn!(error = %e, "auto-commit failed");
        }
    }
}
