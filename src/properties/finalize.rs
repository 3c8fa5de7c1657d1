//! The checks librdkafka makes on a whole configuration when it creates a client, with its
//! messages, and the values it adjusts on the way.
//!
//! librdkafka accepts each property on its own when it is set (see
//! [`validate`](super::validate)) and looks at them together in `rd_kafka_new`: first
//! `rd_kafka_conf_finalize` (which ends with `rd_kafka_topic_conf_finalize` on the default topic
//! configuration, when a topic property was set), then the assignors, then the SASL provider.
//! A producer runs the topic checks again for every topic it produces to, on a copy of the
//! default topic configuration (or a fresh one); a refusal there fails that first produce, not
//! the client. [`finalize`] does all of that in the same order, stops at the first refusal as
//! librdkafka does, and keeps the topic refusal of a producer whose client checks passed for
//! [`ProducerProperties::check_topic`](super::ProducerProperties::check_topic).
//!
//! # Checks implemented (librdkafka's messages, verbatim)
//!
//! Both clients:
//! 1. `ssl.keystore.location` without `ssl.keystore.password`.
//! 2. With `sasl.mechanism` `OAUTHBEARER` (any case) and `sasl.oauthbearer.method=oidc`
//!    (17 messages): `enable.sasl.oauthbearer.unsecure.jwt` excluded;
//!    `sasl.oauthbearer.token.endpoint.url` required (for Azure IMDS: unless
//!    `sasl.oauthbearer.config` has a `query`); with the client-credentials grant,
//!    `sasl.oauthbearer.client.id` and `...client.secret` required; with the JWT-bearer grant
//!    and `sasl.oauthbearer.assertion.file` set, none of the ten other assertion settings (the
//!    private key file, PEM and passphrase, the template file, the `sub`, `aud` and `iss`
//!    claims, and, when set at all, `jti.include`, `exp.seconds` and `nbf.seconds`); without
//!    it, exactly one of the private key file and PEM. (The conversion then refuses the
//!    JWT-bearer grant and Azure IMDS, which this crate does not implement, at the first
//!    connection; the client-credentials grant needs the `oidc` feature.)
//! 3. `reconnect.backoff.max.ms` >= `reconnect.backoff.ms`.
//! 4. `partition.assignment.strategy`: every name `range`, `roundrobin` or
//!    `cooperative-sticky` (exact case; names split at commas, leading spaces and commas skipped,
//!    trailing spaces kept, as librdkafka parses them), and eager and cooperative ones not mixed.
//!    librdkafka checks this for producers too.
//! 5. With `security.protocol` `sasl_plaintext` or `sasl_ssl`: the mechanism (exact case) must be
//!    `PLAIN`, `SCRAM-SHA-*`, `OAUTHBEARER` or (this crate's addition, which librdkafka refuses
//!    as `Unsupported SASL mechanism`) `AWS_MSK_IAM`, and `GSSAPI` has no provider here (librdkafka's
//!    "No provider for SASL mechanism GSSAPI", with this crate's reason); PLAIN and SCRAM need
//!    `sasl.username` and `sasl.password`; SCRAM needs SHA-1, SHA-256 or SHA-512.
//!
//! Consumer:
//! 6. Classic protocol: `max.poll.interval.ms` >= `session.timeout.ms` (librdkafka's message
//!    lacks a space after the first name; so does this one).
//! 7. `group.protocol=consumer`: `session.timeout.ms`, `partition.assignment.strategy`,
//!    `group.protocol.type` and `heartbeat.interval.ms` must not be set (four messages).
//! 8. `fetch.max.bytes`, when set, >= `message.max.bytes`.
//! 9. `receive.message.max.bytes`, when set, >= `fetch.max.bytes` + 512.
//!
//! Producer:
//! 10. `transactional.id` with `enable.idempotence` explicitly false.
//! 11. `transactional.id` with `socket.timeout.ms` set above `transaction.timeout.ms` + 100.
//! 12. Idempotence with `max.in.flight` set above 5.
//! 13. Idempotence with `retries` set below 1.
//! 14. Idempotence with `queue.buffering.backpressure.threshold` set above 1.
//! 15. `enable.gapless.guarantee=true` (set) without idempotence.
//! 16. Idempotence with `acks` set to anything but all (topic check).
//! 17. Idempotence with `queuing.strategy` set to anything but fifo (topic check).
//! 18. `transactional.id` with `message.timeout.ms` set above `transaction.timeout.ms` (topic).
//! 19. `message.timeout.ms` (not 0) <= `linger.ms` when `linger.ms` was set: at client
//!     creation when a topic property was set, and in the topic check.
//!
//! Also one check of this crate's own, where its native producer has no equivalent: `acks`
//! other than -1, 0 or 1 (librdkafka sends such counts and brokers refuse every produce).
//!
//! That is 42 of librdkafka's messages: 25 for both clients, 7 for consumers, 10 for producers.
//!
//! # Adjustments made (so that the values read back and converted are librdkafka's)
//!
//! Consumer: `fetch.max.bytes` unless set becomes `max(min(it, queued.max.messages.kbytes *
//! 1024), message.max.bytes)`; `receive.message.max.bytes` unless set is raised to
//! `fetch.max.bytes` + 512; idempotence off. Producer: a transactional id turns idempotence on
//! and, unless set, `socket.timeout.ms` becomes `max(transaction.timeout.ms - 100, 900)` and
//! `message.timeout.ms` becomes `transaction.timeout.ms`; idempotence makes `max.in.flight`
//! at most 5, `retries` `i32::MAX`, `queue.buffering.backpressure.threshold` 1, `acks` all and
//! `queuing.strategy` fifo unless set; `sticky.partitioning.linger.ms` unless set is twice
//! `linger.ms` (at most 900 000); `linger.ms` unless set drops to `message.timeout.ms` - 0.1
//! when it is not below it (only where librdkafka does: a topic property was set). Both:
//! `metadata.max.age.ms` unless set is three refresh intervals; `topic.metadata.refresh.fast.
//! interval.ms` unless set is `retry.backoff.ms`; `connections.max.idle.ms` unless set is
//! 230 000 when a bootstrap server name contains `azure`; `allow.auto.create.topics` unless
//! set is true for producers and false for consumers.
//!
//! # Checks skipped, and why
//!
//! - `socket_cb` / `open_cb` mandatory: callbacks cannot be set from strings, so they always
//!   have librdkafka's defaults; nothing to check.
//! - Memory CA certificate (`set_ssl_cert`) with `ssl.ca.location`/`ssl.ca.pem`, and
//!   `enable.sasl.oauthbearer.unsecure.jwt` with a token refresh callback: both need a C API
//!   call this crate does not have.
//! - `https.ca.location` with `https.ca.pem`, `https.ca.location` existing on disk, and the
//!   libcurl version for `https.ca.pem`: those properties are unsupported here (no HTTP client),
//!   so they can never be set.
//! - The TLS context (`rd_kafka_ssl_ctx_init`: reading and parsing key, certificate, CA and CRL
//!   files, keystore passwords): it needs the files and the TLS library; the TLS layer reports
//!   those when it builds its configuration at connect.
//! - The mock cluster (`test.mock.num.brokers`): unsupported here.
//! - `queue.buffering.max.kbytes` beyond `SIZE_MAX` (32-bit hosts only) is a clamp, not a check.
//! - Sanitizing `client.software.name`/`version` and the sparse-connection interval are
//!   internal adjustments with nothing to compare.
//!
//! One arithmetic difference: librdkafka computes `transaction.timeout.ms + 100` in a C `int`,
//! which overflows for a timeout within 100 of `i32::MAX`; here it is computed without overflow.

