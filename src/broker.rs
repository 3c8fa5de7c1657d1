//! The broker: [`KafkaBroker`] (configuration), [`ConnectedKafkaBroker`] (the connection every
//! handle aliases) and [`ClosedKafkaBroker`] (what shutdown leaves).
//!
//! Building a [`KafkaBroker`] does no I/O and needs no runtime. `connect` validates the
//! producer configuration like librdkafka would at client creation, probes the cluster with a
//! metadata request bounded by `connect_timeout`, and captures the current tokio runtime:
//! every task the crate starts later (consumers, producers, exactly-once windows) runs there,
//! so a handler publishing from a short-lived runtime of its own never strands one.
//!
//! The shared producer is created by the first publish, not by `connect`. `shutdown` marks the
//! connection closed first (every handle paired before then fails with
//! [`KafkaError::Closed`] from that moment), then flushes that producer for at most
//! `flush_timeout`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ruststream::{
    AddressedCopies, Broker, ConnectedBroker, DescribeServer, ServerSpec, Subscribe,
    SubscriptionSource,
};
use tokio::runtime::Handle;
use tokio::sync::{OnceCell, watch};

use crate::client::outlined::Outlined;
use crate::client::{Client, Observer, Observers, TokenProvider};
use crate::connection::{BrokerState, ConnectedKafkaBroker, Link, redacted_servers};
use crate::eos::EosRegistry;
use crate::error::KafkaError;
use crate::properties::{ProducerProperties, Properties, log_not_acted_on};
use crate::publisher::{KafkaPublish, KafkaPublisher};
use crate::subscriber::KafkaSubscriber;
use crate::subscription::KafkaTopic;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);
const ASSIGNMENT_TIMEOUT: Duration = Duration::from_mins(1);

/// A Kafka cluster to connect to: bootstrap servers, librdkafka properties and the crate's own
/// bounds. Building it does no I/O.
///
/// ```
/// use std::time::Duration;
///
/// use ruststream_kafka::KafkaBroker;
///
/// let broker = KafkaBroker::new(["localhost:9092"])
///     .default_group("order-intake")
///     .config("client.id", "orders")
///     .producer_config("acks", "all")
///     .connect_timeout(Duration::from_secs(10));
/// ```
#[derive(Clone)]
pub struct KafkaBroker {
    servers: Vec<String>,
    default_group: Option<String>,
    config: Properties,
    producer_config: Properties,
    connect_timeout: Duration,
    flush_timeout: Duration,
    assignment_timeout: Duration,
    /// Who is told what the clients of this broker do.
    observers: Observers,
    /// Where every client's OAUTHBEARER tokens come from, when installed in code.
    token_provider: Option<TokenProvider>,
    /// The schema registry and prefetch attached to this broker.
    #[cfg(feature = "schema-registry")]
    registry_edges: crate::schema_registry::Edges,
}

impl fmt::Debug for KafkaBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaBroker")
            .field("servers", &redacted_servers(&self.servers))
            .field("default_group", &self.default_group)
            // Keys are printed, secret values redacted.
            .field("config", &self.config)
            .field("producer_config", &self.producer_config)
            .field("connect_timeout", &self.connect_timeout)
            .field("flush_timeout", &self.flush_timeout)
            .field("assignment_timeout", &self.assignment_timeout)
            .field("observers", &self.observers.len())
            .field("token_provider", &self.token_provider.is_some())
            .finish_non_exhaustive()
    }
}

