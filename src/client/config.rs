//! Typed configuration of the native client.
//!
//! Defaults are librdkafka 2.12's, so that a service moving off librdkafka sees the same
//! timing and limits. The librdkafka property table (names, aliases, validation) lives in the
//! adapter and builds these structs.

use std::borrow::Cow;
use std::time::Duration;

use crate::client::error::{Error, Result};
use crate::client::producer::partitioner::Partitioner;
use crate::client::records::Codec;
use crate::client::security::{SaslConfig, SaslMechanism, SecurityConfig};

/// Settings shared by every part of a client: where the cluster is and how to talk to it.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `bootstrap.servers`: `host:port` entries to learn the cluster from.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: String,
    /// `socket.timeout.ms`: the default time allowed for a request's answer.
    pub socket_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`: TCP connect plus version handshake.
    pub connect_timeout: Duration,
    /// `reconnect.backoff.ms`: first wait before dialling a broker again.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`: the longest such wait.
    pub reconnect_backoff_max: Duration,
    /// `retry.backoff.ms`: first wait before retrying a failed request.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`: the longest such wait.
    pub retry_backoff_max: Duration,
    /// `topic.metadata.refresh.interval.ms`: periodic metadata refresh of known topics.
    pub metadata_refresh_interval: Duration,
    /// `metadata.recovery.strategy`: whether the client asks its bootstrap servers again when
    /// the brokers it learned of cannot give it metadata (KIP-899).
    pub metadata_recovery: super::cluster::MetadataRecovery,
    /// `metadata.recovery.rebootstrap.trigger.ms`: how long metadata may fail (from the first
    /// request after the last answer) before the client bootstraps again.
    pub rebootstrap_trigger: Duration,
    /// `receive.message.max.bytes`: the largest response frame accepted.
    pub max_response_size: usize,
    /// `allow.auto.create.topics`: whether metadata lookups may create missing topics (when
    /// the broker allows it). librdkafka's default is true for producers, false for consumers.
    pub allow_auto_create_topics: bool,
    /// `security.protocol`, `ssl.*`, `sasl.*`: TLS and SASL.
    pub security: SecurityConfig,
    /// `statistics.interval.ms`: how often statistics are reported (to the observers that ask
    /// for [`Interest::STATISTICS`](super::observe::Interest::STATISTICS), and as one INFO line
    /// by the adapter); zero for never (observers that ask then hear every second).
    pub statistics_interval: Duration,
    /// Who is told what the client does (no property: a service registers them in code).
    pub observers: super::observe::Observers,
    /// `enable.metrics.push`: push this client's metrics to the cluster when it subscribes to
    /// them (KIP-714).
    pub enable_metrics_push: bool,
    /// Whether the client stands for a producer or a consumer: names its pushed metrics.
    pub role: super::telemetry::ClientRole,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            bootstrap_servers: Vec::new(),
            client_id: "rdkafka".to_owned(),
            socket_timeout: Duration::from_mins(1),
            connect_timeout: Duration::from_secs(30),
            reconnect_backoff: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(10),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            metadata_refresh_interval: Duration::from_mins(5),
            metadata_recovery: super::cluster::MetadataRecovery::Rebootstrap,
            rebootstrap_trigger: Duration::from_mins(5),
            max_response_size: 100_000_000,
            allow_auto_create_topics: true,
            security: SecurityConfig::default(),
            statistics_interval: Duration::ZERO,
            observers: super::observe::Observers::default(),
            enable_metrics_push: true,
            role: super::telemetry::ClientRole::Producer,
        }
    }
}

