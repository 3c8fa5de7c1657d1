//! From finalized settings to the native client's typed configurations: [`ClientConfig`],
//! [`ProducerConfig`] and [`ConsumerConfig`].
//!
//! Every field of those structs is filled from the property it documents, with librdkafka's
//! meaning. Where librdkafka gives a value a meaning the struct spells differently, the
//! conversion translates it:
//!
//! - `topic.metadata.refresh.interval.ms` of -1 or 0 (no periodic refresh) is a zero interval,
//!   which the client reads as "off".
//! - `auto.commit.interval.ms=0` (no periodic commit) is the longest duration: the consumer's
//!   commit timer then never fires.
//! - `queue.buffering.max.messages=0` (no limit) is `usize::MAX`.
//! - `compression.type` of the topic configuration wins over the global one unless it is
//!   `inherit`.
//! - Empty `group.id`, `group.instance.id` and `client.rack` are none (librdkafka creates no
//!   group for an empty group id).
//! - Bootstrap servers are split at commas and spaces, a `scheme://` prefix and anything from
//!   the next `/` dropped, and port 9092 added where none is given, as librdkafka reads them.
//!
//! [`ACTED_ON`] lists the properties these conversions read, and the three more the crate acts
//! on otherwise; every other property a string can set is in
//! [`NOT_ACTED_ON`](super::NOT_ACTED_ON).

use std::time::Duration;

use crate::client::{
    Acks, CaSource, ClientConfig, ClientRole, Codec, ConsumerConfig, GroupProtocol, IsolationLevel,
    Keystore, MetadataRecovery, OffsetReset, Partitioner, Pem, ProducerConfig, SaslConfig,
    SaslMechanism, Secret, SecurityConfig, SecurityProtocol, TlsConfig, TokenProvider,
    unsecured_jwt_provider, without_userinfo,
};

use super::finalize::assignor_names;
use super::settings::Settings;
use super::table::id;

/// The properties this crate acts on: those the conversions into the native client's
/// configurations read (`transactional.id` and `transaction.timeout.ms` included) and
/// `builtin.features` (a check only). By this crate's names, `topic.` for the topic
/// property whose name a global one has too.
pub const ACTED_ON: [&str; 85] = [
    // ClientConfig
    "bootstrap.servers",
    "client.id",
    "socket.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "topic.metadata.refresh.interval.ms",
    "metadata.recovery.strategy",
    "metadata.recovery.rebootstrap.trigger.ms",
    "receive.message.max.bytes",
    "allow.auto.create.topics",
    "statistics.interval.ms",
    "enable.metrics.push",
    // ClientConfig::security
    "security.protocol",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.ca.location",
    "ssl.ca.pem",
    "enable.ssl.certificate.verification",
    "ssl.endpoint.identification.algorithm",
    "ssl.crl.location",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.cipher.suites",
    "ssl.curves.list",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.token.endpoint.url",
    // Acted on by refusing what is not implemented (the JWT-bearer grant, Azure IMDS).
    "sasl.oauthbearer.grant.type",
    "sasl.oauthbearer.metadata.authentication.type",
    // ProducerConfig
    "acks",
    "enable.idempotence",
    "linger.ms",
    "batch.size",
    "batch.num.messages",
    "message.max.bytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "message.timeout.ms",
    "request.timeout.ms",
    "retries",
    "max.in.flight.requests.per.connection",
    "compression.type",
    "topic.compression.type",
    "compression.level",
    "partitioner",
    "sticky.partitioning.linger.ms",
    // ConsumerConfig
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.remote.assignor",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "auto.offset.reset",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "enable.auto.offset.store",
    "isolation.level",
    "check.crcs",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.wait.max.ms",
    "max.partition.fetch.bytes",
    "fetch.error.backoff.ms",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "client.rack",
    // ProducerConfig (transactions), or a check only.
    "transactional.id",
    "transaction.timeout.ms",
    "builtin.features",
];

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn size(n: i32) -> usize {
    usize::try_from(n).unwrap_or(0)
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.filter(|s| !s.is_empty()).map(str::to_owned)
}