use super::error::PropertyError;
use super::property::Clients;
use super::setting::Setting;
use super::settings::Settings;
use super::table::{PROPERTIES, id};

/// The client a configuration is finalized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClientKind {
    /// A consumer.
    Consumer,
    /// A producer.
    Producer,
}

/// librdkafka's largest number of requests in flight with idempotence.
const IDEMPOTENT_MAX_IN_FLIGHT: i32 = 5;

/// The assignors librdkafka has, by name, and whether they rebalance cooperatively.
const ASSIGNORS: [(&str, bool); 3] = [
    ("range", false),
    ("roundrobin", false),
    ("cooperative-sticky", true),
];

/// Checks `settings` for a client of `kind` and adjusts them as librdkafka would. `Ok` carries
/// the producer's refusal at its first produce, if it would have one.
pub(super) fn finalize(
    settings: &mut Settings,
    kind: ClientKind,
) -> Result<Option<PropertyError>, PropertyError> {
    conf_finalize(settings, kind).map_err(PropertyError::conflict)?;
    assignors(settings).map_err(PropertyError::conflict)?;
    sasl_provider(settings).map_err(PropertyError::conflict)?;
    // The checks of each topic the producer creates, on its copy of the default topic
    // configuration; at creation they ran already when a topic property was set.
    let topic_refusal = if kind == ClientKind::Producer {
        topic_finalize(settings, kind)
            .err()
            .map(PropertyError::conflict)
    } else {
        None
    };
    Ok(topic_refusal)
}

