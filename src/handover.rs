//! Hand-over: the points where a transport that promises more than Kafka waits or counts.
//!
//! The in-process transport of `testing` promises what the reference's in-process transport
//! promised: a publish returns once the subscriptions of its connection hold the record ready,
//! and the harness counts every delivery alive. It is the one [`Handover`]; a live connection
//! has none, and each point below is one test of an `Option`.
//!
//! Invariant: a hand-over only waits or counts; it never changes what is delivered, committed
//! or published.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

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

/// Marks a publish under way with `handover`, if there is one.
pub(crate) fn publishing(handover: Option<&Arc<dyn Handover>>) -> Option<Mark> {
    handover.map(|h| Arc::clone(h).publishing())
}
