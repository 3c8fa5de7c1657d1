//! The exactly-once pipeline against the cluster under test (J2-J9): `Commit::Transactional`
//! subscriptions feeding a `KafkaEosPublish` pipeline.

use crate::live;

use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker, HeaderMap, IncomingMessage, OutgoingMessage, PublishPolicy, Publisher, Seekable,
    Seeker, Subscriber, SubscriptionSource,
};
use ruststream_kafka::client::IsolationLevel::{ReadCommitted, ReadUncommitted};
use ruststream_kafka::client::{Admin, OffsetSpec};
use ruststream_kafka::{
    Commit, ConnectedKafkaBroker, EOS_SOURCE_HEADER, EosPipeline, KafkaBroker, KafkaEosPublish,
    KafkaError, KafkaMessage, KafkaPosition, KafkaPublish, KafkaSubscriber, KafkaTopic,
    SourceOffset, StartOffset,
};

struct Rig {
    broker: ConnectedKafkaBroker,
    group: String,
    input: String,
    output: String,
    pipeline: EosPipeline,
    subscriber: KafkaSubscriber,
}

/// A pipeline and a `Commit::Transactional` subscription of its id, with `inputs` on the
/// input topic.
async fn rig(policy: impl Fn(String) -> KafkaEosPublish, inputs: &[&str]) -> Rig {
    live::logs();
    let input = live::unique("eos-in");
    let output = live::unique("eos-out");
    live::create_topic(&input, 1).await;
    live::create_topic(&output, 1).await;
    let group = live::unique("eos-group");
    let broker = KafkaBroker::new([live::url()])
        .default_group(&group)
        .connect()
        .await
        .expect("connect");
    let id = live::unique("eos");
    let pipeline = PublishPolicy::pair(policy(id.clone()), &broker)
        .await
        .expect("pairing");
    assert_eq!(pipeline.id(), id);
    let subscriber = KafkaTopic::new(&input)
        .start(StartOffset::Earliest)
        .commit(Commit::Transactional(id))
        .subscribe(&broker)
        .await
        .expect("subscribe");
    let plain = broker.publisher(KafkaPublish::default());
    for value in inputs {
        plain
            .publish(OutgoingMessage::new(&input, value.as_bytes()), None)
            .await
            .expect("input");
    }
    Rig {
        broker,
        group,
        input,
        output,
        pipeline,
        subscriber,
    }
}

async fn next(
    stream: &mut (impl futures::Stream<Item = Result<KafkaMessage, KafkaError>> + Unpin),
) -> KafkaMessage {
    tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("a delivery in time")
        .expect("the stream goes on")
        .expect("no error")
}

/// What a handler mounted with `EosReplies` sends: the reply with the delivery's source
/// header.
async fn reply(pipeline: &EosPipeline, message: &KafkaMessage, output: &str) {
    let mut headers = HeaderMap::new();
    let source = message
        .headers()
        .get_shared(EOS_SOURCE_HEADER)
        .expect("a Commit::Transactional delivery carries its source");
    headers.insert(EOS_SOURCE_HEADER, source);
    let mut body = message.payload().to_vec();
    body.push(b'\'');
    Publisher::publish(
        pipeline,
        OutgoingMessage::new(output, &body).with_headers(headers),
        None,
    )
    .await
    .expect("reply");
}

