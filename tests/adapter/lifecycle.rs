//! The broker's lifecycle against the cluster (reference 4.A): what `connect` refuses and how
//! fast, the clean shutdown, and handles that outlive the connection.

use crate::live;

use std::time::{Duration, Instant};

use ruststream::{
    Broker, ConnectedBroker, DescribeServer, IncomingMessage, OutgoingMessage, Publisher, Seekable,
    Seeker, Subscriber, SubscriptionSource,
};
use ruststream_kafka::{KafkaBroker, KafkaError, KafkaPosition, KafkaTopic, StartOffset};

fn connect_error(result: Result<impl std::fmt::Debug, KafkaError>) -> String {
    match result {
        Err(KafkaError::Connect(e)) => e.to_string(),
        other => panic!("expected a Connect error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_validates_the_producer_configuration() {
    live::logs();
    let text = connect_error(
        KafkaBroker::new([live::url()])
            .producer_config("acks", "sometimes")
            .connect()
            .await,
    );
    assert!(text.contains("acks"), "{text}");
    let text = connect_error(
        KafkaBroker::new([live::url()])
            .config("acks", "1")
            .producer_config("enable.idempotence", "true")
            .connect()
            .await,
    );
    assert!(text.contains("`acks` must be set to `all`"), "{text}");
    let err = KafkaBroker::new(Vec::<String>::new())
        .connect()
        .await
        .expect_err("no servers");
    assert!(
        matches!(err, KafkaError::InvalidOptions(ref m) if m.contains("at least one bootstrap server is required")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_fails_within_the_connect_timeout() {
    live::logs();
    let started = Instant::now();
    let err = KafkaBroker::new(["127.0.0.1:1"])
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, KafkaError::Connect(_)), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_reports_nothing_left() {
    live::logs();
    // No producer was ever opened.
    let closed = live::connect(live::broker())
        .await
        .shutdown()
        .await
        .expect("shutdown");
    assert_eq!(closed.unflushed_records(), 0);

    let topic = live::topic("shutdown", 1).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    // Racing first publishes share the one producer.
    let sends = (0..8).map(|i| {
        let publisher = publisher.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            publisher
                .publish(
                    OutgoingMessage::new(&topic, format!("r{i}").as_bytes()),
                    None,
                )
                .await
        })
    });
    for send in futures::future::join_all(sends).await {
        send.expect("task").expect("publish");
    }
    let closed = connected.shutdown().await.expect("shutdown");
    assert_eq!(closed.unflushed_records(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_aliasing_a_shut_down_connection_are_closed() {
    live::logs();
    let topic = live::topic("aliased", 1).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    let mut subscriber = KafkaTopic::new(&topic)
        .group(live::unique("aliased"))
        .start(StartOffset::Earliest)
        .subscribe(&connected)
        .await
        .expect("subscribe");
    live::send(&publisher, &topic, b"before").await;
    let seeker = subscriber.seeker();
    let held = {
        let mut stream = subscriber.stream();
        live::next(&mut stream).await
    };
    connected.shutdown().await.expect("shutdown");

    let err = publisher
        .publish(OutgoingMessage::new(&topic, b"after"), None)
        .await
        .expect_err("closed");
    assert!(
        matches!(err, KafkaError::Closed { topic: ref t } if *t == topic),
        "{err}"
    );
    let err = seeker
        .seek(KafkaPosition::earliest())
        .await
        .expect_err("closed");
    assert!(
        matches!(err, KafkaError::Closed { topic: ref t } if *t == topic),
        "{err}"
    );
    // A delivery outlives the connection: its body is still there.
    assert_eq!(held.payload(), b"before");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_description_names_hosts_without_credentials() {
    let broker = KafkaBroker::new(["SASL_SSL://alice:hunter2@kafka-1:9093", "kafka-2:9093"])
        .config("sasl.password", "hunter2");
    let spec = broker.describe_server();
    let printed = format!("{spec:?}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(printed.contains("kafka-1:9093,kafka-2:9093"), "{printed}");
    assert!(printed.contains("kafka"), "{printed}");
    let broker = KafkaBroker::new(["kafka-1:9093"]).config("sasl.password", "hunter2");
    let debug = format!(
        "{broker:?} {:?}",
        KafkaTopic::new("t").config("ssl.key.password", "hunter2")
    );
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("sasl.password") && debug.contains("ssl.key.password"));
}