/// A refusal with `message`, for the checks whose messages are partly built.
fn refuse<T>(message: impl Into<String>) -> Result<T, String> {
    Err(message.into())
}

/// `rd_kafka_conf_finalize`.
fn conf_finalize(s: &mut Settings, kind: ClientKind) -> Result<(), String> {
    if s.str(id::SSL_KEYSTORE_LOCATION).is_some() && s.str(id::SSL_KEYSTORE_PASSWORD).is_none() {
        return refuse("`ssl.keystore.password` is mandatory when `ssl.keystore.location` is set");
    }
    if s.str(id::SASL_MECHANISM)
        .is_some_and(|m| m.eq_ignore_ascii_case("OAUTHBEARER"))
    {
        oauthbearer_oidc(s)?;
    }
    match kind {
        ClientKind::Consumer => consumer(s)?,
        ClientKind::Producer => producer(s)?,
    }

    let refresh = s.int(id::TOPIC_METADATA_REFRESH_INTERVAL_MS);
    if !s.modified(id::METADATA_MAX_AGE_MS) && refresh > 0 {
        s.set(
            id::METADATA_MAX_AGE_MS,
            Setting::Int(refresh.saturating_mul(3)),
        );
    }
    if s.int(id::RECONNECT_BACKOFF_MAX_MS) < s.int(id::RECONNECT_BACKOFF_MS) {
        return refuse("`reconnect.backoff.max.ms` must be >= `reconnect.backoff.ms`");
    }
    if !s.modified(id::TOPIC_METADATA_REFRESH_FAST_INTERVAL_MS) {
        let backoff = s.int(id::RETRY_BACKOFF_MS);
        s.set(
            id::TOPIC_METADATA_REFRESH_FAST_INTERVAL_MS,
            Setting::Int(backoff),
        );
    }
    let on_azure = s
        .str(id::BOOTSTRAP_SERVERS)
        .is_some_and(|list| list.to_ascii_lowercase().contains("azure"));
    if !s.modified(id::CONNECTIONS_MAX_IDLE_MS) && on_azure {
        // librdkafka's answer to Azure's load balancers dropping idle connections after 4 min.
        s.set(
            id::CONNECTIONS_MAX_IDLE_MS,
            Setting::Int((4 * 60 - 10) * 1000),
        );
    }
    if !s.modified(id::ALLOW_AUTO_CREATE_TOPICS) {
        s.set(
            id::ALLOW_AUTO_CREATE_TOPICS,
            Setting::Bool(kind == ClientKind::Producer),
        );
    }

    if s.has_topic_conf {
        if kind == ClientKind::Producer {
            let timeout = s.int(id::MESSAGE_TIMEOUT_MS);
            if timeout != 0 && f64::from(timeout) <= s.float(id::LINGER_MS) {
                if s.modified(id::LINGER_MS) {
                    return refuse("`message.timeout.ms` must be greater than `linger.ms`");
                }
                s.set(id::LINGER_MS, Setting::Float(f64::from(timeout) - 0.1));
            }
        }
        topic_finalize(s, kind)?;
    }
    Ok(())
}

