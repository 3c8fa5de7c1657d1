//! Faults injected into the embedded cluster, met by this crate's client: each one is
//! recovered from the way a client recovers from it on a real cluster.
#![cfg(feature = "testing")]

use std::time::Duration;

use bytes::Bytes;
use ruststream::{IncomingMessage, Subscriber};
use ruststream_kafka::client::{
    Admin, CORRUPT_REFETCHES, Client, ClientConfig, Consumer, ConsumerConfig, ConsumerEvent,
    CorruptBatch, GroupProtocol, IsolationLevel, NewTopic, OffsetReset, OffsetSpec,
    PartitionReader, Producer, ProducerConfig, ProducerRecord, StartAt, Subscription,
    TopicPartition,
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

/// A Produce answer later than the request's timeout: the sender gives up on it (closing the
/// connection, as a request's timeout does), sends the batch again on a new connection, and
/// the record is written once; the producer goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_produce_answered_too_late_is_timed_out_and_sent_again_once() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "late").await;
    let p = Producer::new(
        client.clone(),
        ProducerConfig {
            enable_idempotence: true,
            linger: Duration::ZERO,
            // The client waits this and 500 ms more for an answer.
            request_timeout: Duration::from_millis(500),
            ..ProducerConfig::default()
        },
    )
    .expect("producer");
    assert_eq!(deliver(&p, "late", "first").await, 0);
    cluster
        .faults()
        .delay_next(ApiKey::Produce, 1, Duration::from_secs(3));
    let started = std::time::Instant::now();
    assert_eq!(deliver(&p, "late", "second").await, 1);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1),
        "the answer was waited for until its deadline: {took:?}"
    );
    assert!(
        took < Duration::from_secs(3),
        "the late answer was not waited for: {took:?}"
    );
    assert!(p.retries() >= 1, "retries {}", p.retries());
    assert_eq!(deliver(&p, "late", "third").await, 2);
    // The late request itself reaches the log's owner after its delay: it writes nothing.
    tokio::time::sleep(
        Duration::from_secs(3).saturating_sub(started.elapsed()) + Duration::from_millis(500),
    )
    .await;
    assert_eq!(values(&client, "late").await, ["first", "second", "third"]);
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

/// A consumer of partition 0 of `topic` from its start, checking CRCs, with `policy`.
fn crc_checking(client: &Client, topic: &str, policy: CorruptBatch) -> Consumer {
    let mut consumer = Consumer::new(
        client.clone(),
        ConsumerConfig {
            check_crcs: true,
            corrupt_batches: policy,
            fetch_error_backoff: Duration::from_millis(50),
            ..ConsumerConfig::default()
        },
    )
    .expect("consumer");
    consumer
        .assign(&[(TopicPartition::new(topic, 0), StartAt::Earliest)])
        .expect("assigned");
    consumer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_corrupted_on_the_way_is_fetched_again_and_read() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "bitflip").await;
    let producer = idempotent(&client);
    deliver(&producer, "bitflip", "one").await;
    cluster
        .faults()
        .corrupt_fetched("bitflip", 0, CORRUPT_REFETCHES as usize);
    let mut consumer = crc_checking(&client, "bitflip", CorruptBatch::Hold);
    let mut seen = Vec::new();
    poll_until(&mut consumer, &mut seen, |s| {
        s.iter().any(|e| e == "record one")
    })
    .await;
    assert_eq!(seen, ["record one"], "no error for a fault a refetch heals");
    consumer.close().await.expect("closes");
}