impl ClientConfig {
    /// A configuration for the comma-separated `bootstrap.servers` list, librdkafka defaults
    /// for everything else.
    #[must_use]
    pub fn new(bootstrap_servers: &str) -> Self {
        ClientConfig {
            bootstrap_servers: bootstrap_servers
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(strip_scheme)
                .collect(),
            ..ClientConfig::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.bootstrap_servers.is_empty() {
            return Err(Error::Config("`bootstrap.servers` is empty".into()));
        }
        #[cfg(not(feature = "ssl"))]
        if self.security.protocol.uses_tls() {
            return Err(Error::Config(
                "`security.protocol` asks for TLS, which this build lacks: enable the `ssl` \
                 feature of ruststream-kafka"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The SASL settings connections authenticate with, checked; `None` without SASL.
    pub(crate) fn sasl(&self) -> Result<Option<SaslConfig>> {
        if !self.security.protocol.uses_sasl() {
            return Ok(None);
        }
        let Some(sasl) = &self.security.sasl else {
            return Err(Error::Config(
                "`security.protocol` asks for SASL but no `sasl.mechanism` is configured".into(),
            ));
        };
        if sasl.mechanism == SaslMechanism::OAuthBearer && sasl.token_provider.is_none() {
            return Err(Error::Config(
                "`sasl.mechanism=OAUTHBEARER` needs a token provider (or \
                 `enable.sasl.oauthbearer.unsecure.jwt=true` with `sasl.oauthbearer.config`)"
                    .into(),
            ));
        }
        if sasl.mechanism == SaslMechanism::AwsMskIam && sasl.aws_credentials.is_none() {
            return Err(Error::Config(
                "`sasl.mechanism=AWS_MSK_IAM` needs an AWS credentials provider".into(),
            ));
        }
        Ok(Some(sasl.clone()))
    }

    /// The TLS configuration connections use, built now so that unusable files fail startup;
    /// `None` without TLS.
    #[cfg(feature = "ssl")]
    pub(crate) fn tls_connector(&self) -> Result<Option<crate::client::TlsConnector>> {
        if !self.security.protocol.uses_tls() {
            return Ok(None);
        }
        crate::client::TlsConnector::new(&self.security.tls).map(Some)
    }
}

fn strip_scheme(s: &str) -> String {
    // librdkafka accepts `PLAINTEXT://host:port` style entries too.
    let s = without_userinfo(s);
    s.split_once("://").map_or(&*s, |(_, rest)| rest).to_owned()
}

/// What stands in for the credentials an address carries.
const REDACTED_USERINFO: &str = "[redacted]";

/// `entry` (`host:port`, `PROTO://host:port`) with whatever precedes its last `@` replaced:
/// `SASL_SSL://user:secret@host:9093` becomes `SASL_SSL://[redacted]@host:9093`.
///
/// Kafka takes credentials from `sasl.username` and `sasl.password`, never from an address:
/// librdkafka resolves `user:secret@host` as a host name and fails. The replacement keeps that
/// outcome (`[redacted]@host` resolves to nothing either) while every error, log and `Debug`
/// that names the address shows no secret. The scheme is kept only when it looks like one, so
/// that a password holding `://` is not taken for a scheme and printed.
pub(crate) fn without_userinfo(entry: &str) -> Cow<'_, str> {
    let Some(at) = entry.rfind('@') else {
        return Cow::Borrowed(entry);
    };
    let host = &entry[at + 1..];
    let scheme = entry[..at]
        .split_once("://")
        .map(|(scheme, _)| scheme)
        .filter(|scheme| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    Cow::Owned(match scheme {
        Some(scheme) => format!("{scheme}://{REDACTED_USERINFO}@{host}"),
        None => format!("{REDACTED_USERINFO}@{host}"),
    })
}

/// A `bootstrap.servers` list (entries separated by commas or spaces) as it may be printed:
/// each entry through [`without_userinfo`], the separators kept.
pub(crate) fn bootstrap_list_shown(list: &str) -> String {
    list.split(',')
        .map(|part| {
            part.split(' ')
                .map(without_userinfo)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `acks`: how many replicas must have a record before the broker answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: the broker sends no answer; delivery reports carry no offset.
    None,
    /// `acks=1`: the leader has it.
    Leader,
    /// `acks=all` (`-1`): every in-sync replica has it.
    All,
}

impl Acks {
    /// The wire value.
    #[must_use]
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Producer settings, librdkafka's names in the field docs.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// `acks` (alias `request.required.acks`); librdkafka's default is all.
    pub acks: Acks,
    /// `enable.idempotence`.
    pub enable_idempotence: bool,
    /// `linger.ms` (alias `queue.buffering.max.ms`): how long a batch waits for company.
    pub linger: Duration,
    /// `batch.size`: the largest batch in bytes.
    pub batch_size: usize,
    /// `batch.num.messages`: the most records in one batch.
    pub batch_num_messages: usize,
    /// `message.max.bytes`: the largest record (and request) the client builds.
    pub message_max_bytes: usize,
    /// `queue.buffering.max.messages`: records waiting in the client at most.
    pub queue_max_messages: usize,
    /// `queue.buffering.max.kbytes`: their bytes at most, in KiB.
    pub queue_max_kbytes: usize,
    /// `message.timeout.ms` (alias `delivery.timeout.ms`): a record not delivered by then
    /// fails. Zero means forever.
    pub message_timeout: Duration,
    /// `request.timeout.ms`: how long the broker may take to answer a produce.
    pub request_timeout: Duration,
    /// `retries` (alias `message.send.max.retries`).
    pub retries: u32,
    /// `max.in.flight.requests.per.connection` (alias `max.in.flight`).
    pub max_in_flight: usize,
    /// `compression.type` (alias `compression.codec`).
    pub compression: Codec,
    /// `compression.level` (-1: the codec's default).
    pub compression_level: i32,
    /// `partitioner`.
    pub partitioner: Partitioner,
    /// `sticky.partitioning.linger.ms`: how long keyless records stay on one partition.
    pub sticky_partitioning_linger: Duration,
    /// `transactional.id`: set, the producer is a
    /// [`TransactionalProducer`](crate::client::TransactionalProducer) and needs
    /// `enable.idempotence`.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the transaction coordinator lets a transaction stay
    /// open before it aborts it; also the deadline of each transactional call. While
    /// `message_timeout` is left at its default, a transactional producer lowers it to this.
    pub transaction_timeout: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            enable_idempotence: false,
            linger: Duration::from_millis(5),
            batch_size: 1_000_000,
            batch_num_messages: 10_000,
            message_max_bytes: 1_000_000,
            queue_max_messages: 100_000,
            queue_max_kbytes: 1_048_576,
            message_timeout: DEFAULT_MESSAGE_TIMEOUT,
            request_timeout: Duration::from_secs(30),
            retries: i32::MAX as u32,
            max_in_flight: 1_000_000,
            compression: Codec::None,
            compression_level: -1,
            partitioner: Partitioner::ConsistentRandom,
            sticky_partitioning_linger: Duration::from_millis(10),
            transactional_id: None,
            transaction_timeout: DEFAULT_TRANSACTION_TIMEOUT,
        }
    }
}

const DEFAULT_MESSAGE_TIMEOUT: Duration = Duration::from_mins(5);
const DEFAULT_TRANSACTION_TIMEOUT: Duration = Duration::from_mins(1);

impl ProducerConfig {
    /// librdkafka's defaults with `transactional.id` = `id` and the idempotence it requires.
    #[must_use]
    pub fn transactional(id: impl Into<String>) -> Self {
        ProducerConfig {
            transactional_id: Some(id.into()),
            enable_idempotence: true,
            ..ProducerConfig::default()
        }
    }

    /// The number of produce requests per broker connection the producer keeps in flight.
    #[must_use]
    pub fn effective_in_flight(&self) -> usize {
        if self.enable_idempotence {
            self.max_in_flight.clamp(1, 5)
        } else {
            self.max_in_flight.max(1)
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.enable_idempotence {
            if self.acks != Acks::All {
                return Err(Error::Config(
                    "`acks` must be set to `all` when `enable.idempotence` is true".into(),
                ));
            }
            if self.max_in_flight > 5 && self.max_in_flight != 1_000_000 {
                return Err(Error::Config(
                    "`max.in.flight` must be set <= 5 when `enable.idempotence` is true".into(),
                ));
            }
        }
        if self.batch_size == 0 || self.batch_num_messages == 0 {
            return Err(Error::Config(
                "`batch.size` and `batch.num.messages` must be > 0".into(),
            ));
        }
        let timeout_ms = self.transaction_timeout.as_millis();
        if !(1000..=i32::MAX as u128).contains(&timeout_ms) {
            return Err(Error::Config(format!(
                "Invalid value \"{timeout_ms}\" for configuration property \"transaction.timeout.ms\": value must be between 1000 and {}",
                i32::MAX
            )));
        }
        if let Some(id) = &self.transactional_id {
            if id.is_empty() {
                return Err(Error::Config("`transactional.id` must not be empty".into()));
            }
            if !self.enable_idempotence {
                return Err(Error::Config(
                    "`transactional.id` requires `enable.idempotence=true`".into(),
                ));
            }
            // A record outliving its transaction could only fail the commit late.
            if self.message_timeout != DEFAULT_MESSAGE_TIMEOUT
                && (self.message_timeout.is_zero()
                    || self.message_timeout > self.transaction_timeout)
            {
                return Err(Error::Config(
                    "`message.timeout.ms` must be set <= `transaction.timeout.ms`".into(),
                ));
            }
        }
        Ok(())
    }

    /// The configuration a producer runs with: librdkafka's adjustments applied (a
    /// transactional producer's default `message.timeout.ms` becomes `transaction.timeout.ms`).
    pub(crate) fn resolved(mut self) -> Self {
        if self.transactional_id.is_some() && self.message_timeout == DEFAULT_MESSAGE_TIMEOUT {
            self.message_timeout = self.transaction_timeout;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(config: &ProducerConfig) -> String {
        match config.validate() {
            Err(e) => e.to_string(),
            Ok(()) => String::new(),
        }
    }

    #[test]
    fn credentials_in_an_address_are_replaced_and_the_rest_kept() {
        for (given, shown) in [
            ("kafka-1:9092", "kafka-1:9092"),
            ("SASL_SSL://kafka-1:9093", "SASL_SSL://kafka-1:9093"),
            ("ana:s3cret@kafka-1:9093", "[redacted]@kafka-1:9093"),
            (
                "SASL_SSL://ana:s3cret@kafka-1:9093",
                "SASL_SSL://[redacted]@kafka-1:9093",
            ),
            ("ana@[::1]:9093", "[redacted]@[::1]:9093"),
            // An `@` inside the password: everything up to the last one goes.
            ("ana:p@ss@kafka-1", "[redacted]@kafka-1"),
            // A `://` inside the password is not a scheme.
            ("ana:se://cret@kafka-1", "[redacted]@kafka-1"),
            ("ana:pa/ss@kafka-1:9093", "[redacted]@kafka-1:9093"),
        ] {
            assert_eq!(without_userinfo(given), shown, "{given}");
        }
        assert_eq!(
            bootstrap_list_shown("a:1,ana:s3cret@b:2 bob:pa55@c:3"),
            "a:1,[redacted]@b:2 [redacted]@c:3"
        );
        let config = ClientConfig::new("PLAINTEXT://ana:s3cret@kafka-1:9092, kafka-2:9092");
        assert_eq!(
            config.bootstrap_servers,
            ["[redacted]@kafka-1:9092", "kafka-2:9092"]
        );
    }

    #[test]
    fn a_transactional_id_needs_idempotence() {
        let config = ProducerConfig {
            enable_idempotence: false,
            ..ProducerConfig::transactional("t")
        };
        assert!(refusal(&config).contains("`transactional.id` requires `enable.idempotence=true`"));
        let config = ProducerConfig {
            acks: Acks::Leader,
            ..ProducerConfig::transactional("t")
        };
        assert!(refusal(&config).contains("`acks` must be set to `all`"));
        assert!(ProducerConfig::transactional("t").validate().is_ok());
        assert!(!refusal(&ProducerConfig::transactional("")).is_empty());
    }

    #[test]
    fn the_message_timeout_stays_within_the_transaction_timeout() {
        let config = ProducerConfig {
            transaction_timeout: Duration::from_secs(2),
            ..ProducerConfig::transactional("t")
        };
        assert!(config.validate().is_ok());
        assert_eq!(config.resolved().message_timeout, Duration::from_secs(2));
        let config = ProducerConfig {
            message_timeout: Duration::from_secs(3),
            transaction_timeout: Duration::from_secs(2),
            ..ProducerConfig::transactional("t")
        };
        assert!(
            refusal(&config)
                .contains("`message.timeout.ms` must be set <= `transaction.timeout.ms`")
        );
        let config = ProducerConfig {
            transaction_timeout: Duration::from_millis(999),
            ..ProducerConfig::transactional("t")
        };
        assert!(refusal(&config).contains("transaction.timeout.ms"));
        // Without a transactional id nothing changes.
        let plain = ProducerConfig::default().resolved();
        assert_eq!(plain.message_timeout, DEFAULT_MESSAGE_TIMEOUT);
    }
}
