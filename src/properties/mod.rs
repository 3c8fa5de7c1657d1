//! librdkafka 2.12's configuration properties, validated as librdkafka validates them.
//!
//! A service moving from `ruststream-rdkafka` passes the same `(key, value)` pairs it passed
//! to librdkafka, and must see the same ones accepted, the same ones refused with the same
//! message, and the accepted ones mean the same. This module holds that promise:
//!
//! - [`PROPERTIES`] is librdkafka 2.12.1's property table (generated from its sources by
//!   `scripts/gen-properties.py`): every global and topic property, with aliases, scope,
//!   client, type, range, enum values, default and status. [`find`] looks a key up the way
//!   librdkafka does.
//! - [`Properties`] keeps the pairs in the order they were set, the way the adapter collects
//!   them; a later pair for the same key replaces an earlier one. Its `Debug` prints every key
//!   and redacts the values of the [`REDACTED`] keys.
//! - [`Properties::consumer`] and [`Properties::producer`] check the pairs as librdkafka does
//!   when they are set on a configuration object (see `validate.rs`) and then as a whole when a
//!   client is created (see `finalize.rs`, which lists every cross-check of librdkafka and
//!   whether it is implemented), and give typed values and the native client's configuration
//!   structs.
//! - [`NOT_ACTED_ON`] lists the properties accepted but not acted on yet, and
//!   [`log_not_acted_on`] says so at startup.
//!
//! One invariant matters more than the rest: a configuration that passes these checks means
//! what it means to librdkafka. Values are read with librdkafka's parsing (C `strtol`/`strtod`,
//! case-insensitive enums, its trimming rules) and its adjustments (the consumer's
//! `fetch.max.bytes`, a transactional producer's timeouts, ...) are applied before a value is
//! read back or converted, so that nothing downstream sees a value librdkafka would not have
//! used.
//!
//! Properties this crate cannot honour at all (OpenSSL engines and providers, OAuth/OIDC over
//! HTTP, Kerberos, plugins, librdkafka's mock cluster) are refused as a librdkafka build without
//! them refuses them: "not supported in this build", with this crate's reason.

mod cnum;
mod convert;
mod error;
mod finalize;
mod not_acted_on;
mod property;
mod setting;
mod settings;
mod table;
mod validate;

use std::fmt;
use std::time::Duration;

use crate::client::{ClientConfig, ConsumerConfig, ProducerConfig, bootstrap_list_shown};

pub use convert::ACTED_ON;
pub use error::PropertyError;
pub use not_acted_on::{NOT_ACTED_ON, log_not_acted_on, not_acted_on};
pub use property::{Clients, EnumValue, Flag, Gate, Importance, Kind, Property, Scope, StrCheck};
pub use table::PROPERTIES;

use finalize::ClientKind;
use setting::Setting;
use settings::Settings;
use table::id;

/// The keys whose values `Debug` prints as `[redacted]`: exact, case-sensitive matches.
///
/// They are the spellings of the properties librdkafka marks sensitive, plus the Java client's
/// `ssl.truststore.password`, which a configuration copied from a Java service may carry.
pub const REDACTED: [&str; 15] = [
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl_key",
    "ssl.ca.pem",
    "ssl.keystore.password",
    "ssl.truststore.password",
];

/// Whether `Debug` hides the value of `key`.
pub(crate) fn is_redacted(key: &str) -> bool {
    REDACTED.contains(&key)
}

/// Whether `key` (any spelling) is `bootstrap.servers`, whose entries may carry credentials
/// (`user:secret@host`) that `Debug` must not print.
fn names_bootstrap_servers(key: &str) -> bool {
    validate::resolve(key).is_ok_and(|index| index == id::BOOTSTRAP_SERVERS)
}

/// The property `key` sets, found as librdkafka finds it: a global property or alias of that
/// exact name, else a topic property or alias named by `key` without a leading `topic.`.
#[must_use]
pub fn find(key: &str) -> Option<&'static Property> {
    validate::resolve(key).ok().map(|i| &PROPERTIES[i])
}

/// librdkafka configuration pairs, in the order they were set.
///
/// Setting a key again replaces its earlier value (the earlier pair is kept for `Debug` but
/// never validated or used, as a map would have dropped it). Two spellings of one property
/// (`linger.ms` and `queue.buffering.max.ms`) are both applied, in order, so the later wins.
/// Nothing is checked until [`check`](Self::check), [`consumer`](Self::consumer) or
/// [`producer`](Self::producer).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Properties {
    pairs: Vec<(String, String)>,
}