/// `ClientConfig` of finalized settings.
pub(super) fn client_config(s: &Settings) -> ClientConfig {
    let refresh = s.int(id::TOPIC_METADATA_REFRESH_INTERVAL_MS);
    ClientConfig {
        bootstrap_servers: bootstrap_servers(s.str(id::BOOTSTRAP_SERVERS).unwrap_or("")),
        client_id: s.str(id::CLIENT_ID).unwrap_or_default().to_owned(),
        socket_timeout: millis(s.int(id::SOCKET_TIMEOUT_MS)),
        connect_timeout: millis(s.int(id::SOCKET_CONNECTION_SETUP_TIMEOUT_MS)),
        reconnect_backoff: millis(s.int(id::RECONNECT_BACKOFF_MS)),
        reconnect_backoff_max: millis(s.int(id::RECONNECT_BACKOFF_MAX_MS)),
        retry_backoff: millis(s.int(id::RETRY_BACKOFF_MS)),
        retry_backoff_max: millis(s.int(id::RETRY_BACKOFF_MAX_MS)),
        metadata_refresh_interval: if refresh > 0 {
            millis(refresh)
        } else {
            Duration::ZERO
        },
        metadata_recovery: MetadataRecovery::from_name(
            s.enum_meaning(id::METADATA_RECOVERY_STRATEGY),
        )
        .unwrap_or_default(),
        rebootstrap_trigger: millis(s.int(id::METADATA_RECOVERY_REBOOTSTRAP_TRIGGER_MS)),
        max_response_size: size(s.int(id::RECEIVE_MESSAGE_MAX_BYTES)),
        allow_auto_create_topics: s.bool(id::ALLOW_AUTO_CREATE_TOPICS),
        security: security_config(s),
        statistics_interval: millis(s.int(id::STATISTICS_INTERVAL_MS)),
        observers: crate::client::Observers::default(),
        enable_metrics_push: s.bool(id::ENABLE_METRICS_PUSH),
        role: ClientRole::Producer,
    }
}

/// `SecurityConfig` of `security.protocol`, the `ssl.*` and the `sasl.*` properties.
///
/// An unusable `sasl.oauthbearer.config` becomes a token provider that fails with the reason,
/// so that the first connection (at startup) reports it.
fn security_config(s: &Settings) -> SecurityConfig {
    let protocol =
        SecurityProtocol::from_name(s.enum_meaning(id::SECURITY_PROTOCOL)).unwrap_or_default();
    let pem = |location: usize, text: usize| {
        s.str(text)
            .map(|t| Pem::Text(Secret::new(t)))
            .or_else(|| s.str(location).map(|p| Pem::File(p.into())))
    };
    let ca = match (s.str(id::SSL_CA_PEM), s.str(id::SSL_CA_LOCATION)) {
        (Some(text), _) => CaSource::Pem(text.to_owned()),
        (None, Some(location)) if location != "probe" => CaSource::Location(location.into()),
        _ => CaSource::System,
    };
    let tls = TlsConfig {
        ca,
        certificate: pem(id::SSL_CERTIFICATE_LOCATION, id::SSL_CERTIFICATE_PEM),
        key: pem(id::SSL_KEY_LOCATION, id::SSL_KEY_PEM),
        key_password: s.str(id::SSL_KEY_PASSWORD).map(Secret::new),
        verify_hostname: s.enum_meaning(id::SSL_ENDPOINT_IDENTIFICATION_ALGORITHM) != "none",
        verify_certificate: s.bool(id::ENABLE_SSL_CERTIFICATE_VERIFICATION),
        crl: s.str(id::SSL_CRL_LOCATION).map(Into::into),
        // `finalize` refuses a keystore without its password.
        keystore: s.str(id::SSL_KEYSTORE_LOCATION).map(|path| Keystore {
            path: path.into(),
            password: Secret::new(s.str(id::SSL_KEYSTORE_PASSWORD).unwrap_or_default()),
        }),
        cipher_suites: s.str(id::SSL_CIPHER_SUITES).map(str::to_owned),
        curves: s.str(id::SSL_CURVES_LIST).map(str::to_owned),
    };
    let sasl = s
        .str(id::SASL_MECHANISM)
        .and_then(SaslMechanism::from_name)
        .map(|mechanism| {
            let mut sasl = SaslConfig::with_password(
                mechanism,
                s.str(id::SASL_USERNAME).unwrap_or_default(),
                s.str(id::SASL_PASSWORD).unwrap_or_default(),
            );
            if mechanism == SaslMechanism::AwsMskIam {
                // The AWS SDKs' chain over this process's environment, read once per client.
                sasl.aws_credentials = Some(std::sync::Arc::new(
                    crate::client::AwsCredentialChain::from_environment(),
                ));
            }
            if mechanism == SaslMechanism::OAuthBearer {
                sasl.token_provider = oauthbearer_provider(s);
            }
            sasl
        });
    SecurityConfig {
        protocol,
        tls,
        sasl,
    }
}

