//! Faults injected into the embedded cluster, met by this crate's client: each one is
//! recovered from the way a client recovers from it on a real cluster.
#![cfg(feature = "testing")]

use std::time::Duration;

use bytes::Bytes;
use ruststream_kafka::client::{
    Admin, Client, ClientConfig, Consumer, ConsumerConfig, ConsumerEvent, GroupProtocol,
    IsolationLevel, NewTopic, OffsetReset, OffsetSpec, PartitionReader, Producer, ProducerConfig,
    ProducerRecord, Subscription,
};
use ruststream_kafka::testing::faults::{ApiKey, ResponseError};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};

fn cluster() -> EmbeddedCluster {
    EmbeddedCluster::new(ClusterOptions {
        nodes: 3,
        ..ClusterOptions::default()
    })
}

async fn connect(cluster: &EmbeddedCluster) -> Client {
    Client::connect(ClientConfig::new(&cluster.bootstrap()))
        .await
        .expect("connects")
}

async fn topic(client: &Client, name: &str) {
    Admin::new(client.clone())
        .create_topics(&[NewTopic::new(name, 1, 1)], Duration::from_secs(10))
        .await
        .expect("created");
}

fn idempotent(client: &Client) -> Producer {
    Producer::new(
        client.clone(),
        ProducerConfig {
            enable_idempotence: true,
            linger: Duration::ZERO,
            ..ProducerConfig::default()
        },
    )
    .expect("producer")
}

async fn deliver(p: &Producer, topic: &str, value: &'static str) -> i64 {
    let record = ProducerRecord::new(topic, Bytes::from_static(value.as_bytes())).partition(0);
    let delivery = p.send(record).await.expect("sent");
    tokio::time::timeout(Duration::from_secs(30), delivery)
        .await
        .expect("in time")
        .expect("delivered")
        .offset
}

