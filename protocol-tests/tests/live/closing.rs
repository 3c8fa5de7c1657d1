//! A producer that is closed and dropped, with its client, leaves no task behind: its sender
//! ends once the last answers are in (it holds the client), and a dropped client's own tasks
//! (the periodic metadata refresh, the KIP-714 pushes, its connections) end at once rather than
//! at their next wake-up minutes later.

use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{client, create_topic, unique_topic};
use ruststream_kafka::client::{ProducerConfig, ProducerRecord};

use crate::{producer, send_all};

/// The tasks alive on this test's runtime.
fn alive() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_producer_leaves_no_task_behind() {
    let before = alive();
    let client = client().await;
    let topic = unique_topic("closing");
    create_topic(&client, &topic, 3).await;
    let p = producer(
        &client,
        ProducerConfig {
            enable_idempotence: true,
            linger: Duration::from_millis(5),
            ..ProducerConfig::default()
        },
    )
    .await;
    // Several partitions, several batches each, the last of them answered just before the
    // close: the sender's final round is one that handles answers.
    let records = (0..600)
        .map(|i| ProducerRecord::new(topic.clone(), Bytes::from(format!("r{i}"))).partition(i % 3))
        .collect();
    let written = send_all(&p, records).await;
    assert_eq!(written.len(), 600);
    let last = ProducerRecord::new(topic.clone(), Bytes::from_static(b"last")).partition(1);
    let pending = match p.send(last).await {
        Ok(d) => d,
        Err(e) => panic!("send: {e}"),
    };
    assert_eq!(
        p.close(Duration::from_secs(10)).await,
        0,
        "records left unsent"
    );
    if let Err(e) = pending.await {
        panic!("the last record: {e}");
    }
    drop(p);
    drop(client);
    gone_within(before, Duration::from_secs(10)).await;
}

/// Producers closed without waiting (a zero flush) while their requests are out: each sender
/// still ends, whichever round hears the last answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_closed_mid_flight_leave_no_task_behind() {
    let before = alive();
    let client = client().await;
    let topic = unique_topic("closing-mid-flight");
    create_topic(&client, &topic, 3).await;
    for round in 0..100 {
        let p = producer(
            &client,
            ProducerConfig {
                enable_idempotence: true,
                linger: Duration::ZERO,
                ..ProducerConfig::default()
            },
        )
        .await;
        let mut deliveries = Vec::new();
        for i in 0..200 {
            let record = ProducerRecord::new(topic.clone(), Bytes::from(format!("{round}-{i}")))
                .partition(i % 3);
            match p.send(record).await {
                Ok(d) => deliveries.push(d),
                Err(e) => panic!("send: {e}"),
            }
        }
        // Whatever is not out yet fails; what is out is answered.
        let _ = p.close(Duration::ZERO).await;
        drop(p);
        for d in deliveries {
            let _ = d.await;
        }
    }
    drop(client);
    gone_within(before, Duration::from_secs(10)).await;
}

/// A client dropped without a producer: its tasks end as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_leaves_no_task_behind() {
    let before = alive();
    let client = client().await;
    let topic = unique_topic("closing-client");
    create_topic(&client, &topic, 1).await;
    assert!(alive() > before, "the client runs tasks of its own");
    drop(client);
    gone_within(before, Duration::from_secs(10)).await;
}

/// Waits until no more than `before` tasks are alive, failing after `bound`.
async fn gone_within(before: usize, bound: Duration) {
    let deadline = tokio::time::Instant::now() + bound;
    while alive() > before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} tasks still alive {bound:?} after the client was dropped ({before} before)",
            alive()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
