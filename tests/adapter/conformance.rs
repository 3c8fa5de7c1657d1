//! The `RustStream` conformance suites, live against the cluster under test.
//!
//! Every suite the broker declares runs here (the transactions suite has its own file), and,
//! with the `testing` feature, the suites that compare the cluster with the in-process mode
//! (the embedded cluster): settlement answers, backlog and refusals. The in-process passes of
//! the suites are in `in_process.rs`. Each suite's topic is
//! created before the suite subscribes (a consumer would otherwise wait for a metadata refresh
//! to see a topic that a publish auto-created), the group coordinator is warmed first (the
//! first group of a fresh cluster creates `__consumer_offsets`), and every test has a group of
//! its own.

use crate::live;

use std::time::Duration;

use ruststream::conformance::message_shape::OptionCases;
use ruststream::conformance::settlement::{self, Answer};
use ruststream::conformance::{capabilities, harness, helpers, lifecycle, message_shape};
use ruststream::testing::Backlog;
use ruststream::{Bytes, Name};
use ruststream_kafka::{
    Commit, ConnectedKafkaBroker, KafkaBroker, KafkaOptions, KafkaPosition, KafkaPublish,
    KafkaPublisher, KafkaTopic, LaneKey, PARTITION_KEY_HEADER, StartOffset,
};

/// A broker whose bare-name subscriptions join `group`.
fn broker_in(group: &str) -> impl Fn() -> KafkaBroker + Send + Sync + 'static {
    let url = live::url();
    let group = group.to_owned();
    move || KafkaBroker::new([url.clone()]).default_group(group.clone())
}

/// The descriptor the suites read with: `group`, from the start, tracked commits; its topic is
/// created (with `partitions`) before it is returned.
fn source_in(group: &str, partitions: i32, commit: Commit) -> impl Fn(&str) -> KafkaTopic {
    let group = group.to_owned();
    move |name: &str| {
        live::ensure_topic(name, partitions);
        live::quick(
            KafkaTopic::new(name)
                .group(group.clone())
                .start(StartOffset::Earliest)
                .commit(commit.clone()),
        )
    }
}

fn publisher(connected: &ConnectedKafkaBroker) -> KafkaPublisher {
    connected.publisher(KafkaPublish::default())
}

/// A throw-away group round trip, so the suites do not pay for creating `__consumer_offsets`.
async fn warm() {
    static WARM: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    WARM.get_or_init(warm_once).await;
}

async fn warm_once() {
    use ruststream::{IncomingMessage, Subscriber, SubscriptionSource};
    let topic = live::topic("conformance-warm", 1).await;
    let connected = live::connect(live::broker()).await;
    let mut subscriber = tokio::time::timeout(
        Duration::from_secs(30),
        KafkaTopic::new(&topic)
            .start(StartOffset::Earliest)
            .subscribe(&connected),
    )
    .await
    .expect("the warm-up group opens within 30 s")
    .expect("the warm-up subscription opens");
    live::send(&publisher(&connected), &topic, b"warm").await;
    let mut stream = subscriber.stream();
    let message = live::next(&mut stream).await;
    message.ack().await.expect("ack");
}

