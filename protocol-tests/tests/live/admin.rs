//! Topic administration and `ListOffsets` (earliest, latest, by timestamp).

use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{client, create_topic, unique_topic};
use ruststream_kafka::client::{
    Admin, IsolationLevel, NewTopic, OffsetSpec, ProducerConfig, ProducerRecord, ResponseError,
};

use crate::{producer, send_all};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_by_position_and_time() {
    let client = client().await;
    let admin = Admin::new(client.clone());
    let topic = unique_topic("offsets");
    create_topic(&client, &topic, 1).await;
    let p = producer(&client, ProducerConfig::default()).await;
    let records = (0..10)
        .map(|i| {
            ProducerRecord::new(topic.clone(), Bytes::from_static(b"x"))
                .timestamp(1_000_000 + i * 100)
        })
        .collect();
    send_all(&p, records).await;
    let at = |spec| {
        let admin = admin.clone();
        let topic = topic.clone();
        async move {
            match admin
                .list_offset(&topic, 0, spec, IsolationLevel::ReadCommitted)
                .await
            {
                Ok((offset, _)) => offset,
                Err(e) => panic!("{spec:?}: {e}"),
            }
        }
    };
    assert_eq!(at(OffsetSpec::Earliest).await, 0);
    assert_eq!(at(OffsetSpec::Latest).await, 10);
    assert_eq!(at(OffsetSpec::Timestamp(1_000_000)).await, 0);
    assert_eq!(at(OffsetSpec::Timestamp(1_000_450)).await, 5);
    assert_eq!(at(OffsetSpec::Timestamp(1_000_900)).await, 9);
    assert_eq!(at(OffsetSpec::Timestamp(2_000_000)).await, -1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_refused_twice_and_deleted() {
    let client = client().await;
    let admin = Admin::new(client.clone());
    let topic = unique_topic("admin");
    let spec = NewTopic::new(&topic, 4, 1).config("cleanup.policy", "compact");
    if let Err(e) = admin
        .create_topics(std::slice::from_ref(&spec), Duration::from_secs(30))
        .await
    {
        panic!("create: {e}");
    }
    let info = match client.topic(&topic).await {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(info.partitions.len(), 4);
    let again = admin.create_topics(&[spec], Duration::from_secs(30)).await;
    assert_eq!(
        again.err().and_then(|e| e.code()),
        Some(ResponseError::TopicAlreadyExists)
    );
    if let Err(e) = admin
        .delete_topics(&[&topic], Duration::from_secs(30))
        .await
    {
        panic!("delete: {e}");
    }
    let gone = admin
        .delete_topics(&[&topic], Duration::from_secs(30))
        .await;
    assert_eq!(
        gone.err().and_then(|e| e.code()),
        Some(ResponseError::UnknownTopicOrPartition)
    );
    let cluster = match admin.describe_cluster().await {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert!(!cluster.brokers.is_empty() && cluster.cluster_id.is_some());
}
