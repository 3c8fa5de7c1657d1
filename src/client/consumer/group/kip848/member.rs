//! The KIP-848 membership as a state machine with no I/O: it decides when to heartbeat, what
//! a heartbeat says, what an answer, a refusal or a failure does, and how an assignment is
//! reconciled. The driver (`mod.rs`) sends the heartbeats and runs the [`Work`] it asks for;
//! what the member does to the consumer goes through a [`Host`], so the tests drive it with
//! a double and a clock of their own.
//!
//! The invariant: a partition is taken only after every partition that left the assignment
//! was given back and the coordinator heard it (revocations first, additions after), and
//! whenever the member can no longer know what the coordinator thinks of it (fenced, unknown,
//! no heartbeat answered within the session timeout, or left for lack of polls) it drops
//! everything at once as lost and joins again with epoch 0 and the same member id.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ConsumerGroupHeartbeatResponse;
use tokio::time::Instant;

use crate::client::Backoff;
use crate::client::consumer::{GroupMember, TopicPartition};
use crate::client::error::{Error, Result};

use super::super::TopicMatcher;
use super::heartbeat::{Beat, Sent, Wanted, broker_regex};
use super::member_id::new_member_id;
use super::reconcile::{Assignment, TopicId, assignment_of, merge, plan, subtract};

/// A coordinator asking for heartbeats faster than this is not obeyed.
pub(super) const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// How long a caller blocked in `poll` gets to show it is alive before the member leaves.
pub(super) const POLL_PROBE: Duration = Duration::from_millis(200);
/// How often a member that left for lack of polls looks for the next poll.
pub(super) const STALE_CHECK: Duration = Duration::from_millis(100);

/// The consumer that hosts the membership, as the member acts on it. The driver implements
/// it on the consumer's shared state; the tests with a double that records each call.
pub(super) trait Host {
    /// How long since the caller last polled (zero while a poll waits for events).
    fn since_last_poll(&self) -> Duration;
    /// Wakes a caller blocked in `poll`, so that it can show it still polls.
    fn wake_poll(&self);
    /// These partitions join the assignment (the caller hears `Assigned`).
    fn assign(&self, partitions: &[TopicPartition]);
    /// The member holds what it was assigned (possibly nothing).
    fn reconciled(&self);
    /// Everything held is lost (the caller hears `Lost`).
    fn lose_everything(&self);
    /// The membership commits go under (`None`: no membership).
    fn set_member(&self, member: Option<GroupMember>);
    /// The topics a resolution of the subscription found.
    fn note_topics(&self, names: &[String]);
    /// The group's coordinator is to be looked up again.
    fn forget_coordinator(&self);
    /// The membership stops for good: the caller hears `error`.
    fn report(&self, error: Error);
    /// The names the metadata gives to these topic ids, of those it knows.
    fn names_of(&self, ids: &[TopicId]) -> Vec<(TopicId, Arc<str>)>;
}

/// What the member takes from the consumer's configuration.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub group: String,
    /// `group.instance.id`, when not empty.
    pub instance_id: Option<String>,
    /// `client.rack`, when not empty.
    pub rack: Option<String>,
    /// `group.remote.assignor`, when not empty.
    pub assignor: Option<String>,
    pub heartbeat_interval: Duration,
    pub session_timeout: Duration,
    pub max_poll: Duration,
    /// How often a pattern matched here is matched again.
    pub pattern_every: Duration,
    pub backoff: Backoff,
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

/// Work the driver does for the member besides heartbeats; its end comes back as a [`Step`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Work {
    /// Give these partitions back (the caller hears `Revoked` and has its say), then
    /// [`Step::Revoked`] with `revoked`.
    Revoke {
        partitions: Vec<TopicPartition>,
        revoked: Assignment,
    },
    /// Refresh the metadata, to name assigned topics.
    Refresh,
    /// Match the pattern here again.
    Match,
}

/// The end of a [`Work`].
#[derive(Debug)]
pub(super) enum Step {
    /// The caller is done with these partitions and they left the consumer.
    Revoked(Assignment),
    /// The metadata was refreshed.
    Refreshed(Result<()>),
    /// The pattern was matched here again.
    Matched(Result<Vec<String>>),
}