impl KafkaBroker {
    /// The bootstrap servers: `host`, `host:port`, or `PLAINTEXT://host:port` style entries.
    #[must_use]
    pub fn new<I, S>(servers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            servers: servers.into_iter().map(S::into).collect(),
            default_group: None,
            config: Properties::new(),
            producer_config: Properties::new(),
            connect_timeout: CONNECT_TIMEOUT,
            flush_timeout: FLUSH_TIMEOUT,
            assignment_timeout: ASSIGNMENT_TIMEOUT,
            observers: Observers::default(),
            token_provider: None,
            #[cfg(feature = "schema-registry")]
            registry_edges: crate::schema_registry::Edges::default(),
        }
    }

    /// Attaches a schema registry for the consume edge: every subscription turns deliveries
    /// in the Confluent envelope into plain JSON (JSON Schema payloads lose the envelope, Avro
    /// and Protobuf ones are converted with the schema the id names) before handlers decode
    /// them. Unframed payloads, and framed ones that cannot be converted (logged), arrive
    /// untouched. Pair it with the [`SchemaFrame`](crate::SchemaFrame) publish layer for the
    /// way out. Nothing is asked of the registry until a framed record arrives.
    #[cfg(feature = "schema-registry")]
    #[must_use]
    pub fn schema_registry(mut self, registry: crate::SchemaRegistry) -> Self {
        self.registry_edges.registry = Some(registry);
        self
    }

    /// Attaches the [`SchemaPrefetch`](crate::SchemaPrefetch) the registry codecs were built
    /// from: `connect` resolves (and checks, or registers) every subject they declared, and
    /// each subscription caches a framed delivery's writer schema before its codec decodes
    /// it. Payloads are left framed: the codecs read the envelope themselves.
    #[cfg(feature = "schema-registry")]
    #[must_use]
    pub fn schema_prefetch(mut self, prefetch: crate::SchemaPrefetch) -> Self {
        self.registry_edges.prefetch = Some(prefetch);
        self
    }

    /// The consumer group of subscriptions that name none (a bare-name subscription needs it).
    #[must_use]
    pub fn default_group(mut self, group: impl Into<String>) -> Self {
        self.default_group = Some(group.into());
        self
    }

    /// A librdkafka property for every client: consumers and the producer. A later call with
    /// the same key wins.
    #[must_use]
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.set(key, value);
        self
    }

    /// A librdkafka property for the producer only, on top of [`config`](Self::config).
    #[must_use]
    pub fn producer_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.producer_config.set(key, value);
        self
    }

    /// How long `connect` waits for the cluster to answer its probe (default 30 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long `shutdown` waits for the producer to deliver what it holds (default 30 s).
    #[must_use]
    pub fn flush_timeout(mut self, timeout: Duration) -> Self {
        self.flush_timeout = timeout;
        self
    }

    /// How long a group subscription waits for its first assignment (default 60 s, which
    /// leaves room for a `session.timeout.ms` of 45 s plus the broker's
    /// `group.initial.rebalance.delay.ms`).
    #[must_use]
    pub fn assignment_timeout(mut self, timeout: Duration) -> Self {
        self.assignment_timeout = timeout;
        self
    }

    /// Registers `observer` on every client of this broker (the connect probe and the
    /// producers, and each subscription's consumer): it hears their connections and requests
    /// as they happen (see [`crate::client::observe`]). Observers add up; with none, nothing is
    /// reported and nothing is paid.
    #[must_use]
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observers = self.observers.with(Arc::new(observer));
        self
    }

    /// Installs the source of OAUTHBEARER tokens for every client of this broker (the
    /// connect probe, the producers and each subscription's consumer), for
    /// `sasl.mechanism=OAUTHBEARER`: librdkafka's token refresh callback, made async. It takes
    /// the place of what `sasl.oauthbearer.method=oidc` or
    /// `enable.sasl.oauthbearer.unsecure.jwt` would give.
    ///
    /// The provider asks its source for a token when a connection authenticates and none is
    /// cached, and again once 80 % of the token's lifetime has passed; a failed refresh keeps
    /// the current token while it is valid and is retried after a backoff. An error with no
    /// valid token fails the connection with the source's text (at `connect`, the startup).
    /// Whatever the source awaits runs on the client's runtime: do I/O with async clients.
    ///
    /// ```no_run
    /// use std::time::{Duration, SystemTime};
    ///
    /// use ruststream_kafka::KafkaBroker;
    /// use ruststream_kafka::client::{OAuthToken, Secret, TokenProvider};
    ///
    /// /// Asks the service's identity provider (a stand-in here).
    /// async fn fetch_from_identity_provider() -> Result<(String, u64), String> {
    ///     Ok(("eyJhbGciOiJSUzI1NiJ9.e30.c2ln".to_owned(), 3600))
    /// }
    ///
    /// let tokens = TokenProvider::new(|| async {
    ///     let (jwt, lifetime_seconds) = fetch_from_identity_provider().await?;
    ///     Ok(OAuthToken {
    ///         value: Secret::new(jwt),
    ///         expires: SystemTime::now() + Duration::from_secs(lifetime_seconds),
    ///         principal: "orders-service".to_owned(),
    ///         // SASL extensions (`key=value`) some brokers ask for, e.g. Confluent Cloud's
    ///         extensions: vec![("logicalCluster".to_owned(), "lkc-abc123".to_owned())],
    ///     })
    /// });
    /// let broker = KafkaBroker::new(["kafka.example.com:9093"])
    ///     .config("security.protocol", "SASL_SSL")
    ///     .config("sasl.mechanism", "OAUTHBEARER")
    ///     .oauthbearer_token_provider(tokens);
    /// ```
    #[must_use]
    pub fn oauthbearer_token_provider(mut self, provider: TokenProvider) -> Self {
        self.token_provider = Some(provider);
        self
    }

    /// `bootstrap.servers`, then every `config` pair.
    fn base_properties(&self) -> Properties {
        let mut base = Properties::new();
        base.set("bootstrap.servers", self.servers.join(","));
        for (key, value) in &self.config {
            base.set(key, value);
        }
        base
    }

    /// The base properties with the producer overlay.
    fn producer_properties(base: &Properties, overlay: &Properties) -> Properties {
        let mut producer = base.clone();
        for (key, value) in overlay {
            producer.set(key, value);
        }
        producer
    }
}

