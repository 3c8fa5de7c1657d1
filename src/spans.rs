//! Delivery spans: [`KafkaTracing`] runs each handler of a Kafka delivery inside a span with
//! OpenTelemetry's messaging attributes, and ties it to the producer's trace when the record
//! carries a W3C `traceparent` header.
//!
//! Invariants:
//! - a delivery that is not a Kafka record (another broker of the app, a batch) passes through
//!   untouched, so the layer can ride the app-wide stack;
//! - a `traceparent` that does not parse is ignored, never an error: a record's headers are
//!   whatever its producer wrote;
//! - with no subscriber enabled at INFO for this target, no span is built.

use std::any::Any;
use std::future::Future;

use ruststream::Field;
use ruststream::runtime::{BlanketLayer, Context, Handler, HandlerOutcome, Layer};
use tracing::Instrument as _;

use crate::context::KafkaContext;

/// A layer that runs each handler of a Kafka delivery inside an INFO span `kafka.process`.
///
/// The span carries OpenTelemetry's messaging attributes: `otel.kind = "consumer"`,
/// `otel.name = "process <topic>"`, `messaging.system = "kafka"`,
/// `messaging.operation.type` and `.name` (`process`), `messaging.destination.name` (the
/// topic), `messaging.destination.partition.id`, `messaging.kafka.offset`,
/// `messaging.kafka.message.key` (when the key is UTF-8), `messaging.consumer.group.name`,
/// `messaging.client.id`; and, when the record has a valid W3C `traceparent` header, the
/// producer's `trace_id` and `parent_span_id`.
///
/// Mount it on the app (`RustStream::new(..).layer(KafkaTracing::default())`) or on one
/// registration. With `tracing-opentelemetry` the attributes become the exported span's; for
/// the exported span to be the producer's child, mount ruststream's `otel.consume_layer()`
/// outside this one (its span continues the record's trace, and this span is its child).
#[derive(Debug, Clone, Copy, Default)]
pub struct KafkaTracing {
    _private: (),
}

impl<H> Layer<H> for KafkaTracing {
    type Handler = KafkaTraced<H>;

    fn layer(&self, inner: H) -> KafkaTraced<H> {
        KafkaTraced { inner }
    }
}

impl BlanketLayer for KafkaTracing {
    fn apply<M, C, S, H>(&self, handler: H) -> impl Handler<M, C, S> + 'static
    where
        M: Send + Sync + 'static,
        C: Send + 'static,
        S: Send + Sync + 'static,
        H: Handler<M, C, S> + 'static,
    {
        self.layer(handler)
    }
}

/// A handler wrapped by [`KafkaTracing`].
#[derive(Debug, Clone, Copy)]
pub struct KafkaTraced<H> {
    inner: H,
}

/// Reads a delivery's context as `Any`, so that one layer serves every context type and
/// recognizes the Kafka one.
struct AsAny;

impl<C: Any> Field<C> for AsAny {
    type Value<'a>
        = &'a dyn Any
    where
        C: 'a;

    fn get(self, src: &C) -> &dyn Any {
        src
    }
}

impl<M, C, S, H> Handler<M, C, S> for KafkaTraced<H>
where
    M: Sync,
    C: Send + 'static,
    S: Send + Sync,
    H: Handler<M, C, S>,
{
    fn handle(
        &self,
        msg: &M,
        ctx: &mut Context<'_, C, S>,
    ) -> impl Future<Output = HandlerOutcome> + Send {
        let span = match ctx.context(AsAny).downcast_ref::<KafkaContext>() {
            Some(kafka) if tracing::enabled!(target: "ruststream_kafka::spans", tracing::Level::INFO) => {
                delivery_span(kafka, ctx.headers().get_str(TRACEPARENT))
            }
            _ => tracing::Span::none(),
        };
        self.inner.handle(msg, ctx).instrument(span)
    }
}

const TRACEPARENT: &str = "traceparent";

fn delivery_span(kafka: &KafkaContext, traceparent: Option<&str>) -> tracing::Span {
    let core = kafka.seeker().core();
    let topic = kafka.topic();
    let parent = traceparent.and_then(TraceParent::parse);
    tracing::info_span!(
        target: "ruststream_kafka::spans",
        "kafka.process",
        otel.kind = "consumer",
        otel.name = %format_args!("process {topic}"),
        messaging.system = "kafka",
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.destination.name = topic,
        messaging.destination.partition.id = kafka.partition(),
        messaging.kafka.offset = kafka.offset(),
        messaging.kafka.message.key = kafka.key().and_then(|k| std::str::from_utf8(k).ok()),
        messaging.consumer.group.name = core.consumer.group_id(),
        messaging.client.id = core.consumer.client_id(),
        trace_id = parent.map(|p| p.trace_id),
        parent_span_id = parent.map(|p| p.span_id),
    )
}

/// The ids of a W3C `traceparent` (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TraceParent<'a> {
    trace_id: &'a str,
    span_id: &'a str,
}

impl<'a> TraceParent<'a> {
    /// The ids of a valid header: version `00` (or a later one, read as `00` as the spec asks),
    /// lowercase hex of the right lengths, neither id all zeros.
    fn parse(header: &'a str) -> Option<Self> {
        let mut parts = header.trim().split('-');
        let version = parts.next()?;
        let trace_id = parts.next()?;
        let span_id = parts.next()?;
        let flags = parts.next()?;
        let hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let valid = hex(version, 2)
            && version != "ff"
            && (version != "00" || parts.next().is_none())
            && hex(trace_id, 32)
            && hex(span_id, 16)
            && hex(flags, 2)
            && trace_id.bytes().any(|b| b != b'0')
            && span_id.bytes().any(|b| b != b'0');
        valid.then_some(TraceParent { trace_id, span_id })
    }
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn a_traceparent_is_read_as_the_w3c_spec_says() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            TraceParent::parse(good),
            Some(TraceParent {
                trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
                span_id: "00f067aa0ba902b7",
            })
        );
        // a later version may carry more fields
        assert!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }
}
