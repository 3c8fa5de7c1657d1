//! The embedded cluster's two transaction protocols, met by this crate's transactional
//! producer: at `transaction.version` 2 (Kafka 4's default) the producer speaks KIP-890, below
//! it the classic protocol; either way commits are seen by `read_committed` readers and aborts
//! never are.
#![cfg(feature = "testing")]

use std::time::Duration;

use bytes::Bytes;
use ruststream_kafka::client::{
    Admin, Client, ClientConfig, IsolationLevel, NewTopic, OffsetSpec, PartitionReader,
    ProducerConfig, ProducerRecord, TransactionProtocol, TransactionalProducer,
};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};

const TOPIC: &str = "ledger";

/// What a `read_committed` reader finds in `partition`.
async fn committed(client: &Client, partition: i32) -> Vec<String> {
    let (end, _) = Admin::new(client.clone())
        .list_offset(
            TOPIC,
            partition,
            OffsetSpec::Latest,
            IsolationLevel::ReadCommitted,
        )
        .await
        .expect("stable offset");
    PartitionReader::new(client.clone(), TOPIC, partition)
        .read_range(0, end, Duration::from_secs(10))
        .await
        .expect("read")
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// Aborts one transaction over both partitions, commits the next, and checks what readers see.
async fn commits_show_and_aborts_do_not(level: i16, expected: TransactionProtocol) {
    let cluster = EmbeddedCluster::new(ClusterOptions {
        nodes: 3,
        transaction_version: level,
        ..ClusterOptions::default()
    });
    let client = Client::connect(ClientConfig::new(&cluster.bootstrap()))
        .await
        .expect("connects");
    Admin::new(client.clone())
        .create_topics(&[NewTopic::new(TOPIC, 2, 1)], Duration::from_secs(10))
        .await
        .expect("created");
    let producer = TransactionalProducer::new(
        client.clone(),
        ProducerConfig {
            linger: Duration::ZERO,
            ..ProducerConfig::transactional(format!("ledger-{level}"))
        },
    )
    .expect("producer");
    producer.init().await.expect("initialized");
    assert_eq!(producer.protocol(), Some(expected));

    for (round, commit) in [("dropped", false), ("kept", true), ("also kept", true)] {
        producer.begin().expect("begins");
        let mut reports = Vec::new();
        for partition in 0..2 {
            let value = format!("{round} {partition}");
            let record = ProducerRecord::new(TOPIC, Bytes::from(value)).partition(partition);
            reports.push(producer.send(record).await.expect("sent"));
        }
        for report in reports {
            report.await.expect("delivered");
        }
        if commit {
            producer.commit().await.expect("commits");
        } else {
            producer.abort().await.expect("aborts");
        }
    }
    for partition in 0..2 {
        assert_eq!(
            committed(&client, partition).await,
            [
                format!("kept {partition}"),
                format!("also kept {partition}")
            ]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_890_at_transaction_version_2() {
    commits_show_and_aborts_do_not(2, TransactionProtocol::V2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_classic_protocol_below_it() {
    commits_show_and_aborts_do_not(1, TransactionProtocol::Classic).await;
    commits_show_and_aborts_do_not(0, TransactionProtocol::Classic).await;
}
