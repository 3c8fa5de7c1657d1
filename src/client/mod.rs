//! The native Kafka client: wire protocol over tokio, with no `RustStream` types.
//!
//! [`Client`] owns the connections and the metadata cache and is cheap to clone; the
//! [`Producer`], [`PartitionReader`] and [`Admin`] are built on one. This module never imports
//! `ruststream`, so it could be published on its own.

mod admin;
pub(crate) mod aws;
mod cluster;
mod config;
pub mod consumer;
mod coordinator;
mod error;
mod hashing;
mod isolation;
mod json;
pub mod metrics;
mod net;
pub mod observe;
#[cfg(feature = "oidc")]
mod oidc;
pub(crate) mod outlined;
pub mod producer;
#[cfg(any(feature = "ssl", feature = "schema-registry", feature = "oidc"))]
mod provider;
mod reader;
pub mod records;
mod security;
pub mod statistics;
mod telemetry;
mod token;
mod topic_partition;
mod unwind;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::{Request, StrBytes, VersionRange};

pub use admin::{Admin, GroupDescription, NewTopic, OffsetSpec};
pub use aws::{AwsCredentialChain, AwsCredentials, AwsCredentialsFuture, AwsCredentialsProvider};
pub use cluster::{BrokerInfo, LeaderHint, Metadata, MetadataRecovery, PartitionInfo, TopicInfo};
pub use config::{Acks, ClientConfig, ProducerConfig};
pub(crate) use config::{bootstrap_list_shown, without_userinfo};
pub use consumer::{
    CORRUPT_REFETCHES, CommittedOffset, Consumer, ConsumerConfig, ConsumerEvent, ConsumerHandle,
    CorruptBatch, FetchStats, GroupMember, GroupMetadata, GroupProtocol, LateTopicStart,
    OffsetReset, OffsetToCommit, Offsets, PartitionRecords, Revocation, StartAt, Subscription,
    TopicPartition,
};
pub use coordinator::CoordinatorKind;
pub use error::{Error, ResponseError, Result};
pub use isolation::IsolationLevel;
pub use metrics::MetricsObserver;
#[cfg(feature = "ssl")]
pub use net::TlsConnector;
#[cfg(feature = "testing")]
pub(crate) use net::check_request;
#[cfg(fuzzing)]
pub(crate) use net::unsecured_token_now;
pub use net::{
    ApiVersions, Backoff, Connection, ConnectionOptions, InFlight, check_response, memory,
    reauthentications, unsecured_jwt_provider,
};
pub use observe::{Event, Interest, Observer, Observers, PartitionChange, Settlement};
#[cfg(feature = "oidc")]
pub use oidc::{OidcConfig, oidc_provider, parse_extensions};
pub use producer::{
    DeliveryFuture, Partitioner, Producer, ProducerRecord, RecordMetadata, RecordRef,
    TransactionError, TransactionErrorKind, TransactionProtocol, TransactionalProducer,
};
#[cfg(any(feature = "ssl", feature = "schema-registry", feature = "oidc"))]
pub use provider::{TLS_PROVIDER_VARIABLE, TlsProvider, crypto_provider, tls_provider};
pub use reader::{FetchedPartition, PartitionReader};
pub use records::{Codec, Header, Record};
pub use security::{
    CaSource, Keystore, OAuthToken, Pem, SaslConfig, SaslMechanism, Secret, SecurityConfig,
    SecurityProtocol, TlsConfig, TokenProvider,
};
pub use statistics::StatisticsObserver;
pub use telemetry::ClientRole;
pub use token::TokenFuture;

use cluster::Connections;
use outlined::Outlined;

/// A connection to a Kafka cluster: shared connections and the metadata cache.
///
/// Cloning is cheap and every clone shares the same connections.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: ClientConfig,
    connections: Connections,
    metadata: RwLock<Metadata>,
    /// Counts the changes of `metadata`, so that a cache of what it said can tell it is stale
    /// with one load (bumped under its write lock).
    metadata_generation: AtomicU64,
    // Serialises refreshes so that a burst of misses costs one request.
    refreshing: tokio::sync::Mutex<()>,
    /// When the bootstrap servers are asked again (KIP-899).
    recovery: cluster::Recovery,
    coordinators: coordinator::Coordinators,
    /// KIP-714 pushes, with `enable.metrics.push`.
    telemetry: Option<Arc<telemetry::Telemetry>>,
    /// Dropped with the client: the client's own tasks, which hold it weakly, end when it is
    /// (their receivers see the channel close) rather than at their next wake-up, minutes away.
    lifeline: tokio::sync::watch::Sender<()>,
}

