//! Commit modes and settlement against the cluster (reference section 4.D): what `ack` and
//! `nack` do under `Commit::Auto` and `Commit::Tracked`, checked by restarting a member of the
//! same group and looking at where it resumes.

use crate::live;

use futures::FutureExt;
use ruststream::{AckError, IncomingMessage, Subscriber, SubscriptionSource};
use ruststream_kafka::{Commit, ConnectedKafkaBroker, KafkaSubscriber, KafkaTopic, StartOffset};

/// A member of `group` on `topic`, reading from the start. Auto-commit runs only at close
/// (the interval is a minute), so what a restart sees is what the close committed.
async fn member(
    connected: &ConnectedKafkaBroker,
    topic: &str,
    group: &str,
    commit: Commit,
) -> KafkaSubscriber {
    live::quick(
        KafkaTopic::new(topic)
            .group(group)
            .start(StartOffset::Earliest)
            .commit(commit)
            .config("auto.commit.interval.ms", "60000"),
    )
    .subscribe(connected)
    .await
    .expect("subscribe")
}

/// Opens a fresh member, publishes `marker`, and returns the payloads it reads up to and
/// including the marker (acking each).
async fn resumed(
    connected: &ConnectedKafkaBroker,
    topic: &str,
    group: &str,
    commit: Commit,
) -> Vec<String> {
    let mut subscriber = member(connected, topic, group, commit).await;
    let publisher = live::plain_publisher(connected);
    live::send(&publisher, topic, b"marker").await;
    let mut stream = subscriber.stream();
    let mut seen = Vec::new();
    loop {
        let message = live::next(&mut stream).await;
        let text = live::text(&message);
        message.ack().await.expect("ack");
        let done = text == "marker";
        seen.push(text);
        if done {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_commit_settles_nothing_and_refuses_a_requeue() {
    live::logs();
    let topic = live::topic("auto", 1).await;
    let group = live::unique("auto");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    {
        let mut subscriber = member(&connected, &topic, &group, Commit::Auto).await;
        for payload in [&b"a"[..], b"b", b"c"] {
            live::send(&publisher, &topic, payload).await;
        }
        let mut stream = subscriber.stream();
        let a = live::next(&mut stream).await;
        assert!(matches!(a.nack(true).await, Err(AckError::Unsupported)));
        let b = live::next(&mut stream).await;
        assert_eq!(live::text(&b), "b", "a refused requeue brings nothing back");
        b.ack().await.expect("ack is a no-op under Auto");
        let c = live::next(&mut stream).await;
        c.nack(false)
            .await
            .expect("nack(false) is a no-op under Auto");
        live::nothing_within(&mut stream, live::QUIET).await;
    }
    // The close committed past everything handed over, the requeued record included.
    assert_eq!(
        resumed(&connected, &topic, &group, Commit::Auto).await,
        ["marker"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracked_acks_survive_a_restart() {
    live::logs();
    let topic = live::topic("tracked-restart", 1).await;
    let group = live::unique("tracked-restart");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    {
        let mut subscriber = member(&connected, &topic, &group, Commit::Tracked).await;
        for payload in [&b"m1"[..], b"m2", b"m3"] {
            live::send(&publisher, &topic, payload).await;
        }
        let mut stream = subscriber.stream();
        let m1 = live::next(&mut stream).await;
        let m2 = live::next(&mut stream).await;
        let m3 = live::next(&mut stream).await;
        assert_eq!(live::text(&m3), "m3");
        m1.ack().await.expect("ack");
        m2.ack().await.expect("ack");
        drop(m3);
    }
    assert_eq!(
        resumed(&connected, &topic, &group, Commit::Tracked).await,
        ["m3", "marker"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_out_of_order_commit_up_to_the_first_gap() {
    live::logs();
    let topic = live::topic("tracked-prefix", 1).await;
    let group = live::unique("tracked-prefix");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    {
        let mut subscriber = member(&connected, &topic, &group, Commit::Tracked).await;
        for payload in [&b"a"[..], b"b", b"c"] {
            live::send(&publisher, &topic, payload).await;
        }
        let mut stream = subscriber.stream();
        let a = live::next(&mut stream).await;
        let b = live::next(&mut stream).await;
        let c = live::next(&mut stream).await;
        c.ack().await.expect("ack c");
        a.ack().await.expect("ack a");
        // b is left unsettled: it blocks the committed position.
        drop(b);
    }
    assert_eq!(
        resumed(&connected, &topic, &group, Commit::Tracked).await,
        ["b", "c", "marker"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_delivery_is_settled_by_nack_false() {
    live::logs();
    let topic = live::topic("tracked-drop", 1).await;
    let group = live::unique("tracked-drop");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    {
        let mut subscriber = member(&connected, &topic, &group, Commit::Tracked).await;
        live::send(&publisher, &topic, b"refused").await;
        let mut stream = subscriber.stream();
        let refused = live::next(&mut stream).await;
        refused.nack(false).await.expect("nack(false)");
        live::nothing_within(&mut stream, live::QUIET).await;
    }
    assert_eq!(
        resumed(&connected, &topic, &group, Commit::Tracked).await,
        ["marker"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeue_comes_back_first_and_blocks_the_commit_until_settled() {
    live::logs();
    let topic = live::topic("tracked-requeue", 1).await;
    let group = live::unique("tracked-requeue");
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    {
        let mut subscriber = member(&connected, &topic, &group, Commit::Tracked).await;
        live::send(&publisher, &topic, b"a").await;
        let mut stream = subscriber.stream();
        let a = live::next(&mut stream).await;
        live::send(&publisher, &topic, b"b").await;
        // Wait until b is fetched, so the requeued a must overtake it.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        a.nack(true).await.expect("nack(true) under Tracked");
        let again = live::next(&mut stream).await;
        assert_eq!(live::text(&again), "a", "the requeued delivery comes first");
        assert_eq!(again.offset(), 0);
        let b = live::next(&mut stream).await;
        assert_eq!(live::text(&b), "b");
        b.ack().await.expect("ack b");
        // a is still outstanding: requeue it once more and close with it unsettled.
        again.nack(true).await.expect("nack(true)");
    }
    // The closed subscription released it unsettled: the next member reads it.
    assert_eq!(
        resumed(&connected, &topic, &group, Commit::Tracked).await,
        ["a", "b", "marker"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_is_ready_at_once() {
    live::logs();
    let topic = live::topic("tracked-ready", 1).await;
    let connected = live::connect(live::broker()).await;
    let publisher = live::plain_publisher(&connected);
    let mut subscriber = member(&connected, &topic, &live::unique("ready"), Commit::Tracked).await;
    for payload in [&b"a"[..], b"b"] {
        live::send(&publisher, &topic, payload).await;
    }
    let mut stream = subscriber.stream();
    let a = live::next(&mut stream).await;
    let b = live::next(&mut stream).await;
    assert!(matches!(a.ack().now_or_never(), Some(Ok(()))));
    assert!(matches!(b.nack(false).now_or_never(), Some(Ok(()))));
}
