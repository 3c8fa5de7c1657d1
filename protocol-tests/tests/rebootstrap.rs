//! KIP-899 `metadata.recovery.strategy` on a 3-node cluster (`scripts/kafka up --nodes 3`):
//! the cluster "moves" while a producer runs. The client bootstraps through a front door (a
//! relay in this test) to the brokers' CHAOS listener, so it learns the fault proxy's addresses;
//! then every proxy route refuses connections and the front door leads to the PLAINTEXT
//! listener instead, whose brokers advertise other addresses, as a cluster whose brokers were
//! replaced behind an unchanged bootstrap name. With `rebootstrap` the client asks the front
//! door again, learns the new addresses and delivers; with `none` it keeps dialling the dead
//! addresses, never the front door, and delivers only once they answer again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{client, read_all, unique_topic};
use ruststream_kafka::client::{
    Admin, Client, ClientConfig, MetadataRecovery, NewTopic, Producer, ProducerConfig,
    ProducerRecord,
};
use tokio::net::{TcpListener, TcpStream};

/// The tests of this file bind the fault proxy's fixed ports: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A relay whose target can change; changing it cuts the connections it carries.
struct FrontDoor {
    address: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    relays: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    accepted: Arc<AtomicU64>,
}

impl FrontDoor {
    async fn open(target: SocketAddr) -> FrontDoor {
        let listener = match TcpListener::bind(("127.0.0.1", 0)).await {
            Ok(l) => l,
            Err(e) => panic!("front door: {e}"),
        };
        let address = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("front door: {e}"),
        };
        let door = FrontDoor {
            address,
            target: Arc::new(Mutex::new(target)),
            relays: Arc::new(Mutex::new(Vec::new())),
            accepted: Arc::new(AtomicU64::new(0)),
        };
        let (target, relays, accepted) = (
            door.target.clone(),
            door.relays.clone(),
            door.accepted.clone(),
        );
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::Relaxed);
                let to = *target.lock().unwrap_or_else(PoisonError::into_inner);
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                relays
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(relay.abort_handle());
            }
        });
        door
    }

    /// Leads to `target` from now on; the connections it carried end.
    fn lead_to(&self, target: SocketAddr) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target;
        for relay in self
            .relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            relay.abort();
        }
    }

    fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

/// The fault proxy on `KAFKA_CHAOS_LISTENERS`' routes, in this process. Panics (failing the
/// test) without the 3-node cluster's variables.
async fn proxy() -> Vec<Arc<chaos_proxy::route::Route>> {
    protocol_tests::chaos_proxy().await
}

fn addresses(client: &Client) -> Vec<String> {
    let mut known: Vec<String> = client.with_metadata(|m| {
        m.brokers
            .values()
            .map(ruststream_kafka::client::BrokerInfo::address)
            .collect()
    });
    known.sort();
    known
}

/// What a run saw: the client's brokers before and after, and whether `after` was delivered.
struct Moved {
    direct: Client,
    client: Client,
    topic: String,
    learned_before: Vec<String>,
    door: FrontDoor,
    door_accepted_at_move: u64,
    delivered_after: Result<i64, String>,
    routes: Vec<Arc<chaos_proxy::route::Route>>,
    producer: Producer,
}

