//! The in-process arm of a connected broker: its embedded cluster and the harness count.
//!
//! `TestApp` waits until nothing is in flight, so the transport keeps the harness
//! [`Coordinator`] told of every change of what is outstanding:
//!
//! - records a subscription of this connection has still to hand its handler: for every
//!   partition of a subscribed topic, the deliverable records (control markers never, aborted
//!   ones not under `read_committed`) from the next offset the reader will hand out to the end
//!   it can see. That start is read off the subscription itself (the record it is handing out,
//!   its queue, its consumer's position); a partition no member holds at the moment (between
//!   a revoke and an assign) starts at the group's committed offset, or at the reset;
//! - deliveries alive (handed out and not dropped; a requeued one stays alive);
//! - records inside transactions still open.
//!
//! The count is recomputed, not kept by events: after every request the cluster answers,
//! every injection, every dropped delivery and every reposition. A recount that differs from
//! the last one reported tells the coordinator the difference.
//!
//! Each subscription reaches the link through its `Tap`, the `handover::Watch` the link hands
//! out at subscribe; the link reads a subscription back only through `handover::Watched`, never
//! its private state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ruststream::testing::Coordinator;

use super::cluster::{EmbeddedCluster, State};
use crate::client::TopicPartition;
use crate::handover::{Reads, Watch, Watched};

/// The longest an in-process publish, subscribe, seek or subscriber drop waits for the
/// subscriptions of its connection to queue what the cluster holds for them.
const HANDOVER_BOUND: Duration = Duration::from_secs(2);

/// The longest a subscriber's drop waits for a task it spawns to run: a runtime that runs
/// nothing more (it is shutting down) is not waited on.
const PROBE_BOUND: Duration = Duration::from_millis(50);

/// The longest a subscriber's drop waits for the last other hold on its subscription (the
/// pump's passing one) to go; a delivery or seeker still alive keeps it open for longer, and
/// the drop does not wait for those.
const RELEASE_BOUND: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Count {
    coordinator: Option<Coordinator>,
    reported: u64,
    alive: u64,
    readers: Vec<Weak<Tap>>,
    /// The cluster's count of topic creations when last looked at.
    topics_created: u64,
}

impl Count {
    /// The subscriptions of this connection still open, each with its watch.
    fn live_readers(&self) -> Vec<Live> {
        self.readers
            .iter()
            .filter_map(|tap| {
                let tap = tap.upgrade()?;
                let subscription = tap.subscription.get()?.upgrade()?;
                Some(Live { tap, subscription })
            })
            .collect()
    }
}

/// An open subscription of this connection and its watch. Dropping the last hold on a
/// subscription closes it, which recounts: never drop one while the count's lock is held.
struct Live {
    tap: Arc<Tap>,
    subscription: Arc<dyn Watched>,
}

/// A connected broker's link to its embedded cluster.
pub(crate) struct InProcessLink {
    pub(crate) cluster: EmbeddedCluster,
    count: Mutex<Count>,
    /// Woken whenever a subscription queued records or the cluster changed, for
    /// [`handed_over`](Self::handed_over).
    handed: tokio::sync::Notify,
    /// Publishes of this connection under way (see [`publishing`](Self::publishing)).
    publishing: AtomicUsize,
    /// Batch streams waiting for no publish to be under way.
    quiet: Mutex<Vec<Waker>>,
}