impl Broker for KafkaBroker {
    type Error = KafkaError;
    type Connected = ConnectedKafkaBroker;

    async fn connect(self) -> Result<ConnectedKafkaBroker, KafkaError> {
        self.open(None).await
    }
}

impl KafkaBroker {
    /// Refuses a broker with no bootstrap server, as `connect` does before any I/O.
    pub(crate) fn check_servers(&self) -> Result<(), KafkaError> {
        if self.servers.iter().all(|s| s.trim().is_empty()) {
            return Err(KafkaError::InvalidOptions(
                "at least one bootstrap server is required: `KafkaBroker::new([\"host:9092\"])`"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The producer configuration every client of this broker starts from, validated.
    #[cfg_attr(
        not(feature = "testing"),
        allow(dead_code, reason = "read by the in-process routing of `testing`")
    )]
    pub(crate) fn producer_settings(&self) -> Result<ProducerProperties, KafkaError> {
        let base = self.base_properties();
        Self::producer_properties(&base, &self.producer_config)
            .producer()
            .map_err(KafkaError::connect)
    }

    /// Connects: to the configured servers, or (in-process) to `link`'s cluster, whose
    /// address then replaces the servers in every client's configuration.
    #[inline(never)]
    pub(crate) fn open(
        self,
        link: Link,
    ) -> Outlined<'static, Result<ConnectedKafkaBroker, KafkaError>> {
        Box::pin(async move {
            #[cfg(not(feature = "testing"))]
            let _ = link;
            self.check_servers()?;
            #[allow(unused_mut, reason = "rewritten only in process")]
            let mut base = self.base_properties();
            #[cfg(feature = "testing")]
            if let Some(link) = &link {
                base.set("bootstrap.servers", link.cluster.bootstrap());
            }
            let producer_properties = Self::producer_properties(&base, &self.producer_config);
            let producer = producer_properties
                .producer()
                .map_err(KafkaError::connect)?;
            log_not_acted_on(&producer_properties);
            let runtime = Handle::current();
            let mut client_config = producer.client_config();
            // every client of the broker reports to the statistics of `statistics.interval.ms`
            let observers = crate::statistics::reporting(
                &client_config.client_id,
                client_config.statistics_interval,
                &self.observers,
            );
            client_config.observers = observers.clone();
            crate::connection::install_token_provider(
                &mut client_config,
                self.token_provider.as_ref(),
            );
            let probe = Client::connect(client_config);
            let client = match tokio::time::timeout(self.connect_timeout, probe).await {
                Ok(Ok(client)) => client,
                Ok(Err(e)) => return Err(KafkaError::connect(e)),
                Err(_) => {
                    return Err(KafkaError::Connect(KafkaError::text(format!(
                        "no broker of {} answered within {:?}",
                        redacted_servers(&self.servers).join(","),
                        self.connect_timeout
                    ))));
                }
            };
            #[cfg(feature = "schema-registry")]
            self.registry_edges.on_connect().await?;
            Ok(ConnectedKafkaBroker {
                state: Arc::new(BrokerState {
                    servers: self.servers,
                    default_group: self.default_group,
                    base,
                    producer_properties,
                    producer_settings: producer,
                    flush_timeout: self.flush_timeout,
                    assignment_timeout: self.assignment_timeout,
                    runtime,
                    closed: AtomicBool::new(false),
                    client,
                    producer: OnceCell::new(),
                    eos: EosRegistry::default(),
                    closing_consumers: watch::Sender::new(0),
                    opened: std::sync::Mutex::new(Vec::new()),
                    observers,
                    token_provider: self.token_provider,
                    handover: link.as_ref().map(crate::handover::Transport::handover),
                    #[cfg(feature = "testing")]
                    in_process: link,
                    #[cfg(feature = "schema-registry")]
                    registry_edges: self.registry_edges,
                }),
            })
        })
    }
}

impl DescribeServer for KafkaBroker {
    fn describe_server(&self) -> ServerSpec {
        let hosts: Vec<String> = self
            .servers
            .iter()
            .map(|s| ServerSpec::host_from_url(s))
            .collect();
        let spec = ServerSpec::new(hosts.join(","), "kafka"); // AsyncAPI protocol name
        #[cfg(all(feature = "schema-registry", feature = "asyncapi"))]
        let spec = spec.bindings(crate::bindings::server(
            self.registry_edges
                .registry
                .as_ref()
                .and_then(crate::SchemaRegistry::public_url)
                .as_deref(),
        ));
        spec
    }
}

impl ConnectedKafkaBroker {
    /// A plain publisher on the shared producer (what pairing a [`KafkaPublish`] gives).
    #[must_use]
    pub fn publisher(&self, policy: KafkaPublish) -> KafkaPublisher {
        KafkaPublisher::new(self.shared_state(), policy.queue_bound())
    }