/// What the driver does after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flow {
    Go,
    /// The membership was reset: work under way for the old one is void.
    Reset,
    /// The membership stopped for good.
    Stop,
}

/// What the driver does before it waits, from [`Membership::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Heartbeats and work as they come due.
    Active,
    /// Left for lack of polls: look again after this long.
    Idle(Duration),
    /// The caller stopped polling: drop the work under way, leave the group, then
    /// [`Membership::stale`].
    Leave,
    /// The membership was dropped: work under way is void.
    Reset,
}

/// This consumer's membership of its group.
#[derive(Debug)]
pub(super) struct Membership {
    settings: Settings,
    matcher: TopicMatcher,
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
    pub(super) fn new(settings: Settings, matcher: TopicMatcher, now: Instant) -> Self {
        Membership {
            matcher,
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
            interval: settings.heartbeat_interval,
            next_beat: now,
            not_before: now,
            resolve_backoff: settings.backoff.clone(),
            backoff: settings.backoff.clone(),
            last_ok: now,
            resolve_at: now,
            probe: None,
            maybe_member: false,
            settings,
        }
    }

    pub(super) fn group(&self) -> &str {
        &self.settings.group
    }

    pub(super) fn matcher(&self) -> &TopicMatcher {
        &self.matcher
    }

    pub(super) fn max_poll(&self) -> Duration {
        self.settings.max_poll
    }

    /// Looks at the caller and the session before the driver waits.
    pub(super) fn check(&mut self, now: Instant, host: &dyn Host) -> Check {
        if self.phase == Phase::Stale {
            if host.since_last_poll() < self.settings.max_poll {
                tracing::info!(group = %self.settings.group, "the caller polls again: rejoining");
                self.phase = Phase::Joining;
                self.next_beat = now;
                self.not_before = now;
            } else {
                return Check::Idle(STALE_CHECK);
            }
        } else if self.caller_gone(now, host) {
            return Check::Leave;
        }
        if self.epoch > 0 && now.duration_since(self.last_ok) > self.settings.session_timeout {
            self.fenced("no heartbeat answered within session.timeout.ms", now, host);
            return Check::Reset;
        }
        Check::Active
    }

    /// Whether the caller stopped polling. A caller blocked in `poll` for lack of events
    /// looks the same from here, so it is woken first and given a moment to show it polls.
    fn caller_gone(&mut self, now: Instant, host: &dyn Host) -> bool {
        if host.since_last_poll() <= self.settings.max_poll {
            self.probe = None;
            return false;
        }
        match self.probe {
            None => {
                self.probe = Some(now);
                host.wake_poll();
                false
            }
            Some(at) => now.duration_since(at) >= POLL_PROBE,
        }
    }

    /// What a heartbeat sent now says, and what the coordinator was told before it; the
    /// coordinator may hold a membership for us from now on.
    pub(super) fn start_beat(&mut self) -> (Sent, Wanted) {
        self.maybe_member = true;
        (self.sent.clone(), self.wanted())
    }

    fn wanted(&self) -> Wanted {
        Wanted {
            group: self.settings.group.clone(),
            member_id: self.member_id.clone(),
            epoch: self.epoch,
            instance_id: self.settings.instance_id.clone(),
            rack: self.settings.rack.clone(),
            rebalance_timeout_ms: millis(self.settings.max_poll),
            topics: match &self.matcher {
                TopicMatcher::Topics(topics) => Some(topics.clone()),
                TopicMatcher::Pattern(..) => self.pattern_names.clone(),
            },
            regex: self.matcher.pattern().map(broker_regex),
            assignor: self.settings.assignor.clone(),
            owned: self.owned.clone(),
        }
    }

    /// A heartbeat is due at the interval, and at once (after any backoff) to join or to
    /// tell the coordinator what the member holds now.
    pub(super) fn beat_due(&self, now: Instant) -> bool {
        now >= self.not_before && (now >= self.next_beat || self.urgent())
    }

    fn urgent(&self) -> bool {
        self.epoch == 0 || self.sent.owned.as_ref() != Some(&self.owned)
    }

