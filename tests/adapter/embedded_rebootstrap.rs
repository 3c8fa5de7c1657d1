//! KIP-899 on the embedded cluster: a broker's `REBOOTSTRAP_REQUIRED` (KIP-1102, Metadata v13)
//! sends the client back to its bootstrap servers with `metadata.recovery.strategy=rebootstrap`,
//! and not with `none`; once the cluster is learned, the bootstrap servers are left alone.
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex, PoisonError};

use ruststream_kafka::client::{
    Client, ClientConfig, Event, Interest, MetadataRecovery, Observer, Observers, ResponseError,
};
use ruststream_kafka::testing::faults::ApiKey;
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};

/// The address of every Metadata request the client made, in order.
#[derive(Default)]
struct MetadataAsked(Mutex<Vec<String>>);

impl Observer for MetadataAsked {
    fn interest(&self) -> Interest {
        Interest::REQUESTS
    }

    fn on_event(&self, event: &Event<'_>) {
        if let Event::Request {
            broker, api_key: 3, ..
        } = event
        {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(broker.address.to_owned());
        }
    }
}

impl MetadataAsked {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A 3-node cluster on loopback TCP and a client bootstrapped at `localhost:<node 0>`, an
/// address the brokers never advertise (they name `127.0.0.1`), so that each Metadata request
/// tells whether it went to a bootstrap server or to a learned broker.
async fn learned(
    strategy: MetadataRecovery,
) -> (EmbeddedCluster, Client, Arc<MetadataAsked>, String) {
    let cluster = EmbeddedCluster::new(ClusterOptions {
        nodes: 3,
        ..ClusterOptions::default()
    });
    let addresses = cluster.listen().await.expect("listens");
    let bootstrap = format!("localhost:{}", addresses[0].port());
    let asked = Arc::new(MetadataAsked::default());
    let mut config = ClientConfig::new(&bootstrap);
    config.metadata_recovery = strategy;
    config.observers = Observers::default().with(asked.clone());
    let client = Client::connect(config).await.expect("connects");
    assert_eq!(
        asked.take(),
        vec![bootstrap.clone()],
        "bootstrapped at {bootstrap}"
    );
    assert_eq!(client.metadata().brokers.len(), 3);
    // Learned: the next refresh asks a broker by its advertised address.
    client.refresh_metadata(&[]).await.expect("refreshed");
    let next = asked.take();
    assert_eq!(next.len(), 1);
    assert!(next[0].starts_with("127.0.0.1:"), "asked {next:?}");
    (cluster, client, asked, bootstrap)
}

#[tokio::test]
async fn rebootstrap_required_sends_the_client_back_to_its_bootstrap_servers() {
    let (cluster, client, asked, bootstrap) = learned(MetadataRecovery::Rebootstrap).await;
    cluster
        .faults()
        .fail_next(ApiKey::Metadata, 1, ResponseError::RebootstrapRequired);
    client
        .refresh_metadata(&[])
        .await
        .expect("answered by the bootstrap server");
    let round = asked.take();
    assert_eq!(
        round.len(),
        2,
        "a learned broker, then the bootstrap server: {round:?}"
    );
    assert!(round[0].starts_with("127.0.0.1:"), "{round:?}");
    assert_eq!(round[1], bootstrap);
    assert_eq!(client.rebootstraps(), 1);
    assert_eq!(client.metadata().brokers.len(), 3);
    // The answer named the brokers again: back to them.
    client.refresh_metadata(&[]).await.expect("refreshed");
    let after = asked.take();
    assert!(
        after.len() == 1 && after[0].starts_with("127.0.0.1:"),
        "{after:?}"
    );
}

#[tokio::test]
async fn with_strategy_none_rebootstrap_required_fails_the_refresh() {
    let (cluster, client, asked, bootstrap) = learned(MetadataRecovery::None).await;
    cluster
        .faults()
        .fail_next(ApiKey::Metadata, 3, ResponseError::RebootstrapRequired);
    let refreshed = client.refresh_metadata(&[]).await;
    assert!(
        matches!(
            &refreshed,
            Err(ruststream_kafka::client::Error::Broker {
                code: ResponseError::RebootstrapRequired,
                ..
            })
        ),
        "{refreshed:?}"
    );
    let round = asked.take();
    assert_eq!(round.len(), 3, "each learned broker once: {round:?}");
    assert!(!round.contains(&bootstrap), "{round:?}");
    assert_eq!(client.rebootstraps(), 0);
}
