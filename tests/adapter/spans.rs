//! Delivery spans: with `KafkaTracing` on the app, a handler runs inside a `kafka.process` span
//! with OpenTelemetry's messaging attributes and the producer's trace ids from `traceparent`.

use crate::captured::Captured;
use crate::live;

use std::time::{Duration, Instant};

use bytes::Bytes;
use ruststream::prelude::*;
use ruststream::testing::TestApp;
use ruststream::{ConnectedBroker, HeaderMap, OutgoingMessage, Publisher};
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::{KafkaBroker, KafkaPublish, KafkaTopic, KafkaTracing, StartOffset};

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "asyncapi", derive(ruststream::schemars::JsonSchema))]
#[cfg_attr(feature = "asyncapi", schemars(crate = "ruststream::schemars"))]
struct Job {
    id: u64,
}

/// Logs one line from inside the handler: the span it runs in prefixes it.
#[derive(Clone)]
struct Handled;

impl Handle<Job, (), (), KafkaContext> for Handled {
    fn handle(
        &self,
        job: &Job,
        _outs: &(),
        _ctx: &mut Context<'_, KafkaContext>,
    ) -> impl std::future::Future<Output = Result<(), HandlerOutcome>> + Send {
        tracing::info!(target: "spans_test", job = job.id, "handled");
        std::future::ready(Ok(()))
    }
}

// One thread: the subscriber that captures the lines is this thread's, and the app's tasks
// run on it.
#[tokio::test(flavor = "current_thread")]
async fn a_handler_runs_inside_the_deliverys_span_with_the_messaging_attributes() {
    let captured = Captured::default();
    let _local = tracing::subscriber::set_default(
        captured.subscriber("ruststream_kafka::spans=info,spans_test=info"),
    );
    let topic = live::topic("spans", 2).await;
    let group = live::unique("spans-group");
    let source = live::quick(
        KafkaTopic::new(&topic)
            .group(&group)
            .start(StartOffset::Earliest),
    );
    let app = RustStream::new(AppInfo::new("spans", "0.0.0"))
        .layer(KafkaTracing::default())
        .with_broker(KafkaBroker::new([live::url()]), |b| {
            b.include(subscriber(source, Handled).build());
        });
    let tb = TestApp::start_live_within(app, Duration::from_secs(30))
        .await
        .expect("start");
    let connected = live::connect(KafkaBroker::new([live::url()])).await;
    let publisher = connected.publisher(KafkaPublish::default());
    let mut traced = HeaderMap::new();
    traced.insert(
        "traceparent",
        Bytes::from_static(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    );
    traced.insert(
        ruststream_kafka::PARTITION_KEY_HEADER,
        Bytes::from_static(b"order-7"),
    );
    publisher
        .publish(
            OutgoingMessage::new(&topic, br#"{"id":1}"#.as_slice()).with_headers(traced),
            None,
        )
        .await
        .expect("publish");
    publisher
        .publish(
            OutgoingMessage::new(&topic, br#"{"id":2}"#.as_slice()),
            None,
        )
        .await
        .expect("publish");
    let deadline = Instant::now() + live::WAIT;
    let lines = loop {
        let lines = captured.lines_with("spans_test: handled");
        if lines.len() >= 2 {
            break lines;
        }
        assert!(
            Instant::now() < deadline,
            "handled {lines:?} within {:?}",
            live::WAIT
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for line in &lines {
        for field in [
            "kafka.process{",
            "otel.kind=\"consumer\"",
            &format!("otel.name=process {topic}"),
            "messaging.system=\"kafka\"",
            "messaging.operation.type=\"process\"",
            &format!("messaging.destination.name=\"{topic}\""),
            "messaging.destination.partition.id=",
            "messaging.kafka.offset=",
            &format!("messaging.consumer.group.name=\"{group}\""),
            "messaging.client.id=",
        ] {
            assert!(line.contains(field), "{field} in {line}");
        }
    }
    let traced: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\""))
        .collect();
    assert_eq!(
        traced.len(),
        1,
        "one record carried a traceparent: {lines:?}"
    );
    assert!(
        traced[0].contains("parent_span_id=\"00f067aa0ba902b7\""),
        "{}",
        traced[0]
    );
    assert!(
        traced[0].contains("messaging.kafka.message.key=\"order-7\""),
        "{}",
        traced[0]
    );
    drop(publisher);
    connected.shutdown().await.expect("shutdown");
    tb.shutdown().await.expect("shutdown");
}
