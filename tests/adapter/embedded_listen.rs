//! The embedded cluster's TCP listeners on addresses the caller picks
//! (`EmbeddedCluster::listen_on`): what Metadata advertises through them, and how binding fails.
#![cfg(feature = "testing")]

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use ruststream_kafka::client::{
    Client, ClientConfig, PartitionReader, Producer, ProducerConfig, ProducerRecord,
};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};

fn cluster(nodes: u16) -> EmbeddedCluster {
    EmbeddedCluster::new(ClusterOptions {
        nodes,
        ..ClusterOptions::default()
    })
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The brokers Metadata lists, by node id, as `host:port`.
async fn advertised(bootstrap: &str) -> BTreeMap<i32, String> {
    let client = Client::connect(ClientConfig::new(bootstrap))
        .await
        .expect("connects over TCP");
    client.refresh_metadata(&[]).await.expect("metadata");
    let brokers = client.with_metadata(|m| {
        m.brokers
            .values()
            .map(|b| (b.id, b.address()))
            .collect::<BTreeMap<_, _>>()
    });
    client.close();
    brokers
}

#[tokio::test]
async fn metadata_advertises_the_addresses_listened_on() {
    let cluster = cluster(2);
    let bound = cluster
        .listen_on(&[loopback(0), loopback(0)])
        .await
        .expect("listens");
    assert_eq!(bound.len(), 2);
    assert!(bound.iter().all(|a| a.port() != 0), "{bound:?}");
    let expected: BTreeMap<i32, String> = [(0, bound[0].to_string()), (1, bound[1].to_string())]
        .into_iter()
        .collect();
    // Whichever node a client bootstraps from, it is told the same addresses.
    assert_eq!(advertised(&bound[0].to_string()).await, expected);
    assert_eq!(advertised(&bound[1].to_string()).await, expected);
    assert_eq!(
        cluster.loopback_bootstrap().as_deref(),
        Some(format!("{},{}", bound[0], bound[1]).as_str())
    );
}

#[tokio::test]
async fn records_go_through_the_listeners_to_every_node() {
    let cluster = cluster(3);
    cluster
        .listen_on(&[loopback(0), loopback(0), loopback(0)])
        .await
        .expect("listens");
    assert!(cluster.create_topic("spread", 3));
    let bootstrap = cluster.loopback_bootstrap().expect("listening");
    let client = Client::connect(ClientConfig::new(&bootstrap))
        .await
        .expect("connects");
    let producer = Producer::new(client.clone(), ProducerConfig::default()).expect("producer");
    for partition in 0..3 {
        let record = ProducerRecord::new("spread", Bytes::from(format!("p{partition}")))
            .partition(partition);
        producer
            .send(record)
            .await
            .expect("queued")
            .await
            .expect("delivered through the partition leader's listener");
    }
    for partition in 0..3 {
        let read = PartitionReader::new(client.clone(), "spread", partition)
            .read_range(0, 1, Duration::from_secs(10))
            .await
            .expect("reads");
        assert_eq!(
            read[0].value.as_deref(),
            Some(format!("p{partition}").as_bytes())
        );
    }
    producer.close(Duration::from_secs(5)).await;
    client.close();
}

#[tokio::test]
async fn an_unspecified_address_is_advertised_as_loopback() {
    let cluster = cluster(1);
    let bound = cluster
        .listen_on(&[SocketAddr::from(([0, 0, 0, 0], 0))])
        .await
        .expect("listens");
    assert!(bound[0].ip().is_unspecified());
    let dial = loopback(bound[0].port());
    assert_eq!(
        advertised(&dial.to_string()).await,
        [(0, dial.to_string())].into_iter().collect()
    );
    assert_eq!(cluster.loopback_bootstrap(), Some(dial.to_string()));
}

#[tokio::test]
async fn one_address_per_node_is_required() {
    let cluster = cluster(2);
    let err = cluster
        .listen_on(&[loopback(0)])
        .await
        .expect_err("two nodes, one address");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("2 node(s)"), "{err}");
    assert_eq!(cluster.loopback_bootstrap(), None);
}

#[tokio::test]
async fn a_port_in_use_is_reported_and_nothing_stays_open() {
    let taken = std::net::TcpListener::bind(loopback(0)).expect("a port");
    let taken_addr = taken.local_addr().expect("its address");
    let cluster = cluster(2);
    let err = cluster
        .listen_on(&[loopback(0), taken_addr])
        .await
        .expect_err("the port is taken");
    assert_eq!(err.kind(), ErrorKind::AddrInUse);
    let text = err.to_string();
    assert!(
        text.contains("node 1") && text.contains(&taken_addr.to_string()),
        "{text}"
    );
    assert_eq!(cluster.loopback_bootstrap(), None);
    // The failed attempt left nothing half-open: another one succeeds.
    let bound = cluster.listen().await.expect("listens");
    assert_eq!(bound.len(), 2);
}

#[tokio::test]
async fn listening_twice_is_refused_and_listen_returns_the_open_listeners() {
    let cluster = cluster(1);
    let bound = cluster.listen_on(&[loopback(0)]).await.expect("listens");
    let err = cluster
        .listen_on(&[loopback(0)])
        .await
        .expect_err("already listening");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert_eq!(cluster.listen().await.expect("the same"), bound);
}

#[tokio::test]
async fn the_port_closes_when_the_cluster_goes() {
    let cluster = cluster(1);
    let bound = cluster.listen_on(&[loopback(0)]).await.expect("listens");
    drop(cluster);
    // The accept task is aborted on drop; the socket closes when the runtime next runs it.
    let mut refused = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(bound[0]).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "{} still accepts connections", bound[0]);
    // And the port can be listened on again at once.
    let again = cluster_on(bound[0]).await;
    assert_eq!(again.loopback_bootstrap(), Some(bound[0].to_string()));
}

async fn cluster_on(addr: SocketAddr) -> EmbeddedCluster {
    let cluster = cluster(1);
    cluster
        .listen_on(&[addr])
        .await
        .expect("the port is free again");
    cluster
}