fn consumer(s: &mut Settings) -> Result<(), &'static str> {
    if s.enum_meaning(id::GROUP_PROTOCOL) == "classic" {
        if s.int(id::MAX_POLL_INTERVAL_MS) < s.int(id::SESSION_TIMEOUT_MS) {
            return Err("`max.poll.interval.ms`must be >= `session.timeout.ms`");
        }
    } else {
        if s.modified(id::SESSION_TIMEOUT_MS) {
            return Err(
                "`session.timeout.ms` is not supported for `group.protocol=consumer`. \
                        It is defined broker side",
            );
        }
        if s.modified(id::PARTITION_ASSIGNMENT_STRATEGY) {
            return Err("`partition.assignment.strategy` is not supported for \
                        `group.protocol=consumer`. Use `group.remote.assignor` instead");
        }
        if s.modified(id::GROUP_PROTOCOL_TYPE) {
            return Err("`group.protocol.type` is not supported for `group.protocol=consumer`");
        }
        if s.modified(id::HEARTBEAT_INTERVAL_MS) {
            return Err(
                "`heartbeat.interval.ms` is not supported for `group.protocol=consumer`. \
                        It is defined broker side",
            );
        }
    }

    let message_max = s.int(id::MESSAGE_MAX_BYTES);
    if s.modified(id::FETCH_MAX_BYTES) {
        if s.int(id::FETCH_MAX_BYTES) < message_max {
            return Err("`fetch.max.bytes` must be >= `message.max.bytes`");
        }
    } else {
        let queued = s.int(id::QUEUED_MAX_MESSAGES_KBYTES).saturating_mul(1024);
        let fetch = s.int(id::FETCH_MAX_BYTES).min(queued).max(message_max);
        s.set(id::FETCH_MAX_BYTES, Setting::Int(fetch));
    }
    let fetch = i64::from(s.int(id::FETCH_MAX_BYTES));
    if s.modified(id::RECEIVE_MESSAGE_MAX_BYTES) {
        if fetch + 512 > i64::from(s.int(id::RECEIVE_MESSAGE_MAX_BYTES)) {
            return Err("`receive.message.max.bytes` must be >= `fetch.max.bytes` + 512");
        }
    } else {
        // fetch.max.bytes is at most i32::MAX - 512, so this fits.
        let receive = s
            .int(id::RECEIVE_MESSAGE_MAX_BYTES)
            .max((fetch + 512) as i32);
        s.set(id::RECEIVE_MESSAGE_MAX_BYTES, Setting::Int(receive));
    }
    s.set(id::ENABLE_IDEMPOTENCE, Setting::Bool(false));
    Ok(())
}

