//! The KIP-848 consumer group protocol (`group.protocol=consumer`): the member sends
//! `ConsumerGroupHeartbeat`s, the coordinator computes the assignment.
//!
//! The invariant: a partition is read by at most one member at a time, and it changes hands
//! at the offset committed when it was given back (with `enable.auto.commit`, where its last
//! owner's caller stopped). The coordinator gives a partition to a new owner
//! only once the previous owner has said, in a heartbeat, that it no longer holds it; so this
//! member reconciles an assignment by first revoking what left it (the caller hears
//! `Revoked`, stored offsets are committed) and telling the coordinator, and only then taking
//! what joined it. Whenever the member can no longer know what the coordinator thinks of it
//! (fenced, unknown, no heartbeat answered within the session timeout, or left after
//! `max.poll.interval.ms` without a poll), it drops everything at once as `Lost` and joins again
//! with epoch 0 and the same member id.
//!
//! Heartbeats carry only what changed since the last one the coordinator answered; after any
//! failure the next one carries everything again, since the coordinator may or may not have
//! seen the last.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::consumer_group_heartbeat_response::Assignment as WireAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use tokio::time::Instant;

use crate::client::coordinator::CoordinatorKind;
use crate::client::error::{Error, Result};
use crate::client::{Backoff, Client};

use super::super::{GroupMember, Shared, TopicPartition};
use super::TopicMatcher;

/// v0 came with Kafka 3.7 (early access); v1 (Kafka 4.0) adds the topic regex and requires the
/// member id to come from the client (KIP-1082).
const HEARTBEAT_VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };
/// The member epoch that leaves the group.
const LEAVE_EPOCH: i32 = -1;
/// The member epoch with which a static member leaves but keeps its assignment for a while.
const LEAVE_STATIC_EPOCH: i32 = -2;
/// A coordinator asking for heartbeats faster than this is not obeyed.
const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// How long a caller blocked in `poll` gets to show it is alive before the member leaves.
const POLL_PROBE: Duration = Duration::from_millis(200);
/// How often a member that left for lack of polls looks for the next poll.
const STALE_CHECK: Duration = Duration::from_millis(100);
/// How often a pattern is matched again here when the coordinator cannot match it (v0).
const PATTERN_REFRESH_DEFAULT: Duration = Duration::from_mins(5);

type TopicId = [u8; 16];
/// Partitions by topic id. No topic maps to an empty set, so that equal assignments compare
/// equal.
type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;
type Task<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Runs the membership until the consumer closes (then leaves the group) or the coordinator
/// refuses the member for good (then the caller hears the error).
pub(crate) async fn run(shared: Arc<Shared>, matcher: TopicMatcher) {
    let Some(group) = shared.config.group_id.clone() else {
        return;
    };
    Membership::new(shared, matcher, group).run().await;
}

/// Where the member stands with the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The next heartbeat joins (epoch 0).
    Joining,
    /// The coordinator answered a heartbeat of this membership.
    Joined,
    /// Left because the caller stopped polling; joins again at the next poll.
    Stale,
}

/// Everything a heartbeat could say, before leaving out what the coordinator already knows.
#[derive(Debug, Clone, PartialEq)]
struct Wanted {
    group: String,
    member_id: String,
    epoch: i32,
    instance_id: Option<String>,
    rack: Option<String>,
    rebalance_timeout_ms: i32,
    /// The topic list, or the names a pattern matched here (for a coordinator without v1).
    topics: Option<Vec<String>>,
    /// A pattern subscription, as the coordinator should match it.
    regex: Option<String>,
    assignor: Option<String>,
    owned: Assignment,
}

/// What the coordinator was last told, field by field (`None`: nothing it can rely on).
#[derive(Debug, Clone, Default, PartialEq)]
struct Sent {
    rebalance_timeout_ms: Option<i32>,
    topics: Option<Vec<String>>,
    regex: Option<String>,
    assignor: Option<String>,
    rack: Option<String>,
    owned: Option<Assignment>,
}

