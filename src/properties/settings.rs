//! The values of every property after a list of pairs was applied: the counterpart of a
//! librdkafka configuration object.
//!
//! Besides each value, it keeps what librdkafka keeps and its cross-checks look at: whether a
//! property was set at all ("modified", even when set to its default or emptied back to it),
//! and whether any topic property was set, which is when librdkafka creates the default topic
//! configuration and checks it together with the client's.

use super::error::PropertyError;
use super::property::{Kind, Scope};
use super::table::PROPERTIES;
use super::validate;

/// One property's value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Setting {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i32),
    /// A float.
    Float(f64),
    /// A string, a Kafka string or a pattern list; `None` when unset.
    Str(Option<String>),
    /// The index of an enum value.
    Enum(usize),
    /// A set of flags, bit `i` for value `i`.
    Flags(u32),
    /// Nothing settable (pointers, callbacks, internal state).
    Unsettable,
}

impl Setting {
    fn default_of(kind: Kind) -> Setting {
        match kind {
            Kind::Bool { default } => Setting::Bool(default),
            Kind::Int { default, .. } => Setting::Int(default),
            Kind::Float { default, .. } => Setting::Float(default),
            Kind::Str { default, .. } | Kind::KafkaStr { default } => {
                Setting::Str(default.map(str::to_owned))
            }
            Kind::Enum { default, .. } => Setting::Enum(default),
            Kind::Flags { default, .. } => Setting::Flags(default),
            Kind::Patterns => Setting::Str(None),
            Kind::Pointer | Kind::Internal | Kind::Foreign => Setting::Unsettable,
        }
    }
}

/// Every property's value, and which were set.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    values: Vec<Setting>,
    modified: Vec<bool>,
    /// Whether a topic property was set (librdkafka then has a default topic configuration
    /// when the client is created, and checks it then).
    pub(super) has_topic_conf: bool,
}

impl Settings {
    /// librdkafka's defaults.
    pub(super) fn defaults() -> Self {
        Settings {
            values: PROPERTIES
                .iter()
                .map(|p| Setting::default_of(p.kind))
                .collect(),
            modified: vec![false; PROPERTIES.len()],
            has_topic_conf: false,
        }
    }

    /// Applies `pairs` in order, stopping at the first refusal.
    pub(super) fn apply<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), PropertyError> {
        for (key, value) in pairs {
            let index =
                validate::resolve(key).map_err(|name| PropertyError::unknown(key, value, name))?;
            let property = &PROPERTIES[index];
            if property.scope == Scope::Topic {
                self.has_topic_conf = true;
            }
            if let Some(setting) = validate::parse(property, key, value)? {
                self.values[index] = setting;
                self.modified[index] = true;
            }
        }
        Ok(())
    }

    pub(super) fn get(&self, index: usize) -> &Setting {
        &self.values[index]
    }

    pub(super) fn set(&mut self, index: usize, setting: Setting) {
        self.values[index] = setting;
    }

    /// Sets a value as if it had been set from a string, without the checks (tests reach
    /// properties this build refuses this way).
    #[cfg(test)]
    pub(super) fn force(&mut self, index: usize, setting: Setting) {
        self.values[index] = setting;
        self.modified[index] = true;
    }

    /// Whether the property was set (librdkafka's `rd_kafka_conf_is_modified`).
    pub(super) fn modified(&self, index: usize) -> bool {
        self.modified[index]
    }

    pub(super) fn bool(&self, index: usize) -> bool {
        match self.values[index] {
            Setting::Bool(v) => v,
            ref other => unreachable!("{} is not a boolean: {other:?}", PROPERTIES[index].name),
        }
    }

    pub(super) fn int(&self, index: usize) -> i32 {
        match self.values[index] {
            Setting::Int(v) => v,
            ref other => unreachable!("{} is not an integer: {other:?}", PROPERTIES[index].name),
        }
    }

    pub(super) fn float(&self, index: usize) -> f64 {
        match self.values[index] {
            Setting::Float(v) => v,
            ref other => unreachable!("{} is not a float: {other:?}", PROPERTIES[index].name),
        }
    }

    pub(super) fn str(&self, index: usize) -> Option<&str> {
        match &self.values[index] {
            Setting::Str(v) => v.as_deref(),
            other => unreachable!("{} is not a string: {other:?}", PROPERTIES[index].name),
        }
    }

    /// The enum value's spelling of its meaning (the first of its synonyms: `smallest` for
    /// `earliest`).
    pub(super) fn enum_meaning(&self, index: usize) -> &'static str {
        match (self.values[index].clone(), PROPERTIES[index].kind) {
            (Setting::Enum(i), Kind::Enum { values, .. }) => {
                values[usize::from(values[i].meaning)].name
            }
            (other, _) => unreachable!("{} is not an enum: {other:?}", PROPERTIES[index].name),
        }
    }
}