impl Properties {
    /// No properties.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a pair.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.pairs.push((key.into(), value.into()));
        self
    }

    /// Adds a pair, by value.
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set(key, value);
        self
    }

    /// The pairs as they were set, repeats included.
    #[must_use]
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The pairs as they were set, repeats included.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many pairs were set, repeats included.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair was set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The value last given to the property `key` names, under any of its spellings (`acks`
    /// finds `request.required.acks=all`), as it was written; `None` if the property was not
    /// set or `key` names none.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        let Ok(index) = validate::resolve(key) else {
            return None;
        };
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| validate::resolve(k) == Ok(index))
            .map(|(_, v)| v.as_str())
    }

    /// The value last set for exactly `key`.
    #[must_use]
    pub fn get_exact(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Removes every pair that sets the property `key` names, under any spelling (or, for a
    /// key that names no property, every pair of exactly that key). Returns how many went.
    pub fn remove(&mut self, key: &str) -> usize {
        let before = self.pairs.len();
        match validate::resolve(key) {
            Ok(index) => self
                .pairs
                .retain(|(k, _)| validate::resolve(k) != Ok(index)),
            Err(_) => self.pairs.retain(|(k, _)| k != key),
        }
        before - self.pairs.len()
    }

    /// The pairs librdkafka would be given: for each key its last value, in the order of those
    /// last settings.
    fn effective(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().enumerate().filter_map(|(i, (k, v))| {
            let replaced = self.pairs[i + 1..].iter().any(|(later, _)| later == k);
            (!replaced).then_some((k.as_str(), v.as_str()))
        })
    }

    fn settings(&self) -> Result<Settings, PropertyError> {
        let mut settings = Settings::defaults();
        settings.apply(self.effective())?;
        Ok(settings)
    }

    /// Checks each property on its own, as librdkafka does when it is set: the name exists,
    /// the value has the property's type and range, and this build supports both.
    pub fn check(&self) -> Result<(), PropertyError> {
        self.settings().map(|_| ())
    }

    /// Checks the pairs as a consumer's configuration, as librdkafka does when each is set and
    /// when the consumer is created, and gives its values.
    pub fn consumer(&self) -> Result<ConsumerProperties, PropertyError> {
        let mut settings = self.settings()?;
        finalize::finalize(&mut settings, ClientKind::Consumer)?;
        Ok(ConsumerProperties { settings })
    }

    /// Checks the pairs as a producer's configuration, as librdkafka does when each is set and
    /// when the producer is created, and gives its values.
    ///
    /// A producer configuration that librdkafka accepts but whose first produce to any topic it
    /// would refuse (only possible when no topic property was set) passes here;
    /// [`ProducerProperties::check_topic`] reports it.
    pub fn producer(&self) -> Result<ProducerProperties, PropertyError> {
        let mut settings = self.settings()?;
        let topic_refusal = finalize::finalize(&mut settings, ClientKind::Producer)?;
        let acks = settings.int(id::ACKS);
        if !(-1..=1).contains(&acks) {
            // librdkafka sends other counts and the broker refuses every produce; the native
            // producer has no such setting, so it is refused here, at creation.
            return Err(PropertyError::conflict(format!(
                "Unsupported value \"{acks}\" for configuration property \
                 \"request.required.acks\": Kafka brokers accept only 0, 1 and all (-1)"
            )));
        }
        Ok(ProducerProperties {
            settings,
            topic_refusal,
        })
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Properties {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut properties = Properties::new();
        properties.extend(iter);
        properties
    }
}

impl<K: Into<String>, V: Into<String>> Extend<(K, V)> for Properties {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.set(k, v);
        }
    }
}

impl<'a> IntoIterator for &'a Properties {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, String)>,
        fn(&'a (String, String)) -> (&'a str, &'a str),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Prints in place of a secret.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

// Configurations end up in logs, and a credential in a log has left the service.
impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (key, value) in &self.pairs {
            if is_redacted(key) {
                list.entry(&(key, Redacted));
            } else if names_bootstrap_servers(key) {
                list.entry(&(key, bootstrap_list_shown(value)));
            } else {
                list.entry(&(key, value));
            }
        }
        list.finish()
    }
}

/// A property's value, as librdkafka holds it after the client was created.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i32),
    /// A float (`linger.ms`).
    Float(f64),
    /// A string or pattern list; `None` when unset.
    Str(Option<&'a str>),
    /// An enum value, spelled as librdkafka reports it: the first of its synonyms
    /// (`smallest` for `earliest` and `beginning`, `largest` for `latest` and `end`).
    Enum(&'static str),
    /// The flags that are set (those this build has, as librdkafka reports them).
    Flags(Vec<&'static str>),
}

/// Prints the value as librdkafka's `rd_kafka_conf_get` does.
impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(v) => write!(f, "{v}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => f.write_str(&cnum::format_g(*v)),
            Value::Str(v) => f.write_str(v.unwrap_or("")),
            Value::Enum(v) => f.write_str(v),
            Value::Flags(v) => f.write_str(&v.join(",")),
        }
    }
}

