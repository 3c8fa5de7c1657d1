//! Promises of the adapter that a healthy broker never provokes, provoked with the embedded
//! cluster's faults: a shutdown whose flush outlasts `flush_timeout`, a manual assignment whose
//! start positions cannot be read, and consumer errors that the stream yields and then goes on.
#![cfg(feature = "testing")]

use std::time::Duration;

use futures::StreamExt;
use ruststream::{Broker, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher};
use ruststream::{Subscriber, SubscriptionSource};
use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};
use ruststream_kafka::testing::faults::{ApiKey, ResponseError};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
use ruststream_kafka::{KafkaBroker, KafkaError, KafkaPartitions, KafkaPublish, StartOffset};

async fn cluster_with(topic: &str, partitions: i32) -> EmbeddedCluster {
    let cluster = EmbeddedCluster::new(ClusterOptions::default());
    let client = Client::connect(ClientConfig::new(&cluster.bootstrap()))
        .await
        .expect("connects");
    Admin::new(client.clone())
        .create_topics(
            &[NewTopic::new(topic, partitions, 1)],
            Duration::from_secs(10),
        )
        .await
        .expect("created");
    client.close();
    cluster
}

/// A8: the flush at shutdown is bounded by `flush_timeout`, and running out of it is a
/// `Publish` error, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_that_outlasts_flush_timeout_fails_the_shutdown() {
    let cluster = cluster_with("slow-acks", 1).await;
    let broker = KafkaBroker::new([cluster.bootstrap()])
        .flush_timeout(Duration::from_millis(300))
        .connect()
        .await
        .expect("connects");
    let publisher = broker.publisher(KafkaPublish::default());
    publisher
        .publish(OutgoingMessage::new("slow-acks", b"first".as_slice()), None)
        .await
        .expect("the first record is acknowledged");
    // The broker now sits on the next produce far longer than the flush may wait.
    cluster
        .faults()
        .delay_next(ApiKey::Produce, 1, Duration::from_secs(20));
    let waiting = tokio::spawn(async move {
        publisher
            .publish(
                OutgoingMessage::new("slow-acks", b"second".as_slice()),
                None,
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = tokio::time::Instant::now();
    let refused = broker.shutdown().await;
    assert!(
        matches!(refused, Err(KafkaError::Publish(_))),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the flush gave up at its timeout"
    );
    waiting.abort();
}

/// B10c: a manual assignment whose start positions cannot be read fails `subscribe` with the
/// reason, once the assignment timeout is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_start_positions_fail_the_subscribe() {
    let cluster = cluster_with("hidden-ends", 1).await;
    let broker = KafkaBroker::new([cluster.bootstrap()])
        .assignment_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connects");
    cluster.faults().fail_next(
        ApiKey::ListOffsets,
        10_000,
        ResponseError::TopicAuthorizationFailed,
    );
    let refused = KafkaPartitions::new("hidden-ends", [0])
        .start(StartOffset::Latest)
        .subscribe(&broker)
        .await;
    let Err(KafkaError::Subscribe(reason)) = refused else {
        panic!("expected a Subscribe error, got {:?}", refused.map(|_| ()));
    };
    assert!(reason.to_string().contains("start positions"), "{reason}");
    cluster.faults().clear();
    broker.shutdown().await.expect("shuts down");
}

/// B17: a consumer error is an item of the stream (`Consume`), and the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_error_is_yielded_and_the_stream_goes_on() {
    let topic = "refused-once";
    let cluster = cluster_with(topic, 1).await;
    let broker = KafkaBroker::new([cluster.bootstrap()])
        .connect()
        .await
        .expect("connects");
    broker
        .publisher(KafkaPublish::default())
        .publish(OutgoingMessage::new(topic, b"still here".as_slice()), None)
        .await
        .expect("published");
    // The first fetch is refused; the consumer reports it and tries again after its backoff.
    cluster
        .faults()
        .fail_next(ApiKey::Fetch, 1, ResponseError::TopicAuthorizationFailed);
    let mut subscriber = KafkaPartitions::new(topic, [0])
        .start(StartOffset::Earliest)
        .subscribe(&broker)
        .await
        .expect("subscribes");
    let mut stream = subscriber.stream();
    let mut errors = Vec::new();
    let delivered = loop {
        let item = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("the stream goes on")
            .expect("the stream never ends by itself");
        match item {
            Ok(message) => break message,
            Err(error) => errors.push(error),
        }
    };
    assert_eq!(delivered.payload(), b"still here");
    delivered.ack().await.expect("ack");
    assert!(
        !errors.is_empty() && errors.iter().all(|e| matches!(e, KafkaError::Consume(_))),
        "{errors:?}"
    );
    drop(stream);
    drop(subscriber);
    broker.shutdown().await.expect("shuts down");
}
