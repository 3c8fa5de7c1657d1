//! In process, a record is in a subscription's stream by the time the call that put it in the
//! log returns: `publish`, a transaction's `commit`, `subscribe` over a backlog, and a seek, and
//! a pattern subscription reads a topic the first publish creates. A service's tests poll a
//! stream once right after such a call and expect the record there, as they did with the
//! librdkafka adapter's in-process transport. Dropping a member is one such call too: on a
//! multi-thread runtime its partitions are the other members' when the drop returns.
#![cfg(feature = "testing")]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{FutureExt as _, Stream, StreamExt as _};
use ruststream::runtime::{AppInfo, Context, Handle, HandlerOutcome, RustStream, subscriber};
use ruststream::testing::{InProcess as _, TestApp};
use ruststream::{
    IncomingMessage as _, Outgoing, OutgoingMessage, Publisher as _, Seekable as _, Seeker as _,
    Subscribe as _, Subscriber as _, SubscriptionSource as _, TransactionalPublisher as _,
};
use ruststream_kafka::{
    ConnectedKafkaBroker, KafkaBroker, KafkaError, KafkaMessage, KafkaPosition, KafkaPublish,
    KafkaTopic, KafkaTopics, StartOffset,
};
use serde::{Deserialize, Serialize};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_reads_a_topic_the_first_publish_creates_after_it_subscribed() {
    let broker = cluster().await;
    // No start given: a new group starts at the end of what it matches now, yet a topic that
    // appears later holds nothing written before the subscription, so all of it is read.
    let mut regional = KafkaTopics::pattern("^shipments\\.")
        .group("regional")
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let mut stream = Box::pin(regional.stream());
    write(&broker, "shipments.north", b"n1").await;
    assert_eq!(ready_now(&mut stream).await, bodies(&["n1"]));

    write(&broker, "shipments.south", b"s1").await;
    write(&broker, "shipments.north", b"n2").await;
    write(&broker, "shipping.misc", b"m1").await;
    let mut seen = ready_now(&mut stream).await;
    seen.sort();
    assert_eq!(seen, bodies(&["n2", "s1"]));
}

/// Counts the parcels it takes.
#[derive(Clone, Default)]
struct Tally(Arc<AtomicUsize>);

impl Handle<Parcel> for Tally {
    fn handle(
        &self,
        _parcel: &Parcel,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(()))
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
struct Parcel {
    weight: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_test_app_a_pattern_handler_is_called_for_a_topic_created_after_start() {
    let tally = Tally::default();
    let body = tally.clone();
    let app = RustStream::new(AppInfo::new("depot", "1.0.0")).with_broker(
        KafkaBroker::new(["kafka.internal:9092"]).default_group("depot"),
        move |b| {
            b.include(
                subscriber(KafkaTopics::pattern("^parcels\\..+"), body.clone())
                    .undocumented()
                    .build(),
            )
            .out_retry(KafkaPublish::default())
            .to("parcels-retry");
        },
    );
    let tb = TestApp::start(app).await.expect("start");
    for (topic, weight) in [("parcels.heavy", 40), ("parcels.light", 2)] {
        tb.broker::<KafkaBroker>()
            .message(&Parcel { weight })
            .to(topic)
            .publish()
            .await
            .expect("publish");
    }
    tb.broker::<KafkaBroker>()
        .subscriber("^parcels\\..+")
        .assert_called(2);
    assert_eq!(tally.0.load(Ordering::SeqCst), 2);
    tb.shutdown().await.expect("shutdown");
}

/// A handler that publishes a run of records, and a batch handler reading them.
mod fan_out {
    use ruststream::testing::TestApp;
    use ruststream_kafka::KafkaPublish;
    use ruststream_kafka::prelude::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize, Outgoing)]
    struct Manifest {
        crates: u32,
    }

    #[derive(Debug, Serialize, Deserialize, Outgoing)]
    struct Crate {
        number: u32,
    }