/// Refreshes the known topics every `topic.metadata.refresh.interval.ms`, until the client is
/// dropped (`lifeline` closes), so that leader moves are seen even by a client that hits no
/// error.
async fn refresh_periodically(
    inner: std::sync::Weak<Inner>,
    mut lifeline: tokio::sync::watch::Receiver<()>,
) {
    loop {
        let Some(interval) = inner.upgrade().map(|i| i.config.metadata_refresh_interval) else {
            return;
        };
        if interval.is_zero() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = lifeline.changed() => return,
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let client = Client { inner };
        let topics: Vec<String> = client.with_metadata(|m| m.topics.keys().cloned().collect());
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        if let Err(e) = client.refresh_metadata(&names).await {
            tracing::debug!(error = %e, "periodic metadata refresh failed");
        }
    }
}

/// Metadata request versions whose semantics the client implements (13: the answer's own
/// error code, `REBOOTSTRAP_REQUIRED` among them).
const METADATA_VERSIONS: VersionRange = VersionRange { min: 4, max: 13 };

impl Client {
    /// Connects to the cluster: dials the bootstrap servers until one answers a Metadata
    /// request, and fills the cache with the brokers.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the half-built client and its connections are dropped (a dial still running on
    /// the runtime finishes and its connection is closed); the periodic metadata refresh is started
    /// only after the last await.
    pub async fn connect(mut config: ClientConfig) -> Result<Client> {
        config.validate()?;
        // A list set field by field skipped `ClientConfig::new`'s parse: credentials in an
        // address would reach every error and log that names it (and cannot be dialled).
        for server in &mut config.bootstrap_servers {
            if let Cow::Owned(shown) = without_userinfo(server) {
                *server = shown;
            }
        }
        // The tally hears this client's events only: it is its own observer, registered here.
        let telemetry = config
            .enable_metrics_push
            .then(|| Arc::new(telemetry::Telemetry::new()));
        if let Some(t) = &telemetry {
            config.observers = config.observers.with(t.tally());
        }
        let options = ConnectionOptions {
            client_id: Some(config.client_id.clone()),
            connect_timeout: config.connect_timeout,
            max_response_size: config.max_response_size,
            runtime: tokio::runtime::Handle::try_current().ok(),
            #[cfg(feature = "ssl")]
            tls: config.tls_connector()?,
            sasl: config.sasl()?,
            observers: config.observers.clone(),
        };
        let backoff = Backoff::new(config.reconnect_backoff, config.reconnect_backoff_max);
        let (lifeline, _) = tokio::sync::watch::channel(());
        let client = Client {
            inner: Arc::new(Inner {
                connections: Connections::new(options, backoff),
                metadata: RwLock::new(Metadata::default()),
                metadata_generation: AtomicU64::new(0),
                refreshing: tokio::sync::Mutex::new(()),
                recovery: cluster::Recovery::new(
                    config.metadata_recovery,
                    config.rebootstrap_trigger,
                ),
                coordinators: coordinator::Coordinators::default(),
                telemetry,
                lifeline,
                config,
            }),
        };
        client.refresh_metadata(&[]).await?;
        outlined::spawn(refresh_periodically(
            Arc::downgrade(&client.inner),
            client.inner.lifeline.subscribe(),
        ));
        if let Some(t) = &client.inner.telemetry {
            outlined::spawn(telemetry::run(
                Arc::downgrade(&client.inner),
                Arc::clone(t),
                client.inner.lifeline.subscribe(),
            ));
        }
        Ok(client)
    }

