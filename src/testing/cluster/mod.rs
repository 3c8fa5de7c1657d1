//! An embedded Kafka cluster: brokers in this process that speak the Kafka protocol.
//!
//! [`EmbeddedCluster`] keeps topics, partition logs, consumer groups, committed offsets,
//! producer ids and transactions in memory and serves them over the wire protocol, so a test
//! runs the same client and adapter code as production. Clients reach it through in-memory
//! pipes (addresses from [`EmbeddedCluster::bootstrap`], no socket needed) or, when asked,
//! through TCP listeners ([`EmbeddedCluster::listen`] on ephemeral loopback ports,
//! [`EmbeddedCluster::listen_on`] on given addresses) that external tools can use.
//!
//! What it does not model is listed in `docs/embedded-cluster.md`.

mod configs;
mod direct;
mod dispatch;
mod fetch;
pub(crate) mod groups;
mod list_offsets;
mod log;
mod metadata;
mod msk_iam;
mod produce;
mod producers;
pub(crate) mod server;
mod state;
mod topics;
mod txn;
pub(crate) mod versions;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::io::DuplexStream;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::client::memory::{self, MemoryEndpoint};
use crate::testing::faults::{FaultState, Faults};

pub use direct::Refusal;
pub use msk_iam::{MskIamAuthority, iso8601};
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
    /// The TCP listeners' addresses, node 0 first; empty until `listen`/`listen_on`.
    listeners: Mutex<Vec<SocketAddr>>,
    /// The tasks accepting on them, stopped when the cluster goes so that the ports close.
    accept_tasks: Mutex<Vec<AbortHandle>>,
    endpoints: Mutex<Vec<Arc<NodeEndpoint>>>,
    /// Faults armed by the test, consulted before each request.
    pub(crate) faults: FaultState,
    /// The next partition of a keyless record written directly.
    pub(crate) round_robin: AtomicU64,
    /// Run after every request the cluster answers (the in-process harness count).
    change_hook: OnceLock<ChangeHook>,
    /// `AWS_MSK_IAM` on the TCP listeners, once required.
    pub(crate) msk_iam: OnceLock<Arc<MskIamAuthority>>,
    /// Whether group members' sessions are held rather than timed (see
    /// [`hold_sessions`](Shared::hold_sessions)).
    sessions_held: std::sync::atomic::AtomicBool,
}

type ChangeHook = Box<dyn Fn() + Send + Sync>;

/// Which way a connection reached the cluster: decides the addresses Metadata advertises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    Memory,
    /// One of the TCP listeners `listen`/`listen_on` opened.
    Tcp,
}