/// `want` unless the coordinator already has it.
fn unless_sent<T: PartialEq + Clone>(full: bool, sent: Option<&T>, want: Option<&T>) -> Option<T> {
    want.filter(|w| full || sent != Some(*w)).cloned()
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl Sent {
    /// The heartbeat saying `w` at `version`, and what the coordinator knows once it answers.
    fn request(&self, w: &Wanted, version: i16) -> (ConsumerGroupHeartbeatRequest, Sent) {
        // The coordinator checks a join against the whole picture, whatever it heard before.
        let full = w.epoch == 0;
        let (topics, regex) = match &w.regex {
            Some(regex) if version >= 1 => (None, Some(regex)),
            _ => (w.topics.as_ref(), None),
        };
        let next = Sent {
            rebalance_timeout_ms: unless_sent(
                full,
                self.rebalance_timeout_ms.as_ref(),
                Some(&w.rebalance_timeout_ms),
            ),
            topics: unless_sent(full, self.topics.as_ref(), topics),
            regex: unless_sent(full, self.regex.as_ref(), regex),
            assignor: unless_sent(full, self.assignor.as_ref(), w.assignor.as_ref()),
            rack: unless_sent(full, self.rack.as_ref(), w.rack.as_ref()),
            owned: unless_sent(full, self.owned.as_ref(), Some(&w.owned)),
        };
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(&w.group)))
            .with_member_id(text(&w.member_id))
            .with_member_epoch(w.epoch)
            // Sent every time: it is how the coordinator tells a static member's heartbeats
            // from a dynamic one's.
            .with_instance_id(w.instance_id.as_deref().map(text))
            .with_rack_id(next.rack.as_deref().map(text))
            .with_rebalance_timeout_ms(next.rebalance_timeout_ms.unwrap_or(-1))
            .with_subscribed_topic_names(
                next.topics
                    .as_ref()
                    .map(|t| t.iter().map(|n| TopicName(text(n))).collect()),
            )
            .with_subscribed_topic_regex(next.regex.as_deref().map(text))
            .with_server_assignor(next.assignor.as_deref().map(text))
            .with_topic_partitions(next.owned.as_ref().map(wire_partitions));
        let known = Sent {
            rebalance_timeout_ms: next.rebalance_timeout_ms.or(self.rebalance_timeout_ms),
            topics: next.topics.or_else(|| self.topics.clone()),
            regex: next.regex.or_else(|| self.regex.clone()),
            assignor: next.assignor.or_else(|| self.assignor.clone()),
            rack: next.rack.or_else(|| self.rack.clone()),
            owned: next.owned.or_else(|| self.owned.clone()),
        };
        (request, known)
    }
}

fn wire_partitions(owned: &Assignment) -> Vec<TopicPartitions> {
    owned
        .iter()
        .map(|(id, partitions)| {
            TopicPartitions::default()
                .with_topic_id(uuid::Uuid::from_bytes(*id))
                .with_partitions(partitions.iter().copied().collect())
        })
        .collect()
}

/// The heartbeat that leaves the group: epoch -1, or -2 for a static member (whose
/// partitions the coordinator then keeps for it until the session times out).
fn leave_request(
    group: &str,
    member_id: &str,
    instance_id: Option<&str>,
) -> ConsumerGroupHeartbeatRequest {
    let epoch = if instance_id.is_some() {
        LEAVE_STATIC_EPOCH
    } else {
        LEAVE_EPOCH
    };
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member_id))
        .with_member_epoch(epoch)
        .with_instance_id(instance_id.map(text))
        .with_rack_id(None)
        .with_rebalance_timeout_ms(-1)
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(None)
        .with_server_assignor(None)
        .with_topic_partitions(None)
}

/// The assignment in a response; a negative partition makes the whole answer suspect.
fn assignment_of(wire: &WireAssignment) -> Result<Assignment> {
    let mut out = Assignment::new();
    for topic in &wire.topic_partitions {
        if topic.partitions.is_empty() {
            continue;
        }
        let set = out.entry(*topic.topic_id.as_bytes()).or_default();
        for &p in &topic.partitions {
            if p < 0 {
                return Err(Error::protocol(format_args!(
                    "ConsumerGroupHeartbeat assigns partition {p}"
                )));
            }
            set.insert(p);
        }
    }
    Ok(out)
}

/// The next move towards an assignment.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    /// Owned but no longer assigned: given back first.
    revoke: Assignment,
    /// Assigned, not owned, and of a topic whose name is known.
    add: Assignment,
    /// Assigned topics whose names the metadata does not give yet.
    unresolved: BTreeSet<TopicId>,
}

fn plan(owned: &Assignment, target: &Assignment, names: &HashMap<TopicId, Arc<str>>) -> Plan {
    let mut out = Plan::default();
    for (id, partitions) in owned {
        let kept = target.get(id);
        let gone: BTreeSet<i32> = partitions
            .iter()
            .filter(|p| !kept.is_some_and(|k| k.contains(p)))
            .copied()
            .collect();
        if !gone.is_empty() {
            out.revoke.insert(*id, gone);
        }
    }
    for (id, partitions) in target {
        let held = owned.get(id);
        let new: BTreeSet<i32> = partitions
            .iter()
            .filter(|p| !held.is_some_and(|h| h.contains(p)))
            .copied()
            .collect();
        if new.is_empty() {
            continue;
        }
        if names.contains_key(id) {
            out.add.insert(*id, new);
        } else {
            out.unresolved.insert(*id);
        }
    }
    out
}

fn merge(into: &mut Assignment, add: &Assignment) {
    for (id, partitions) in add {
        into.entry(*id).or_default().extend(partitions);
    }
}

fn subtract(from: &mut Assignment, remove: &Assignment) {
    for (id, partitions) in remove {
        if let Some(set) = from.get_mut(id) {
            set.retain(|p| !partitions.contains(p));
            if set.is_empty() {
                from.remove(id);
            }
        }
    }
}

/// A member id as Kafka writes a random (version 4) UUID: 22 characters of URL-safe base64
/// without padding, never starting with `-` (command-line tools would take it for an option).
fn new_member_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    loop {
        let mut bytes = [0u8; 16];
        fastrand::fill(&mut bytes);
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let mut out = String::with_capacity(22);
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            }
        }
        if !out.starts_with('-') {
            return out;
        }
    }
}