    #[derive(OutSlot)]
    #[publishes(Crate)]
    struct Crates;

    /// Unpacks a manifest into one record per crate.
    #[subscriber("manifests")]
    async fn unpack(
        manifest: &Manifest,
        Out(crates): Out<impl Publisher, Crates>,
    ) -> HandlerOutcome {
        for number in 0..manifest.crates {
            let sent = crates
                .message(&Crate { number })
                .to("crates")
                .publish()
                .await;
            if sent.is_err() {
                return HandlerOutcome::retry();
            }
        }
        HandlerOutcome::ack()
    }

    #[subscriber(KafkaTopic::new("crates"))]
    async fn shelve(crates: &[Crate]) -> HandlerOutcome {
        let _ = crates.len();
        HandlerOutcome::ack()
    }

    /// On a current-thread runtime the unpacking handler writes every crate before the batch
    /// handler runs, so the batches are cut by size alone.
    #[tokio::test]
    async fn a_run_published_by_one_handler_is_batched_by_size() {
        let app = RustStream::new(AppInfo::new("warehouse", "1.0.0")).with_broker(
            KafkaBroker::new(["kafka.internal:9092"]).default_group("warehouse"),
            |b| {
                b.include(unpack)
                    .out(Crates, KafkaPublish::default())
                    .build();
                b.include(shelve.batch(nonzero!(3)));
            },
        );
        let tb = TestApp::start(app).await.expect("start");
        tb.broker::<KafkaBroker>()
            .message(&Manifest { crates: 7 })
            .to("manifests")
            .publish()
            .await
            .expect("publish");
        tb.broker::<KafkaBroker>()
            .subscriber("crates")
            .assert_batch_sizes(&[3, 3, 1]);
        tb.shutdown().await.expect("shutdown");
    }
}

fn tracked_on(topic: &str, group: &str) -> KafkaTopic {
    KafkaTopic::new(topic)
        .group(group)
        .commit(ruststream_kafka::Commit::Tracked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeue_after_its_subscription_closed_reaches_the_next_member() {
    let broker = cluster().await;
    write(&broker, "returns", b"r1").await;
    let mut first = tracked_on("returns", "clerks")
        .start(StartOffset::Earliest)
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let held = {
        let mut stream = Box::pin(first.stream());
        stream
            .next()
            .now_or_never()
            .flatten()
            .expect("r1")
            .expect("a delivery")
    };
    drop(first);
    held.nack(true).await.expect("requeue");

    // Nothing was settled, so the group holds no offset (a start is never committed): the next
    // member reads r1 from where its own start puts it.
    let mut next = tracked_on("returns", "clerks")
        .start(StartOffset::Earliest)
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let mut stream = Box::pin(next.stream());
    assert_eq!(ready_now(&mut stream).await, bodies(&["r1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_leaves_hands_its_partition_to_the_other_at_the_committed_offset() {
    let broker = cluster().await;
    let mut first = tracked_on("tickets", "desk")
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let mut second = tracked_on("tickets", "desk")
        .subscribe(&broker)
        .await
        .expect("subscribe");
    write(&broker, "tickets", b"t1").await;
    write(&broker, "tickets", b"t2").await;
    // One partition: the first member holds it.
    {
        let mut stream = Box::pin(first.stream());
        let t1 = stream
            .next()
            .now_or_never()
            .flatten()
            .expect("t1")
            .expect("a delivery");
        assert_eq!(t1.payload(), b"t1");
        t1.ack().await.expect("ack");
    }
    let mut stream = Box::pin(second.stream());
    assert!(ready_now(&mut stream).await.is_empty());
    // The drop returns once the group has handed the partition over and the survivor has
    // queued what it owes, so the survivor's stream has it at once.
    drop(first);
    assert_eq!(
        ready_now(&mut stream).await,
        bodies(&["t2"]),
        "resumed at the committed offset, t1 not read again"
    );
}