impl Shared {
    /// From now on a group member's session does not lapse on the clock: a member leaves its
    /// group by leaving, by being fenced or by [`Faults`](crate::testing::Faults) ending its
    /// session, as in the librdkafka adapter's in-process cluster, which has no sessions. The
    /// in-process transport asks for it: a test's paused clock steps over a session timeout at
    /// once (`TestApp::advance`), while no heartbeat could be sent, and a real member would
    /// have heartbeated all along.
    pub(crate) fn hold_sessions(&self) {
        self.sessions_held
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether members' sessions lapse on the clock (see [`hold_sessions`](Self::hold_sessions)).
    pub(crate) fn sessions_lapse(&self) -> bool {
        !self
            .sessions_held
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Locks the cluster state. A handler never holds it across an await.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // Handlers validate before they mutate, so a panic cannot leave it half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `host:port` clients use to reach `node` through `listener`.
    pub(crate) fn advertised(&self, listener: Listener, node: i32) -> (String, u16) {
        match listener {
            Listener::Memory => (memory_host(self.id, node), MEMORY_PORT),
            Listener::Tcp => {
                let listeners = self
                    .listeners
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let addr = usize::try_from(node)
                    .ok()
                    .and_then(|n| listeners.get(n).copied());
                addr.map_or_else(
                    || ("127.0.0.1".to_owned(), 0),
                    |a| (advertised_ip(a.ip()).to_string(), a.port()),
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

/// What clients are told to dial for a listener bound to `ip`: an unspecified address is not
/// one to dial, the loopback address of its family is (a client that reached it from another
/// machine would need the cluster to know its name, which it does not).
fn advertised_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    }
}

/// Binds one node's listener without blocking the runtime's reactor later on.
fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    // std's bind sets SO_REUSEADDR on Unix, so a port a stopped cluster left in TIME_WAIT can
    // be taken again at once, as Kafka's own acceptor can.
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// Accepts connections to `node` until the task is aborted (the cluster goes).
async fn accept(shared: Weak<Shared>, node: i32, listener: tokio::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                // Requests and answers are small and latency-bound; Kafka's sockets do the
                // same.
                let _ = stream.set_nodelay(true);
                tokio::spawn(server::serve(shared, node, Listener::Tcp, stream));
            }
            Err(e) => {
                // Accept fails for reasons that pass (a peer that reset before it was
                // accepted, descriptors exhausted for a moment): keep listening, without
                // spinning.
                tracing::warn!(node, error = %e, "embedded broker could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
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
            accept_tasks: Mutex::new(Vec::new()),
            endpoints: Mutex::new(Vec::new()),
            faults,
            change_hook: OnceLock::new(),
            msk_iam: OnceLock::new(),
            sessions_held: std::sync::atomic::AtomicBool::new(false),
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

    /// Makes the TCP listeners require `AWS_MSK_IAM` authentication verified by `authority`
    /// (the in-memory pipes stay open); connections accepted before keep their state. A second
    /// authority is ignored: the answer is the one in force.
    pub fn require_msk_iam(&self, authority: Arc<MskIamAuthority>) -> Arc<MskIamAuthority> {
        self.shared.msk_iam.get_or_init(|| authority).clone()
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
    /// returns the listeners already open (whether `listen` or
    /// [`listen_on`](Self::listen_on) opened them).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it does not await, so the listeners are open once it is first polled.
    // Async although nothing awaits: being polled puts it on a runtime, which the accept
    // tasks it spawns need (and callers of `listen` already await it).
    #[allow(clippy::unused_async)]
    pub async fn listen(&self) -> std::io::Result<Vec<SocketAddr>> {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let wanted = vec![any; usize::from(self.shared.options.nodes)];
        self.open_listeners(&wanted, true)
    }

    /// Opens one TCP listener per node on `addresses` (node 0 on the first) on the current
    /// runtime and returns the bound addresses (port 0 is replaced by the port the system
    /// chose). Metadata, `FindCoordinator` and the produce leader hints then advertise these
    /// addresses to clients that connected through them, so external clients (Kafka's console
    /// tools, kcat, another process's service) can use the cluster like a broker. An
    /// unspecified address (`0.0.0.0`, `::`) listens on every interface and is advertised as
    /// the loopback address of its family.
    ///
    /// The listeners close when the last clone of the cluster is dropped.
    ///
    /// # Errors
    ///
    /// `InvalidInput` when `addresses` does not hold one address per node, `AlreadyExists`
    /// when the cluster listens already, and the bind error (port in use, permission denied)
    /// naming the node and the address. Nothing stays open after an error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it does not await, so the listeners are open once it is first polled.
    // Async although nothing awaits: being polled puts it on a runtime, which the accept
    // tasks it spawns need (and callers of `listen` already await it).
    #[allow(clippy::unused_async)]
    pub async fn listen_on(&self, addresses: &[SocketAddr]) -> std::io::Result<Vec<SocketAddr>> {
        self.open_listeners(addresses, false)
    }

    /// Binds `wanted` and starts accepting. Everything happens under the listener lock, so two
    /// callers cannot both bind; binding is a system call, not worth an await.
    fn open_listeners(
        &self,
        wanted: &[SocketAddr],
        reuse_open: bool,
    ) -> std::io::Result<Vec<SocketAddr>> {
        use std::io::{Error, ErrorKind};
        let mut open = self
            .shared
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !open.is_empty() {
            if reuse_open {
                return Ok(open.clone());
            }
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("the embedded cluster already listens on {open:?}"),
            ));
        }
        let nodes = usize::from(self.shared.options.nodes);
        if wanted.len() != nodes {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "the embedded cluster has {nodes} node(s) and needs one address each, got {}",
                    wanted.len()
                ),
            ));
        }
        // Bound all before any accepts: a failure on a later node drops the earlier sockets.
        let mut bound = Vec::with_capacity(nodes);
        for (node, addr) in wanted.iter().enumerate() {
            let listener = bind(*addr).map_err(|e| {
                Error::new(
                    e.kind(),
                    format!("embedded node {node} could not listen on {addr}: {e}"),
                )
            })?;
            bound.push(listener);
        }
        let mut addresses = Vec::with_capacity(nodes);
        for listener in &bound {
            addresses.push(listener.local_addr()?);
        }
        let mut tasks = self
            .shared
            .accept_tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (node, listener) in self.shared.node_ids().zip(bound) {
            let weak = Arc::downgrade(&self.shared);
            tasks.push(tokio::spawn(accept(weak, node, listener)).abort_handle());
        }
        open.clone_from(&addresses);
        Ok(addresses)
    }

    /// The TCP bootstrap list (`host:port,...`, as advertised), once [`listen`](Self::listen)
    /// or [`listen_on`](Self::listen_on) has opened it.
    #[must_use]
    pub fn loopback_bootstrap(&self) -> Option<String> {
        let open = self
            .shared
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (!open.is_empty()).then(|| {
            open.iter()
                .map(|a| SocketAddr::new(advertised_ip(a.ip()), a.port()).to_string())
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
        for task in self
            .accept_tasks
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
        for node in self.node_ids() {
            memory::unregister(&format!("{}:{MEMORY_PORT}", memory_host(self.id, node)));
        }
    }
}
