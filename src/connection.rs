//! The connection every handle of one connected broker shares: [`ConnectedKafkaBroker`] and
//! the [`BrokerState`] behind it (configuration, the metadata client, the shared producer,
//! the exactly-once registry, the observers and, in process, the transport's hand-over).
//!
//! The invariant: this module names nothing of the adapter above it (publishers,
//! subscriptions, deliveries); they all reach the connection through it, and it through
//! nothing of theirs, so the adapter's modules form a tree with this at its root.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{OnceCell, watch};

use crate::client::{
    Client, ClientConfig, Observers, Producer, ProducerConfig, SaslMechanism, TokenProvider,
    without_userinfo,
};
use crate::eos::EosRegistry;
use crate::error::KafkaError;
use crate::properties::{ProducerProperties, Properties};

/// The in-process arm a connection is opened with (nothing without the `testing` feature).
#[cfg(feature = "testing")]
pub(crate) type Link = Option<Arc<crate::testing::link::InProcessLink>>;
/// The in-process arm a connection is opened with (nothing without the `testing` feature).
#[cfg(not(feature = "testing"))]
pub(crate) type Link = Option<std::convert::Infallible>;

/// The connection state every handle of one connected broker shares.
pub(crate) struct BrokerState {
    pub(crate) servers: Vec<String>,
    pub(crate) default_group: Option<String>,
    /// `bootstrap.servers` and the broker's `config`: the base of every client.
    pub(crate) base: Properties,
    /// The base with the producer overlay.
    pub(crate) producer_properties: Properties,
    pub(crate) producer_settings: ProducerProperties,
    pub(crate) flush_timeout: Duration,
    pub(crate) assignment_timeout: Duration,
    /// The runtime `connect` ran on; the crate's tasks run here.
    pub(crate) runtime: Handle,
    pub(crate) closed: AtomicBool,
    /// The connect probe's client, kept for the producers.
    pub(crate) client: Client,
    /// The shared plain producer, created by the first publish.
    pub(crate) producer: OnceCell<Producer>,
    /// The `Commit::Transactional` subscriptions, by pipeline id.
    pub(crate) eos: EosRegistry,
    /// Consumers whose subscription is gone and whose close (commit, leave) still runs.
    pub(crate) closing_consumers: watch::Sender<usize>,
    /// Every subscription opened, in order: how the cluster routes a record to them.
    pub(crate) opened: std::sync::Mutex<Vec<Opened>>,
    /// Registered on every client the broker builds.
    pub(crate) observers: Observers,
    /// The OAUTHBEARER token provider installed on the `KafkaBroker`, for every client.
    pub(crate) token_provider: Option<TokenProvider>,
    /// The embedded cluster of an in-process connection.
    #[cfg(feature = "testing")]
    pub(crate) in_process: Link,
    /// What the transport hooks into publishes and deliveries (the in-process link's count).
    pub(crate) handover: Option<Arc<dyn crate::handover::Handover>>,
    /// The schema registry edges the subscriptions apply.
    #[cfg(feature = "schema-registry")]
    pub(crate) registry_edges: crate::schema_registry::Edges,
}

/// A subscription as routing sees it.
#[cfg_attr(
    not(feature = "testing"),
    allow(dead_code, reason = "read by the in-process routing of `testing`")
)]
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    pub(crate) name: String,
    pub(crate) group: Option<String>,
    pub(crate) topics: Vec<String>,
    pub(crate) pattern: Option<regex::Regex>,
    /// Whether it reads named partitions (a manual assignment, outside any group's sharing).
    pub(crate) partitions: bool,
}

impl Opened {
    /// Whether it reads `topic`.
    #[cfg_attr(
        not(feature = "testing"),
        allow(dead_code, reason = "read by the in-process routing of `testing`")
    )]
    pub(crate) fn reads(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t == topic)
            || self.pattern.as_ref().is_some_and(|p| p.is_match(topic))
    }
}

impl fmt::Debug for BrokerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerState")
            .field("servers", &redacted_servers(&self.servers))
            .field("default_group", &self.default_group)
            .field("closed", &self.is_closed())
            .field("producer_open", &self.producer.initialized())
            .finish_non_exhaustive()
    }
}

/// Puts `provider` (one installed on the `KafkaBroker`) in `config`'s OAUTHBEARER settings,
/// in place of what the properties gave.
pub(crate) fn install_token_provider(config: &mut ClientConfig, provider: Option<&TokenProvider>) {
    if let (Some(provider), Some(sasl)) = (provider, config.security.sasl.as_mut())
        && sasl.mechanism == SaslMechanism::OAuthBearer
    {
        sasl.token_provider = Some(provider.clone());
    }
}

impl BrokerState {
    /// `config` with the observers every client of this broker reports to.
    pub(crate) fn observed(&self, mut config: ClientConfig) -> ClientConfig {
        config.observers = self.observers.clone();
        install_token_provider(&mut config, self.token_provider.as_ref());
        config
    }