impl std::fmt::Debug for InProcessLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessLink")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl InProcessLink {
    /// Links a fresh cluster; the cluster recounts after every request it answers.
    pub(crate) fn new(cluster: EmbeddedCluster) -> Arc<Self> {
        let link = Arc::new(InProcessLink {
            cluster,
            count: Mutex::new(Count::default()),
            handed: tokio::sync::Notify::new(),
            publishing: AtomicUsize::new(0),
            quiet: Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&link);
        link.cluster.shared().on_change(Box::new(move || {
            if let Some(link) = weak.upgrade() {
                link.new_topics_to_patterns();
                link.rebalances_to_members();
                link.recount();
                link.handed.notify_waiters();
            }
        }));
        link
    }

    fn count(&self) -> MutexGuard<'_, Count> {
        self.count.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Installs the harness coordinator (a second install is ignored) and reports what is
    /// outstanding already.
    pub(crate) fn attach(&self, coordinator: Coordinator) {
        {
            let mut count = self.count();
            if count.coordinator.is_some() {
                return;
            }
            count.coordinator = Some(coordinator);
        }
        self.recount();
    }

    /// A subscription opened on this connection.
    fn reader_opened(&self, tap: &Arc<Tap>) {
        self.count().readers.push(Arc::downgrade(tap));
        self.recount();
    }

    /// A delivery was handed out.
    pub(crate) fn delivery_opened(&self) {
        self.count().alive += 1;
    }

    /// A delivery was dropped (settled, refused or abandoned).
    pub(crate) fn delivery_closed(&self) {
        {
            let mut count = self.count();
            count.alive = count.alive.saturating_sub(1);
        }
        self.recount();
    }

    /// When the cluster created a topic, has every pattern subscription match again at once,
    /// as the in-process transport routes a record to a topic created after a pattern
    /// subscription opened (a live consumer waits for its next metadata refresh).
    fn new_topics_to_patterns(&self) {
        let created = self.cluster.shared().state().topics.created();
        let readers: Vec<Live> = {
            let mut count = self.count();
            if count.topics_created == created {
                return;
            }
            count.topics_created = created;
            count.live_readers()
        };
        for live in &readers {
            if live.tap.reads.pattern.is_some() {
                live.subscription.consumer().check_membership_now();
            }
        }
    }

    /// Has the members here of a group waiting for its members to rejoin heartbeat now: the
    /// rebalance a member's leave or join started then completes at once, as the in-process
    /// transport of the librdkafka adapter reassigns partitions, not a heartbeat interval
    /// later.
    fn rebalances_to_members(&self) {
        let readers: Vec<Live> = {
            let count = self.count();
            count.live_readers()
        };
        let waiting: Vec<&Live> = {
            let state = self.cluster.shared().state();
            readers
                .iter()
                .filter(|live| {
                    live.tap
                        .reads
                        .group
                        .as_deref()
                        .is_some_and(|group| state.groups.is_rebalancing(group))
                })
                .collect()
        };
        for live in waiting {
            live.subscription.consumer().check_membership_now();
        }
    }

    /// Marks a publish of this connection under way until the guard drops. A batch is cut
    /// only while none is (see [`poll_quiet`](Self::poll_quiet)): the in-process transport
    /// of the librdkafka adapter writes synchronously, so a handler publishing a run of
    /// records lands all of them before a batch handler on another task is handed any.
    pub(crate) fn publishing(self: &Arc<Self>) -> Publishing {
        self.publishing.fetch_add(1, Ordering::AcqRel);
        Publishing(Arc::clone(self))
    }

    /// Ready when no publish of this connection is under way; otherwise `cx` is woken when
    /// the last one ends.
    pub(crate) fn poll_quiet(&self, cx: &Context<'_>) -> Poll<()> {
        if self.publishing.load(Ordering::Acquire) == 0 {
            return Poll::Ready(());
        }
        {
            let mut quiet = self.quiet.lock().unwrap_or_else(PoisonError::into_inner);
            if !quiet.iter().any(|w| w.will_wake(cx.waker())) {
                quiet.push(cx.waker().clone());
            }
        }
        // The last publish may have ended before the waker was in place.
        if self.publishing.load(Ordering::Acquire) == 0 {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// A subscription's pump queued records for its stream.
    fn records_queued(&self) {
        self.handed.notify_waiters();
    }

    /// Waits until every subscription of this connection has queued, for each partition it
    /// holds (only `only` when given), every record the cluster holds for it, so that its stream
    /// has them ready: the in-process transport hands records over as they are written, the
    /// way a service's tests expect when they poll a stream right after publishing. A full
    /// queue (the pump paused its partitions) is not waited for, and the wait is bounded.
    pub(crate) async fn handed_over(&self, only: Option<(&str, i32)>) {
        let deadline = tokio::time::Instant::now() + HANDOVER_BOUND;
        loop {
            let notified = self.handed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.all_queued(only) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    fn all_queued(&self, only: Option<(&str, i32)>) -> bool {
        let readers: Vec<Live> = {
            let count = self.count();
            count.live_readers()
        };
        let mut through = Vec::new();
        // Per group, the partitions its members here hold: a partition of a read topic that
        // none holds (between a leave and the reassignment) has yet to be taken up.
        let mut held: Vec<(Option<String>, TopicPartition)> = Vec::new();
        for live in &readers {
            let reader = &live.tap.reads;
            let consumer = live.subscription.consumer();
            let assignment = consumer.assignment();
            held.extend(
                assignment
                    .iter()
                    .map(|tp| (reader.group.clone(), tp.clone())),
            );
            if live.subscription.is_throttled() {
                continue;
            }
            for tp in assignment {
                if only.is_some_and(|(topic, partition)| {
                    &*tp.topic != topic || tp.partition != partition
                }) {
                    continue;
                }
                // No position yet (its start is being looked up): nothing of it is queued.
                let position = live
                    .tap
                    .queued_through(&tp)
                    .or_else(|| consumer.position(&tp))
                    .unwrap_or(i64::MIN);
                through.push((tp, position, reader.read_committed));
            }
        }
        let views = self.views(&readers);
        let ready = {
            let state = self.cluster.shared().state();
            through.iter().all(|(tp, position, read_committed)| {
                state.deliverable(&tp.topic, tp.partition, *position, *read_committed) == 0
            }) && !unheld(&state, &views, &held, only)
        };
        // A subscription whose last handle was one of these closes here, outside the
        // cluster's lock (its drop recounts, which takes that lock).
        drop(readers);
        ready
    }

    /// How the count sees each of `readers` (the live ones of this connection).
    fn views(&self, readers: &[Live]) -> Vec<View> {
        let topics = self.topic_names();
        readers.iter().map(|live| View::of(live, &topics)).collect()
    }

    fn topic_names(&self) -> Vec<String> {
        self.cluster
            .shared()
            .state()
            .topics
            .by_name
            .keys()
            .cloned()
            .collect()
    }

    /// Recounts what is outstanding and tells the coordinator the difference.
    pub(crate) fn recount(&self) {
        let mut count = self.count();
        if count.coordinator.is_none() {
            return;
        }
        count.readers.retain(|r| r.strong_count() > 0);
        let readers: Vec<Live> = count.live_readers();
        // Where each live reader stands, read before the cluster is locked (a subscription's
        // locks are never taken inside the cluster's).
        let views = self.views(&readers);
        let owed = {
            let state = self.cluster.shared().state();
            owed(&state, &views)
        };
        let total = owed + count.alive;
        let Some(coordinator) = count.coordinator.clone() else {
            return;
        };
        let reported = count.reported;
        count.reported = total;
        drop(count);
        for _ in reported..total {
            coordinator.enqueued();
        }
        for _ in total..reported {
            coordinator.consumed();
        }
        // A subscription whose last handle was the one held here closes now, and its own
        // recount runs after this one has reported.
        drop(readers);
    }
}

/// Whether a group reading here owes records on a partition that none of its members here
/// holds (only `only` when given): a member left or a pattern took a topic up, and the
/// reassignment has yet to come. Partition readers hold what they name.
fn unheld(
    state: &State,
    views: &[View],
    held: &[(Option<String>, TopicPartition)],
    only: Option<(&str, i32)>,
) -> bool {
    views.iter().any(|view| {
        if view.reader.group.is_none() || view.reader.partitions.is_some() {
            return false;
        }
        state.topic_partitions().any(|(topic, partitions)| {
            if !view.reader.reads(topic) {
                return false;
            }
            (0..partitions).any(|partition| {
                if only.is_some_and(|(t, p)| t != topic || p != partition) {
                    return false;
                }
                let is_held = held.iter().any(|(group, tp)| {
                    *group == view.reader.group && &*tp.topic == topic && tp.partition == partition
                });
                !is_held
                    && fallback_start(state, views, view, topic, partition).is_some_and(|start| {
                        state.deliverable(topic, partition, start, view.reader.read_committed) > 0
                    })
            })
        })
    })
}

/// A publish under way on an in-process connection (see [`InProcessLink::publishing`]).
pub(crate) struct Publishing(Arc<InProcessLink>);

impl Drop for Publishing {
    fn drop(&mut self) {
        if self.0.publishing.fetch_sub(1, Ordering::AcqRel) == 1 {
            let waiting =
                std::mem::take(&mut *self.0.quiet.lock().unwrap_or_else(PoisonError::into_inner));
            for waker in waiting {
                waker.wake();
            }
        }
    }
}

impl crate::handover::Transport for Arc<InProcessLink> {
    fn handover(&self) -> Arc<dyn crate::handover::Handover> {
        Arc::clone(self) as Arc<dyn crate::handover::Handover>
    }
}

impl crate::handover::Handover for InProcessLink {
    fn publishing(self: Arc<Self>) -> crate::handover::Mark {
        Box::new(InProcessLink::publishing(&self))
    }

    fn handed_over<'a>(&'a self, only: Option<(&'a str, i32)>) -> crate::handover::Wait<'a> {
        Box::pin(InProcessLink::handed_over(self, only))
    }

    fn delivery_opened(&self) {
        InProcessLink::delivery_opened(self);
    }

    fn delivery_closed(&self) {
        InProcessLink::delivery_closed(self);
    }

    fn recount(&self) {
        InProcessLink::recount(self);
    }

    /// A new subscription first lets the subscriptions dropped before it finish closing
    /// (bounded): a member that left is out of its group before the next one joins, as with
    /// the librdkafka adapter's in-process transport, where a close is immediate.
    fn after_closes<'a>(&'a self, closes: crate::handover::Wait<'a>) -> crate::handover::Wait<'a> {
        Box::pin(async move {
            let _ = tokio::time::timeout(HANDOVER_BOUND, closes).await;
        })
    }

    /// The drop of a subscriber returns once its group's other members here hold its
    /// partitions, with their records queued, as with the librdkafka adapter's in-process
    /// transport, whose leave reassigned synchronously. Here the leave and the reassignment
    /// are the client's and the cluster's tasks, so the dropping thread waits for them
    /// (bounded by [`HANDOVER_BOUND`]) under `block_in_place`: a runtime worker hands its
    /// tasks to another thread first, and the thread of a `block_on` blocks alone. It polls
    /// plain state against the wall clock, never the runtime's timers, so a runtime that stops
    /// meanwhile cannot hang it. A current-thread runtime could run nothing while it waited:
    /// there the members take the partitions over once the test next yields.
    fn subscription_dropped(&self, released: &dyn Fn() -> bool, left: &dyn Fn() -> bool) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return;
        }
        // A runtime shutting down (its tasks dropped, the drop one of them) runs nothing more:
        // a task spawned now that runs proves the runtime still does.
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let probe = Arc::clone(&alive);
        drop(runtime.spawn(async move { probe.store(true, Ordering::Release) }));
        let wait = || {
            let begun = std::time::Instant::now();
            let until = |bound: Duration, done: &dyn Fn() -> bool| {
                while !done() {
                    if begun.elapsed() >= bound {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                true
            };
            if !until(PROBE_BOUND, &|| alive.load(Ordering::Acquire)) {
                return;
            }
            // A delivery or seeker alive keeps the subscription (and its partitions) open:
            // nothing is handed over until it goes, and the drop does not wait for that.
            if !until(PROBE_BOUND + RELEASE_BOUND, released) {
                return;
            }
            let _ = until(PROBE_BOUND + HANDOVER_BOUND, &|| {
                left() && self.all_queued(None)
            });
        };
        // `block_in_place` refuses where the thread cannot be given up (a `LocalSet`): the
        // drop then returns at once, as on a current-thread runtime.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tokio::task::block_in_place(wait);
        }))
        .is_err()
        {
            tracing::debug!("a subscriber dropped where its thread cannot wait: not waited on");
        }
    }

    /// Naming a topic creates it (one partition), as a first produce would.
    fn subscribing(&self, topics: &[&str]) {
        for topic in topics {
            let _ = self.cluster.create_topic(topic, 1);
        }
    }

    /// Every record is handed over as it is written: a topic a pattern takes up later was
    /// written after the subscription began, so all of it is read.
    fn configure_reader(&self, config: &mut crate::client::ConsumerConfig) {
        config.late_topic_start = crate::client::LateTopicStart::Earliest;
    }

    fn watch(self: Arc<Self>, reads: Reads) -> Arc<dyn Watch> {
        Arc::new(Tap {
            link: self,
            reads,
            subscription: std::sync::OnceLock::new(),
            current: Mutex::new(None),
            queued_through: Mutex::new(HashMap::new()),
        })
    }
}

/// One live subscription as the count sees it.
struct View {
    reader: Reads,
    /// Its assigned partitions and the next offset each hands out, where known.
    starts: Vec<(TopicPartition, Option<i64>)>,
    /// Topics of the cluster its pattern took up after it first matched: read from their
    /// start.
    late: Vec<String>,
    /// The starts its consumer was given at earlier assignments: where a partition it gets
    /// back with nothing committed resumes.
    given: Vec<(TopicPartition, i64)>,
}

impl View {
    fn of(live: &Live, topics: &[String]) -> View {
        let reader = live.tap.reads.clone();
        let consumer = live.subscription.consumer();
        let late = match &reader.pattern {
            Some(pattern) => topics
                .iter()
                .filter(|t| pattern.is_match(t) && consumer.is_late_topic(t))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        let in_hand = live.tap.current();
        View {
            reader,
            starts: live.subscription.next_to_hand(in_hand.as_ref()),
            late,
            given: consumer.given_starts(),
        }
    }
}

/// Records owed to the readers plus records inside open transactions.
fn owed(state: &State, views: &[View]) -> u64 {
    let mut total = state.open_transaction_records();
    // Partitions already counted for a group (by any of its members).
    let mut counted: Vec<(Option<&str>, &str, i32)> = Vec::new();
    for view in views {
        let group = view.reader.group.as_deref();
        for (tp, start) in &view.starts {
            if counted.contains(&(group, &tp.topic, tp.partition)) && group.is_some() {
                continue;
            }
            counted.push((group, &tp.topic, tp.partition));
            let start =
                start.or_else(|| fallback_start(state, views, view, &tp.topic, tp.partition));
            if let Some(start) = start {
                total +=
                    state.deliverable(&tp.topic, tp.partition, start, view.reader.read_committed);
            }
        }
    }
    // Partitions of a read topic that no member of the group holds right now.
    for view in views {
        let Some(group) = view.reader.group.as_deref() else {
            continue;
        };
        if view.reader.partitions.is_some() {
            continue;
        }
        for (topic, partitions) in state.topic_partitions() {
            if !view.reader.reads(topic) {
                continue;
            }
            for partition in 0..partitions {
                if counted.contains(&(Some(group), topic, partition)) {
                    continue;
                }
                counted.push((Some(group), topic, partition));
                if let Some(start) = fallback_start(state, views, view, topic, partition) {
                    total += state.deliverable(topic, partition, start, view.reader.read_committed);
                }
            }
        }
    }
    total
}

/// Where a reader that has not read `topic`/`partition` yet will start: the group's
/// committed offset, else the start a member of its group was given when it held the partition
/// before (the earliest of them: the count may owe too much until the partition is held again,
/// never too little), else the reset (`latest` owes nothing already there), except on a topic
/// its pattern took up late, read from the start.
fn fallback_start(
    state: &State,
    views: &[View],
    view: &View,
    topic: &str,
    partition: i32,
) -> Option<i64> {
    let reader = &view.reader;
    if let Some(group) = &reader.group
        && let Some(committed) = state.groups.committed(group, topic, partition)
    {
        return Some(committed);
    }
    if reader.group.is_some() {
        let given = views
            .iter()
            .filter(|other| other.reader.group == reader.group)
            .flat_map(|other| &other.given)
            .filter(|(tp, _)| &*tp.topic == topic && tp.partition == partition)
            .map(|(_, start)| *start)
            .min();
        if given.is_some() {
            return given;
        }
    }
    if reader.earliest || view.late.iter().any(|t| t == topic) {
        state
            .topics
            .partition(topic, partition)
            .map(|p| p.log.log_start())
    } else {
        None
    }
}

/// A subscription's side of the count: what it reads, the record it is handing out and how
/// far it has queued each partition.
struct Tap {
    link: Arc<InProcessLink>,
    reads: Reads,
    /// The subscription, once open (held weakly: its handles' drops close it).
    subscription: OnceLock<Weak<dyn Watched>>,
    /// The partition the subscriber is handing out from and the next offset it hands.
    current: Mutex<Option<(TopicPartition, i64)>>,
    /// The consumer's position right after the subscription last queued records of each
    /// partition; none until then and after a reposition.
    queued_through: Mutex<HashMap<TopicPartition, i64>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tap {
    fn current(&self) -> Option<(TopicPartition, i64)> {
        locked(&self.current).clone()
    }

    fn queued_through(&self, tp: &TopicPartition) -> Option<i64> {
        locked(&self.queued_through).get(tp).copied()
    }
}

impl Watch for Tap {
    fn opened(self: Arc<Self>, subscription: Weak<dyn Watched>) {
        let _ = self.subscription.set(subscription);
        self.link.reader_opened(&self);
    }

    fn handing(&self, tp: &TopicPartition, next: i64) {
        *locked(&self.current) = Some((tp.clone(), next));
    }

    fn handed_all(&self) {
        *locked(&self.current) = None;
    }

    fn repositioned(&self, tps: &[TopicPartition]) {
        {
            let mut current = locked(&self.current);
            if current.as_ref().is_some_and(|(tp, _)| tps.contains(tp)) {
                *current = None;
            }
        }
        let mut queued = locked(&self.queued_through);
        for tp in tps {
            queued.remove(tp);
        }
    }

    fn queued(&self, tp: &TopicPartition, position: Option<i64>) {
        if let Some(position) = position {
            let mut queued = locked(&self.queued_through);
            let through = queued.entry(tp.clone()).or_insert(position);
            *through = (*through).max(position);
        }
        self.link.records_queued();
    }

    fn poll_batch(&self, cx: &Context<'_>) -> Poll<()> {
        self.link.poll_quiet(cx)
    }
}
