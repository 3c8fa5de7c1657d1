//! The vocabulary of Kafka's message shapes: versions, field types, fields, structs and
//! messages, with the `const` constructors the generated tables (`shapes`, `request_shapes`)
//! are written in. A leaf: the tables and the walk that checks bodies against them
//! (`shape_check`) both name it, and it names neither.

/// In a version range: "and every later version".
pub(crate) const X: i16 = i16::MAX;

/// An inclusive range of versions; empty when `lo > hi`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Versions {
    pub(super) lo: i16,
    pub(super) hi: i16,
}

impl Versions {
    const NONE: Versions = Versions { lo: 0, hi: -1 };

    pub(super) const fn contains(self, version: i16) -> bool {
        self.lo <= version && version <= self.hi
    }
}

/// The type of a field (of each element, for an array field).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ty {
    Bool,
    Int8,
    Int16,
    Uint16,
    Int32,
    Int64,
    // No response has one (Kafka 4.1); kept so that a regenerated table can use it.
    #[allow(dead_code)]
    Uint32,
    Float64,
    Uuid,
    Str,
    Bytes,
    Records,
    Struct(&'static Struct),
}

/// One field of a struct, as Kafka's spec declares it.
#[derive(Debug)]
pub(crate) struct Field {
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) array: bool,
    pub(super) versions: Versions,
    pub(super) nullable: Versions,
    pub(super) tagged: Versions,
    pub(super) tag: u32,
}

impl Field {
    /// The versions in which the field may be null.
    pub(crate) const fn n(mut self, lo: i16, hi: i16) -> Field {
        self.nullable = Versions { lo, hi };
        self
    }

    /// The field's tag, and the versions in which it is a tagged field.
    pub(crate) const fn t(mut self, tag: u32, lo: i16, hi: i16) -> Field {
        self.tag = tag;
        self.tagged = Versions { lo, hi };
        self
    }
}

/// A field present in versions `lo..=hi`.
pub(crate) const fn f(name: &'static str, ty: Ty, lo: i16, hi: i16) -> Field {
    Field {
        name,
        ty,
        array: false,
        versions: Versions { lo, hi },
        nullable: Versions::NONE,
        tagged: Versions::NONE,
        tag: 0,
    }
}

/// An array field present in versions `lo..=hi`.
pub(crate) const fn a(name: &'static str, ty: Ty, lo: i16, hi: i16) -> Field {
    Field {
        array: true,
        ..f(name, ty, lo, hi)
    }
}

/// A struct: a named list of fields.
#[derive(Debug)]
pub(crate) struct Struct {
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [Field],
}

/// A response or request: its API key, valid and flexible versions, and its top-level struct.
#[derive(Debug)]
pub(crate) struct Message {
    pub(super) api_key: i16,
    pub(super) valid: Versions,
    pub(super) flexible: Versions,
    pub(super) body: &'static Struct,
}

/// A response or request with versions `lo..=hi`, flexible in `flex_lo..=flex_hi`.
pub(crate) const fn m(
    api_key: i16,
    lo: i16,
    hi: i16,
    flex_lo: i16,
    flex_hi: i16,
    body: &'static Struct,
) -> Message {
    Message {
        api_key,
        valid: Versions { lo, hi },
        flexible: Versions {
            lo: flex_lo,
            hi: flex_hi,
        },
        body,
    }
}