fn producer(s: &mut Settings) -> Result<(), &'static str> {
    if s.str(id::TRANSACTIONAL_ID).is_some() {
        if !s.bool(id::ENABLE_IDEMPOTENCE) {
            if s.modified(id::ENABLE_IDEMPOTENCE) {
                return Err("`transactional.id` requires `enable.idempotence=true`");
            }
            s.set(id::ENABLE_IDEMPOTENCE, Setting::Bool(true));
        }
        let transaction_timeout = s.int(id::TRANSACTION_TIMEOUT_MS);
        if !s.modified(id::SOCKET_TIMEOUT_MS) {
            // Room for one request before the transaction times out.
            let socket = transaction_timeout.saturating_sub(100).max(900);
            s.set(id::SOCKET_TIMEOUT_MS, Setting::Int(socket));
        } else if i64::from(transaction_timeout) + 100 < i64::from(s.int(id::SOCKET_TIMEOUT_MS)) {
            return Err("`socket.timeout.ms` must be set <= `transaction.timeout.ms` + 100");
        }
    }

    if s.bool(id::ENABLE_IDEMPOTENCE) {
        let in_flight = s.int(id::MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION);
        if s.modified(id::MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION) {
            if in_flight > IDEMPOTENT_MAX_IN_FLIGHT {
                return Err("`max.in.flight` must be set <= 5 when `enable.idempotence` is true");
            }
        } else {
            s.set(
                id::MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                Setting::Int(in_flight.min(IDEMPOTENT_MAX_IN_FLIGHT)),
            );
        }
        if s.modified(id::RETRIES) {
            if s.int(id::RETRIES) < 1 {
                return Err("`retries` must be set >= 1 when `enable.idempotence` is true");
            }
        } else {
            s.set(id::RETRIES, Setting::Int(i32::MAX));
        }
        if s.modified(id::QUEUE_BUFFERING_BACKPRESSURE_THRESHOLD)
            && s.int(id::QUEUE_BUFFERING_BACKPRESSURE_THRESHOLD) > 1
        {
            return Err(
                "`queue.buffering.backpressure.threshold` must be set to 1 when \
                        `enable.idempotence` is true",
            );
        }
        s.set(id::QUEUE_BUFFERING_BACKPRESSURE_THRESHOLD, Setting::Int(1));
    } else if s.bool(id::ENABLE_GAPLESS_GUARANTEE) && s.modified(id::ENABLE_GAPLESS_GUARANTEE) {
        return Err("`enable.gapless.guarantee` requires `enable.idempotence` to be enabled");
    }

    if !s.modified(id::STICKY_PARTITIONING_LINGER_MS) {
        // librdkafka truncates twice the (fractional) linger to whole milliseconds.
        let twice = (2.0 * s.float(id::LINGER_MS)).min(900_000.0) as i32;
        s.set(id::STICKY_PARTITIONING_LINGER_MS, Setting::Int(twice));
    }
    Ok(())
}

/// `rd_kafka_topic_conf_finalize`: nothing for consumers.
fn topic_finalize(s: &mut Settings, kind: ClientKind) -> Result<(), &'static str> {
    if kind != ClientKind::Producer {
        return Ok(());
    }
    if s.bool(id::ENABLE_IDEMPOTENCE) {
        if s.modified(id::ACKS) {
            if s.int(id::ACKS) != -1 {
                return Err("`acks` must be set to `all` when `enable.idempotence` is true");
            }
        } else {
            s.set(id::ACKS, Setting::Int(-1));
        }
        if s.modified(id::QUEUING_STRATEGY) {
            if s.enum_meaning(id::QUEUING_STRATEGY) != "fifo" {
                return Err(
                    "`queuing.strategy` must be set to `fifo` when `enable.idempotence` \
                            is true",
                );
            }
        } else {
            s.set(id::QUEUING_STRATEGY, Setting::Enum(0));
        }
        if s.str(id::TRANSACTIONAL_ID).is_some() {
            let transaction_timeout = s.int(id::TRANSACTION_TIMEOUT_MS);
            if !s.modified(id::MESSAGE_TIMEOUT_MS) {
                s.set(id::MESSAGE_TIMEOUT_MS, Setting::Int(transaction_timeout));
            } else if s.int(id::MESSAGE_TIMEOUT_MS) > transaction_timeout {
                return Err("`message.timeout.ms` must be set <= `transaction.timeout.ms`");
            }
        }
    }
    let timeout = s.int(id::MESSAGE_TIMEOUT_MS);
    if timeout != 0 && f64::from(timeout) <= s.float(id::LINGER_MS) && s.modified(id::LINGER_MS) {
        return Err("`message.timeout.ms` must be greater than `linger.ms`");
    }
    Ok(())
}

