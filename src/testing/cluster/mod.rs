//! An embedded Kafka cluster: brokers in this process that speak the Kafka protocol.
//!
//! [`EmbeddedCluster`] keeps topics, partition logs, consumer groups, committed offsets,
//! producer ids and transactions in memory and serves them over the wire protocol, so a test
//! runs the same client and adapter code as production. Clients reach it through in-memory
//! pipes (addresses from [`EmbeddedCluster::bootstrap`], no socket needed) or, when asked,
//! through loopback TCP listeners ([`EmbeddedCluster::listen`]) that external tools can use.
//!
//! What it does not model is listed in `docs/embedded-cluster.md`.

mod direct;
mod dispatch;
mod fetch;
pub(crate) mod groups;
mod list_offsets;
mod log;
mod metadata;
mod produce;
mod producers;
pub(crate) mod server;
mod state;
mod topics;
mod txn;
pub(crate) mod versions;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::io::DuplexStream;
use tokio::sync::Notify;

use crate::client::memory::{self, MemoryEndpoint};
use crate::testing::faults::{FaultState, Faults};

pub use direct::Refusal;
pub(crate) use state::State;

static NEXT_CLUSTER: AtomicU64 = AtomicU64::new(1);

/// The port every in-memory address carries; the host name tells clusters and nodes apart.
const MEMORY_PORT: u16 = 9092;

/// How an embedded cluster is set up. The defaults are Apache Kafka's broker defaults where a
/// test would notice the difference, and short timeouts where a test would otherwise wait.
#[derive(Debug, Clone, Copy)]
pub struct ClusterOptions {
    /// Number of brokers (node ids `0..nodes`); partitions and coordinators are spread over
    /// them.
    pub nodes: u16,
    /// `auto.create.topics.enable`: a Metadata request that allows it creates a missing topic.
    pub auto_create_topics: bool,
    /// `num.partitions`: partitions of an automatically created topic.
    pub num_partitions: i32,
    /// `message.max.bytes`: the largest record batch a produce may carry.
    pub message_max_bytes: usize,
    /// Keep at most this many records per partition; older ones move the log start forward.
    /// `None` keeps everything.
    pub retention_records: Option<u64>,
    /// `group.min.session.timeout.ms`.
    pub group_min_session_timeout: Duration,
    /// `group.max.session.timeout.ms`.
    pub group_max_session_timeout: Duration,
    /// `group.initial.rebalance.delay.ms`: how long a new classic group waits for more members.
    pub group_initial_rebalance_delay: Duration,
    /// `transaction.max.timeout.ms`: the largest transaction timeout a producer may ask for.
    pub transaction_max_timeout: Duration,
    /// `group.consumer.heartbeat.interval.ms` handed to KIP-848 members.
    pub consumer_heartbeat_interval: Duration,
    /// The finalized level of the `transaction.version` feature (0 to 2). At 2, as on a new
    /// Kafka 4 cluster, the brokers advertise Produce v12, `TxnOffsetCommit` v5 and `EndTxn`
    /// v5 and speak the KIP-890 transaction protocol; below it they stop at v11, v4 and v4,
    /// and clients register partitions and groups themselves.
    pub transaction_version: i16,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            nodes: 1,
            auto_create_topics: true,
            num_partitions: 1,
            message_max_bytes: 1_048_588,
            retention_records: None,
            group_min_session_timeout: Duration::from_secs(6),
            group_max_session_timeout: Duration::from_mins(30),
            group_initial_rebalance_delay: Duration::ZERO,
            transaction_max_timeout: Duration::from_mins(15),
            consumer_heartbeat_interval: Duration::from_secs(5),
            transaction_version: 2,
        }
    }
}

/// An in-memory Kafka cluster. Cheap to clone; the cluster stops (its addresses refuse
/// connections) when the last clone is dropped.
#[derive(Clone)]
pub struct EmbeddedCluster {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EmbeddedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedCluster")
            .field("id", &self.shared.id)
            .field("nodes", &self.shared.options.nodes)
            .finish_non_exhaustive()
    }
}

/// What every connection of the cluster shares.
pub(crate) struct Shared {
    pub(crate) id: u64,
    pub(crate) options: ClusterOptions,
    state: Mutex<State>,
    /// Woken on every change a waiting request may care about (appends, group changes).
    pub(crate) changed: Notify,
    listeners: Mutex<Vec<SocketAddr>>,
    endpoints: Mutex<Vec<Arc<NodeEndpoint>>>,
    /// Faults armed by the test, consulted before each request.
    pub(crate) faults: FaultState,
    /// The next partition of a keyless record written directly.
    pub(crate) round_robin: AtomicU64,
    /// Run after every request the cluster answers (the in-process harness count).
    change_hook: OnceLock<ChangeHook>,
}

type ChangeHook = Box<dyn Fn() + Send + Sync>;

/// Which way a connection reached the cluster: decides the addresses Metadata advertises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    Memory,
    Loopback,
}