async fn stable_offset(topic: &str) -> i64 {
    let client = live::admin_client().await;
    let stable = Admin::new(client.clone())
        .list_offset(topic, 0, OffsetSpec::Latest, ReadCommitted)
        .await
        .expect("list offsets");
    client.close();
    stable.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_and_consumed_offsets_commit_together() {
    let mut rig = rig(
        |id| KafkaEosPublish::new(id).commit_interval(Duration::from_secs(4)),
        &["a", "b", "c"],
    )
    .await;
    let mut stream = rig.subscriber.stream();
    for expected in ["a", "b", "c"] {
        let message = next(&mut stream).await;
        assert_eq!(message.payload(), expected.as_bytes());
        assert_eq!(
            message.headers().get_str(EOS_SOURCE_HEADER),
            Some(format!("0:{}:{}", message.offset(), rig.input).as_str())
        );
        reply(&rig.pipeline, &message, &rig.output).await;
        message.ack().await.expect("ack");
    }
    // The window is still open: written, not visible to read_committed, offsets not committed.
    assert_eq!(
        live::values(&rig.output, 0, ReadUncommitted).await,
        ["a'", "b'", "c'"]
    );
    assert!(live::values(&rig.output, 0, ReadCommitted).await.is_empty());
    assert!(live::committed(&rig.group, &rig.input, 0).await < 3);

    let (output, group, input) = (&rig.output, &rig.group, &rig.input);
    let committed = live::eventually(Duration::from_secs(30), || async {
        live::values(output, 0, ReadCommitted).await == ["a'", "b'", "c'"]
    })
    .await;
    assert!(committed, "the window committed its records");
    assert_eq!(live::committed(group, input, 0).await, 3, "and the offsets");
    for record in live::read_partition(output, 0, ReadUncommitted).await {
        assert!(
            record
                .headers
                .iter()
                .all(|h| &h.key[..] != EOS_SOURCE_HEADER.as_bytes()),
            "the source header never reaches the wire"
        );
    }
    drop(stream);
    drop(rig.subscriber);
    drop(rig.broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_window_replays_without_output_duplicates() {
    let mut rig = rig(
        |id| KafkaEosPublish::new(id).transaction_timeout(Duration::from_secs(5)),
        &["a", "b"],
    )
    .await;
    let mut stream = rig.subscriber.stream();
    let first = next(&mut stream).await;
    reply(&rig.pipeline, &first, &rig.output).await;
    first.ack().await.expect("ack");
    let second = next(&mut stream).await;
    assert_eq!(second.payload(), b"b");
    reply(&rig.pipeline, &second, &rig.output).await;
    // Handed back: the window cannot settle, times out, aborts and seeks back.
    second.nack(true).await.expect("nack");

    let replayed_a = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the replay comes")
        .expect("stream")
        .expect("delivery");
    assert_eq!(
        replayed_a.payload(),
        b"a",
        "replayed from the first enrolled offset"
    );
    reply(&rig.pipeline, &replayed_a, &rig.output).await;
    replayed_a.ack().await.expect("ack");
    let replayed_b = next(&mut stream).await;
    assert_eq!(replayed_b.payload(), b"b");
    reply(&rig.pipeline, &replayed_b, &rig.output).await;
    replayed_b.ack().await.expect("ack");

    let (output, group, input) = (&rig.output, &rig.group, &rig.input);
    assert!(
        live::eventually(Duration::from_secs(30), || async {
            live::committed(group, input, 0).await == 2
        })
        .await,
        "the replayed window committed"
    );
    assert_eq!(live::values(output, 0, ReadCommitted).await, ["a'", "b'"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        live::values(output, 0, ReadCommitted).await,
        ["a'", "b'"],
        "exactly once, nothing more"
    );
    assert_eq!(
        live::values(output, 0, ReadUncommitted).await,
        ["a'", "b'", "a'", "b'"],
        "the aborted window's records were written, never committed"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(500), stream.next())
            .await
            .is_err(),
        "no further delivery"
    );
}

/// Replays after an aborted window, from `a` on: each input's reply under `read_committed`
/// exactly once, in order, and the offsets committed past all of them.
async fn replays_everything_from_the_first(
    pipeline: &EosPipeline,
    (input, output, group): (&str, &str, &str),
    stream: &mut (impl futures::Stream<Item = Result<KafkaMessage, KafkaError>> + Unpin),
    inputs: &[&str],
) {
    for expected in inputs {
        let message = tokio::time::timeout(Duration::from_secs(25), stream.next())
            .await
            .expect("the replay comes")
            .expect("stream")
            .expect("delivery");
        assert_eq!(
            message.payload(),
            expected.as_bytes(),
            "the aborted window replays from the lowest offset it had not committed"
        );
        reply(pipeline, &message, output).await;
        message.ack().await.expect("ack");
    }
    let committed = i64::try_from(inputs.len()).unwrap_or(i64::MAX);
    assert!(
        live::eventually(Duration::from_secs(30), || async {
            live::committed(group, input, 0).await == committed
        })
        .await,
        "the replayed window committed"
    );
    let replies: Vec<String> = inputs.iter().map(|i| format!("{i}'")).collect();
    assert_eq!(live::values(output, 0, ReadCommitted).await, replies);
}

/// `a` and `b` delivered side by side from one partition, `b` answered and settled first;
/// `a` answered and handed back (`a_replied`), or not answered at all. Either way the window
/// cannot settle, times out, aborts and must replay from `a`.
async fn aborted_after_b_settled(a_replied: bool) {
    let mut rig = rig(
        |id| KafkaEosPublish::new(id).transaction_timeout(Duration::from_secs(5)),
        &["a", "b"],
    )
    .await;
    let mut stream = rig.subscriber.stream();
    let a = next(&mut stream).await;
    let b = next(&mut stream).await;
    assert_eq!((a.payload(), b.payload()), (&b"a"[..], &b"b"[..]));
    reply(&rig.pipeline, &b, &rig.output).await;
    b.ack().await.expect("ack");
    let a_source = a.headers().get_shared(EOS_SOURCE_HEADER);
    if a_replied {
        reply(&rig.pipeline, &a, &rig.output).await;
        a.nack(true).await.expect("nack");
    }
    let names = (rig.input.as_str(), rig.output.as_str(), rig.group.as_str());
    replays_everything_from_the_first(&rig.pipeline, names, &mut stream, &["a", "b"]).await;
    if !a_replied {
        // The first `a` answers late: refused, since the replay answered it.
        let late = OutgoingMessage::new(&rig.output, b"late").with_headers({
            let mut headers = HeaderMap::new();
            if let Some(source) = a_source {
                headers.insert(EOS_SOURCE_HEADER, source);
            }
            headers
        });
        assert!(Publisher::publish(&rig.pipeline, late, None).await.is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_window_replays_a_delivery_that_had_not_published_yet() {
    // The window enrolled only `b`; `a`, before it in the partition, had published nothing.
    aborted_after_b_settled(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_window_replays_from_the_lowest_offset_it_enrolled() {
    // `b` enrolled before `a`: the window's first enrollment is not its lowest offset.
    aborted_after_b_settled(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_inside_a_window_voids_it_without_seeking_back() {
    let mut rig = rig(
        |id| KafkaEosPublish::new(id).commit_interval(Duration::from_secs(3)),
        &["a", "b", "c"],
    )
    .await;
    let seeker = rig.subscriber.seeker();
    let mut stream = rig.subscriber.stream();
    for _ in 0..3 {
        let message = next(&mut stream).await;
        reply(&rig.pipeline, &message, &rig.output).await;
        message.ack().await.expect("ack");
    }
    seeker
        .seek(KafkaPosition::offset(0, 1))
        .await
        .expect("seek inside the window");
    for expected in ["b", "c"] {
        let message = next(&mut stream).await;
        assert_eq!(
            message.payload(),
            expected.as_bytes(),
            "from the seek target on"
        );
        reply(&rig.pipeline, &message, &rig.output).await;
        message.ack().await.expect("ack");
    }
    let (output, group, input) = (&rig.output, &rig.group, &rig.input);
    assert!(
        live::eventually(Duration::from_secs(30), || async {
            live::committed(group, input, 0).await == 3
        })
        .await,
        "the fresh window committed"
    );
    assert_eq!(
        live::values(output, 0, ReadCommitted).await,
        ["b'", "c'"],
        "the void window's records are gone, the replay's committed once"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(800), stream.next())
            .await
            .is_err(),
        "no seek-back after the void window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_without_its_source_is_refused() {
    let rig = rig(KafkaEosPublish::new, &[]).await;
    let printed = format!("{:?}", rig.pipeline);
    assert!(printed.contains(rig.pipeline.id()), "{printed}");
    let check = |err: KafkaError| {
        let text = err.to_string();
        assert!(matches!(err, KafkaError::InvalidOptions(_)), "{err:?}");
        assert!(
            text.contains("Commit::Transactional") && text.contains("EosReplies"),
            "{text}"
        );
    };
    check(
        Publisher::publish(&rig.pipeline, OutgoingMessage::new(&rig.output, b"x"), None)
            .await
            .expect_err("no header"),
    );
    let mut headers = HeaderMap::new();
    headers.insert(EOS_SOURCE_HEADER, "3:x:orders");
    check(
        Publisher::publish(
            &rig.pipeline,
            OutgoingMessage::new(&rig.output, b"x").with_headers(headers),
            None,
        )
        .await
        .expect_err("malformed header"),
    );
    assert!(
        live::values(&rig.output, 0, ReadUncommitted)
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_without_a_registered_source_aborts() {
    let rig = rig(
        |id| KafkaEosPublish::new(id).commit_interval(Duration::from_millis(200)),
        &[],
    )
    .await;
    // A source no `Commit::Transactional` subscription of this pipeline reads.
    let elsewhere = SourceOffset::new(live::unique("not-subscribed"), 0, 7);
    rig.pipeline
        .publish(
            &elsewhere,
            OutgoingMessage::new(&rig.output, b"orphan"),
            None,
        )
        .await
        .expect("the record joins the window");
    let output = &rig.output;
    assert!(
        live::eventually(Duration::from_secs(20), || async {
            stable_offset(output).await > 1
        })
        .await,
        "the window ended"
    );
    assert!(
        live::values(output, 0, ReadCommitted).await.is_empty(),
        "aborted"
    );
    assert_eq!(live::values(output, 0, ReadUncommitted).await, ["orphan"]);
}