/// The OIDC part of `rd_kafka_conf_finalize` for OAUTHBEARER.
fn oauthbearer_oidc(s: &Settings) -> Result<(), String> {
    if s.enum_meaning(id::SASL_OAUTHBEARER_METHOD) != "oidc" {
        return Ok(());
    }
    if s.bool(id::ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT) {
        return refuse(
            "`enable.sasl.oauthbearer.unsecure.jwt` and `sasl.oauthbearer.method=oidc` \
                    are mutually exclusive",
        );
    }
    let azure = s.enum_meaning(id::SASL_OAUTHBEARER_METADATA_AUTHENTICATION_TYPE) == "azure_imds";
    if s.str(id::SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL).is_none() {
        if !azure {
            return refuse(
                "`sasl.oauthbearer.token.endpoint.url` is mandatory when \
                        `sasl.oauthbearer.method=oidc` is set",
            );
        }
        let has_query = s
            .str(id::SASL_OAUTHBEARER_CONFIG)
            .is_some_and(|config| config_has_key(config, "query"));
        if !has_query {
            return refuse(
                "`sasl.oauthbearer.token.endpoint.url` is mandatory for Azure IMDS \
                        authentication when `query` isn't set",
            );
        }
    }
    if azure {
        return Ok(());
    }
    if s.enum_meaning(id::SASL_OAUTHBEARER_GRANT_TYPE) == "client_credentials" {
        if s.str(id::SASL_OAUTHBEARER_CLIENT_ID).is_none() {
            return refuse(
                "`sasl.oauthbearer.client.id` is mandatory when \
                        `sasl.oauthbearer.method=oidc` is set",
            );
        }
        if s.str(id::SASL_OAUTHBEARER_CLIENT_SECRET).is_none() {
            return refuse(
                "`sasl.oauthbearer.client.secret` is mandatory when \
                        `sasl.oauthbearer.method=oidc` is set",
            );
        }
        return Ok(());
    }
    jwt_bearer(s)
}

/// The JWT-bearer grant's settings: a ready assertion file, or the key to sign one with.
fn jwt_bearer(s: &Settings) -> Result<(), String> {
    let key_file = s
        .str(id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_FILE)
        .is_some();
    let key_pem = s
        .str(id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_PEM)
        .is_some();
    if s.str(id::SASL_OAUTHBEARER_ASSERTION_FILE).is_none() {
        if key_file && key_pem {
            return refuse(
                "Mutually exclusive properties set. \
                        `sasl.oauthbearer.assertion.private.key.file` and \
                        `sasl.oauthbearer.assertion.private.key.pem` cannot both be set",
            );
        }
        if !key_file && !key_pem {
            return refuse(
                "`sasl.oauthbearer.assertion.private.key.file` or \
                        `sasl.oauthbearer.assertion.private.key.pem` is mandatory when \
                        `sasl.oauthbearer.grant.type` is set to \
                        `urn:ietf:params:oauth:grant-type:jwt-bearer`",
            );
        }
        return Ok(());
    }
    // The settings a ready assertion makes pointless; strings count when they hold a value,
    // the claim numbers and flag when they were set at all.
    let excluded: [(usize, bool, &str); 10] = [
        (
            id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_FILE,
            false,
            "private.key.file",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_PEM,
            false,
            "private.key.pem",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_PASSPHRASE,
            false,
            "private.key.passphrase",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_JWT_TEMPLATE_FILE,
            false,
            "jwt.template.file",
        ),
        (id::SASL_OAUTHBEARER_ASSERTION_CLAIM_SUB, false, "claim.sub"),
        (id::SASL_OAUTHBEARER_ASSERTION_CLAIM_AUD, false, "claim.aud"),
        (id::SASL_OAUTHBEARER_ASSERTION_CLAIM_ISS, false, "claim.iss"),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_JTI_INCLUDE,
            true,
            "claim.jti.include",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_EXP_SECONDS,
            true,
            "claim.exp.seconds",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_NBF_SECONDS,
            true,
            "claim.nbf.seconds",
        ),
    ];
    for (index, by_modification, suffix) in excluded {
        let present = if by_modification {
            s.modified(index)
        } else {
            s.str(index).is_some()
        };
        if present {
            return refuse(format!(
                "Mutually exclusive properties set. `sasl.oauthbearer.assertion.file` and \
                 `sasl.oauthbearer.assertion.{suffix}` cannot both be set"
            ));
        }
    }
    Ok(())
}

