//! Smoke test of the in-process connection: publish, read back through partitions.
#![cfg(feature = "testing")]

use std::time::Duration;

use futures::StreamExt;
use ruststream::testing::{InProcess, TestableBroker};
use ruststream::{IncomingMessage, OutgoingMessage, Publisher, Subscriber, SubscriptionSource};
use ruststream_kafka::{KafkaBroker, KafkaPartitions, KafkaPublish, StartOffset};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_record_is_read_back_in_process() {
    let connected = KafkaBroker::new(["kafka.internal:9092"])
        .connect_in_process()
        .await
        .expect("connects in process");
    connected
        .publisher(KafkaPublish::default())
        .publish(OutgoingMessage::new("smoke", b"one".as_slice()), None)
        .await
        .expect("publish");
    connected.inject(OutgoingMessage::new("smoke", b"two".as_slice()));
    let published = connected.published("smoke");
    assert_eq!(published.len(), 2);
    let mut subscriber = KafkaPartitions::new("smoke", [0])
        .start(StartOffset::Earliest)
        .subscribe(&connected)
        .await
        .expect("subscribe");
    let mut stream = subscriber.stream();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("in time")
        .expect("item")
        .expect("message");
    assert_eq!(first.payload(), b"one");
    first.ack().await.expect("ack");
}
