//! The values of every property after a list of pairs was applied: the counterpart of a
//! librdkafka configuration object.
//!
//! Besides each value, it keeps what librdkafka keeps and its cross-checks look at: whether a
//! property was set at all ("modified", even when set to its default or emptied back to it),
//! and whether any topic property was set, which is when librdkafka creates the default topic
//! configuration and checks it together with the client's.

use super::error::PropertyError;
use super::property::{Kind, Scope};
use super::setting::Setting;
use super::table::PROPERTIES;
use super::validate;

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
