//! In process, a record is in a subscription's stream by the time the call that put it in the
//! log returns: `publish`, a transaction's `commit`, `subscribe` over a backlog, and a seek.
//! A service's tests poll a stream once right after such a call and expect the record there,
//! as they did with the librdkafka adapter's in-process transport.
#![cfg(feature = "testing")]

use futures::{FutureExt as _, Stream, StreamExt as _};
use ruststream::testing::InProcess as _;
use ruststream::{
    IncomingMessage as _, OutgoingMessage, Publisher as _, Seekable as _, Seeker as _,
    Subscribe as _, Subscriber as _, SubscriptionSource as _, TransactionalPublisher as _,
};
use ruststream_kafka::{
    ConnectedKafkaBroker, KafkaBroker, KafkaError, KafkaMessage, KafkaPosition, KafkaPublish,
    KafkaTopic, StartOffset,
};

async fn cluster() -> ConnectedKafkaBroker {
    KafkaBroker::new(["kafka.internal:9092"])
        .default_group("handover")
        .connect_in_process()
        .await
        .expect("connect in process")
}

async fn write(broker: &ConnectedKafkaBroker, topic: &str, body: &[u8]) {
    broker
        .publisher(KafkaPublish::default())
        .publish(OutgoingMessage::new(topic, body), None)
        .await
        .expect("publish");
}

/// What the stream has ready this instant, acked, as bodies: nothing is awaited.
async fn ready_now<S>(stream: &mut S) -> Vec<Vec<u8>>
where
    S: Stream<Item = Result<KafkaMessage, KafkaError>> + Unpin,
{
    let mut bodies = Vec::new();
    while let Some(Some(delivery)) = stream.next().now_or_never() {
        let delivery = delivery.expect("a delivery");
        bodies.push(delivery.payload().to_vec());
        delivery.ack().await.expect("ack");
    }
    bodies
}

fn bodies(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|b| b.as_bytes().to_vec()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_record_is_ready_when_publish_returns() {
    let broker = cluster().await;
    let mut invoices = broker.subscribe("invoices").await.expect("subscribe");
    let mut refunds = broker.subscribe("refunds").await.expect("subscribe");

    for round in 0..25 {
        let body = format!("inv-{round}");
        write(&broker, "invoices", body.as_bytes()).await;
        // The stream is taken after the publish, as a test reading "what is there now" does.
        let mut stream = Box::pin(invoices.stream());
        assert_eq!(
            ready_now(&mut stream).await,
            bodies(&[&body]),
            "round {round}"
        );
    }
    let mut refunds = Box::pin(refunds.stream());
    assert!(ready_now(&mut refunds).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_ready_when_subscribe_returns_and_again_after_a_seek() {
    let broker = cluster().await;
    for body in ["a", "b", "c"] {
        write(&broker, "ledger", body.as_bytes()).await;
    }
    let mut ledger = KafkaTopic::new("ledger")
        .group("auditors")
        .start(StartOffset::Earliest)
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let seeker = ledger.seeker();
    let mut stream = Box::pin(ledger.stream());
    assert_eq!(ready_now(&mut stream).await, bodies(&["a", "b", "c"]));

    seeker
        .seek(KafkaPosition::offset(0, 1))
        .await
        .expect("seek");
    assert_eq!(ready_now(&mut stream).await, bodies(&["b", "c"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_is_ready_when_commit_returns() {
    let broker = cluster().await;
    let mut settled = KafkaTopic::new("settled")
        .group("bookkeeping")
        .config("isolation.level", "read_committed")
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let mut stream = Box::pin(settled.stream());
    let writer = broker
        .transactional_publisher(KafkaPublish::default().transactional_id("settler"))
        .await
        .expect("transactional publisher");

    writer.begin_transaction().await.expect("begin");
    for body in ["x", "y"] {
        writer
            .publish(OutgoingMessage::new("settled", body.as_bytes()), None)
            .await
            .expect("publish");
    }
    assert!(
        ready_now(&mut stream).await.is_empty(),
        "an open transaction is not read"
    );
    writer.commit().await.expect("commit");
    assert_eq!(ready_now(&mut stream).await, bodies(&["x", "y"]));
}
