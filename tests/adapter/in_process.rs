//! The `RustStream` conformance suites in process: the production broker connected to an
//! embedded cluster (`InProcess`), driven through the same descriptors and publish policies
//! as the live suites in `conformance.rs`.
#![cfg(feature = "testing")]

use std::time::Duration;

use ruststream::conformance::harness::{self, InProcessBroker};
use ruststream::conformance::message_shape::OptionCases;
use ruststream::conformance::settlement::{self, Answer};
use ruststream::conformance::{capabilities, helpers, message_shape};
use ruststream::{Bytes, Name};
use ruststream_kafka::{
    Commit, ConnectedKafkaBroker, KafkaBroker, KafkaOptions, KafkaPosition, KafkaPublish,
    KafkaPublisher, KafkaTopic, LaneKey, PARTITION_KEY_HEADER, StartOffset,
};

/// The production broker a service would build: never dialled in process.
fn service_broker() -> KafkaBroker {
    KafkaBroker::new(["kafka.internal:9092"]).default_group("in-process")
}

fn in_process() -> InProcessBroker<KafkaBroker> {
    InProcessBroker::new(service_broker())
}

fn source(commit: Commit) -> impl Fn(&str) -> KafkaTopic {
    move |name: &str| {
        KafkaTopic::new(name)
            .group("conformance")
            .start(StartOffset::Earliest)
            .commit(commit.clone())
    }
}

fn publisher(connected: &ConnectedKafkaBroker) -> KafkaPublisher {
    connected.publisher(KafkaPublish::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routing_suite() {
    harness::run_suite(service_broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle() {
    harness::lifecycle(in_process, source(Commit::Tracked), publisher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redelivery_address_of_a_topic() {
    harness::redelivery_address(in_process, source(Commit::Tracked), publisher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redelivery_address_of_a_bare_name() {
    harness::redelivery_address(
        in_process,
        |name: &str| Name::new(name.to_owned()),
        publisher,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracked_settlement() {
    let answers = settlement::suite(
        in_process,
        source(Commit::Tracked),
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
    let answers =
        settlement::suite(in_process, source(Commit::Auto), publisher, Duration::ZERO).await;
    assert_eq!(answers.ack, Answer::Settled);
    assert_eq!(answers.reject, Answer::Settled);
    assert_eq!(answers.requeue, Answer::Unsupported);
    assert!(!answers.delay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches() {
    capabilities::batches(in_process, source(Commit::Tracked), publisher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_seeking() {
    capabilities::batch_seeking(in_process, source(Commit::Tracked), publisher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeking() {
    capabilities::seeking(in_process, source(Commit::Tracked), publisher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeking_an_unknown_partition() {
    capabilities::seeking_unknown_position(
        in_process,
        source(Commit::Tracked),
        publisher,
        |subject: &str| KafkaPosition::topic_offset(subject, 7, 0),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_order() {
    let subject = helpers::unique_subject("conformance.keyed");
    message_shape::keyed_order(
        in_process,
        &subject,
        |name: &str| source(Commit::Tracked)(name).lane_key(LaneKey::RecordKey),
        publisher,
        |key: &[u8], headers: &mut ruststream::HeaderMap| {
            headers.insert(PARTITION_KEY_HEADER, Bytes::from(key.to_vec())); // the native key
            None::<KafkaOptions>
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_options() {
    let subject = helpers::unique_subject("conformance.options");
    message_shape::publish_options(
        in_process,
        &subject,
        source(Commit::Tracked),
        KafkaPublish::default(),
        OptionCases::new(0)
            .overrides(KafkaOptions::default().partition(0), 0)
            .refuses(KafkaOptions::default().partition(5)),
        |delivery: &ruststream_kafka::KafkaMessage| delivery.partition(),
    )
    .await;
}