/// A batch that stays unreadable: reported once, then held at (nothing after it is read,
/// until a seek past it) or skipped past, per the policy. Before, it was reported at every
/// fetch and fetched again forever.
async fn an_unreadable_batch(policy: CorruptBatch) {
    let cluster = cluster();
    let client = connect(&cluster).await;
    let name = format!("rotten-{policy:?}");
    topic(&client, &name).await;
    let producer = idempotent(&client);
    deliver(&producer, &name, "good").await;
    let mut consumer = crc_checking(&client, &name, policy);
    let mut seen = Vec::new();
    poll_until(&mut consumer, &mut seen, |s| {
        s.iter().any(|e| e == "record good")
    })
    .await;

    cluster.faults().corrupt_fetched(&name, 0, usize::MAX);
    let bad = deliver(&producer, &name, "bad").await;
    poll_until(&mut consumer, &mut seen, |s| {
        s.iter().any(|e| e.starts_with("error"))
    })
    .await;
    let error = seen.last().cloned().unwrap_or_default();
    assert!(error.contains(&format!("batch at offset {bad}")), "{error}");
    // Only the corrupted answers stop now: what is written next is fetched clean.
    cluster.faults().corrupt_fetched(&name, 0, 0);
    let tp = TopicPartition::new(&name, 0);
    match policy {
        CorruptBatch::Hold => {
            assert!(error.contains("held"), "{error}");
            // Held: nothing further comes, no error again, though more is written.
            deliver(&producer, &name, "after").await;
            let quiet = tokio::time::timeout(Duration::from_secs(2), consumer.poll()).await;
            assert!(quiet.is_err(), "held, yet: {quiet:?}");
            assert_eq!(consumer.position(&tp), Some(bad));
            // A seek past the batch reads on.
            consumer
                .seek(&tp, StartAt::Offset(bad + 1))
                .await
                .expect("seeks");
        }
        CorruptBatch::Skip => {
            assert!(error.contains("skipped"), "{error}");
            deliver(&producer, &name, "after").await;
        }
    }
    poll_until(&mut consumer, &mut seen, |s| {
        s.iter().any(|e| e == "record after")
    })
    .await;
    let errors = seen.iter().filter(|e| e.starts_with("error")).count();
    assert_eq!(errors, 1, "reported once: {seen:?}");
    assert!(!seen.iter().any(|e| e == "record bad"), "{seen:?}");
    consumer.close().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_batch_holds_its_partition_until_a_seek() {
    an_unreadable_batch(CorruptBatch::Hold).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_batch_is_skipped_when_asked() {
    an_unreadable_batch(CorruptBatch::Skip).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_refused_an_id_fails_what_it_holds_then_starts_over() {
    let cluster = cluster();
    let client = connect(&cluster).await;
    topic(&client, "refused").await;
    cluster.faults().fail_next(
        ApiKey::InitProducerId,
        1,
        ResponseError::ClusterAuthorizationFailed,
    );
    let p = idempotent(&client);
    let first = ProducerRecord::new("refused", Bytes::from_static(b"first")).partition(0);
    // Refused at once when the refusal came first, else failed with its delivery.
    let error = match p.send(first).await {
        Err(refused) => refused.to_string(),
        Ok(delivery) => tokio::time::timeout(Duration::from_secs(30), delivery)
            .await
            .expect("in time")
            .expect_err("no producer id, no delivery")
            .to_string(),
    };
    assert!(error.contains("producer id"), "{error}");
    // Before, the producer stayed failed until the process restarted; now it starts over
    // with a new producer id after a short wait, and what is sent then is delivered.
    let started_over = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let record = ProducerRecord::new("refused", Bytes::from_static(b"later")).partition(0);
            match p.send(record).await {
                Ok(delivery) => match delivery.await {
                    Ok(metadata) => return metadata.offset,
                    Err(e) => panic!("a record accepted after the restart failed: {e}"),
                },
                Err(e) => {
                    assert!(e.to_string().contains("producer id"), "{e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
    .await
    .expect("the producer starts over within seconds");
    assert_eq!(started_over, 0, "the failed record was not written");
    assert_eq!(values(&client, "refused").await, ["later"]);
}

/// An exactly-once pipeline on the embedded cluster: `{name}-in` feeds a
/// `Commit::Transactional` subscription, replies go to `{name}-out`, and every transaction call
/// gives up after 2 s (so that a delayed coordinator answer outlasts it).
mod eos {
    use std::time::Duration;

    use ruststream::{
        Broker, HeaderMap, IncomingMessage, OutgoingMessage, PublishPolicy, Publisher,
        SubscriptionSource,
    };
    use ruststream_kafka::testing::EmbeddedCluster;
    use ruststream_kafka::{
        Commit, ConnectedKafkaBroker, EOS_SOURCE_HEADER, EosPipeline, KafkaBroker, KafkaEosPublish,
        KafkaError, KafkaMessage, KafkaPublish, KafkaSubscriber, KafkaTopic, StartOffset,
    };

    pub struct Rig {
        /// Held: the connection lives as long as the rig.
        pub _broker: ConnectedKafkaBroker,
        pub pipeline: EosPipeline,
        pub subscriber: KafkaSubscriber,
        pub output: String,
    }

    /// The topics `{name}-in` (holding one input, `a`) and `{name}-out`, and a connection
    /// whose default group is `name`: (connection, input topic, output topic).
    pub async fn with_input(
        cluster: &EmbeddedCluster,
        name: &str,
    ) -> (ConnectedKafkaBroker, String, String) {
        let client = super::connect(cluster).await;
        let (input, output) = (format!("{name}-in"), format!("{name}-out"));
        super::topic(&client, &input).await;
        super::topic(&client, &output).await;
        let broker = KafkaBroker::new([cluster.bootstrap()])
            .default_group(name)
            .connect()
            .await
            .expect("connect");
        broker
            .publisher(KafkaPublish::default())
            .publish(OutgoingMessage::new(&input, b"a"), None)
            .await
            .expect("input");
        (broker, input, output)
    }

    pub async fn rig(cluster: &EmbeddedCluster, name: &str) -> Rig {
        let (broker, input, output) = with_input(cluster, name).await;
        let pipeline = PublishPolicy::pair(
            KafkaEosPublish::new(name).transaction_timeout(Duration::from_secs(2)),
            &broker,
        )
        .await
        .expect("pairing");
        let subscriber = KafkaTopic::new(&input)
            .start(StartOffset::Earliest)
            .commit(Commit::Transactional(name.to_owned()))
            .subscribe(&broker)
            .await
            .expect("subscribe");
        Rig {
            _broker: broker,
            pipeline,
            subscriber,
            output,
        }
    }

    pub async fn next(
        stream: &mut (impl futures::Stream<Item = Result<KafkaMessage, KafkaError>> + Unpin),
        within: Duration,
    ) -> Option<KafkaMessage> {
        let next = tokio::time::timeout(within, futures::StreamExt::next(stream)).await;
        next.ok()
            .map(|item| item.expect("the stream goes on").expect("no error"))
    }

    /// What a handler mounted with `EosReplies` sends: the reply with the delivery's source.
    pub async fn reply(rig: &Rig, message: &KafkaMessage) {
        let mut headers = HeaderMap::new();
        let source = message
            .headers()
            .get_shared(EOS_SOURCE_HEADER)
            .expect("a Commit::Transactional delivery carries its source");
        headers.insert(EOS_SOURCE_HEADER, source);
        let mut body = message.payload().to_vec();
        body.push(b'\'');
        Publisher::publish(
            &rig.pipeline,
            OutgoingMessage::new(&rig.output, &body).with_headers(headers),
            None,
        )
        .await
        .expect("the reply is published");
    }

    /// Waits until the output's committed records are `expected`.
    pub async fn committed_output(cluster: &EmbeddedCluster, rig: &Rig, expected: &[&str]) {
        let client = super::connect(cluster).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let committed = super::values(&client, &rig.output).await;
            if committed == expected {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "read_committed output {committed:?}, expected {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The first delivery's reply is written, `arm` plans a fault of the coordinator, and the
    /// delivery is handed back, so the window cannot settle and aborts: the replay must come,
    /// and its window must commit the reply once.
    pub async fn abort_then_replay(
        cluster: &EmbeddedCluster,
        rig: &mut Rig,
        arm: impl FnOnce(&ruststream_kafka::testing::faults::Faults),
    ) {
        use ruststream::Subscriber;
        let mut stream = rig.subscriber.stream();
        let first = next(&mut stream, Duration::from_secs(30))
            .await
            .expect("a delivery");
        drop(stream);
        reply(rig, &first).await;
        arm(&cluster.faults());
        first.nack(true).await.expect("nack");
        let mut stream = rig.subscriber.stream();
        let replayed = next(&mut stream, Duration::from_secs(30))
            .await
            .expect("the replay");
        drop(stream);
        assert_eq!(replayed.payload(), b"a", "the aborted window replays");
        reply(rig, &replayed).await;
        replayed.ack().await.expect("ack");
        committed_output(cluster, rig, &["a'"]).await;
    }
}

/// An exactly-once window that cannot settle is aborted, and the coordinator answers that
/// abort's `EndTxn` only after the call's deadline: the abort failed undecided, the producer is
/// still inside the transaction. The pipeline aborts again until the abort finishes, so the
/// replay's window begins and commits. Before, the pipeline gave up after one try and refused
/// every later publish ("a transaction is already open") without another word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exactly_once_window_whose_abort_times_out_is_aborted_again() {
    let cluster = cluster();
    let mut rig = eos::rig(&cluster, "eos-abort").await;
    // The abort's answer comes after the 2 s deadline.
    eos::abort_then_replay(&cluster, &mut rig, |faults| {
        faults.delay_next(ApiKey::EndTxn, 1, Duration::from_secs(4));
    })
    .await;
}

/// The coordinator answers a window's commit only after the call's deadline, so the commit's
/// outcome is undecided. The pipeline commits again, which settles it: the output is
/// committed once and the input is not replayed. Before, the pipeline aborted the window,
/// which finished the commit that had landed, and then replayed the input anyway: its output
/// was committed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exactly_once_commit_that_times_out_is_committed_again_not_replayed() {
    let cluster = cluster();
    let mut rig = eos::rig(&cluster, "eos-commit").await;
    let mut stream = rig.subscriber.stream();
    let first = eos::next(&mut stream, Duration::from_secs(30))
        .await
        .expect("a delivery");
    drop(stream);
    cluster
        .faults()
        .delay_next(ApiKey::EndTxn, 1, Duration::from_secs(4));
    eos::reply(&rig, &first).await;
    first.ack().await.expect("ack");
    eos::committed_output(&cluster, &rig, &["a'"]).await;
    let mut stream = rig.subscriber.stream();
    let again = eos::next(&mut stream, Duration::from_secs(8)).await;
    assert!(
        again.is_none(),
        "the committed input was delivered again: {:?}",
        again.map(|m| m.offset())
    );
    drop(stream);
    eos::committed_output(&cluster, &rig, &["a'"]).await;
}

/// A window's abort is answered `PRODUCER_FENCED`: the producer failed for good. The pipeline
/// initializes it again (a new epoch) and goes on: the replay's window commits. Before, every
/// later publish failed with "fenced" until the process restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exactly_once_pipeline_whose_producer_is_fenced_initializes_it_again() {
    let cluster = cluster();
    let mut rig = eos::rig(&cluster, "eos-fenced").await;
    eos::abort_then_replay(&cluster, &mut rig, |faults| {
        faults.fail_next(ApiKey::EndTxn, 1, ResponseError::ProducerFenced);
    })
    .await;
}

/// An earlier instance of an exactly-once pipeline died inside a transaction that carried
/// offsets: a `read_committed` reader of its group gets `UNSTABLE_OFFSET_COMMIT` for them
/// until that transaction ends. The runtime opens an `Out` slot's subscription before it pairs
/// the pipeline, whose `InitProducerId` would end it, so the subscription fences the id itself:
/// it opens at once, its first delivery is the input the dead instance never committed, and the
/// dead instance's output is never visible. Before, it opened only when the coordinator aborted
/// the transaction for its timeout (60 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_subscription_fences_an_earlier_instance_before_it_reads_offsets() {
    use ruststream::{PublishPolicy, SubscriptionSource};
    use ruststream_kafka::client::TransactionalProducer;
    use ruststream_kafka::client::consumer::{GroupMetadata, OffsetToCommit};
    use ruststream_kafka::{Commit, KafkaEosPublish, KafkaTopic, StartOffset};
    let cluster = cluster();
    let client = connect(&cluster).await;
    let name = "eos-earlier";
    let (broker, input, output) = eos::with_input(&cluster, name).await;

    // The earlier instance: its output and the input's offset in a transaction left open.
    let earlier = TransactionalProducer::new(
        client.clone(),
        ProducerConfig {
            linger: Duration::ZERO,
            ..ProducerConfig::transactional(name)
        },
    )
    .expect("producer");
    earlier.init().await.expect("init");
    earlier.begin().expect("begin");
    let record = ProducerRecord::new(output.clone(), Bytes::from_static(b"earlier")).partition(0);
    let delivery = earlier.send(record).await.expect("sent");
    delivery.await.expect("delivered");
    let offsets = [OffsetToCommit {
        topic: input.clone(),
        partition: 0,
        offset: 1,
        leader_epoch: -1,
        metadata: None,
    }];
    let group = GroupMetadata {
        group_id: name.to_owned(),
        member: None,
    };
    earlier
        .send_offsets(&offsets, &group)
        .await
        .expect("offsets in the transaction");
    // Closed without an end: the transaction stays open, as after a SIGKILL.
    let _ = earlier.close(Duration::ZERO).await;

    // The order of an `Out` slot: the subscription first, the pipeline second.
    let subscribing = KafkaTopic::new(&input)
        .start(StartOffset::Earliest)
        .commit(Commit::Transactional(name.to_owned()))
        .subscribe(&broker);
    let mut subscriber = tokio::time::timeout(Duration::from_secs(10), subscribing)
        .await
        .expect("the subscription opens without waiting for the earlier transaction's timeout")
        .expect("subscribe");
    let pipeline = PublishPolicy::pair(KafkaEosPublish::new(name), &broker)
        .await
        .expect("pairing");
    let mut stream = subscriber.stream();
    let first = eos::next(&mut stream, Duration::from_secs(10))
        .await
        .expect("a delivery");
    assert_eq!(first.payload(), b"a", "the uncommitted input is delivered");
    drop(stream);
    drop(pipeline);
    assert!(
        values(&client, &output).await.is_empty(),
        "the earlier instance's output stays invisible (its transaction was aborted)"
    );
}
