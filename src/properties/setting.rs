//! One property's value, typed by its kind. A leaf: the settings that hold every value and the
//! validation that parses one both name it.

use super::property::Kind;

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
    pub(super) fn default_of(kind: Kind) -> Setting {
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