    #[cfg(feature = "schema-registry")]
    pub(crate) fn registry_edges(&self) -> &crate::schema_registry::Edges {
        &self.registry_edges
    }

    pub(crate) fn default_group(&self) -> Option<&str> {
        self.default_group.as_deref()
    }

    pub(crate) fn base_properties(&self) -> &Properties {
        &self.base
    }

    pub(crate) fn producer_properties(&self) -> &Properties {
        &self.producer_properties
    }

    pub(crate) fn producer_settings(&self) -> &ProducerProperties {
        &self.producer_settings
    }

    pub(crate) fn assignment_timeout(&self) -> Duration {
        self.assignment_timeout
    }

    pub(crate) fn runtime(&self) -> &Handle {
        &self.runtime
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn eos(&self) -> &EosRegistry {
        &self.eos
    }

    /// Notes a subscription opened on this connection.
    pub(crate) fn note_opened(&self, opened: Opened) {
        self.opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(opened);
    }

    /// Every subscription opened on this connection, in order.
    #[cfg_attr(
        not(feature = "testing"),
        allow(dead_code, reason = "read by the in-process routing of `testing`")
    )]
    pub(crate) fn opened(&self) -> Vec<Opened> {
        self.opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The observers every client of this broker reports to (the adapter's events too).
    pub(crate) fn observers(&self) -> &Observers {
        &self.observers
    }

    /// The transport's hand-over, where it promises more than Kafka (in process).
    pub(crate) fn handover(&self) -> Option<&Arc<dyn crate::handover::Handover>> {
        self.handover.as_ref()
    }

    /// The embedded cluster link of an in-process connection.
    #[cfg(feature = "testing")]
    pub(crate) fn in_process(&self) -> Option<&Arc<crate::testing::link::InProcessLink>> {
        self.in_process.as_ref()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// A subscription's last handle is gone: its consumer is closing.
    pub(crate) fn consumer_closing(&self) {
        self.closing_consumers.send_modify(|n| *n += 1);
    }

    /// A closing consumer finished (committed and left its group).
    pub(crate) fn consumer_closed(&self) {
        self.closing_consumers
            .send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Whether every consumer whose subscription was dropped has closed (committed and left
    /// its group).
    pub(crate) fn no_consumer_closing(&self) -> bool {
        *self.closing_consumers.borrow() == 0
    }

    /// Waits until every consumer whose subscription was dropped has closed (committed and
    /// left its group).
    pub(crate) async fn consumers_closed(&self) {
        let mut closing = self.closing_consumers.subscribe();
        let _ = closing.wait_for(|n| *n == 0).await;
    }

    /// Fails with [`KafkaError::Closed`] naming `what` once the broker is shut down.
    pub(crate) fn ensure_open(&self, what: &str) -> Result<(), KafkaError> {
        if self.is_closed() {
            Err(KafkaError::closed(what))
        } else {
            Ok(())
        }
    }

    /// The shared producer, created on first use (racing first publishes share one).
    ///
    /// Once it exists this is a plain read: the creation path is a boxed future of its own, so
    /// that every publish future does not carry the room it needs.
    pub(crate) async fn producer(&self) -> Result<&Producer, KafkaError> {
        match self.producer.get() {
            Some(producer) => Ok(producer),
            None => Box::pin(self.create_producer()).await,
        }
    }

    async fn create_producer(&self) -> Result<&Producer, KafkaError> {
        self.producer
            .get_or_try_init(|| async {
                let config: ProducerConfig = self.producer_settings().producer_config();
                // The producer's tasks belong on the broker's runtime, whoever publishes first.
                let _on_runtime = self.runtime.enter();
                Producer::new(self.client.clone(), config).map_err(KafkaError::publish)
            })
            .await
    }
}

/// The servers as `Debug` and errors show them: credentials written into an address
/// (`SASL_SSL://user:secret@host:9093`) are replaced, the rest kept.
pub(crate) fn redacted_servers(servers: &[String]) -> Vec<String> {
    servers
        .iter()
        .map(|server| without_userinfo(server).into_owned())
        .collect()
}

/// A connected broker: opens subscriptions and pairs publishers. Consumed by `shutdown`.
#[derive(Debug)]
pub struct ConnectedKafkaBroker {
    pub(crate) state: Arc<BrokerState>,
}

impl ConnectedKafkaBroker {
    pub(crate) fn state(&self) -> &BrokerState {
        &self.state
    }

    pub(crate) fn shared_state(&self) -> Arc<BrokerState> {
        Arc::clone(&self.state)
    }

    /// The embedded cluster this broker was connected to in process
    /// (`TestApp::start`, `TestApp::with_state`), `None` for a connection to real servers.
    /// Its [`faults`](crate::testing::EmbeddedCluster::faults) let a test put the service
    /// through a rebalance, an expired session, a moved leader or failing requests.
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn embedded_cluster(&self) -> Option<crate::testing::EmbeddedCluster> {
        self.state.in_process().map(|link| link.cluster.clone())
    }
}