/// The token provider the `sasl.oauthbearer.*` properties describe: OIDC with
/// `sasl.oauthbearer.method=oidc`, librdkafka's unsecured JWTs with
/// `enable.sasl.oauthbearer.unsecure.jwt`, else none (a provider installed in code, such as
/// `KafkaBroker::token_provider`, or the startup error that one is needed).
fn oauthbearer_provider(s: &Settings) -> Option<TokenProvider> {
    if s.enum_meaning(id::SASL_OAUTHBEARER_METHOD) == "oidc" {
        return Some(oidc_provider(s).unwrap_or_else(TokenProvider::failing));
    }
    if s.bool(id::ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT) {
        let config = s.str(id::SASL_OAUTHBEARER_CONFIG).unwrap_or_default();
        return Some(unsecured_jwt_provider(config).unwrap_or_else(TokenProvider::failing));
    }
    None
}

/// The OIDC provider of the client-credentials properties (`finalize` has checked that the
/// endpoint, id and secret are there), or why there is none.
fn oidc_provider(s: &Settings) -> Result<TokenProvider, String> {
    if s.enum_meaning(id::SASL_OAUTHBEARER_METADATA_AUTHENTICATION_TYPE) != "none" {
        return Err(
            "`sasl.oauthbearer.metadata.authentication.type=azure_imds` is not implemented by \
             ruststream-kafka: use the client-credentials grant or a token provider"
                .to_owned(),
        );
    }
    if s.enum_meaning(id::SASL_OAUTHBEARER_GRANT_TYPE) != "client_credentials" {
        return Err(
            "`sasl.oauthbearer.grant.type=urn:ietf:params:oauth:grant-type:jwt-bearer` is not \
             implemented by ruststream-kafka: use `client_credentials` or a token provider"
                .to_owned(),
        );
    }
    oidc_client_credentials(s)
}

#[cfg(feature = "oidc")]
fn oidc_client_credentials(s: &Settings) -> Result<TokenProvider, String> {
    let extensions = crate::client::parse_extensions(
        s.str(id::SASL_OAUTHBEARER_EXTENSIONS).unwrap_or_default(),
    )?;
    crate::client::oidc_provider(crate::client::OidcConfig {
        token_endpoint_url: s
            .str(id::SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL)
            .unwrap_or_default()
            .to_owned(),
        client_id: s
            .str(id::SASL_OAUTHBEARER_CLIENT_ID)
            .unwrap_or_default()
            .to_owned(),
        client_secret: Secret::new(
            s.str(id::SASL_OAUTHBEARER_CLIENT_SECRET)
                .unwrap_or_default(),
        ),
        scope: non_empty(s.str(id::SASL_OAUTHBEARER_SCOPE)),
        extensions,
    })
    .map_err(|e| format!("`sasl.oauthbearer.method=oidc`: {e}"))
}

#[cfg(not(feature = "oidc"))]
fn oidc_client_credentials(_: &Settings) -> Result<TokenProvider, String> {
    Err(
        "`sasl.oauthbearer.method=oidc` needs the `oidc` feature of ruststream-kafka (its HTTP \
         client fetches the tokens); enable it in Cargo.toml"
            .to_owned(),
    )
}

/// The entries of a bootstrap list, each `host:port`.
pub(super) fn bootstrap_servers(list: &str) -> Vec<String> {
    list.split([',', ' '])
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            // Credentials first, before the path is cut: a password may hold a `/`, and the
            // address is what every error and log of the client prints.
            let entry = without_userinfo(entry);
            let address = entry.split_once("://").map_or(&*entry, |(_, rest)| rest);
            let address = address.split_once('/').map_or(address, |(host, _)| host);
            let has_port = match address.rfind(']') {
                // `[v6]` or `[v6]:port`
                Some(end) => address[end..].contains(':'),
                None => address.contains(':'),
            };
            if has_port {
                address.to_owned()
            } else {
                format!("{address}:9092")
            }
        })
        .collect()
}