/// A pattern as the coordinator should match it. The coordinator matches whole topic names,
/// while a [`Subscription::Pattern`](super::super::Subscription::Pattern) is searched for in
/// the name, anchored at the start unless it begins with `^` itself (then it is used as
/// written, as librdkafka does); the padding keeps one meaning whichever side matches.
fn broker_regex(pattern: &str) -> String {
    if pattern.starts_with('^') {
        format!(".*(?:{pattern}).*")
    } else {
        format!("(?:{pattern}).*")
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// An answered heartbeat.
#[derive(Debug)]
struct Beat {
    version: i16,
    /// What the coordinator knows once this answer is a success.
    sent: Sent,
    /// Names a pattern matched here, for a coordinator that cannot match it.
    names: Option<Vec<String>>,
    response: ConsumerGroupHeartbeatResponse,
}

async fn heartbeat(
    client: Client,
    matcher: TopicMatcher,
    sent: Sent,
    mut wanted: Wanted,
) -> Result<Beat> {
    let node = client
        .coordinator(CoordinatorKind::Group, &wanted.group)
        .await?;
    let conn = client.connection(node).await?;
    let version = conn.version_of::<ConsumerGroupHeartbeatRequest>(HEARTBEAT_VERSIONS)?;
    let mut names = None;
    if version == 0 && wanted.regex.is_some() && wanted.topics.is_none() {
        let here = matcher.topics(&client).await?;
        wanted.topics = Some(here.clone());
        names = Some(here);
    }
    let (request, sent) = sent.request(&wanted, version);
    let response = conn
        .send(&request, version, client.socket_timeout())
        .await?;
    Ok(Beat {
        version,
        sent,
        names,
        response,
    })
}

/// Work the membership waits for besides heartbeats.
#[derive(Debug)]
enum Step {
    /// The caller is done with these partitions and they left the consumer.
    Revoked(Assignment),
    /// The metadata was refreshed to name assigned topics.
    Refreshed(Result<()>),
    /// A pattern was matched here again.
    Matched(Result<Vec<String>>),
}

/// What the loop does after an answer.
enum Flow {
    Go,
    /// The membership was reset: work for the old one is void.
    Reset,
    Stop,
}

/// Waits for `task`, or forever when there is none.
async fn next<T>(task: &mut Option<Task<T>>) -> T {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

/// This consumer's membership of its group.
struct Membership {
    shared: Arc<Shared>,
    matcher: TopicMatcher,
    group: String,
    member_id: String,
    epoch: i32,
    phase: Phase,
    /// The latest assignment from the coordinator (`None` before one in this membership).
    target: Option<Assignment>,
    /// What the consumer holds from this membership.
    owned: Assignment,
    /// Names of the topics assigned so far.
    names: HashMap<TopicId, Arc<str>>,
    sent: Sent,
    /// The coordinator's heartbeat version, once known.
    version: Option<i16>,
    /// A pattern's topics as matched here (only for a coordinator without v1).
    pattern_names: Option<Vec<String>>,
    pattern_at: Instant,
    interval: Duration,
    /// The next regular heartbeat.
    next_beat: Instant,
    /// No heartbeat before this (after a failure).
    not_before: Instant,
    backoff: Backoff,
    /// The last heartbeat the coordinator accepted.
    last_ok: Instant,
    resolve_at: Instant,
    resolve_backoff: Backoff,
    /// When the caller was asked to show it still polls.
    probe: Option<Instant>,
    /// The coordinator may hold a membership for us (a join went out since the last leave).
    maybe_member: bool,
}

impl Membership {
    fn new(shared: Arc<Shared>, matcher: TopicMatcher, group: String) -> Self {
        let now = Instant::now();
        let backoff = shared.client.retry_backoff();
        Membership {
            matcher,
            group,
            member_id: new_member_id(),
            epoch: 0,
            phase: Phase::Joining,
            target: None,
            owned: Assignment::new(),
            names: HashMap::new(),
            sent: Sent::default(),
            version: None,
            pattern_names: None,
            pattern_at: now,
            interval: shared.config.heartbeat_interval,
            next_beat: now,
            not_before: now,
            resolve_backoff: backoff.clone(),
            backoff,
            last_ok: now,
            resolve_at: now,
            probe: None,
            maybe_member: false,
            shared,
        }
    }

    fn max_poll(&self) -> Duration {
        self.shared.config.max_poll_interval
    }

    async fn run(mut self) {
        let mut closing = self.shared.closing.subscribe();
        let mut beat: Option<Task<Result<Beat>>> = None;
        let mut step: Option<Task<Step>> = None;
        loop {
            if self.shared.is_closing() {
                drop((beat, step));
                self.leave("the consumer closes").await;
                return;
            }
            let now = Instant::now();
            if self.phase == Phase::Stale {
                if self.shared.since_last_poll() < self.max_poll() {
                    tracing::info!(group = %self.group, "the caller polls again: rejoining");
                    self.phase = Phase::Joining;
                    self.next_beat = now;
                    self.not_before = now;
                } else {
                    tokio::select! {
                        () = tokio::time::sleep(STALE_CHECK) => {}
                        _ = closing.changed() => {}
                    }
                    continue;
                }
            } else if self.caller_gone(now) {
                beat = None;
                step = None;
                tracing::warn!(
                    group = %self.group,
                    "no poll within max.poll.interval.ms: leaving the group until the next poll"
                );
                self.leave("max.poll.interval.ms passed without a poll")
                    .await;
                self.phase = Phase::Stale;
                continue;
            }
            if self.epoch > 0
                && now.duration_since(self.last_ok) > self.shared.config.session_timeout
            {
                beat = None;
                step = None;
                self.fenced("no heartbeat answered within session.timeout.ms");
            }
            if step.is_none() {
                step = self.next_step(now);
            }
            if beat.is_none() && self.beat_due(now) {
                self.maybe_member = true;
                beat = Some(Box::pin(heartbeat(
                    self.shared.client.clone(),
                    self.matcher.clone(),
                    self.sent.clone(),
                    self.wanted(),
                )));
            }
            let wake = self.wake_at(now, beat.is_none(), step.is_none());
            let shared = self.shared.clone();
            tokio::select! {
                result = next(&mut beat) => {
                    beat = None;
                    match self.on_beat(result) {
                        Flow::Go => {}
                        Flow::Reset => step = None,
                        Flow::Stop => return,
                    }
                }
                done = next(&mut step) => {
                    step = None;
                    self.on_step(done);
                }
                () = tokio::time::sleep_until(wake) => {}
                _ = closing.changed() => {}
                () = shared.act_now.notified() => {
                    // The coordinator matches a pattern itself from v1 on.
                    self.pattern_at = Instant::now();
                    self.next_beat = Instant::now();
                }
            }
        }
    }

    /// Whether the caller stopped polling. A caller blocked in `poll` for lack of events
    /// looks the same from here, so it is woken first and given a moment to show it polls.
    fn caller_gone(&mut self, now: Instant) -> bool {
        if self.shared.since_last_poll() <= self.max_poll() {
            self.probe = None;
            return false;
        }
        match self.probe {
            None => {
                self.probe = Some(now);
                self.shared.poll_wake.notify_one();
                false
            }
            Some(at) => now.duration_since(at) >= POLL_PROBE,
        }
    }

    fn wanted(&self) -> Wanted {
        let config = &self.shared.config;
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        Wanted {
            group: self.group.clone(),
            member_id: self.member_id.clone(),
            epoch: self.epoch,
            instance_id: non_empty(&config.group_instance_id),
            rack: non_empty(&config.client_rack),
            rebalance_timeout_ms: millis(self.max_poll()),
            topics: match &self.matcher {
                TopicMatcher::Topics(topics) => Some(topics.clone()),
                TopicMatcher::Pattern(..) => self.pattern_names.clone(),
            },
            regex: self.matcher.pattern().map(broker_regex),
            assignor: non_empty(&config.group_remote_assignor),
            owned: self.owned.clone(),
        }
    }

    /// A heartbeat is due at the interval, and at once (after any backoff) to join or to
    /// tell the coordinator what the member holds now.
    fn beat_due(&self, now: Instant) -> bool {
        now >= self.not_before && (now >= self.next_beat || self.urgent())
    }

    fn urgent(&self) -> bool {
        self.epoch == 0 || self.sent.owned.as_ref() != Some(&self.owned)
    }

    fn wake_at(&self, now: Instant, beat_idle: bool, step_idle: bool) -> Instant {
        let mut wake = match self.probe {
            Some(at) => at + POLL_PROBE,
            None => {
                now + self
                    .max_poll()
                    .saturating_sub(self.shared.since_last_poll())
            }
        };
        if beat_idle {
            let due = if self.urgent() {
                self.not_before
            } else {
                self.next_beat.max(self.not_before)
            };
            wake = wake.min(due);
        }
        if self.epoch > 0 {
            wake = wake.min(self.last_ok + self.shared.config.session_timeout);
        }
        if step_idle {
            if self
                .target
                .as_ref()
                .is_some_and(|t| !plan(&self.owned, t, &self.names).unresolved.is_empty())
            {
                wake = wake.min(self.resolve_at);
            }
            if self.pattern_here() {
                wake = wake.min(self.pattern_at);
            }
        }
        wake.max(now)
    }

    /// How often a pattern matched here is matched again: at each periodic metadata refresh,
    /// as librdkafka does.
    fn pattern_every(&self) -> Duration {
        let every = self.shared.client.config().metadata_refresh_interval;
        if every.is_zero() {
            PATTERN_REFRESH_DEFAULT
        } else {
            // A year is forever here, and keeps `Instant` arithmetic from overflowing.
            every.min(Duration::from_hours(24 * 365))
        }
    }

    /// Whether a pattern has to be matched here: the coordinator cannot (v0).
    fn pattern_here(&self) -> bool {
        self.matcher.is_pattern() && self.version == Some(0)
    }

    /// Starts the next reconciliation move, if any: revocations first, then additions (done
    /// at once), then a metadata refresh for topics it cannot name.
    fn next_step(&mut self, now: Instant) -> Option<Task<Step>> {
        if self.phase == Phase::Joined
            && let Some(target) = &self.target
        {
            let plan = plan(&self.owned, target, &self.names);
            if !plan.revoke.is_empty() {
                let partitions = self.partitions(&plan.revoke);
                tracing::info!(group = %self.group, epoch = self.epoch, ?partitions, "revoking");
                let shared = self.shared.clone();
                let limit = self.max_poll();
                return Some(Box::pin(async move {
                    shared.revoke_partitions(&partitions, limit).await;
                    Step::Revoked(plan.revoke)
                }));
            }
            if !plan.add.is_empty() {
                let partitions = self.partitions(&plan.add);
                tracing::info!(group = %self.group, epoch = self.epoch, ?partitions, "assigned");
                self.shared.assign_partitions(&partitions);
                merge(&mut self.owned, &plan.add);
            } else if plan.unresolved.is_empty() {
                // Reconciled (possibly to nothing): the member has its assignment.
                self.shared.assigned_once.send_replace(true);
            }
            if !plan.unresolved.is_empty() && now >= self.resolve_at {
                tracing::debug!(group = %self.group, "assigned topics unknown here: refreshing metadata");
                let client = self.shared.client.clone();
                return Some(Box::pin(async move {
                    Step::Refreshed(client.refresh_all_metadata().await)
                }));
            }
        }
        if self.pattern_here() && now >= self.pattern_at {
            let client = self.shared.client.clone();
            let matcher = self.matcher.clone();
            return Some(Box::pin(async move {
                Step::Matched(matcher.topics(&client).await)
            }));
        }
        None
    }

    fn on_step(&mut self, done: Step) {
        let now = Instant::now();
        match done {
            Step::Revoked(revoked) => subtract(&mut self.owned, &revoked),
            Step::Refreshed(result) => {
                if let Err(e) = result {
                    tracing::debug!(group = %self.group, error = %e, "metadata refresh failed");
                }
                if self.learn_names() {
                    self.resolve_backoff.reset();
                } else {
                    self.resolve_at = now + self.resolve_backoff.next_delay();
                }
            }
            Step::Matched(result) => match result {
                Ok(names) => {
                    self.shared.note_topics(&names);
                    self.pattern_names = Some(names);
                    self.pattern_at = now + self.pattern_every();
                }
                Err(e) => {
                    tracing::debug!(group = %self.group, error = %e, "matching the pattern failed");
                    self.pattern_at = now + self.resolve_backoff.next_delay();
                }
            },
        }
    }

    /// Looks the assigned topics up in the metadata; true when every one has a name.
    fn learn_names(&mut self) -> bool {
        let Some(target) = &self.target else {
            return true;
        };
        let unknown: Vec<TopicId> = target
            .keys()
            .filter(|id| !self.names.contains_key(*id) && **id != [0; 16])
            .copied()
            .collect();
        if unknown.is_empty() {
            return target.keys().all(|id| self.names.contains_key(id));
        }
        let found: Vec<(TopicId, Arc<str>)> = self.shared.client.with_metadata(|m| {
            m.topics
                .values()
                .filter(|t| unknown.contains(&t.id))
                .map(|t| (t.id, t.name.clone()))
                .collect()
        });
        self.names.extend(found);
        target.keys().all(|id| self.names.contains_key(id))
    }

    fn partitions(&self, of: &Assignment) -> Vec<TopicPartition> {
        let mut out = Vec::new();
        for (id, partitions) in of {
            if let Some(name) = self.names.get(id) {
                out.extend(partitions.iter().map(|&p| TopicPartition {
                    topic: name.clone(),
                    partition: p,
                }));
            }
        }
        out
    }

    fn on_beat(&mut self, result: Result<Beat>) -> Flow {
        let beat = match result {
            Ok(beat) => beat,
            Err(e) => return self.on_failure(e),
        };
        self.version = Some(beat.version);
        if let Some(names) = beat.names {
            self.shared.note_topics(&names);
            self.pattern_names = Some(names);
            self.pattern_at = Instant::now() + self.pattern_every();
        }
        let response = beat.response;
        match ResponseError::try_from_code(response.error_code) {
            None => self.on_answer(beat.sent, &response),
            Some(code) => self.on_refusal(code, response.error_message.as_deref()),
        }
    }

    fn on_answer(&mut self, sent: Sent, response: &ConsumerGroupHeartbeatResponse) -> Flow {
        if response.member_epoch <= 0 {
            return self.retry(&Error::protocol(format_args!(
                "ConsumerGroupHeartbeat answered member epoch {}",
                response.member_epoch
            )));
        }
        let target = match response.assignment.as_ref().map(assignment_of).transpose() {
            Ok(t) => t,
            Err(e) => return self.retry(&e),
        };
        let now = Instant::now();
        self.sent = sent;
        self.last_ok = now;
        self.backoff.reset();
        self.not_before = now;
        self.interval = u64::try_from(response.heartbeat_interval_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map_or(self.shared.config.heartbeat_interval, Duration::from_millis)
            .max(MIN_INTERVAL);
        self.next_beat = now + self.interval;
        let mut changed = self.epoch != response.member_epoch;
        // A v0 coordinator may name the member itself.
        if let Some(id) = response.member_id.as_deref().filter(|id| !id.is_empty())
            && id != self.member_id
        {
            id.clone_into(&mut self.member_id);
            changed = true;
        }
        if self.phase != Phase::Joined {
            tracing::info!(group = %self.group, member_id = %self.member_id, epoch = response.member_epoch, "joined");
        }
        self.epoch = response.member_epoch;
        self.phase = Phase::Joined;
        if changed {
            self.shared.set_member(Some(GroupMember {
                generation: self.epoch,
                member_id: self.member_id.clone(),
                instance_id: self
                    .shared
                    .config
                    .group_instance_id
                    .clone()
                    .filter(|s| !s.is_empty()),
            }));
        }
        if let Some(target) = target {
            tracing::debug!(group = %self.group, epoch = self.epoch, topics = target.len(), "new assignment");
            self.target = Some(target);
            if !self.learn_names() {
                self.resolve_at = now;
            }
        }
        Flow::Go
    }

    fn on_refusal(&mut self, code: ResponseError, message: Option<&str>) -> Flow {
        self.sent = Sent::default();
        let detail = message.map_or_else(String::new, |m| format!(": {m}"));
        match code {
            ResponseError::UnknownMemberId | ResponseError::FencedMemberEpoch => {
                let joining = self.epoch == 0;
                self.fenced(&format!("{code:?}{detail}"));
                if joining {
                    // Refused while joining: joining again at once would only spin.
                    self.retry(&Error::Broker {
                        code,
                        context: format!("joining group {}{detail}", self.group),
                    });
                }
                Flow::Reset
            }
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
                self.shared
                    .client
                    .forget_coordinator(CoordinatorKind::Group, &self.group);
                self.retry(&Error::Broker {
                    code,
                    context: format!("heartbeat of group {}{detail}", self.group),
                })
            }
            ResponseError::UnsupportedVersion => {
                self.fail(Error::Broker {
                    code,
                    context: format!(
                        "group {}: the cluster does not support `group.protocol=consumer` \
                         (KIP-848); use `group.protocol=classic` until it does{detail}",
                        self.group
                    ),
                });
                Flow::Stop
            }
            code if code.is_retriable() => self.retry(&Error::Broker {
                code,
                context: format!("heartbeat of group {}{detail}", self.group),
            }),
            code => {
                self.fail(Error::Broker {
                    code,
                    context: format!(
                        "group {} refused this member (`group.protocol=consumer`){detail}",
                        self.group
                    ),
                });
                Flow::Stop
            }
        }
    }

    fn on_failure(&mut self, error: Error) -> Flow {
        self.sent = Sent::default();
        match error {
            Error::Unsupported(what) => {
                self.fail(Error::Unsupported(format!(
                    "ConsumerGroupHeartbeat (KIP-848, needed by `group.protocol=consumer`, \
                     generally available from Kafka 4.0) for group {}: {what}; use \
                     `group.protocol=classic`",
                    self.group
                )));
                Flow::Stop
            }
            e if e.is_retriable() || matches!(e, Error::Protocol(_) | Error::Closed(_)) => {
                if !matches!(e, Error::Broker { code, .. } if code == ResponseError::CoordinatorLoadInProgress)
                {
                    self.shared
                        .client
                        .forget_coordinator(CoordinatorKind::Group, &self.group);
                }
                self.retry(&e)
            }
            Error::Broker { code, context } => {
                self.fail(Error::Broker {
                    code,
                    context: format!(
                        "{context} (membership of group {} with `group.protocol=consumer`)",
                        self.group
                    ),
                });
                Flow::Stop
            }
            e => {
                self.fail(e);
                Flow::Stop
            }
        }
    }

    /// Tries again after a backoff, with every field.
    fn retry(&mut self, error: &Error) -> Flow {
        self.sent = Sent::default();
        let delay = self.backoff.next_delay();
        tracing::debug!(group = %self.group, error = %error, ?delay, "heartbeat failed; retrying");
        let now = Instant::now();
        self.not_before = now + delay;
        self.next_beat = self.not_before;
        Flow::Go
    }

    /// Drops the membership: everything held is lost, the next heartbeat joins again with
    /// the same member id.
    fn fenced(&mut self, why: &str) {
        tracing::info!(group = %self.group, member_id = %self.member_id, epoch = self.epoch, why, "partitions lost; rejoining");
        self.drop_membership();
        self.phase = Phase::Joining;
        let now = Instant::now();
        self.not_before = now;
        self.next_beat = now;
    }

    fn drop_membership(&mut self) {
        self.shared.lose_partitions(&self.shared.owned_partitions());
        self.owned.clear();
        self.target = None;
        self.epoch = 0;
        self.sent = Sent::default();
        self.shared.set_member(None);
    }

    /// Gives up on the group: the caller hears `error`.
    fn fail(&mut self, error: Error) {
        tracing::error!(group = %self.group, error = %error, "the group membership stops");
        self.drop_membership();
        self.shared.lock().report(error);
        self.shared.poll_wake.notify_one();
    }

    /// Leaves the group (best effort: the coordinator expires the member anyway) and drops
    /// what the member held.
    async fn leave(&mut self, why: &str) {
        if self.maybe_member {
            let request = leave_request(
                &self.group,
                &self.member_id,
                self.shared
                    .config
                    .group_instance_id
                    .as_deref()
                    .filter(|s| !s.is_empty()),
            );
            let client = self.shared.client.clone();
            let group = self.group.clone();
            let sent = tokio::time::timeout(client.socket_timeout(), async {
                let node = client.coordinator(CoordinatorKind::Group, &group).await?;
                client.send_to(node, HEARTBEAT_VERSIONS, |_| request).await
            })
            .await;
            match sent {
                Ok(Ok(r)) if r.error_code == 0 => {
                    tracing::info!(group = %self.group, member_id = %self.member_id, why, "left the group");
                }
                Ok(Ok(r)) => {
                    tracing::debug!(group = %self.group, code = r.error_code, why, "leaving refused");
                }
                Ok(Err(e)) => {
                    tracing::debug!(group = %self.group, error = %e, why, "leaving failed");
                }
                Err(_) => tracing::debug!(group = %self.group, why, "leaving timed out"),
            }
        }
        self.maybe_member = false;
        self.drop_membership();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: TopicId = [1; 16];
    const B: TopicId = [2; 16];

    fn assignment(entries: &[(TopicId, &[i32])]) -> Assignment {
        entries
            .iter()
            .map(|(id, ps)| (*id, ps.iter().copied().collect()))
            .collect()
    }

    fn wanted(epoch: i32) -> Wanted {
        Wanted {
            group: "g".into(),
            member_id: "m".into(),
            epoch,
            instance_id: None,
            rack: Some("r1".into()),
            rebalance_timeout_ms: 300_000,
            topics: Some(vec!["t".into()]),
            regex: None,
            assignor: Some("uniform".into()),
            owned: Assignment::new(),
        }
    }

    #[test]
    fn revocations_come_before_additions_and_unknown_topics_wait() {
        let names: HashMap<TopicId, Arc<str>> = [(A, Arc::from("a"))].into();
        let owned = assignment(&[(A, &[0, 1, 2])]);
        let target = assignment(&[(A, &[1, 2, 3]), (B, &[0])]);
        let p = plan(&owned, &target, &names);
        assert_eq!(p.revoke, assignment(&[(A, &[0])]));
        assert_eq!(p.add, assignment(&[(A, &[3])]));
        assert_eq!(p.unresolved, [B].into());
        // Reconciled: nothing to do.
        let p = plan(&target, &target, &names);
        assert_eq!(p, Plan::default());
        // Everything goes.
        let p = plan(&owned, &Assignment::new(), &names);
        assert_eq!(p.revoke, owned);
    }

    #[test]
    fn holding_sets_stay_normalised() {
        let mut owned = assignment(&[(A, &[0, 1]), (B, &[0])]);
        subtract(&mut owned, &assignment(&[(B, &[0]), (A, &[1])]));
        assert_eq!(owned, assignment(&[(A, &[0])]));
        merge(&mut owned, &assignment(&[(B, &[3])]));
        assert_eq!(owned, assignment(&[(A, &[0]), (B, &[3])]));
    }

    #[test]
    fn a_join_says_everything_and_later_heartbeats_only_what_changed() {
        let (join, known) = Sent::default().request(&wanted(0), 1);
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.rebalance_timeout_ms, 300_000);
        assert_eq!(join.subscribed_topic_names.as_ref().map(Vec::len), Some(1));
        assert_eq!(join.subscribed_topic_regex, None);
        assert_eq!(join.server_assignor.as_deref(), Some("uniform"));
        assert_eq!(join.rack_id.as_deref(), Some("r1"));
        assert_eq!(join.topic_partitions, Some(vec![]));

        let mut w = wanted(3);
        let (beat, known) = known.request(&w, 1);
        assert_eq!(beat.member_epoch, 3);
        assert_eq!(beat.rebalance_timeout_ms, -1);
        assert_eq!(beat.subscribed_topic_names, None);
        assert_eq!(beat.server_assignor, None);
        assert_eq!(beat.rack_id, None);
        assert_eq!(beat.topic_partitions, None);

        // A new assignment held: the owned partitions go out, and only them.
        w.owned = assignment(&[(A, &[2, 0])]);
        let (ack, known) = known.request(&w, 1);
        let owned = ack.topic_partitions.unwrap_or_default();
        assert_eq!(owned.len(), 1);
        assert_eq!(owned[0].topic_id.as_bytes(), &A);
        assert_eq!(owned[0].partitions, vec![0, 2]);
        assert_eq!(ack.subscribed_topic_names, None);
        let (beat, known) = known.request(&w, 1);
        assert_eq!(beat.topic_partitions, None);

        // After a failure the member forgets what the coordinator knew.
        let _ = known;
        let (full, _) = Sent::default().request(&w, 1);
        assert_eq!(full.rebalance_timeout_ms, 300_000);
        assert!(full.subscribed_topic_names.is_some());
        assert!(full.topic_partitions.is_some());
    }

    #[test]
    fn a_rejoin_repeats_everything_even_if_sent_before() {
        let (_, known) = Sent::default().request(&wanted(0), 1);
        let (rejoin, _) = known.request(&wanted(0), 1);
        assert_eq!(rejoin.rebalance_timeout_ms, 300_000);
        assert!(rejoin.subscribed_topic_names.is_some());
        assert_eq!(rejoin.topic_partitions, Some(vec![]));
    }

    #[test]
    fn patterns_go_as_a_regex_from_v1_and_as_names_before() {
        let mut w = wanted(0);
        w.regex = Some(broker_regex("orders-.*"));
        w.topics = Some(vec!["orders-eu".into()]);
        let (v1, _) = Sent::default().request(&w, 1);
        assert_eq!(v1.subscribed_topic_names, None);
        assert_eq!(
            v1.subscribed_topic_regex.as_deref(),
            Some("(?:orders-.*).*")
        );
        let (v0, _) = Sent::default().request(&w, 0);
        assert_eq!(v0.subscribed_topic_regex, None);
        assert_eq!(
            v0.subscribed_topic_names
                .unwrap_or_default()
                .iter()
                .map(|n| n.0.to_string())
                .collect::<Vec<_>>(),
            vec!["orders-eu".to_owned()]
        );
    }

    #[test]
    fn the_broker_regex_matches_what_the_client_side_pattern_matches() {
        for (pattern, name, expected) in [
            ("orders-.*", "orders-eu", true),
            ("orders", "orders-eu", true),
            ("orders", "old-orders", false),
            ("^orders", "orders-eu", true),
            ("^orders", "old-orders", false),
            // `^` binds to the first alternative only, on both sides.
            ("^a|b", "bx", true),
            ("^a|b", "xb", true),
            ("^a|b", "xa", false),
            ("t$", "t", true),
        ] {
            let whole = regex::Regex::new(&format!("^(?:{})$", broker_regex(pattern)));
            let client_side =
                TopicMatcher::new(super::super::super::Subscription::Pattern(pattern.into()));
            let (Ok(whole), Ok(TopicMatcher::Pattern(re, _))) = (whole, client_side) else {
                panic!("{pattern}: not a pattern");
            };
            assert_eq!(whole.is_match(name), expected, "{pattern} {name}");
            assert_eq!(
                re.is_match(name),
                expected,
                "{pattern} {name} (client side)"
            );
        }
    }

    #[test]
    fn leaving_uses_the_static_epoch_for_static_members() {
        let dynamic = leave_request("g", "m", None);
        assert_eq!(dynamic.member_epoch, LEAVE_EPOCH);
        assert_eq!(dynamic.instance_id, None);
        assert_eq!(dynamic.topic_partitions, None);
        assert_eq!(dynamic.subscribed_topic_names, None);
        let fixed = leave_request("g", "m", Some("i-1"));
        assert_eq!(fixed.member_epoch, LEAVE_STATIC_EPOCH);
        assert_eq!(fixed.instance_id.as_deref(), Some("i-1"));
    }

    #[test]
    fn member_ids_look_like_kafkas_uuids() {
        let a = new_member_id();
        let b = new_member_id();
        assert_ne!(a, b);
        for id in [a, b] {
            assert_eq!(id.len(), 22);
            assert!(!id.starts_with('-'));
            assert!(
                id.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
            );
        }
    }

    #[test]
    fn base64_of_known_bytes() {
        // The version and variant bits are forced; the rest follows RFC 4648 (URL-safe).
        fastrand::seed(7);
        let id = new_member_id();
        fastrand::seed(7);
        let mut bytes = [0u8; 16];
        fastrand::fill(&mut bytes);
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        // A first draw encoding to a leading `-` is drawn again; this seed's is not.
        assert_ne!(bytes[0] >> 2, 62);
        assert_eq!(decode_base64url(&id), bytes.to_vec());
    }

    fn decode_base64url(s: &str) -> Vec<u8> {
        let value = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => u32::from(c - b'A'),
                b'a'..=b'z' => u32::from(c - b'a') + 26,
                b'0'..=b'9' => u32::from(c - b'0') + 52,
                b'-' => 62,
                _ => 63,
            }
        };
        let mut bits = 0u32;
        let mut count = 0;
        let mut out = Vec::new();
        for c in s.bytes() {
            bits = (bits << 6) | value(c);
            count += 6;
            if count >= 8 {
                count -= 8;
                out.push((bits >> count) as u8);
            }
        }
        out
    }

    #[test]
    fn assignments_with_negative_partitions_are_refused() {
        use kafka_protocol::messages::consumer_group_heartbeat_response::TopicPartitions as Tp;
        let ok = WireAssignment::default().with_topic_partitions(vec![
            Tp::default()
                .with_topic_id(uuid::Uuid::from_bytes(A))
                .with_partitions(vec![2, 0]),
            Tp::default().with_topic_id(uuid::Uuid::from_bytes(B)),
        ]);
        assert_eq!(assignment_of(&ok).ok(), Some(assignment(&[(A, &[0, 2])])));
        let bad = WireAssignment::default().with_topic_partitions(vec![
            Tp::default()
                .with_topic_id(uuid::Uuid::from_bytes(A))
                .with_partitions(vec![-1]),
        ]);
        assert!(assignment_of(&bad).is_err());
    }
}