    /// When the driver must look again, with no heartbeat (`beat_idle`) or no work
    /// (`step_idle`) under way.
    pub(super) fn wake_at(
        &self,
        now: Instant,
        beat_idle: bool,
        step_idle: bool,
        host: &dyn Host,
    ) -> Instant {
        let mut wake = match self.probe {
            Some(at) => at + POLL_PROBE,
            None => {
                now + self
                    .settings
                    .max_poll
                    .saturating_sub(host.since_last_poll())
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
            wake = wake.min(self.last_ok + self.settings.session_timeout);
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

    /// Whether a pattern has to be matched here: the coordinator cannot (v0).
    fn pattern_here(&self) -> bool {
        self.matcher.is_pattern() && self.version == Some(0)
    }

    /// The next reconciliation move, if any: revocations first (as work for the driver),
    /// then additions (done at once), then a metadata refresh for topics it cannot name.
    pub(super) fn next_step(&mut self, now: Instant, host: &dyn Host) -> Option<Work> {
        if self.phase == Phase::Joined
            && let Some(target) = &self.target
        {
            let plan = plan(&self.owned, target, &self.names);
            if !plan.revoke.is_empty() {
                let partitions = self.partitions(&plan.revoke);
                tracing::info!(group = %self.settings.group, epoch = self.epoch, ?partitions, "revoking");
                return Some(Work::Revoke {
                    partitions,
                    revoked: plan.revoke,
                });
            }
            if !plan.add.is_empty() {
                let partitions = self.partitions(&plan.add);
                tracing::info!(group = %self.settings.group, epoch = self.epoch, ?partitions, "assigned");
                host.assign(&partitions);
                merge(&mut self.owned, &plan.add);
            } else if plan.unresolved.is_empty() {
                // Reconciled (possibly to nothing): the member has its assignment.
                host.reconciled();
            }
            if !plan.unresolved.is_empty() && now >= self.resolve_at {
                tracing::debug!(group = %self.settings.group, "assigned topics unknown here: refreshing metadata");
                return Some(Work::Refresh);
            }
        }
        if self.pattern_here() && now >= self.pattern_at {
            return Some(Work::Match);
        }
        None
    }

    /// The end of a [`Work`].
    pub(super) fn on_step(&mut self, done: Step, now: Instant, host: &dyn Host) {
        match done {
            Step::Revoked(revoked) => subtract(&mut self.owned, &revoked),
            Step::Refreshed(result) => {
                if let Err(e) = result {
                    tracing::debug!(group = %self.settings.group, error = %e, "metadata refresh failed");
                }
                if self.learn_names(host) {
                    self.resolve_backoff.reset();
                } else {
                    self.resolve_at = now + self.resolve_backoff.next_delay();
                }
            }
            Step::Matched(result) => match result {
                Ok(names) => {
                    host.note_topics(&names);
                    self.pattern_names = Some(names);
                    self.pattern_at = now + self.settings.pattern_every;
                }
                Err(e) => {
                    tracing::debug!(group = %self.settings.group, error = %e, "matching the pattern failed");
                    self.pattern_at = now + self.resolve_backoff.next_delay();
                }
            },
        }
    }

    /// The caller asked for a heartbeat (and a pattern match) now.
    pub(super) fn act_now(&mut self, now: Instant) {
        // The coordinator matches a pattern itself from v1 on.
        self.pattern_at = now;
        self.next_beat = now;
    }

    /// Looks the assigned topics up in the metadata; true when every one has a name.
    fn learn_names(&mut self, host: &dyn Host) -> bool {
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
        self.names.extend(host.names_of(&unknown));
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

    /// A heartbeat's end: its answer, or why there is none.
    pub(super) fn on_beat(&mut self, result: Result<Beat>, now: Instant, host: &dyn Host) -> Flow {
        let beat = match result {
            Ok(beat) => beat,
            Err(e) => return self.on_failure(e, now, host),
        };
        self.version = Some(beat.version);
        if let Some(names) = beat.names {
            host.note_topics(&names);
            self.pattern_names = Some(names);
            self.pattern_at = now + self.settings.pattern_every;
        }
        let response = beat.response;
        match ResponseError::try_from_code(response.error_code) {
            None => self.on_answer(beat.sent, &response, now, host),
            Some(code) => self.on_refusal(code, response.error_message.as_deref(), now, host),
        }
    }

    fn on_answer(
        &mut self,
        sent: Sent,
        response: &ConsumerGroupHeartbeatResponse,
        now: Instant,
        host: &dyn Host,
    ) -> Flow {
        if response.member_epoch <= 0 {
            return self.retry(
                &Error::protocol(format_args!(
                    "ConsumerGroupHeartbeat answered member epoch {}",
                    response.member_epoch
                )),
                now,
            );
        }
        let target = match response.assignment.as_ref().map(assignment_of).transpose() {
            Ok(t) => t,
            Err(e) => return self.retry(&e, now),
        };
        self.sent = sent;
        self.last_ok = now;
        self.backoff.reset();
        self.not_before = now;
        self.interval = u64::try_from(response.heartbeat_interval_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map_or(self.settings.heartbeat_interval, Duration::from_millis)
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
            tracing::info!(group = %self.settings.group, member_id = %self.member_id, epoch = response.member_epoch, "joined");
        }
        self.epoch = response.member_epoch;
        self.phase = Phase::Joined;
        if changed {
            host.set_member(Some(GroupMember {
                generation: self.epoch,
                member_id: self.member_id.clone(),
                instance_id: self.settings.instance_id.clone(),
            }));
        }
        if let Some(target) = target {
            tracing::debug!(group = %self.settings.group, epoch = self.epoch, topics = target.len(), "new assignment");
            self.target = Some(target);
            if !self.learn_names(host) {
                self.resolve_at = now;
            }
        }
        Flow::Go
    }

    fn on_refusal(
        &mut self,
        code: ResponseError,
        message: Option<&str>,
        now: Instant,
        host: &dyn Host,
    ) -> Flow {
        self.sent = Sent::default();
        let group = self.settings.group.clone();
        let detail = message.map_or_else(String::new, |m| format!(": {m}"));
        match code {
            ResponseError::UnknownMemberId | ResponseError::FencedMemberEpoch => {
                let joining = self.epoch == 0;
                self.fenced(&format!("{code:?}{detail}"), now, host);
                if joining {
                    // Refused while joining: joining again at once would only spin.
                    self.retry(
                        &Error::Broker {
                            code,
                            context: format!("joining group {group}{detail}"),
                        },
                        now,
                    );
                }
                Flow::Reset
            }
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
                host.forget_coordinator();
                self.retry(
                    &Error::Broker {
                        code,
                        context: format!("heartbeat of group {group}{detail}"),
                    },
                    now,
                )
            }
            ResponseError::UnsupportedVersion => {
                self.fail(
                    Error::Broker {
                        code,
                        context: format!(
                            "group {group}: the cluster does not support \
                             `group.protocol=consumer` (KIP-848); use \
                             `group.protocol=classic` until it does{detail}"
                        ),
                    },
                    host,
                );
                Flow::Stop
            }
            code if code.is_retriable() => self.retry(
                &Error::Broker {
                    code,
                    context: format!("heartbeat of group {group}{detail}"),
                },
                now,
            ),
            code => {
                self.fail(
                    Error::Broker {
                        code,
                        context: format!(
                            "group {group} refused this member (`group.protocol=consumer`){detail}"
                        ),
                    },
                    host,
                );
                Flow::Stop
            }
        }
    }

    fn on_failure(&mut self, error: Error, now: Instant, host: &dyn Host) -> Flow {
        self.sent = Sent::default();
        let group = self.settings.group.clone();
        match error {
            Error::Unsupported(what) => {
                self.fail(
                    Error::Unsupported(format!(
                        "ConsumerGroupHeartbeat (KIP-848, needed by `group.protocol=consumer`, \
                         generally available from Kafka 4.0) for group {group}: {what}; use \
                         `group.protocol=classic`"
                    )),
                    host,
                );
                Flow::Stop
            }
            e if e.is_retriable() || matches!(e, Error::Protocol(_) | Error::Closed(_)) => {
                if !matches!(e, Error::Broker { code, .. } if code == ResponseError::CoordinatorLoadInProgress)
                {
                    host.forget_coordinator();
                }
                self.retry(&e, now)
            }
            Error::Broker { code, context } => {
                self.fail(
                    Error::Broker {
                        code,
                        context: format!(
                            "{context} (membership of group {group} with \
                             `group.protocol=consumer`)"
                        ),
                    },
                    host,
                );
                Flow::Stop
            }
            e => {
                self.fail(e, host);
                Flow::Stop
            }
        }
    }

    /// Tries again after a backoff, with every field.
    fn retry(&mut self, error: &Error, now: Instant) -> Flow {
        self.sent = Sent::default();
        let delay = self.backoff.next_delay();
        tracing::debug!(group = %self.settings.group, error = %error, ?delay, "heartbeat failed; retrying");
        self.not_before = now + delay;
        self.next_beat = self.not_before;
        Flow::Go
    }

    /// Drops the membership: everything held is lost, the next heartbeat joins again with
    /// the same member id.
    fn fenced(&mut self, why: &str, now: Instant, host: &dyn Host) {
        tracing::info!(group = %self.settings.group, member_id = %self.member_id, epoch = self.epoch, why, "partitions lost; rejoining");
        self.drop_membership(host);
        self.phase = Phase::Joining;
        self.not_before = now;
        self.next_beat = now;
    }

    fn drop_membership(&mut self, host: &dyn Host) {
        host.lose_everything();
        self.owned.clear();
        self.target = None;
        self.epoch = 0;
        self.sent = Sent::default();
        host.set_member(None);
    }

    /// Gives up on the group: the caller hears `error`.
    fn fail(&mut self, error: Error, host: &dyn Host) {
        tracing::error!(group = %self.settings.group, error = %error, "the group membership stops");
        self.drop_membership(host);
        host.report(error);
    }

    /// The member id and instance id to leave with, if the coordinator may hold a membership
    /// for us.
    pub(super) fn leaving(&self) -> Option<(&str, Option<&str>)> {
        self.maybe_member.then_some((
            self.member_id.as_str(),
            self.settings.instance_id.as_deref(),
        ))
    }

    /// The member left the group (or tried to: the coordinator expires it anyway) and drops
    /// what it held.
    pub(super) fn left(&mut self, host: &dyn Host) {
        self.maybe_member = false;
        self.drop_membership(host);
    }

    /// The member left because the caller stopped polling: it joins again at the next poll.
    pub(super) fn stale(&mut self) {
        self.phase = Phase::Stale;
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use kafka_protocol::messages::consumer_group_heartbeat_response::{
        Assignment as WireAssignment, TopicPartitions,
    };
    use kafka_protocol::protocol::StrBytes;

    use super::super::reconcile::tests::{A, B, assignment};
    use super::*;

    const SESSION: Duration = Duration::from_secs(45);
    const MAX_POLL: Duration = Duration::from_mins(5);
    const BACKOFF_MAX: Duration = Duration::from_secs(1);

    /// What the member did to the consumer, in order.
    #[derive(Debug, Clone, PartialEq)]
    enum Did {
        WokePoll,
        Assigned(Vec<String>),
        Reconciled,
        LostEverything,
        SetMember(Option<(i32, String)>),
        NotedTopics(Vec<String>),
        ForgotCoordinator,
        Reported(String),
    }

    /// A consumer that records what the member does to it.
    #[derive(Default)]
    struct Double {
        polled_ago: Cell<Duration>,
        did: RefCell<Vec<Did>>,
        metadata: RefCell<HashMap<TopicId, Arc<str>>>,
    }

    impl Double {
        fn knows(&self, id: TopicId, name: &str) {
            self.metadata.borrow_mut().insert(id, Arc::from(name));
        }

        fn take(&self) -> Vec<Did> {
            std::mem::take(&mut *self.did.borrow_mut())
        }

        fn push(&self, did: Did) {
            self.did.borrow_mut().push(did);
        }
    }

    impl Host for Double {
        fn since_last_poll(&self) -> Duration {
            self.polled_ago.get()
        }
        fn wake_poll(&self) {
            self.push(Did::WokePoll);
        }
        fn assign(&self, partitions: &[TopicPartition]) {
            self.push(Did::Assigned(
                partitions
                    .iter()
                    .map(|tp| format!("{}-{}", tp.topic, tp.partition))
                    .collect(),
            ));
        }
        fn reconciled(&self) {
            self.push(Did::Reconciled);
        }
        fn lose_everything(&self) {
            self.push(Did::LostEverything);
        }
        fn set_member(&self, member: Option<GroupMember>) {
            self.push(Did::SetMember(member.map(|m| (m.generation, m.member_id))));
        }
        fn note_topics(&self, names: &[String]) {
            self.push(Did::NotedTopics(names.to_vec()));
        }
        fn forget_coordinator(&self) {
            self.push(Did::ForgotCoordinator);
        }
        fn report(&self, error: Error) {
            self.push(Did::Reported(error.to_string()));
        }
        fn names_of(&self, ids: &[TopicId]) -> Vec<(TopicId, Arc<str>)> {
            let known = self.metadata.borrow();
            ids.iter()
                .filter_map(|id| known.get(id).map(|n| (*id, n.clone())))
                .collect()
        }
    }

    fn member(now: Instant) -> Membership {
        let settings = Settings {
            group: "g".into(),
            instance_id: None,
            rack: None,
            assignor: None,
            heartbeat_interval: Duration::from_secs(3),
            session_timeout: SESSION,
            max_poll: MAX_POLL,
            pattern_every: Duration::from_mins(5),
            backoff: Backoff::new(Duration::from_millis(100), BACKOFF_MAX),
        };
        Membership::new(
            settings,
            TopicMatcher::Topics(vec!["a".into(), "b".into()]),
            now,
        )
    }

    fn wire(entries: &[(TopicId, &[i32])]) -> WireAssignment {
        WireAssignment::default().with_topic_partitions(
            entries
                .iter()
                .map(|(id, ps)| {
                    TopicPartitions::default()
                        .with_topic_id(uuid::Uuid::from_bytes(*id))
                        .with_partitions(ps.to_vec())
                })
                .collect(),
        )
    }

    /// Sends a heartbeat and gives the member the coordinator's `response` to it.
    fn beat(
        m: &mut Membership,
        response: ConsumerGroupHeartbeatResponse,
        now: Instant,
        host: &Double,
    ) -> (Wanted, Flow) {
        let (sent, wanted) = m.start_beat();
        let (_, known) = sent.request(&wanted, 1);
        let flow = m.on_beat(
            Ok(Beat {
                version: 1,
                sent: known,
                names: None,
                response,
            }),
            now,
            host,
        );
        (wanted, flow)
    }

    fn accepted(
        epoch: i32,
        assigned: Option<&[(TopicId, &[i32])]>,
    ) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse::default()
            .with_member_epoch(epoch)
            .with_heartbeat_interval_ms(3000)
            .with_assignment(assigned.map(wire))
    }

    fn refused(code: ResponseError) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code.code())
            .with_member_epoch(-1)
    }

    /// A member that joined at epoch 5 and holds a-0 and a-1.
    fn holding(now: Instant, host: &Double) -> Membership {
        host.knows(A, "a");
        let mut m = member(now);
        let (_, flow) = beat(&mut m, accepted(5, Some(&[(A, &[0, 1])])), now, host);
        assert_eq!(flow, Flow::Go);
        assert_eq!(m.next_step(now, host), None);
        host.take();
        m
    }

    #[test]
    fn a_join_takes_the_named_partitions_and_refreshes_the_metadata_for_the_rest() {
        let now = Instant::now();
        let host = Double::default();
        host.knows(A, "a");
        let mut m = member(now);
        assert!(m.beat_due(now), "a new member joins at once");
        let (wanted, flow) = beat(
            &mut m,
            accepted(5, Some(&[(A, &[0, 1]), (B, &[0])])),
            now,
            &host,
        );
        assert_eq!(wanted.epoch, 0);
        assert_eq!(flow, Flow::Go);
        assert_eq!(
            host.take(),
            [Did::SetMember(Some((5, wanted.member_id.clone())))]
        );

        // b is unknown here: a's partitions are taken now, b waits for the metadata.
        assert_eq!(m.next_step(now, &host), Some(Work::Refresh));
        assert_eq!(
            host.take(),
            [Did::Assigned(vec!["a-0".into(), "a-1".into()])]
        );
        // Holding something new, the member tells the coordinator at once.
        assert!(m.beat_due(now));

        host.knows(B, "b");
        m.on_step(Step::Refreshed(Ok(())), now, &host);
        assert_eq!(m.next_step(now, &host), None);
        assert_eq!(host.take(), [Did::Assigned(vec!["b-0".into()])]);
        // The next heartbeat says what the member holds; then it is reconciled.
        let (wanted, _) = beat(&mut m, accepted(5, None), now, &host);
        assert_eq!(wanted.owned, assignment(&[(A, &[0, 1]), (B, &[0])]));
        assert_eq!(m.next_step(now, &host), None);
        assert_eq!(host.take(), [Did::Reconciled]);
        assert!(!m.beat_due(now), "nothing new to say before the interval");
        assert!(m.beat_due(now + Duration::from_secs(3)));
    }

    #[test]
    fn partitions_that_left_are_given_back_before_new_ones_are_taken() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = holding(now, &host);
        let (_, flow) = beat(&mut m, accepted(6, Some(&[(A, &[1, 2])])), now, &host);
        assert_eq!(flow, Flow::Go);
        host.take();
        let work = m.next_step(now, &host);
        assert_eq!(
            work,
            Some(Work::Revoke {
                partitions: vec![TopicPartition {
                    topic: Arc::from("a"),
                    partition: 0,
                }],
                revoked: assignment(&[(A, &[0])]),
            })
        );
        assert_eq!(
            host.take(),
            [],
            "nothing is taken while a revocation is under way"
        );

        m.on_step(Step::Revoked(assignment(&[(A, &[0])])), now, &host);
        // The coordinator hears at once that a-0 was given back.
        assert!(m.beat_due(now));
        assert_eq!(m.next_step(now, &host), None);
        assert_eq!(host.take(), [Did::Assigned(vec!["a-2".into()])]);
    }