    /// Opens any of the crate's descriptors, or a core wrapper around one (such as
    /// `StartAt`).
    pub fn subscribe_with<S>(
        &self,
        source: S,
    ) -> impl Future<Output = Result<KafkaSubscriber, KafkaError>> + Send
    where
        // Only the reference's bound: the future `subscribe` returns is `Send` by the trait's
        // contract, so the source itself need be neither `Send` nor `'static`.
        S: SubscriptionSource<Self, Subscriber = KafkaSubscriber>,
    {
        source.subscribe(self)
    }
}

impl ConnectedBroker for ConnectedKafkaBroker {
    type Error = KafkaError;
    type Closed = ClosedKafkaBroker;

    fn shutdown(self) -> impl Future<Output = Result<ClosedKafkaBroker, KafkaError>> + Send {
        self.shutdown_outlined()
    }
}

impl ConnectedKafkaBroker {
    /// The shutdown behind [`ConnectedBroker::shutdown`], compiled once (see [`Outlined`]).
    #[inline(never)]
    fn shutdown_outlined(self) -> Outlined<'static, Result<ClosedKafkaBroker, KafkaError>> {
        Box::pin(async move {
            let state = &self.state;
            state.closed.store(true, Ordering::Release);
            let unflushed = match state.producer.get() {
                None => 0,
                Some(producer) => {
                    let left = producer.close(state.flush_timeout).await;
                    i32::try_from(left).unwrap_or(i32::MAX)
                }
            };
            // Subscriptions dropped just before shutdown are still committing and leaving their
            // groups; a process that exits now would lose the commits and leave members behind
            // until their session times out.
            let mut closing = state.closing_consumers.subscribe();
            let _ = tokio::time::timeout(state.flush_timeout, closing.wait_for(|n| *n == 0)).await;
            state.client.push_final_metrics().await;
            state.client.close();
            if unflushed > 0 {
                return Err(KafkaError::Publish(KafkaError::text(format!(
                    "shutdown: {unflushed} records were still undelivered after the {:?} flush",
                    state.flush_timeout
                ))));
            }
            Ok(ClosedKafkaBroker { unflushed })
        })
    }
}

impl Subscribe for ConnectedKafkaBroker {
    type Subscriber = KafkaSubscriber;
    type Copies = AddressedCopies;

    fn subscribe(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<KafkaSubscriber, KafkaError>> + Send {
        KafkaTopic::new(name).subscribe(self)
    }
}

/// What `shutdown` leaves: the records the producer still held after its flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedKafkaBroker {
    unflushed: i32,
}

impl ClosedKafkaBroker {
    /// Records the producer still held after the flush (0 after a clean flush, and when no
    /// publish ever opened the producer).
    #[must_use]
    pub fn unflushed_records(&self) -> i32 {
        self.unflushed
    }
}

#[cfg(test)]
mod tests {
    use super::KafkaBroker;