fn value_of<'a>(settings: &'a Settings, key: &str) -> Option<Value<'a>> {
    let index = validate::resolve(key).ok()?;
    Some(match settings.get(index) {
        Setting::Bool(v) => Value::Bool(*v),
        Setting::Int(v) => Value::Int(*v),
        Setting::Float(v) => Value::Float(*v),
        Setting::Str(v) => Value::Str(v.as_deref()),
        Setting::Enum(_) => Value::Enum(settings.enum_meaning(index)),
        Setting::Flags(set) => {
            let Kind::Flags { values, .. } = PROPERTIES[index].kind else {
                return None;
            };
            // As librdkafka reports them: the flags this build has.
            Value::Flags(
                values
                    .iter()
                    .filter(|flag| *set != 0 && flag.is_in(*set))
                    .filter(|flag| flag.gate.and_then(Gate::unsupported_reason).is_none())
                    .map(|flag| flag.name)
                    .collect(),
            )
        }
        Setting::Unsettable => return None,
    })
}

/// The properties that were set, with secrets redacted, for the views' `Debug`.
fn debug_settings(settings: &Settings, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut out = f.debug_struct(name);
    for (index, property) in PROPERTIES.iter().enumerate() {
        if !settings.modified(index) {
            continue;
        }
        if property.sensitive {
            out.field(property.name, &Redacted);
        } else if index == id::BOOTSTRAP_SERVERS {
            let list = settings.str(index).unwrap_or_default();
            out.field(property.name, &bootstrap_list_shown(list));
        } else if let Some(value) = value_of(settings, property.name) {
            out.field(property.name, &value.to_string());
        }
    }
    out.finish()
}

/// A consumer configuration librdkafka would accept, with the values it would use.
#[derive(Clone)]
pub struct ConsumerProperties {
    settings: Settings,
}

impl ConsumerProperties {
    /// The value of the property `key` names (any spelling), after librdkafka's adjustments
    /// for a consumer; `None` for an unknown key or a pointer property.
    #[must_use]
    pub fn value(&self, key: &str) -> Option<Value<'_>> {
        value_of(&self.settings, key)
    }

    /// The native client's connection settings (a consumer's, for its KIP-714 metrics).
    #[must_use]
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            role: crate::client::ClientRole::Consumer,
            ..convert::client_config(&self.settings)
        }
    }

    /// The native consumer's settings.
    #[must_use]
    pub fn consumer_config(&self) -> ConsumerConfig {
        convert::consumer_config(&self.settings)
    }

    /// What librdkafka would warn about when creating this consumer (in this crate's words).
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        finalize::warnings(&self.settings, ClientKind::Consumer)
    }
}

impl fmt::Debug for ConsumerProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_settings(&self.settings, "ConsumerProperties", f)
    }
}

/// A producer configuration librdkafka would accept, with the values it would use.
#[derive(Clone)]
pub struct ProducerProperties {
    settings: Settings,
    topic_refusal: Option<PropertyError>,
}

impl ProducerProperties {
    /// The value of the property `key` names (any spelling), after librdkafka's adjustments
    /// for a producer and its topics; `None` for an unknown key or a pointer property.
    #[must_use]
    pub fn value(&self, key: &str) -> Option<Value<'_>> {
        value_of(&self.settings, key)
    }

    /// The native client's connection settings.
    #[must_use]
    pub fn client_config(&self) -> ClientConfig {
        convert::client_config(&self.settings)
    }

    /// The native producer's settings.
    #[must_use]
    pub fn producer_config(&self) -> ProducerConfig {
        convert::producer_config(&self.settings)
    }

    /// `transactional.id`, if set to something other than the empty string.
    #[must_use]
    pub fn transactional_id(&self) -> Option<&str> {
        self.settings.str(id::TRANSACTIONAL_ID)
    }

    /// `transaction.timeout.ms`.
    #[must_use]
    pub fn transaction_timeout(&self) -> Duration {
        Duration::from_millis(
            u64::try_from(self.settings.int(id::TRANSACTION_TIMEOUT_MS)).unwrap_or(0),
        )
    }

    /// The refusal librdkafka would give the first produce to any topic (its per-topic checks,
    /// which run at client creation only when a topic property was set): for example
    /// `linger.ms` set above the default `message.timeout.ms`.
    pub fn check_topic(&self) -> Result<(), PropertyError> {
        self.topic_refusal.clone().map_or(Ok(()), Err)
    }

    /// What librdkafka would warn about when creating this producer (in this crate's words).
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        finalize::warnings(&self.settings, ClientKind::Producer)
    }
}

impl fmt::Debug for ProducerProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_settings(&self.settings, "ProducerProperties", f)
    }
}

#[cfg(test)]
mod tests;