    /// The configuration this client was built with.
    #[must_use]
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// A snapshot of the metadata cache.
    #[must_use]
    pub fn metadata(&self) -> Metadata {
        self.inner
            .metadata
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many times the metadata cache has changed: what was read from it while this was
    /// the same still holds.
    pub(crate) fn metadata_generation(&self) -> u64 {
        self.inner.metadata_generation.load(Ordering::Acquire)
    }

    /// Runs `f` on the metadata cache without copying it.
    pub fn with_metadata<T>(&self, f: impl FnOnce(&Metadata) -> T) -> T {
        f(&self
            .inner
            .metadata
            .read()
            .unwrap_or_else(PoisonError::into_inner))
    }

    /// Takes the new leaders Produce and Fetch answers named (KIP-951), so that a moved
    /// partition is sent to its new leader without waiting for a metadata refresh; returns how
    /// many partitions changed leader (see [`Metadata::learn_leaders`]).
    pub(crate) fn learn_leaders(&self, hints: &[LeaderHint], nodes: &[BrokerInfo]) -> usize {
        if hints.is_empty() {
            return 0;
        }
        let changed = self
            .inner
            .metadata
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .learn_leaders(hints, nodes);
        if changed > 0 {
            self.inner
                .metadata_generation
                .fetch_add(1, Ordering::Release);
            tracing::debug!(
                partitions = changed,
                "leaders learnt from a Produce or Fetch answer"
            );
        }
        changed
    }

    /// Asks the cluster about `topics` (only the brokers when empty) and updates the cache.
    ///
    /// Tries each known broker until one answers; the bootstrap servers before the first answer
    /// and when `metadata.recovery.strategy=rebootstrap` sends the client back to them (every
    /// known broker failed, no answer for `metadata.recovery.rebootstrap.trigger.ms`, or a
    /// broker answered `REBOOTSTRAP_REQUIRED`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cache is updated only in the poll that gets an answer, so a dropped refresh
    /// leaves it as it was. With `allow_auto_create_topics`, a Metadata request already sent may
    /// still create the topics.
    pub async fn refresh_metadata(&self, topics: &[&str]) -> Result<()> {
        self.fetch_metadata(Some(topics), self.inner.config.allow_auto_create_topics)
            .await
    }

    /// Asks the cluster about every topic and replaces the cached topic list.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cache is replaced only in the poll that gets an answer, so a dropped
    /// refresh leaves it as it was.
    pub async fn refresh_all_metadata(&self) -> Result<()> {
        self.fetch_metadata(None, false).await
    }

    /// Asks the cluster and updates the cache; compiled once (see [`Outlined`]).
    #[inline(never)]
    fn fetch_metadata<'a>(
        &'a self,
        topics: Option<&'a [&'a str]>,
        auto_create: bool,
    ) -> Outlined<'a, Result<()>> {
        Box::pin(async move {
            let _turn = self.inner.refreshing.lock().await;
            let recovery = &self.inner.recovery;
            let due = recovery.round_begins();
            let (learned, bootstrap) = self.known_and_bootstrap();
            let mut asked_bootstrap = learned.is_empty() || due;
            // The bootstrap servers first when they are due: the learned brokers just failed, or
            // one of them asked for it.
            let mut queue: std::collections::VecDeque<(String, bool)> = if asked_bootstrap {
                let learned = learned.iter().map(|a| (a.clone(), false));
                bootstrap
                    .iter()
                    .map(|a| (a.clone(), true))
                    .chain(learned)
                    .collect()
            } else {
                learned.iter().map(|a| (a.clone(), false)).collect()
            };
            let mut last_error = None;
            let mut learned_failed = 0;
            while let Some((address, from_bootstrap)) = queue.pop_front() {
                let answer = match self.ask_metadata(&address, topics, auto_create).await {
                    Ok(answer) => answer,
                    Err(e) => {
                        last_error = Some(e);
                        if !from_bootstrap {
                            learned_failed += 1;
                        }
                        // Every broker it knows failed in this round: librdkafka's "all brokers
                        // down", which sends it back to its bootstrap servers.
                        if !asked_bootstrap
                            && learned_failed == learned.len()
                            && recovery.request(format_args!(
                                "all {} known brokers failed; the last: {address}",
                                learned.len()
                            ))
                        {
                            asked_bootstrap = true;
                            queue.extend(bootstrap.iter().map(|a| (a.clone(), true)));
                        }
                        continue;
                    }
                };
                if let Some(code) = ResponseError::try_from_code(answer.error_code) {
                    last_error = Some(Error::Broker {
                        code,
                        context: format!("metadata from {address}"),
                    });
                    if code == ResponseError::RebootstrapRequired
                        && recovery.request(format_args!("{address} answered REBOOTSTRAP_REQUIRED"))
                        && !asked_bootstrap
                    {
                        asked_bootstrap = true;
                        // Before the other learned brokers, which are likely to say the same.
                        for a in bootstrap.iter().rev() {
                            queue.push_front((a.clone(), true));
                        }
                    }
                    continue;
                }
                recovery.answered(!answer.brokers.is_empty());
                let mut cache = self
                    .inner
                    .metadata
                    .write()
                    .unwrap_or_else(PoisonError::into_inner);
                let merged = cache.merge(answer, topics.is_none());
                self.inner
                    .metadata_generation
                    .fetch_add(1, Ordering::Release);
                return merged;
            }
            Err(last_error.unwrap_or_else(|| Error::Closed("no broker to ask for metadata".into())))
        })
    }

    /// One Metadata request to `address`.
    async fn ask_metadata(
        &self,
        address: &str,
        topics: Option<&[&str]>,
        auto_create: bool,
    ) -> Result<MetadataResponse> {
        let conn = self.inner.connections.get(address).await?;
        let version = conn.version_of::<MetadataRequest>(METADATA_VERSIONS)?;
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|n| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string((*n).to_owned()))))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(auto_create);
        conn.send(&request, version, self.inner.config.socket_timeout)
            .await
    }

    /// The learned brokers' addresses (shuffled) and the bootstrap servers that are not
    /// among them.
    fn known_and_bootstrap(&self) -> (Vec<String>, Vec<String>) {
        let mut known: Vec<String> =
            self.with_metadata(|m| m.brokers.values().map(BrokerInfo::address).collect());
        fastrand::shuffle(&mut known);
        let bootstrap = self
            .inner
            .config
            .bootstrap_servers
            .iter()
            .filter(|b| !known.contains(b))
            .cloned()
            .collect();
        (known, bootstrap)
    }

    /// How many times this client has begun to bootstrap again (KIP-899).
    #[must_use]
    pub fn rebootstraps(&self) -> u64 {
        self.inner.recovery.count()
    }

    /// The connection to broker `node`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped dial leaves no connection and arms no backoff; the next call dials
    /// again.
    pub async fn connection(&self, node: i32) -> Result<Arc<Connection>> {
        self.connection_on(node, cluster::SHARED_LANE).await
    }

    /// The connection to broker `node` on a private `lane` (see [`Client::new_lane`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped dial leaves no connection and arms no backoff; the next call dials
    /// again.
    pub async fn connection_on(&self, node: i32, lane: u64) -> Result<Arc<Connection>> {
        let address = self
            .with_metadata(|m| m.address_of(node))
            .ok_or_else(|| Error::Closed(format!("broker {node} is not in the metadata")))?;
        self.inner.connections.get_on(&address, lane).await
    }

    /// A private lane: connections of its own to each broker, for requests that must not
    /// wait behind others (a consumer's long-polling fetches, a rebalance's `JoinGroup`).
    /// Release it with [`Client::release_lane`].
    #[must_use]
    pub fn new_lane(&self) -> u64 {
        self.inner.connections.new_lane()
    }

    /// Closes the connections of `lane`.
    pub fn release_lane(&self, lane: u64) {
        self.inner.connections.release_lane(lane);
    }

    /// A connection to any broker that answers (for requests any broker can serve).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped dial leaves no connection and arms no backoff; the next call dials
    /// again.
    pub async fn any_connection(&self) -> Result<Arc<Connection>> {
        self.any_connection_outlined().await
    }

    /// The search behind [`Client::any_connection`], compiled once (see [`Outlined`]).
    #[inline(never)]
    fn any_connection_outlined(&self) -> Outlined<'_, Result<Arc<Connection>>> {
        Box::pin(async move {
            let (learned, bootstrap) = self.known_and_bootstrap();
            let mut last_error = None;
            for address in &learned {
                match self.inner.connections.get(address).await {
                    Ok(c) => return Ok(c),
                    Err(e) => last_error = Some(e),
                }
            }
            // No learned broker answers: the bootstrap servers, before the first metadata answer
            // or when the recovery strategy allows it.
            if learned.is_empty()
                || self.inner.recovery.request(format_args!(
                    "none of {} known brokers reachable",
                    learned.len()
                ))
            {
                for address in &bootstrap {
                    match self.inner.connections.get(address).await {
                        Ok(c) => return Ok(c),
                        Err(e) => last_error = Some(e),
                    }
                }
            }
            Err(last_error.unwrap_or_else(|| Error::Closed("no broker reachable".into())))
        })
    }

    /// Sends `request` to broker `node`, at the highest version within `ours` both speak.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for the client and the connection: dropped after the request was queued, it only
    /// discards the answer. The broker may still act on the request, so for a request with effects
    /// the caller cannot tell whether it applied.
    pub async fn send_to<R: Request>(
        &self,
        node: i32,
        ours: VersionRange,
        request: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        let conn = self.connection(node).await?;
        let version = conn.version_of::<R>(ours)?;
        conn.send(&request(version), version, self.inner.config.socket_timeout)
            .await
    }

    /// The leader of a partition, looking the topic up when the cache lacks it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it reads the cache and at most refreshes it, which a drop leaves as it was.
    pub async fn leader_of(&self, topic: &str, partition: i32) -> Result<(i32, i32)> {
        if let Some(l) = self.with_metadata(|m| m.leader(topic, partition)) {
            return Ok(l);
        }
        self.refresh_metadata(&[topic]).await?;
        self.with_metadata(|m| m.leader(topic, partition))
            .ok_or_else(|| Error::Broker {
                code: ResponseError::LeaderNotAvailable,
                context: format!("no leader for {topic}-{partition}"),
            })
    }

    /// The topic's description, looking it up when the cache lacks it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it reads the cache and at most refreshes it, which a drop leaves as it was.
    pub async fn topic(&self, topic: &str) -> Result<Arc<TopicInfo>> {
        if let Some(t) = self.with_metadata(|m| m.topics.get(topic).cloned()) {
            return Ok(t);
        }
        self.refresh_metadata(&[topic]).await?;
        self.with_metadata(|m| m.topics.get(topic).cloned())
            .ok_or_else(|| Error::Broker {
                code: ResponseError::UnknownTopicOrPartition,
                context: format!("topic {topic}"),
            })
    }

    /// Runs `op` (a request to a partition leader) again after retriable errors, refreshing
    /// `topic`'s metadata in between so that a moved leader is found; gives up after 20 tries.
    pub(crate) async fn retry_at_leader<T, F, Fut>(&self, topic: &str, op: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut backoff = self.retry_backoff();
        let mut attempts = 0;
        loop {
            match op().await {
                Err(e) if e.is_retriable() && attempts < 20 => {
                    attempts += 1;
                    tracing::debug!(topic, error = %e, "leader request failed; refreshing metadata");
                    tokio::time::sleep(backoff.next_delay()).await;
                    let _ = self.refresh_metadata(&[topic]).await;
                }
                other => return other,
            }
        }
    }

    /// The retry backoff this client uses.
    #[must_use]
    pub fn retry_backoff(&self) -> Backoff {
        Backoff::new(
            self.inner.config.retry_backoff,
            self.inner.config.retry_backoff_max,
        )
    }

    /// Drops the connection to `node` so that the next request dials again.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only closes connections, one lane at a time; dropped midway, the lanes not
    /// reached yet keep theirs, and calling it again closes them.
    pub async fn disconnect(&self, node: i32) {
        if let Some(address) = self.with_metadata(|m| m.address_of(node)) {
            self.inner.connections.discard(&address).await;
        }
    }

    /// Ends this client's KIP-714 telemetry: when the cluster subscribes to its metrics, pushes
    /// them one last time, marked terminating (within the socket timeout, at most 2 s); then no
    /// more pushes. Call it before [`close`](Self::close), as the Java client does on close.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped midway, the terminating push may or may not have reached the
    /// broker; either way the client pushes no more.
    pub async fn push_final_metrics(&self) {
        if let Some(t) = &self.inner.telemetry {
            t.finish(self).await;
        }
    }

    /// The client instance id a broker assigned for KIP-714 telemetry, once one did, as Kafka
    /// prints ids (URL-safe base64 of the 16 bytes, unpadded): the id a broker's telemetry
    /// receiver and `kafka-client-metrics.sh` show.
    #[must_use]
    pub fn telemetry_instance_id(&self) -> Option<String> {
        use base64::Engine as _;
        let id = self.inner.telemetry.as_ref()?.instance_id()?;
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes()))
    }

    /// Closes every connection; requests in flight fail.
    pub fn close(&self) {
        self.inner.connections.close_all();
    }

    pub(crate) fn coordinators(&self) -> &coordinator::Coordinators {
        &self.inner.coordinators
    }

    pub(crate) fn socket_timeout(&self) -> Duration {
        self.inner.config.socket_timeout
    }
}