    #[test]
    fn construction_needs_no_runtime_and_prints_no_secret() {
        let broker = KafkaBroker::new(["a:9092", "b:9092"])
            .default_group("g")
            .config("sasl.password", "hunter2")
            .producer_config("acks", "all");
        let printed = format!("{broker:?}");
        assert!(printed.contains("sasl.password"), "{printed}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("acks"), "{printed}");
    }

    #[test]
    fn credentials_in_an_address_are_not_printed() {
        let broker = KafkaBroker::new([
            "SASL_SSL://ana:s3cret@kafka-1:9093",
            "bob:pa55@kafka-2:9093",
            "kafka-3:9092",
        ]);
        let printed = format!("{broker:?}");
        for secret in ["s3cret", "pa55", "ana", "bob"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        for kept in [
            "SASL_SSL://[redacted]@kafka-1:9093",
            "[redacted]@kafka-2:9093",
            "kafka-3:9092",
        ] {
            assert!(printed.contains(kept), "{printed}");
        }
    }

    /// `subscribe_with` asks of its source only what the reference asks: a caller generic over
    /// the source, with the reference's bound alone, compiles.
    #[allow(dead_code, reason = "compiling it is the test")]
    async fn subscribe_with_asks_only_for_a_subscription_source<Source>(
        connected: &super::ConnectedKafkaBroker,
        source: Source,
    ) -> Result<super::KafkaSubscriber, super::KafkaError>
    where
        Source: super::SubscriptionSource<
                super::ConnectedKafkaBroker,
                Subscriber = super::KafkaSubscriber,
            >,
    {
        connected.subscribe_with(source).await
    }

    /// Everything a failed connect says: the error's text, its `Debug` and its sources'.
    fn all_said(err: &super::KafkaError) -> String {
        let mut said = vec![format!("{err} {err:?}")];
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            said.push(format!("{cause} {cause:?}"));
            source = cause.source();
        }
        said.join(" ")
    }

    #[tokio::test]
    async fn a_failed_connect_names_no_credential_of_an_address() {
        use std::time::Duration;

        use ruststream::Broker;

        // Nothing listens on port 1; the address cannot be dialled either way.
        for server in [
            "zuser:s3cret@127.0.0.1:1",
            "SASL_SSL://zuser:s3cret@127.0.0.1:1",
        ] {
            let err = KafkaBroker::new([server])
                .connect_timeout(Duration::from_secs(5))
                .connect()
                .await
                .expect_err("nothing to connect to");
            let said = all_said(&err);
            assert!(
                !said.contains("s3cret") && !said.contains("zuser"),
                "{said}"
            );
            assert!(said.contains("[redacted]@127.0.0.1:1"), "{said}");
        }
        // A broker that accepts and never answers: the connect timeout is what fails, and its
        // text lists every bootstrap server.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let silent_address = silent.local_addr().expect("bound").to_string();
        let _holder = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = silent.accept().await {
                held.push(stream);
            }
        });
        let err = KafkaBroker::new([
            "SASL_SSL://zuser:s3cret@127.0.0.1:1",
            silent_address.as_str(),
        ])
        .connect_timeout(Duration::from_millis(300))
        .connect()
        .await
        .expect_err("no broker answers");
        let said = all_said(&err);
        assert!(said.contains("answered within"), "{said}");
        assert!(
            !said.contains("s3cret") && !said.contains("zuser"),
            "{said}"
        );
        assert!(
            said.contains("SASL_SSL://[redacted]@127.0.0.1:1") && said.contains(&silent_address),
            "{said}"
        );
    }

    #[test]
    fn property_views_print_no_credential_of_an_address() {
        let broker = KafkaBroker::new(["zuser:s3cret@kafka-1:9093"])
            .config("metadata.broker.list", "bob:pa55@kafka-2:9093, kafka-3");
        let base = broker.base_properties();
        let printed = format!("{base:?} {:?}", base.producer().expect("accepted"));
        for secret in ["s3cret", "pa55", "zuser", "bob"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert!(printed.contains("[redacted]@kafka-2:9093"), "{printed}");
        let config = base.producer().expect("accepted").client_config();
        let printed = format!("{config:?}");
        assert!(!printed.contains("pa55"), "{printed}");
    }

    #[tokio::test]
    async fn no_server_is_invalid_options() {
        use ruststream::Broker;
        let err = KafkaBroker::new(Vec::<String>::new())
            .connect()
            .await
            .expect_err("no servers");
        assert!(
            err.to_string()
                .contains("at least one bootstrap server is required")
        );
    }
}
