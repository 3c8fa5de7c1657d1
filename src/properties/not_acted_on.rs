//! The properties this crate accepts, and validates as librdkafka does, but does not act on
//! yet, and the one place that says so at runtime.
//!
//! A service written for librdkafka may set any of them; refusing them would break it, and
//! ignoring them silently would leave its author believing they work. So they are accepted,
//! listed here, and logged once per process the first time a configuration sets them.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use super::Properties;
use super::table::PROPERTIES;
use super::validate::resolve;

/// Properties accepted but not acted on (yet), by the spelling that reaches them (`topic.` for
/// the topic properties whose name a global property has too).
///
/// What they would change, by group:
/// - TLS and SASL tuning (`ssl.sigalgs.list`, the Kerberos details, `enable_sasl_queue`):
///   rustls picks its own safe signature algorithms.
/// - The OIDC JWT-bearer grant's assertion (`sasl.oauthbearer.assertion.*`): the grant itself
///   is refused at the first connection (`sasl.oauthbearer.grant.type` is acted on that way).
/// - Socket and connection tuning (`socket.*`, `broker.address.*`, `connections.max.idle.ms`,
///   `client.dns.lookup`, `enable.sparse.connections`): the client keeps one lazily dialled
///   connection per broker with `TCP_NODELAY`, system buffer sizes and no keep-alive.
/// - Metadata tuning (`metadata.request.timeout.ms`, `metadata.max.age.ms`,
///   `topic.metadata.refresh.fast.*`, `...sparse`,
///   `...propagation.max.ms`, `topic.blacklist`): the client refreshes the topics it uses.
/// - Logging (`debug`, `log*`, `enabled_events`): the client logs through `tracing`
///   (`statistics.interval.ms` is acted on: an INFO line of statistics every interval).
/// - Legacy, deprecated and librdkafka-internal settings, which librdkafka itself mostly ignores.
/// - Producer and consumer details: `enable.gapless.guarantee`,
///   `queue.buffering.backpressure.threshold`, `delivery.report.only.error`, `queuing.strategy`,
///   `fetch.queue.backoff.ms`, `enable.partition.eof`, `coordinator.query.interval.ms`,
///   `group.protocol.type`.
pub const NOT_ACTED_ON: [&str; 69] = [
    "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.jwt.template.file",
    "client.software.name",
    "client.software.version",
    "message.copy.max.bytes",
    "metadata.request.timeout.ms",
    "metadata.max.age.ms",
    "topic.metadata.refresh.fast.interval.ms",
    "topic.metadata.refresh.fast.cnt",
    "topic.metadata.refresh.sparse",
    "topic.metadata.propagation.max.ms",
    "topic.blacklist",
    "debug",
    "socket.blocking.max.ms",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "socket.keepalive.enable",
    "socket.nagle.disable",
    "socket.max.fails",
    "broker.address.ttl",
    "broker.address.family",
    "connections.max.idle.ms",
    "enable.sparse.connections",
    "reconnect.backoff.jitter.ms",
    "enabled_events",
    "log_level",
    "log.queue",
    "log.thread.name",
    "enable.random.seed",
    "log.connection.close",
    "internal.termination.signal",
    "api.version.request",
    "api.version.request.timeout.ms",
    "api.version.fallback.ms",
    "broker.version.fallback",
    "ssl.sigalgs.list",
    "sasl.kerberos.service.name",
    "sasl.kerberos.principal",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.keytab",
    "sasl.kerberos.min.time.before.relogin",
    "enable_sasl_queue",
    "group.protocol.type",
    "coordinator.query.interval.ms",
    "fetch.queue.backoff.ms",
    "offset.store.method",
    "enable.partition.eof",
    "enable.gapless.guarantee",
    "queue.buffering.backpressure.threshold",
    "delivery.report.only.error",
    "client.dns.lookup",
    "queuing.strategy",
    "produce.offset.report",
    "auto.commit.enable",
    "topic.auto.commit.interval.ms",
    "offset.store.path",
    "offset.store.sync.interval.ms",
    "topic.offset.store.method",
    "consume.callback.max.messages",
];

/// The names (as [`NOT_ACTED_ON`] spells them) of the not-acted-on properties that
/// `properties` sets, in the order first set, each once.
#[must_use]
pub fn not_acted_on(properties: &Properties) -> Vec<&'static str> {
    let mut found: Vec<&'static str> = Vec::new();
    for (key, _) in properties {
        let Ok(index) = resolve(key) else {
            continue;
        };
        let listed = NOT_ACTED_ON
            .iter()
            .find(|name| resolve(name) == Ok(index))
            .copied();
        if let Some(name) = listed
            && !found.contains(&name)
        {
            found.push(name);
        }
    }
    found
}

/// Logs (a `tracing` warning) each property of [`NOT_ACTED_ON`] that `properties` sets, unless
/// this process logged it before, and returns the names it logged.
///
/// The adapter calls it at startup with every configuration it builds: each property is
/// reported once however many clients set it.
pub fn log_not_acted_on(properties: &Properties) -> Vec<&'static str> {
    static LOGGED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut logged = LOGGED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut now = Vec::new();
    for name in not_acted_on(properties) {
        if logged.insert(name) {
            let description = resolve(name).map_or("", |i| PROPERTIES[i].description);
            tracing::warn!(
                property = name,
                "librdkafka property `{name}` is accepted but ruststream-kafka does not act on \
                 it yet ({description})"
            );
            now.push(name);
        }
    }
    now
}