async fn values(client: &Client, topic: &str) -> Vec<String> {
    let end = Admin::new(client.clone())
        .list_offset(topic, 0, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
        .await
        .expect("end offset")
        .0;
    PartitionReader::new(client.clone(), topic, 0)
        .read_range(0, end, Duration::from_secs(30))
        .await
        .expect("read")
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_follows_a_moved_leader() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "moving").await;
    let p = idempotent(&client);
    assert_eq!(deliver(&p, "moving", "before").await, 0);
    let (leader, epoch) = client.leader_of("moving", 0).await.expect("leader");
    let to = (leader + 1) % 3;
    assert!(cluster.faults().move_leader("moving", 0, to));
    assert!(
        !cluster.faults().move_leader("moving", 9, to),
        "no such partition"
    );
    assert!(
        !cluster.faults().move_leader("moving", 0, 7),
        "no such node"
    );
    // The old leader answers NOT_LEADER_OR_FOLLOWER; the client refreshes and retries.
    assert_eq!(deliver(&p, "moving", "after").await, 1);
    client
        .refresh_metadata(&["moving"])
        .await
        .expect("metadata");
    assert_eq!(
        client.leader_of("moving", 0).await.expect("leader"),
        (to, epoch + 1)
    );
    assert_eq!(values(&client, "moving").await, ["before", "after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_produce_requests_are_retried_and_written_once() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "failing").await;
    let p = idempotent(&client);
    assert_eq!(deliver(&p, "failing", "first").await, 0);
    cluster
        .faults()
        .fail_next(ApiKey::Produce, 2, ResponseError::NotEnoughReplicas);
    assert_eq!(deliver(&p, "failing", "second").await, 1);
    assert!(p.retries() >= 2, "retries {}", p.retries());
    assert_eq!(values(&client, "failing").await, ["first", "second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fetch_is_retried() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "fetching").await;
    let p = idempotent(&client);
    deliver(&p, "fetching", "one").await;
    cluster
        .faults()
        .fail_next(ApiKey::Fetch, 1, ResponseError::NotLeaderOrFollower);
    assert_eq!(values(&client, "fetching").await, ["one"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_request_is_answered_late() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "slow").await;
    let admin = Admin::new(client.clone());
    let latest = || admin.list_offset("slow", 0, OffsetSpec::Latest, IsolationLevel::ReadCommitted);
    latest().await.expect("warm");
    cluster
        .faults()
        .delay_next(ApiKey::ListOffsets, 1, Duration::from_millis(400));
    let started = std::time::Instant::now();
    assert_eq!(latest().await.expect("answered").0, 0);
    assert!(started.elapsed() >= Duration::from_millis(400));
    let started = std::time::Instant::now();
    latest().await.expect("answered");
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "only the next one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_are_reopened_and_nothing_is_written_twice() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "dropping").await;
    let p = idempotent(&client);
    deliver(&p, "dropping", "a").await;
    for node in 0..3 {
        cluster.faults().drop_connections(node);
    }
    deliver(&p, "dropping", "b").await;
    // The next produce is lost with its connection: the producer sends it again.
    cluster.faults().drop_next_connection(ApiKey::Produce);
    deliver(&p, "dropping", "c").await;
    assert!(p.retries() >= 1, "retries {}", p.retries());
    assert_eq!(values(&client, "dropping").await, ["a", "b", "c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_init_producer_id_is_retried() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "init").await;
    cluster.faults().fail_next(
        ApiKey::InitProducerId,
        1,
        ResponseError::CoordinatorLoadInProgress,
    );
    let p = idempotent(&client);
    assert_eq!(deliver(&p, "init", "x").await, 0);
    assert_eq!(values(&client, "init").await, ["x"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_follow_a_moved_group_coordinator() {
    use ruststream_kafka::client::{OffsetToCommit, Offsets};
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "committed").await;
    let offsets = Offsets::new(client.clone(), "moving-group");
    let at = |offset| OffsetToCommit {
        topic: "committed".to_owned(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    };
    offsets.commit(None, &[at(3)]).await.expect("committed");
    // Every node in turn: the client meets NOT_COORDINATOR and finds the new one.
    for node in 0..3 {
        cluster.faults().move_coordinator("moving-group", node);
        offsets
            .commit(None, &[at(4 + i64::from(node))])
            .await
            .expect("committed");
        let fetched = offsets
            .fetch(&[("committed", 0)], true)
            .await
            .expect("fetched");
        assert_eq!(fetched[0].offset, 4 + i64::from(node));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_follows_its_moved_coordinator() {
    use ruststream_kafka::client::TransactionalProducer;
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "txn-moving").await;
    let config = ProducerConfig {
        linger: Duration::ZERO,
        ..ProducerConfig::transactional("mover")
    };
    let p = TransactionalProducer::new(client.clone(), config).expect("producer");
    p.init().await.expect("init");
    for (node, value) in [(0, "zero"), (1, "one"), (2, "two")] {
        cluster.faults().move_transaction_coordinator("mover", node);
        p.begin().expect("begin");
        let record = ProducerRecord::new("txn-moving", Bytes::from_static(value.as_bytes()));
        let delivery = p.send(record).await.expect("sent");
        delivery.await.expect("delivered");
        p.commit().await.expect("committed");
    }
    assert_eq!(values(&client, "txn-moving").await, ["zero", "one", "two"]);
}

/// Polls `consumer` until `done` says the events seen so far are enough.
async fn poll_until(
    consumer: &mut Consumer,
    seen: &mut Vec<String>,
    done: impl Fn(&[String]) -> bool,
) {
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while !done(seen) {
            match consumer.poll().await.expect("polls") {
                ConsumerEvent::Records(r) => {
                    for record in r.records {
                        let value = record.value.unwrap_or_default();
                        seen.push(format!("record {}", String::from_utf8_lossy(&value)));
                    }
                }
                ConsumerEvent::Assigned(ps) => seen.push(format!("assigned {}", ps.len())),
                ConsumerEvent::Revoked(r) => seen.push(format!("revoked {}", r.partitions.len())),
                ConsumerEvent::Lost(ps) => seen.push(format!("lost {}", ps.len())),
                ConsumerEvent::Error(e) => seen.push(format!("error {e}")),
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out; events so far: {seen:?}");
}

/// One member reads, its session is expired under it, and it comes back: the partitions it
/// held are lost (not revoked), it rejoins under a new membership, and reading goes on from
/// the committed offset.
async fn an_expired_session_is_lost_then_rejoined(protocol: GroupProtocol) {
    let cluster = cluster();
    let client = connect(&cluster).await;
    let name = format!("expiring-{protocol:?}");
    topic(&client, &name).await;
    let producer = idempotent(&client);
    deliver(&producer, &name, "before").await;

    let group = format!("{name}-group");
    let mut consumer = Consumer::new(
        client.clone(),
        ConsumerConfig {
            group_id: Some(group.clone()),
            group_protocol: protocol,
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    )
    .expect("consumer");
    consumer
        .subscribe(Subscription::Topics(vec![name.clone()]))
        .expect("subscribes");
    let mut seen = Vec::new();
    poll_until(&mut consumer, &mut seen, |s| {
        s.iter().any(|e| e == "record before")
    })
    .await;
    consumer.commit().await.expect("commits");
    let first = consumer.member().expect("a member");

    let members = cluster.faults().group_members(&group);
    assert_eq!(members, std::slice::from_ref(&first.member_id));
    assert!(cluster.faults().expire_session(&group, &first.member_id));
    assert!(!cluster.faults().expire_session(&group, "nobody"));
    assert!(cluster.faults().group_members(&group).is_empty());

    deliver(&producer, &name, "after").await;
    // The member learns of the expiry at its next heartbeat; until then it may go on
    // fetching, as on Kafka. After the rejoin it reads from the committed offset, so "after"
    // (never committed) comes again and "before" (committed) does not.
    let rejoined_and_read = |s: &[String]| {
        s.iter().position(|e| e == "lost 1").is_some_and(|lost| {
            s[lost..].iter().any(|e| e == "assigned 1")
                && s.last().is_some_and(|e| e == "record after")
        })
    };
    poll_until(&mut consumer, &mut seen, rejoined_and_read).await;
    let lost = seen.iter().position(|e| e == "lost 1").unwrap_or_default();
    assert!(
        !seen[lost..].iter().any(|e| e == "record before"),
        "the committed record is not read again: {seen:?}"
    );
    let second = consumer.member().expect("a member again");
    if protocol == GroupProtocol::Classic {
        // A classic member that lost its id joins under a new one.
        assert_ne!(second.member_id, first.member_id, "{seen:?}");
    } else {
        // A KIP-848 member keeps the id it made itself and rejoins at epoch 0, into a newer
        // group epoch.
        assert!(
            second.generation > first.generation,
            "{first:?} then {second:?}"
        );
    }
    assert_eq!(cluster.faults().group_members(&group), [second.member_id]);
    consumer.close().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_classic_session_is_lost_then_rejoined() {
    an_expired_session_is_lost_then_rejoined(GroupProtocol::Classic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_kip848_session_is_lost_then_rejoined() {
    an_expired_session_is_lost_then_rejoined(GroupProtocol::Consumer).await;
}
