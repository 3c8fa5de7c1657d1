//! Hand-over: the points where a transport that promises more than Kafka waits or counts.
//!
//! The in-process transport of `testing` promises what the reference's in-process transport
//! promised: a publish returns once the subscriptions of its connection hold the record ready,
//! and the harness counts every delivery alive. It is the one [`Handover`]; a live connection
//! has none, and each point below is one test of an `Option`.
//!
//! A subscription on such a connection carries a [`Watch`]: the transport's side of that one
//! subscription, told what the subscription queues and hands out, and reading back what it
//! needs through [`Watched`]. The subscription's code has no branch of its own for the
//! transport: every point is one test of an `Option`.
//!
//! Invariant: a hand-over only waits or counts; it never changes what is delivered, committed
//! or published. Two exceptions are the reference's own in-process rules, made at subscribe:
//! a topic a subscription names exists ([`Handover::subscribing`]), and a topic a pattern
//! takes up later is read from its start ([`Handover::configure_reader`]).

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use regex::Regex;

use crate::client::ConsumerConfig;
use crate::client::consumer::{ConsumerHandle, TopicPartition};

/// A wait a [`Handover`] hands out: borrowed from it for as long as it runs.
pub(crate) type Wait<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Marks something under way until it is dropped.
pub(crate) type Mark = Box<dyn Any + Send + Sync>;

/// The points a transport's promise hooks into.
pub(crate) trait Handover: Send + Sync + 'static {
    /// A publish of this connection begins; it is under way until the mark drops.
    fn publishing(self: Arc<Self>) -> Mark;

    /// A publish (to `only`, a topic and partition; `None` after a committed transaction) was
    /// acknowledged: resolves once the subscriptions hold what it wrote ready to hand out.
    fn handed_over<'a>(&'a self, only: Option<(&'a str, i32)>) -> Wait<'a>;

    /// A delivery was handed to a handler.
    fn delivery_opened(&self);

    /// A delivery was dropped (settled, refused or abandoned).
    fn delivery_closed(&self);

    /// What a subscription holds changed (it was repositioned, or it closed): the transport
    /// counts again what its subscriptions owe.
    fn recount(&self);

    /// A subscription is about to open; `closes` resolves once the subscriptions dropped
    /// before it have closed. Resolves when the transport no longer waits for them.
    fn after_closes<'a>(&'a self, closes: Wait<'a>) -> Wait<'a>;

    /// The subscriber of a subscription was dropped: `released` says whether nothing holds
    /// the subscription any more (no delivery, no seeker), `left` whether its consumer has
    /// closed (committed and left its group). Returns once the transport's promise for the
    /// drop is kept: in process, the group's other members here hold what it held, with their
    /// records queued (bounded; a runtime that cannot run other tasks while this thread waits
    /// is not waited on, and neither is a subscription a delivery still holds).
    fn subscription_dropped(&self, released: &dyn Fn() -> bool, left: &dyn Fn() -> bool);

    /// A subscription naming `topics` opens.
    fn subscribing(&self, topics: &[&str]);

    /// Adjusts the consumer configuration of a subscription about to open.
    fn configure_reader(&self, config: &mut ConsumerConfig);

    /// The watch of a subscription that reads as `reads`.
    fn watch(self: Arc<Self>, reads: Reads) -> Arc<dyn Watch>;
}

/// What a subscription reads, as a transport's count sees it.
#[derive(Debug, Clone)]
#[cfg_attr(
    not(feature = "testing"),
    allow(dead_code, reason = "read by the in-process transport of `testing`")
)]
pub(crate) struct Reads {
    /// Its consumer group; `None` for a partition reader that joins none.
    pub group: Option<String>,
    /// The topics it names.
    pub topics: Vec<String>,
    /// The topics it matches, if it names patterns.
    pub pattern: Option<Regex>,
    /// Named partitions (a manual assignment): only these are read.
    pub partitions: Option<Vec<i32>>,
    /// Whether it reads only committed records.
    pub read_committed: bool,
    /// Whether a partition with no committed offset starts at its earliest record.
    pub earliest: bool,
}

