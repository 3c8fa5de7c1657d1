//! Transactional publishers and per-partition lanes against the cluster under test (I1-I8,
//! A10).

use crate::live;

use std::time::Duration;

use ruststream::{
    Broker, ConnectedBroker, OutgoingMessage, PublishPolicy, Publisher, TransactionalPublisher,
};
use ruststream_kafka::client::IsolationLevel::{ReadCommitted, ReadUncommitted};
use ruststream_kafka::{
    ConnectedKafkaBroker, KafkaBroker, KafkaError, KafkaOptions, KafkaPublish,
    KafkaTransactionalPublisher, PartitionLanes,
};

async fn connect(broker: KafkaBroker) -> ConnectedKafkaBroker {
    broker.connect().await.expect("connect")
}

async fn send(
    p: &impl Publisher<Error = KafkaError, Options = KafkaOptions>,
    topic: &str,
    v: &str,
) {
    p.publish(OutgoingMessage::new(topic, v.as_bytes()), None)
        .await
        .unwrap_or_else(|e| panic!("publishing {v}: {e}"));
}

async fn paired(broker: &ConnectedKafkaBroker, id: &str) -> KafkaTransactionalPublisher {
    PublishPolicy::pair(KafkaPublish::default().transactional_id(id), broker)
        .await
        .unwrap_or_else(|e| panic!("pairing {id}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_refuses_a_configuration_librdkafka_refuses() {
    let broker =
        connect(KafkaBroker::new([live::url()]).producer_config("enable.idempotence", "false"))
            .await;
    let id = live::unique("refused");
    let err = broker
        .transactional_publisher(KafkaPublish::default().transactional_id(&id))
        .await
        .expect_err("idempotence off cannot transact");
    assert!(matches!(err, KafkaError::Publish(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("`transactional.id` requires `enable.idempotence=true`"),
        "{err}"
    );
    let paired = PublishPolicy::pair(KafkaPublish::default().transactional_id(&id), &broker).await;
    let err = paired.expect_err("pairing fails too");
    assert!(
        format!("{err} {err:?}").contains("enable.idempotence"),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misuse_is_refused_and_leaves_the_open_transaction_alone() {
    let topic = live::unique("txn-misuse");
    live::create_topic(&topic, 1).await;
    let broker = connect(KafkaBroker::new([live::url()])).await;
    let id = live::unique("misuse");
    let publisher = paired(&broker, &id).await;
    assert_eq!(publisher.id(), id);
    let printed = format!("{publisher:?}");
    assert!(
        printed.contains(&id) && printed.contains("timeout"),
        "{printed}"
    );

    let err = publisher.commit().await.expect_err("nothing open");
    assert!(
        matches!(&err, KafkaError::NoTransaction { id: i } if *i == id),
        "{err:?}"
    );
    let err = publisher.abort().await.expect_err("nothing open");
    assert!(
        matches!(&err, KafkaError::NoTransaction { id: i } if *i == id),
        "{err:?}"
    );

    publisher
        .begin_transaction()
        .await
        .expect("a transaction opens");
    send(&publisher, &topic, "kept").await;
    let err = publisher.begin_transaction().await.expect_err("busy");
    assert!(
        matches!(&err, KafkaError::TransactionBusy { id: i } if *i == id),
        "{err:?}"
    );
    let clone = publisher.clone();
    let err = clone
        .begin_transaction()
        .await
        .expect_err("a clone shares it");
    assert!(matches!(err, KafkaError::TransactionBusy { .. }), "{err:?}");
    send(&clone, &topic, "kept too").await;
    clone
        .commit()
        .await
        .expect("the refused begins left the transaction intact");
    assert_eq!(
        live::values(&topic, 0, ReadCommitted).await,
        ["kept", "kept too"]
    );
    let err = publisher.commit().await.expect_err("committed already");
    assert!(matches!(err, KafkaError::NoTransaction { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_is_invisible_until_it_commits_and_an_aborted_one_never_shows() {
    let topic = live::unique("txn-visibility");
    live::create_topic(&topic, 1).await;
    let broker = connect(KafkaBroker::new([live::url()])).await;
    let publisher = paired(&broker, &live::unique("visibility")).await;
    let plain = broker.publisher(KafkaPublish::default());

    // Outside a transaction the handle publishes through the shared plain producer.
    send(&publisher, &topic, "plain-1").await;
    assert_eq!(live::values(&topic, 0, ReadCommitted).await, ["plain-1"]);

    publisher
        .begin_transaction()
        .await
        .expect("a transaction opens");
    send(&publisher, &topic, "t1").await;
    send(&publisher, &topic, "t2").await;
    // Behind the open transaction on the same partition: held back from read_committed too.
    send(&plain, &topic, "plain-2").await;
    assert_eq!(live::values(&topic, 0, ReadCommitted).await, ["plain-1"]);
    assert_eq!(
        live::values(&topic, 0, ReadUncommitted).await,
        ["plain-1", "t1", "t2", "plain-2"]
    );
    publisher.commit().await.expect("commit");
    assert_eq!(
        live::values(&topic, 0, ReadCommitted).await,
        ["plain-1", "t1", "t2", "plain-2"]
    );

    publisher.begin_transaction().await.expect("begin again");
    send(&publisher, &topic, "aborted").await;
    publisher.abort().await.expect("abort");
    send(&publisher, &topic, "plain-3").await;
    assert_eq!(
        live::values(&topic, 0, ReadCommitted).await,
        ["plain-1", "t1", "t2", "plain-2", "plain-3"]
    );
    assert_eq!(
        live::values(&topic, 0, ReadUncommitted).await,
        ["plain-1", "t1", "t2", "plain-2", "aborted", "plain-3"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_pairing_of_an_id_fences_the_first() {
    let topic = live::unique("txn-fence");
    live::create_topic(&topic, 1).await;
    let broker = connect(KafkaBroker::new([live::url()])).await;
    let id = live::unique("fenced");
    let zombie = paired(&broker, &id).await;
    zombie.begin_transaction().await.expect("begin");
    send(&zombie, &topic, "zombie").await;

    let successor = paired(&broker, &id).await;
    let err = zombie.commit().await.expect_err("fenced");
    assert!(matches!(err, KafkaError::Publish(_)), "{err:?}");
    assert!(err.to_string().contains("fenced"), "{err}");
    let _ = zombie.abort().await;
    let err = zombie.begin_transaction().await.expect_err("still fenced");
    assert!(err.to_string().contains("fenced"), "{err}");

    successor.begin_transaction().await.expect("begin");
    send(&successor, &topic, "live").await;
    successor.commit().await.expect("commit");
    assert_eq!(live::values(&topic, 0, ReadCommitted).await, ["live"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_after_the_transaction_timed_out_fails_and_leaves_it_for_abort() {
    let topic = live::unique("txn-expired");
    live::create_topic(&topic, 1).await;
    let broker = connect(
        KafkaBroker::new([live::url()])
            .producer_config("transaction.timeout.ms", "2000")
            .producer_config("message.timeout.ms", "2000"),
    )
    .await;
    let publisher = paired(&broker, &live::unique("expired")).await;
    publisher
        .begin_transaction()
        .await
        .expect("a transaction opens");
    send(&publisher, &topic, "expired").await;
    // The broker looks for expired transactions every 10 s by default; its abort marker
    // moves the last stable offset past the record.
    let aborted = live::eventually(Duration::from_secs(40), || async {
        live::read_partition(&topic, 0, ReadCommitted)
            .await
            .is_empty()
            && live::read_partition(&topic, 0, ReadUncommitted).await.len() == 1
            && broker_aborted(&topic).await
    })
    .await;
    assert!(aborted, "the broker did not abort the transaction");
    let err = publisher.commit().await.expect_err("expired");
    assert!(matches!(err, KafkaError::Publish(_)), "{err:?}");
    let again = publisher
        .commit()
        .await
        .expect_err("still open, still failing");
    assert!(matches!(again, KafkaError::Publish(_)), "{again:?}");
    let _ = publisher.abort().await;
    let err = publisher.commit().await.expect_err("abort closed it");
    assert!(matches!(err, KafkaError::NoTransaction { .. }), "{err:?}");
    assert!(live::values(&topic, 0, ReadCommitted).await.is_empty());
}

/// Whether the transaction's abort marker is written: the stable offset passed the record.
async fn broker_aborted(topic: &str) -> bool {
    use ruststream_kafka::client::{Admin, OffsetSpec};
    let client = live::admin_client().await;
    let stable = Admin::new(client.clone())
        .list_offset(topic, 0, OffsetSpec::Latest, ReadCommitted)
        .await;
    client.close();
    stable.is_ok_and(|(offset, _)| offset > 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_lanes_transact_independently_and_are_created_once() {
    let topic = live::unique("txn-lanes");
    live::create_topic(&topic, 1).await;
    let broker = connect(KafkaBroker::new([live::url()])).await;
    let base = live::unique("lanes");
    let lanes = PublishPolicy::pair(
        KafkaPublish::default()
            .transactional_id(&base)
            .transaction_timeout(Duration::from_secs(20))
            .per_partition(),
        &broker,
    )
    .await
    .expect("pairing is immediate");
    assert!(format!("{lanes:?}").contains(&base));

    // Racing first uses share one producer: a begin through one is busy through the other.
    let (a, b) = tokio::join!(lanes.for_partition(0), lanes.for_partition(0));
    let (a, b) = (a.expect("lane 0"), b.expect("lane 0 again"));
    assert_eq!(a.id(), format!("{base}-p0"));
    a.begin_transaction().await.expect("begin");
    let err = b.begin_transaction().await.expect_err("the same handle");
    assert!(matches!(err, KafkaError::TransactionBusy { .. }), "{err:?}");

    let copy = lanes.clone();
    let one = PartitionLanes::for_partition(&copy, 1)
        .await
        .expect("lane 1");
    assert_eq!(one.id(), format!("{base}-p1"));
    one.begin_transaction()
        .await
        .expect("an independent transaction");
    send(&a, &topic, "from lane 0").await;
    send(&one, &topic, "from lane 1").await;
    one.commit().await.expect("lane 1 commits first");
    a.commit().await.expect("lane 0 commits second");
    let mut seen = live::values(&topic, 0, ReadCommitted).await;
    seen.sort();
    assert_eq!(seen, ["from lane 0", "from lane 1"]);
    let again = lanes.for_partition(0).await.expect("cached");
    again
        .begin_transaction()
        .await
        .expect("cached handle works");
    again.abort().await.expect("abort");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_fail_closed_after_shutdown() {
    let topic = live::unique("txn-closed");
    live::create_topic(&topic, 1).await;
    let broker = connect(KafkaBroker::new([live::url()])).await;
    let id = live::unique("closed");
    let publisher = paired(&broker, &id).await;
    let lanes = PublishPolicy::pair(
        KafkaPublish::default()
            .transactional_id(&id)
            .per_partition(),
        &broker,
    )
    .await
    .expect("lanes");
    publisher
        .begin_transaction()
        .await
        .expect("a transaction opens");
    broker.shutdown().await.expect("shutdown");

    let closed = |err: KafkaError, what: &str| match err {
        KafkaError::Closed { topic } => assert_eq!(topic, what),
        other => panic!("expected Closed {{ {what} }}, got {other:?}"),
    };
    closed(
        publisher
            .publish(OutgoingMessage::new(&topic, b"late"), None)
            .await
            .expect_err("closed"),
        &topic,
    );
    closed(
        publisher.begin_transaction().await.expect_err("closed"),
        &id,
    );
    closed(publisher.commit().await.expect_err("closed"), &id);
    closed(publisher.abort().await.expect_err("closed"), &id);
    closed(
        lanes.for_partition(2).await.expect_err("closed"),
        &format!("{id}-p2"),
    );
}
