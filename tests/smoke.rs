//! First light: publish and consume through the adapter against the cluster under test.

mod live;

use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker, ConnectedBroker, HeaderMap, IncomingMessage, OutgoingMessage, Publisher, Subscriber,
    SubscriptionSource,
};
use ruststream_kafka::{Commit, KafkaBroker, KafkaPublish, KafkaTopic, StartOffset};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_published_is_delivered_and_acked() {
    live::logs();
    let topic = live::unique("smoke");
    live::create_topic(&topic, 3).await;
    let broker = KafkaBroker::new([live::url()])
        .default_group(live::unique("smoke-group"))
        .connect()
        .await
        .expect("connect");
    let mut subscriber = KafkaTopic::new(&topic)
        .start(StartOffset::Earliest)
        .commit(Commit::Tracked)
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let publisher = broker.publisher(KafkaPublish::default());
    let mut headers = HeaderMap::new();
    headers.insert("kafka-partition-key", "k1");
    headers.insert("trace", "abc");
    publisher
        .publish(
            OutgoingMessage::new(&topic, b"hello").with_headers(headers),
            None,
        )
        .await
        .expect("publish");
    let mut stream = subscriber.stream();
    let message = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("a delivery in time")
        .expect("the stream does not end")
        .expect("no error");
    assert_eq!(message.payload(), b"hello");
    assert_eq!(message.key(), Some(&b"k1"[..]));
    assert_eq!(message.headers().get_str("trace"), Some("abc"));
    assert_eq!(message.headers().get_str("kafka-partition-key"), Some("k1"));
    message.ack().await.expect("ack");
    drop(stream);
    drop(subscriber);
    let closed = broker.shutdown().await.expect("shutdown flushes");
    assert_eq!(closed.unflushed_records(), 0);
}