/// Whether `sasl.oauthbearer.config` (`key=value` pairs separated by commas, leading spaces of
/// each pair dropped, `\` escaping the next character) has `key`.
fn config_has_key(config: &str, key: &str) -> bool {
    let mut field = String::new();
    let mut fields = Vec::new();
    let mut escaped = false;
    for c in config.chars() {
        if escaped {
            field.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            fields.push(std::mem::take(&mut field));
        } else if !(field.is_empty() && c.is_ascii_whitespace()) {
            field.push(c);
        }
    }
    fields.push(field);
    fields
        .iter()
        .filter(|f| !f.is_empty())
        .any(|f| f.split_once('=').is_some_and(|(k, _)| k == key))
}

/// The assignors `partition.assignment.strategy` names, in order without repeats, checked as
/// `rd_kafka_assignors_init` checks them.
pub(super) fn assignor_names(strategy: &str) -> Result<Vec<&'static str>, String> {
    let mut names: Vec<&'static str> = Vec::new();
    let mut rest = strategy;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([' ', ',']);
        let (name, next) = rest.split_once(',').unwrap_or((rest, ""));
        let Some(&(known, _)) = ASSIGNORS.iter().find(|(n, _)| *n == name) else {
            return Err(format!("Unsupported partition.assignment.strategy: {name}"));
        };
        if !names.contains(&known) {
            names.push(known);
        }
        rest = next;
    }
    let cooperative = |n: &&str| ASSIGNORS.iter().any(|(a, c)| a == n && *c);
    if names.iter().any(cooperative) && !names.iter().all(cooperative) {
        return Err(format!(
            "All partition.assignment.strategy ({strategy}) assignors must have the same \
             protocol type, online migration between assignors with different protocol types \
             is not supported"
        ));
    }
    Ok(names)
}

fn assignors(s: &Settings) -> Result<(), String> {
    assignor_names(s.str(id::PARTITION_ASSIGNMENT_STRATEGY).unwrap_or("")).map(|_| ())
}

/// `rd_kafka_sasl_select_provider` and the provider's configuration check.
fn sasl_provider(s: &Settings) -> Result<(), String> {
    let protocol = s.enum_meaning(id::SECURITY_PROTOCOL);
    if protocol != "sasl_plaintext" && protocol != "sasl_ssl" {
        return Ok(());
    }
    let mechanism = s.str(id::SASL_MECHANISM).unwrap_or("");
    let needs_credentials = match mechanism {
        "GSSAPI" => {
            return Err(
                "No provider for SASL mechanism GSSAPI: ruststream-kafka has no Kerberos \
                 implementation. Available mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, \
                 OAUTHBEARER, AWS_MSK_IAM"
                    .to_owned(),
            );
        }
        "PLAIN" => true,
        // AWS_MSK_IAM is not librdkafka's: Amazon MSK's IAM mechanism, credentials from the
        // AWS chain.
        "OAUTHBEARER" | "AWS_MSK_IAM" => false,
        m if m.starts_with("SCRAM-SHA-") => true,
        m => return Err(format!("Unsupported SASL mechanism: {m}")),
    };
    if needs_credentials
        && (s.str(id::SASL_USERNAME).is_none() || s.str(id::SASL_PASSWORD).is_none())
    {
        return Err("sasl.username and sasl.password must be set".to_owned());
    }
    if mechanism.starts_with("SCRAM-SHA-")
        && !matches!(mechanism, "SCRAM-SHA-1" | "SCRAM-SHA-256" | "SCRAM-SHA-512")
    {
        return Err(format!(
            "Unsupported hash function: {mechanism} (try SCRAM-SHA-512)"
        ));
    }
    Ok(())
}

