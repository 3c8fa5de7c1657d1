//! A topic deleted and created again under a running producer and consumer (KIP-516): records
//! published to the old topic are written to it or fail, and never reach the new one; the
//! producer and the group consumer carry on with the new topic.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use protocol_tests::{create_topic, read_all, unique_topic};
use ruststream_kafka::client::{
    Admin, Client, DeliveryFuture, NewTopic, Producer, ProducerConfig, ProducerRecord, Subscription,
};

use super::group::{Member, group_config, quick_client, wait_until};
use super::producer;

const PARTITIONS: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_recreated_under_a_running_producer_and_consumer_gets_none_of_the_old_writes() {
    let client = quick_client().await;
    // A client that does not create the topic itself when it looks it up after the delete
    // (the broker's `auto.create.topics.enable` is on): the test creates it again.
    let mut config = client.config().clone();
    config.allow_auto_create_topics = false;
    let client = match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    };
    let admin = Admin::new(client.clone());
    let topic = unique_topic("recreated");
    create_topic(&client, &topic, PARTITIONS).await;
    let member = Member::start(
        &client,
        group_config(&unique_topic("recreated-group"), "range"),
        Subscription::Topics(vec![topic.clone()]),
    );
    let config = ProducerConfig {
        enable_idempotence: true,
        // Batches wait long enough that the delete overtakes those published just before it.
        linger: Duration::from_millis(300),
        message_timeout: Duration::from_mins(1),
        ..ProducerConfig::default()
    };
    let p = producer(&client, config).await;

    // The old topic, written and read.
    let mut first = Vec::new();
    for i in 0..90 {
        first.push(send(&p, &topic, format!("old-{i}")).await);
    }
    for d in first {
        if let Err(e) = d.await {
            panic!("an old record before the delete: {e}");
        }
    }
    wait_until(Duration::from_mins(1), || {
        member.with(|s| s.records.len()) >= 90
    })
    .await;

    // Published, then the topic deleted under them while they linger.
    let mut pending = Vec::new();
    for i in 90..390 {
        pending.push(send(&p, &topic, format!("old-{i}")).await);
    }
    if let Err(e) = admin
        .delete_topics(&[&topic], Duration::from_secs(30))
        .await
    {
        panic!("deleting {topic}: {e}");
    }
    recreate(&admin, &topic).await;

    // The new topic: every record is written, once.
    let mut fresh = Vec::new();
    for i in 0..300 {
        fresh.push(send(&p, &topic, format!("new-{i}")).await);
    }
    for (i, d) in fresh.into_iter().enumerate() {
        if let Err(e) = d.await {
            panic!("new-{i}: {e}");
        }
    }
    settle_old(pending).await;
    assert_only_new_writes(&client, &topic).await;

    // The consumer, running throughout, reads the new topic from its start.
    wait_until(Duration::from_secs(90), || {
        member.with(|s| s.records.iter().filter(|r| r.2.starts_with("new-")).count()) >= 300
    })
    .await;
    let seen = member.stop().await;
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let new_seen: BTreeSet<&String> = seen
        .records
        .iter()
        .map(|r| &r.2)
        .filter(|v| v.starts_with("new-"))
        .collect();
    assert_eq!(new_seen.len(), 300, "the consumer read every new record");
}

async fn send(p: &Producer, topic: &str, value: String) -> DeliveryFuture {
    match p.send(ProducerRecord::new(topic, Bytes::from(value))).await {
        Ok(d) => d,
        Err(e) => panic!("send: {e}"),
    }
}

/// The old records settle: written to the old topic, or failed, none left hanging.
async fn settle_old(pending: Vec<DeliveryFuture>) {
    let (mut written, mut failed) = (0, 0);
    for d in pending {
        match tokio::time::timeout(Duration::from_secs(90), d).await {
            Ok(Ok(_)) => written += 1,
            Ok(Err(e)) => {
                failed += 1;
                if failed == 1 {
                    eprintln!("an old record failed: {e}");
                }
            }
            Err(elapsed) => panic!("an old record never settled: {elapsed}"),
        }
    }
    eprintln!("old records after the delete: {written} written, {failed} failed");
}

/// The new topic holds the 300 new records, each once, and nothing else.
async fn assert_only_new_writes(client: &Client, topic: &str) {
    let values: Vec<String> = read_all(client, topic, PARTITIONS)
        .await
        .into_iter()
        .flatten()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    let old: Vec<&String> = values.iter().filter(|v| !v.starts_with("new-")).collect();
    assert!(old.is_empty(), "the new topic got old writes: {old:?}");
    let new: BTreeSet<&String> = values.iter().collect();
    assert_eq!(
        (values.len(), new.len()),
        (300, 300),
        "each new record once"
    );
}

/// Creates `topic` again once the cluster has finished deleting it.
async fn recreate(admin: &Admin, topic: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let created = admin
            .create_topics(
                &[NewTopic::new(topic, PARTITIONS, 1)],
                Duration::from_secs(30),
            )
            .await;
        match created {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("creating {topic} again: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("creating {topic} again: {e}"),
        }
    }
}