/// `ProducerConfig` of settings finalized for a producer.
pub(super) fn producer_config(s: &Settings) -> ProducerConfig {
    let topic_codec = s.enum_meaning(id::TOPIC_COMPRESSION_TYPE);
    let codec = if topic_codec == "inherit" {
        s.enum_meaning(id::COMPRESSION_TYPE)
    } else {
        topic_codec
    };
    let queue_max_messages = s.int(id::QUEUE_BUFFERING_MAX_MESSAGES);
    ProducerConfig {
        acks: match s.int(id::ACKS) {
            0 => Acks::None,
            1 => Acks::Leader,
            // -1; other counts are refused when the producer configuration is checked.
            _ => Acks::All,
        },
        enable_idempotence: s.bool(id::ENABLE_IDEMPOTENCE),
        linger: Duration::from_secs_f64(s.float(id::LINGER_MS) / 1000.0),
        batch_size: size(s.int(id::BATCH_SIZE)),
        batch_num_messages: size(s.int(id::BATCH_NUM_MESSAGES)),
        message_max_bytes: size(s.int(id::MESSAGE_MAX_BYTES)),
        queue_max_messages: if queue_max_messages == 0 {
            usize::MAX
        } else {
            size(queue_max_messages)
        },
        queue_max_kbytes: size(s.int(id::QUEUE_BUFFERING_MAX_KBYTES)),
        message_timeout: millis(s.int(id::MESSAGE_TIMEOUT_MS)),
        request_timeout: millis(s.int(id::REQUEST_TIMEOUT_MS)),
        retries: u32::try_from(s.int(id::RETRIES)).unwrap_or(0),
        max_in_flight: size(s.int(id::MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION)),
        compression: match codec {
            "gzip" => Codec::Gzip,
            "snappy" => Codec::Snappy,
            "lz4" => Codec::Lz4,
            "zstd" => Codec::Zstd,
            _ => Codec::None,
        },
        compression_level: s.int(id::COMPRESSION_LEVEL),
        // The value was checked against the same names when it was set.
        partitioner: s
            .str(id::PARTITIONER)
            .and_then(Partitioner::from_name)
            .unwrap_or_default(),
        sticky_partitioning_linger: millis(s.int(id::STICKY_PARTITIONING_LINGER_MS)),
        transactional_id: s.str(id::TRANSACTIONAL_ID).map(str::to_owned),
        transaction_timeout: millis(s.int(id::TRANSACTION_TIMEOUT_MS)),
    }
}

/// `ConsumerConfig` of settings finalized for a consumer.
pub(super) fn consumer_config(s: &Settings) -> ConsumerConfig {
    let auto_commit_interval = s.int(id::AUTO_COMMIT_INTERVAL_MS);
    ConsumerConfig {
        group_id: non_empty(s.str(id::GROUP_ID)),
        group_instance_id: non_empty(s.str(id::GROUP_INSTANCE_ID)),
        group_protocol: if s.enum_meaning(id::GROUP_PROTOCOL) == "consumer" {
            GroupProtocol::Consumer
        } else {
            GroupProtocol::Classic
        },
        group_remote_assignor: s.str(id::GROUP_REMOTE_ASSIGNOR).map(str::to_owned),
        // Finalizing checked the names.
        assignment_strategy: assignor_names(s.str(id::PARTITION_ASSIGNMENT_STRATEGY).unwrap_or(""))
            .unwrap_or_default()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        session_timeout: millis(s.int(id::SESSION_TIMEOUT_MS)),
        heartbeat_interval: millis(s.int(id::HEARTBEAT_INTERVAL_MS)),
        max_poll_interval: millis(s.int(id::MAX_POLL_INTERVAL_MS)),
        auto_offset_reset: match s.enum_meaning(id::AUTO_OFFSET_RESET) {
            "smallest" => OffsetReset::Earliest,
            "error" => OffsetReset::Error,
            _ => OffsetReset::Latest,
        },
        enable_auto_commit: s.bool(id::ENABLE_AUTO_COMMIT),
        auto_commit_interval: if auto_commit_interval == 0 {
            Duration::MAX
        } else {
            millis(auto_commit_interval)
        },
        enable_auto_offset_store: s.bool(id::ENABLE_AUTO_OFFSET_STORE),
        remember_starts: false,
        late_topic_start: crate::client::LateTopicStart::Reset,
        isolation: if s.enum_meaning(id::ISOLATION_LEVEL) == "read_uncommitted" {
            IsolationLevel::ReadUncommitted
        } else {
            IsolationLevel::ReadCommitted
        },
        check_crcs: s.bool(id::CHECK_CRCS),
        corrupt_batches: crate::client::CorruptBatch::Hold,
        fetch_min_bytes: s.int(id::FETCH_MIN_BYTES),
        fetch_max_bytes: s.int(id::FETCH_MAX_BYTES),
        fetch_wait_max: millis(s.int(id::FETCH_WAIT_MAX_MS)),
        max_partition_fetch_bytes: s.int(id::MAX_PARTITION_FETCH_BYTES),
        fetch_error_backoff: millis(s.int(id::FETCH_ERROR_BACKOFF_MS)),
        queued_min_messages: size(s.int(id::QUEUED_MIN_MESSAGES)),
        queued_max_bytes: size(s.int(id::QUEUED_MAX_MESSAGES_KBYTES)).saturating_mul(1024),
        client_rack: non_empty(s.str(id::CLIENT_RACK)),
    }
}