/// What librdkafka logs as configuration warnings when it creates a client of `kind` (in this
/// crate's words): deprecated or experimental properties set, properties of the other client
/// kind (which it ignores), and a few combinations that do not do what they seem to.
pub(super) fn warnings(s: &Settings, kind: ClientKind) -> Vec<String> {
    let mut out = Vec::new();
    for (index, property) in PROPERTIES.iter().enumerate() {
        if !s.modified(index) {
            continue;
        }
        let name = property.name;
        if property.deprecated {
            out.push(format!("`{name}` is deprecated: {}", property.description));
        } else if property.experimental {
            out.push(format!(
                "`{name}` is experimental: {}",
                property.description
            ));
        }
        let (other, this) = match (property.clients, kind) {
            (Clients::Consumer, ClientKind::Producer) => ("consumer", "producer"),
            (Clients::Producer, ClientKind::Consumer) => ("producer", "consumer"),
            _ => continue,
        };
        out.push(format!(
            "`{name}` is a {other} property: a {this} ignores it"
        ));
    }
    let backoff_max = s.int(id::RETRY_BACKOFF_MAX_MS);
    if s.int(id::RETRY_BACKOFF_MS) > backoff_max {
        out.push(format!(
            "`retry.backoff.ms` is above `retry.backoff.max.ms`: every retry waits {backoff_max} ms"
        ));
    }
    if s.modified(id::TOPIC_METADATA_REFRESH_FAST_INTERVAL_MS)
        && s.int(id::TOPIC_METADATA_REFRESH_FAST_INTERVAL_MS) > backoff_max
    {
        out.push(format!(
            "`topic.metadata.refresh.fast.interval.ms` is above `retry.backoff.max.ms`: fast \
             refreshes wait {backoff_max} ms"
        ));
    }
    if kind == ClientKind::Consumer
        && i64::from(s.int(id::FETCH_WAIT_MAX_MS)) + 1000 > i64::from(s.int(id::SOCKET_TIMEOUT_MS))
    {
        out.push(
            "`fetch.wait.max.ms` should be at least 1000 ms below `socket.timeout.ms`, or \
             long-polling fetches time out"
                .to_owned(),
        );
    }
    let protocol = s.enum_meaning(id::SECURITY_PROTOCOL);
    if s.modified(id::SASL_MECHANISM) && !protocol.starts_with("sasl_") {
        out.push(
            "`sasl.mechanism` is set but `security.protocol` is not SASL_SSL or SASL_PLAINTEXT, \
             so SASL is not used"
                .to_owned(),
        );
    }
    let mechanism = s.str(id::SASL_MECHANISM).unwrap_or("");
    if s.modified(id::SASL_USERNAME) && !(mechanism.starts_with("SCRAM") || mechanism == "PLAIN") {
        out.push("`sasl.username` is used by the PLAIN and SCRAM mechanisms only".to_owned());
    }
    for (index, name) in [
        (id::CLIENT_SOFTWARE_NAME, "client.software.name"),
        (id::CLIENT_SOFTWARE_VERSION, "client.software.version"),
    ] {
        let unsafe_chars = s.str(index).is_some_and(|v| {
            !v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        });
        if s.modified(index) && unsafe_chars {
            out.push(format!(
                "`{name}` may only hold `a-zA-Z0-9.-`; other characters are sent as `-`"
            ));
        }
    }
    out
}