    #[test]
    fn a_fenced_member_loses_everything_and_rejoins_with_the_same_id() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = holding(now, &host);
        let (before, flow) = beat(
            &mut m,
            refused(ResponseError::FencedMemberEpoch),
            now,
            &host,
        );
        assert_eq!(flow, Flow::Reset);
        assert_eq!(host.take(), [Did::LostEverything, Did::SetMember(None)]);
        assert!(
            m.beat_due(now),
            "a member fenced while joined rejoins at once"
        );
        let (rejoin, _) = m.start_beat();
        let (sent, wanted) = (rejoin, m.wanted());
        assert_eq!(wanted.epoch, 0);
        assert_eq!(wanted.member_id, before.member_id);
        assert!(wanted.owned.is_empty());
        // The rejoin says everything again.
        let (request, _) = sent.request(&wanted, 1);
        assert!(request.subscribed_topic_names.is_some());
        assert_eq!(request.rebalance_timeout_ms, 300_000);
    }

    #[test]
    fn a_join_refused_waits_a_backoff_before_joining_again() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = member(now);
        let (_, flow) = beat(&mut m, refused(ResponseError::UnknownMemberId), now, &host);
        assert_eq!(flow, Flow::Reset);
        assert!(!m.beat_due(now), "no spinning on a refused join");
        assert!(m.beat_due(now + BACKOFF_MAX));
    }

    #[test]
    fn a_moved_coordinator_is_looked_up_again_and_the_member_keeps_its_partitions() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = holding(now, &host);
        let (_, flow) = beat(&mut m, refused(ResponseError::NotCoordinator), now, &host);
        assert_eq!(flow, Flow::Go);
        assert_eq!(host.take(), [Did::ForgotCoordinator]);
        assert!(!m.beat_due(now));
        let later = now + BACKOFF_MAX;
        assert!(m.beat_due(later));
        // Whatever the old coordinator heard, the next heartbeat says everything.
        let (sent, wanted) = m.start_beat();
        assert_eq!(wanted.epoch, 5);
        let (request, _) = sent.request(&wanted, 1);
        assert!(request.topic_partitions.is_some());
        assert!(request.subscribed_topic_names.is_some());

        // A lost connection is the same: look the coordinator up again, and retry.
        let flow = m.on_beat(Err(Error::Closed("connection lost".into())), later, &host);
        assert_eq!(flow, Flow::Go);
        assert_eq!(host.take(), [Did::ForgotCoordinator]);
    }

    #[test]
    fn a_cluster_without_kip848_stops_the_membership_with_an_error_naming_the_fix() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = member(now);
        let (_, flow) = beat(
            &mut m,
            refused(ResponseError::UnsupportedVersion),
            now,
            &host,
        );
        assert_eq!(flow, Flow::Stop);
        let did = host.take();
        assert_eq!(did[..2], [Did::LostEverything, Did::SetMember(None)]);
        let Some(Did::Reported(error)) = did.get(2) else {
            panic!("no error reported: {did:?}");
        };
        assert!(error.contains("group.protocol=classic"), "{error}");
    }

    #[test]
    fn a_refusal_for_good_stops_the_membership() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = holding(now, &host);
        let (_, flow) = beat(
            &mut m,
            refused(ResponseError::GroupAuthorizationFailed),
            now,
            &host,
        );
        assert_eq!(flow, Flow::Stop);
        let did = host.take();
        assert!(
            matches!(did.last(), Some(Did::Reported(e)) if e.contains("refused this member")),
            "{did:?}"
        );
    }

    #[test]
    fn no_heartbeat_answered_within_the_session_loses_the_partitions() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = holding(now, &host);
        // Heartbeats fail, the member keeps its partitions while the session lasts.
        let flow = m.on_beat(Err(Error::Timeout("heartbeat".into())), now, &host);
        assert_eq!(flow, Flow::Go);
        host.take();
        assert_eq!(m.check(now + SESSION, &host), Check::Active);
        assert_eq!(m.wake_at(now, false, false, &host), now + SESSION);
        assert_eq!(
            m.check(now + SESSION + Duration::from_millis(1), &host),
            Check::Reset
        );
        assert_eq!(host.take(), [Did::LostEverything, Did::SetMember(None)]);
        assert_eq!(m.wanted().epoch, 0);
    }

    #[test]
    fn a_caller_that_stops_polling_is_probed_then_the_member_leaves_until_it_polls() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = holding(now, &host);
        host.polled_ago.set(MAX_POLL + Duration::from_secs(1));
        // A caller blocked in poll looks the same: it is woken first.
        assert_eq!(m.check(now, &host), Check::Active);
        assert_eq!(host.take(), [Did::WokePoll]);
        assert_eq!(m.wake_at(now, false, false, &host), now + POLL_PROBE);
        assert_eq!(m.check(now + POLL_PROBE, &host), Check::Leave);
        assert!(
            m.leaving().is_some(),
            "the coordinator holds a membership to leave"
        );
        m.left(&host);
        m.stale();
        assert_eq!(host.take(), [Did::LostEverything, Did::SetMember(None)]);
        assert_eq!(m.leaving(), None);
        assert_eq!(m.check(now + POLL_PROBE, &host), Check::Idle(STALE_CHECK));

        // The caller polls again: the member joins again, with the same id.
        host.polled_ago.set(Duration::ZERO);
        let later = now + Duration::from_secs(1);
        assert_eq!(m.check(later, &host), Check::Active);
        assert!(m.beat_due(later));
        assert_eq!(m.wanted().epoch, 0);
    }

    #[test]
    fn the_coordinator_paces_the_heartbeats_above_a_floor() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = holding(now, &host);
        let fast = accepted(5, None).with_heartbeat_interval_ms(1);
        beat(&mut m, fast, now, &host);
        assert!(!m.beat_due(now + MIN_INTERVAL - Duration::from_millis(1)));
        assert!(m.beat_due(now + MIN_INTERVAL));
        let slow = accepted(5, None).with_heartbeat_interval_ms(7000);
        beat(&mut m, slow, now, &host);
        assert!(!m.beat_due(now + Duration::from_secs(6)));
        assert!(m.beat_due(now + Duration::from_secs(7)));
    }

    #[test]
    fn an_answer_without_a_member_epoch_is_retried_not_trusted() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = member(now);
        let (_, flow) = beat(&mut m, accepted(0, Some(&[(A, &[0])])), now, &host);
        assert_eq!(flow, Flow::Go);
        assert_eq!(host.take(), []);
        assert_eq!(m.next_step(now, &host), None);
        assert!(!m.beat_due(now));
        assert_eq!(m.wanted().epoch, 0);
    }

    #[test]
    fn a_coordinator_that_names_the_member_is_followed() {
        let now = Instant::now();
        let host = Double::default();
        let mut m = member(now);
        let named =
            accepted(1, None).with_member_id(Some(StrBytes::from_static_str("from-coordinator")));
        beat(&mut m, named, now, &host);
        assert_eq!(
            host.take(),
            [Did::SetMember(Some((1, "from-coordinator".into())))]
        );
        assert_eq!(m.wanted().member_id, "from-coordinator");
    }
}