impl Reads {
    /// Whether this subscription reads `topic`.
    #[cfg_attr(
        not(feature = "testing"),
        allow(dead_code, reason = "read by the in-process transport of `testing`")
    )]
    pub(crate) fn reads(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t == topic)
            || self.pattern.as_ref().is_some_and(|p| p.is_match(topic))
    }
}

/// A transport's side of one subscription: told what the subscription queues and hands out.
pub(crate) trait Watch: Send + Sync {
    /// The subscription opened; the watch holds it weakly (it closes when its handles drop).
    fn opened(self: Arc<Self>, subscription: Weak<dyn Watched>);

    /// The subscription hands out `tp` from `next` on.
    fn handing(&self, tp: &TopicPartition, next: i64);

    /// The record the subscription was handing out ran out: it holds none in hand.
    fn handed_all(&self);

    /// `tps` were repositioned: whatever was queued or in hand of them is gone.
    fn repositioned(&self, tps: &[TopicPartition]);

    /// The subscription queued records of `tp`; its consumer's position is now `position`.
    fn queued(&self, tp: &TopicPartition, position: Option<i64>);

    /// Ready when a batch may be cut; otherwise `cx` is woken when it may.
    fn poll_batch(&self, cx: &Context<'_>) -> Poll<()>;
}

/// What a transport reads back of a subscription it watches.
#[cfg_attr(
    not(feature = "testing"),
    allow(dead_code, reason = "read by the in-process transport of `testing`")
)]
pub(crate) trait Watched: Send + Sync {
    /// The subscription's consumer.
    fn consumer(&self) -> &ConsumerHandle;

    /// Every assigned partition with the next offset the subscription hands its handler,
    /// where known: `in_hand`'s if it is that partition's, else the first queued one, else
    /// the consumer's position.
    fn next_to_hand(
        &self,
        in_hand: Option<&(TopicPartition, i64)>,
    ) -> Vec<(TopicPartition, Option<i64>)>;

    /// Whether the subscription paused every partition because its queue is full.
    fn is_throttled(&self) -> bool;
}

/// A connection's in-process arm, as the hand-over it brings: the in-process link of
/// `testing`, or (without that feature) a type with no value at all.
pub(crate) trait Transport {
    /// The hand-over this transport hooks into the broker.
    fn handover(&self) -> Arc<dyn Handover>;
}

/// Without `testing` there is no in-process arm: a link is never there.
impl Transport for std::convert::Infallible {
    fn handover(&self) -> Arc<dyn Handover> {
        match *self {}
    }
}

/// Waits for `handover`'s hand-over of a publish, if there is one.
pub(crate) async fn handed_over(handover: Option<&Arc<dyn Handover>>, only: Option<(&str, i32)>) {
    if let Some(handover) = handover {
        handover.handed_over(only).await;
    }
}

/// A delivery alive, as the transport counts it: opened when made, closed when dropped.
/// Nothing on a live connection.
pub(crate) struct Alive(Option<Arc<dyn Handover>>);

impl Alive {
    /// A delivery made on a connection with `handover`.
    pub(crate) fn open(handover: Option<&Arc<dyn Handover>>) -> Self {
        if let Some(handover) = handover {
            handover.delivery_opened();
        }
        Alive(handover.cloned())
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        if let Some(handover) = &self.0 {
            handover.delivery_closed();
        }
    }
}

/// Tells `watch`, if there is one, `what`.
pub(crate) fn tell(watch: Option<&Arc<dyn Watch>>, what: impl FnOnce(&dyn Watch)) {
    if let Some(watch) = watch {
        what(watch.as_ref());
    }
}

/// Marks a publish under way with `handover`, if there is one.
pub(crate) fn publishing(handover: Option<&Arc<dyn Handover>>) -> Option<Mark> {
    handover.map(|h| Arc::clone(h).publishing())
}