fn group(suite: &str) -> String {
    live::unique(&format!("conformance-{suite}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_live() {
    live::logs();
    warm().await;
    let group = group("lifecycle");
    harness::lifecycle(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redelivery_address_of_a_topic() {
    live::logs();
    warm().await;
    let group = group("redelivery");
    harness::redelivery_address(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redelivery_address_of_a_bare_name() {
    live::logs();
    warm().await;
    let group = group("redelivery-name");
    harness::redelivery_address(
        broker_in(&group),
        |name: &str| {
            live::ensure_topic(name, 1);
            Name::new(name.to_owned())
        },
        publisher,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracked_settlement() {
    live::logs();
    warm().await;
    let group = group("settlement-tracked");
    let answers = settlement::suite(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
        Duration::ZERO,
    )
    .await;
    assert_eq!(answers.ack, Answer::Settled);
    assert_eq!(answers.reject, Answer::Settled);
    assert_eq!(answers.requeue, Answer::Settled);
    assert!(!answers.delay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_settlement() {
    live::logs();
    warm().await;
    let group = group("settlement-auto");
    let answers = settlement::suite(
        broker_in(&group),
        source_in(&group, 1, Commit::Auto),
        publisher,
        Duration::ZERO,
    )
    .await;
    assert_eq!(answers.ack, Answer::Settled);
    assert_eq!(answers.reject, Answer::Settled);
    assert_eq!(answers.requeue, Answer::Unsupported);
    assert!(!answers.delay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_flushes() {
    live::logs();
    warm().await;
    let group = group("flush");
    lifecycle::shutdown_flushes(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
        Backlog::Delivered,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches() {
    live::logs();
    warm().await;
    let group = group("batches");
    capabilities::batches(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_seeking() {
    live::logs();
    warm().await;
    let group = group("batch-seeking");
    capabilities::batch_seeking(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeking() {
    live::logs();
    warm().await;
    let group = group("seeking");
    capabilities::seeking(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeking_an_unknown_partition() {
    live::logs();
    warm().await;
    let group = group("seeking-unknown");
    capabilities::seeking_unknown_position(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
        |subject: &str| KafkaPosition::topic_offset(subject, 7, 0),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_order_over_three_partitions() {
    live::logs();
    warm().await;
    let group = group("keyed");
    let subject = helpers::unique_subject("conformance.keyed");
    live::ensure_topic(&subject, 3);
    let source = source_in(&group, 3, Commit::Tracked);
    message_shape::keyed_order(
        broker_in(&group),
        &subject,
        move |name: &str| source(name).lane_key(LaneKey::RecordKey),
        publisher,
        |key: &[u8], headers: &mut ruststream::HeaderMap| {
            headers.insert(PARTITION_KEY_HEADER, Bytes::from(key.to_vec())); // the native key
            None::<KafkaOptions>
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_options_pin_a_partition() {
    live::logs();
    warm().await;
    let group = group("options");
    let subject = helpers::unique_subject("conformance.options");
    live::ensure_topic(&subject, 1);
    message_shape::publish_options(
        broker_in(&group),
        &subject,
        source_in(&group, 1, Commit::Tracked),
        KafkaPublish::default(),
        OptionCases::new(0)
            .overrides(KafkaOptions::default().partition(0), 0)
            .refuses(KafkaOptions::default().partition(5)),
        |delivery: &ruststream_kafka::KafkaMessage| delivery.partition(),
    )
    .await;
}

// --- live against in process (the embedded cluster), feature `testing` ---

#[cfg(feature = "testing")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracked_settlement_answers_alike_live_and_in_process() {
    live::logs();
    warm().await;
    let group = group("settlement-alike-tracked");
    settlement::matches_in_process(
        broker_in(&group),
        source_in(&group, 1, Commit::Tracked),
        publisher,
        Duration::ZERO,
    )
    .await;
}

#[cfg(feature = "testing")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_settlement_answers_alike_live_and_in_process() {
    live::logs();
    warm().await;
    let group = group("settlement-alike-auto");
    settlement::matches_in_process(
        broker_in(&group),
        source_in(&group, 1, Commit::Auto),
        publisher,
        Duration::ZERO,
    )
    .await;
}

#[cfg(feature = "testing")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_published_before_subscribing_is_missed_alike() {
    live::logs();
    warm().await;
    ruststream::conformance::in_process::backlog_matches_server(
        broker_in(&group("backlog")),
        publisher,
    )
    .await;
}

#[cfg(feature = "testing")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_cluster_refuses_what_kafka_refuses() {
    use ruststream::conformance::in_process::{Refusal, refuses_like_the_server};
    live::logs();
    warm().await;
    let group = group("refusals");
    let sized = helpers::unique_subject("conformance.sized");
    live::ensure_topic(&sized, 1);
    refuses_like_the_server(
        broker_in(&group),
        publisher,
        [
            Refusal::Publish {
                name: "not a topic!".to_owned(),
            },
            Refusal::Subscription {
                source: KafkaTopic::new("not a topic!").group(group.clone()),
            },
            // librdkafka's message.max.bytes (1 000 000) less its 36 bytes of framing.
            Refusal::PayloadOver {
                name: sized,
                limit: 999_964,
            },
        ],
    )
    .await;
}