impl Shared {
    /// Locks the cluster state. A handler never holds it across an await.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // Handlers validate before they mutate, so a panic cannot leave it half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `host:port` clients use to reach `node` through `listener`.
    pub(crate) fn advertised(&self, listener: Listener, node: i32) -> (String, u16) {
        match listener {
            Listener::Memory => (memory_host(self.id, node), MEMORY_PORT),
            Listener::Loopback => {
                let listeners = self
                    .listeners
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let addr = usize::try_from(node)
                    .ok()
                    .and_then(|n| listeners.get(n).copied());
                addr.map_or_else(
                    || ("127.0.0.1".to_owned(), 0),
                    |a| (a.ip().to_string(), a.port()),
                )
            }
        }
    }

    /// Sets what runs after every answered request; a second hook is ignored.
    pub(crate) fn on_change(&self, hook: ChangeHook) {
        let _ = self.change_hook.set(hook);
    }

    /// Runs the change hook, if any. Never called with the state locked.
    pub(crate) fn after_change(&self) {
        if let Some(hook) = self.change_hook.get() {
            hook();
        }
    }

    /// Node ids of the cluster.
    pub(crate) fn node_ids(&self) -> impl Iterator<Item = i32> {
        0..i32::from(self.options.nodes)
    }
}

fn memory_host(cluster: u64, node: i32) -> String {
    format!("embedded-{cluster}-{node}")
}

/// One node's in-memory endpoint: serves pipes dialled to its address.
struct NodeEndpoint {
    shared: Weak<Shared>,
    node: i32,
}

impl MemoryEndpoint for NodeEndpoint {
    fn accept(&self, stream: DuplexStream) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        // The dialling side runs on a runtime (connections are opened inside one), so the
        // broker's end is served there too and ends with it.
        tokio::spawn(server::serve(shared, self.node, Listener::Memory, stream));
    }
}

impl EmbeddedCluster {
    /// Starts a cluster with `options`; it is reachable at [`bootstrap`](Self::bootstrap) at
    /// once.
    #[must_use]
    pub fn new(options: ClusterOptions) -> Self {
        let options = ClusterOptions {
            nodes: options.nodes.max(1),
            num_partitions: options.num_partitions.max(1),
            ..options
        };
        let id = NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed);
        let faults = FaultState::new(options.nodes);
        let shared = Arc::new(Shared {
            id,
            state: Mutex::new(State::new(&options)),
            options,
            changed: Notify::new(),
            listeners: Mutex::new(Vec::new()),
            endpoints: Mutex::new(Vec::new()),
            faults,
            change_hook: OnceLock::new(),
            round_robin: AtomicU64::new(0),
        });
        let mut endpoints = Vec::new();
        for node in shared.node_ids() {
            let endpoint = Arc::new(NodeEndpoint {
                shared: Arc::downgrade(&shared),
                node,
            });
            let weak: Weak<dyn MemoryEndpoint> = {
                let as_dyn: Arc<dyn MemoryEndpoint> = endpoint.clone();
                Arc::downgrade(&as_dyn)
            };
            memory::register(format!("{}:{MEMORY_PORT}", memory_host(id, node)), weak);
            endpoints.push(endpoint);
        }
        *shared
            .endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = endpoints;
        EmbeddedCluster { shared }
    }

    /// The in-memory bootstrap list (`embedded-<cluster>-<node>:9092,...`): any client of this
    /// crate in this process connects through it without a socket.
    #[must_use]
    pub fn bootstrap(&self) -> String {
        self.shared
            .node_ids()
            .map(|node| format!("{}:{MEMORY_PORT}", memory_host(self.shared.id, node)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Opens one loopback TCP listener per node (ephemeral ports) on the current runtime and
    /// returns their addresses, node 0 first. Connections through them are served like the
    /// in-memory ones, and Metadata answers them with the loopback addresses. Calling it again
    /// returns the listeners already open.
    pub async fn listen(&self) -> std::io::Result<Vec<SocketAddr>> {
        {
            let open = self
                .shared
                .listeners
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !open.is_empty() {
                return Ok(open.clone());
            }
        }
        let mut bound = Vec::new();
        for _ in self.shared.node_ids() {
            bound.push(tokio::net::TcpListener::bind("127.0.0.1:0").await?);
        }
        let mut addresses = Vec::new();
        for listener in &bound {
            addresses.push(listener.local_addr()?);
        }
        self.shared
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone_from(&addresses);
        for (node, listener) in self.shared.node_ids().zip(bound) {
            let weak = Arc::downgrade(&self.shared);
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let Some(shared) = weak.upgrade() else { break };
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(server::serve(shared, node, Listener::Loopback, stream));
                }
            });
        }
        Ok(addresses)
    }

    /// The loopback bootstrap list, once [`listen`](Self::listen) has opened it.
    #[must_use]
    pub fn loopback_bootstrap(&self) -> Option<String> {
        let open = self
            .shared
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (!open.is_empty()).then(|| {
            open.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// Arms deterministic faults (failed, delayed or dropped requests, moved leaders and
    /// coordinators) on this cluster; see [`faults`](crate::testing::faults).
    #[must_use]
    pub fn faults(&self) -> Faults {
        Faults::new(self.shared.clone())
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for node in self.node_ids() {
            memory::unregister(&format!("{}:{MEMORY_PORT}", memory_host(self.id, node)));
        }
    }
}