/// Bootstraps a client of `strategy` through the front door (to node 1's CHAOS listener),
/// delivers `before`, moves the cluster and tries to deliver `after` within `limit`.
async fn move_the_cluster(strategy: MetadataRecovery, limit: Duration) -> Moved {
    let direct = client().await;
    let routes = proxy().await;
    let topic = unique_topic("rebootstrap");
    if let Err(e) = Admin::new(direct.clone())
        .create_topics(
            &[NewTopic::new(&topic, 1, 3).config("min.insync.replicas", "2")],
            Duration::from_secs(30),
        )
        .await
    {
        panic!("create {topic}: {e}");
    }
    let Some(b1) = routes.iter().find(|r| r.name() == "b1") else {
        panic!("no proxy route b1 in KAFKA_CHAOS_LISTENERS");
    };
    let door = FrontDoor::open(b1.target()).await;

    let mut config = ClientConfig::new(&door.address.to_string());
    config.metadata_recovery = strategy;
    config.connect_timeout = Duration::from_secs(3);
    config.socket_timeout = Duration::from_secs(5);
    let moving = match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("through the front door at {}: {e}", door.address),
    };
    let producer = match Producer::new(
        moving.clone(),
        ProducerConfig {
            enable_idempotence: true,
            request_timeout: Duration::from_secs(5),
            message_timeout: limit,
            ..ProducerConfig::default()
        },
    ) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    if let Err(e) = deliver(&producer, &topic, "before", Duration::from_secs(30)).await {
        panic!("before the move: {e}");
    }
    let learned_before = addresses(&moving);
    let proxied: Vec<String> = routes.iter().map(|r| r.listen().to_string()).collect();
    for a in &learned_before {
        assert!(
            proxied.contains(a),
            "the client learned {a}, not one of the proxy's {proxied:?}"
        );
    }

    // The move: the learned addresses refuse, the front door leads to the PLAINTEXT listener.
    let Some(plaintext) = direct.with_metadata(|m| m.address_of(1)) else {
        panic!("node 1 is not in the direct client's metadata");
    };
    let plaintext: SocketAddr = match plaintext.parse() {
        Ok(a) => a,
        Err(e) => panic!("node 1's address {plaintext}: {e}"),
    };
    for r in &routes {
        r.set_mode(chaos_proxy::fault::Mode::Drop);
    }
    door.lead_to(plaintext);
    let door_accepted_at_move = door.accepted();
    let delivered_after = deliver(&producer, &topic, "after", limit + Duration::from_secs(5)).await;
    Moved {
        direct,
        client: moving,
        topic,
        learned_before,
        door,
        door_accepted_at_move,
        delivered_after,
        routes,
        producer,
    }
}

async fn deliver(
    producer: &Producer,
    topic: &str,
    value: &str,
    limit: Duration,
) -> Result<i64, String> {
    let record = ProducerRecord::new(topic.to_owned(), Bytes::from(value.to_owned())).partition(0);
    let d = producer.send(record).await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(limit, d).await {
        Ok(Ok(m)) => Ok(m.offset),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer in {limit:?}")),
    }
}

async fn values(client: &Client, topic: &str) -> Vec<String> {
    read_all(client, topic, 1).await[0]
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebootstrap_finds_the_moved_cluster_through_the_bootstrap_address() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let started = tokio::time::Instant::now();
    let m = move_the_cluster(MetadataRecovery::Rebootstrap, Duration::from_secs(30)).await;
    eprintln!(
        "rebootstrap: delivered after the move {:?} (test took {:?}); brokers {:?} -> {:?}; {} rebootstrap(s)",
        m.delivered_after,
        started.elapsed(),
        m.learned_before,
        addresses(&m.client),
        m.client.rebootstraps()
    );
    assert!(m.delivered_after.is_ok(), "{:?}", m.delivered_after);
    assert!(m.client.rebootstraps() >= 1);
    assert!(
        m.door.accepted() > m.door_accepted_at_move,
        "the client never came back to the front door"
    );
    let now = addresses(&m.client);
    assert_eq!(
        now,
        addresses(&m.direct),
        "the client took the brokers the moved cluster advertises"
    );
    let _ = m.producer.close(Duration::from_secs(10)).await;
    assert_eq!(values(&m.direct, &m.topic).await, ["before", "after"]);
    for r in &m.routes {
        r.set_mode(chaos_proxy::fault::Mode::Pass);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategy_none_never_asks_the_bootstrap_address_again() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let m = move_the_cluster(MetadataRecovery::None, Duration::from_secs(10)).await;
    eprintln!(
        "none: after the move {:?}; brokers {:?} -> {:?}; front door dialled {} time(s) after it",
        m.delivered_after,
        m.learned_before,
        addresses(&m.client),
        m.door.accepted() - m.door_accepted_at_move
    );
    assert!(m.delivered_after.is_err(), "{:?}", m.delivered_after);
    assert_eq!(m.door.accepted(), m.door_accepted_at_move);
    assert_eq!(addresses(&m.client), m.learned_before);
    assert_eq!(m.client.rebootstraps(), 0);
    // The learned addresses answer again: the client goes on with them.
    for r in &m.routes {
        r.set_mode(chaos_proxy::fault::Mode::Pass);
    }
    if let Err(e) = deliver(&m.producer, &m.topic, "healed", Duration::from_secs(30)).await {
        panic!("once the learned brokers answer again: {e}");
    }
    let _ = m.producer.close(Duration::from_secs(10)).await;
    assert_eq!(values(&m.direct, &m.topic).await, ["before", "healed"]);
}
