//! The name serde gives a value's type, which the registering codecs key subjects by.
//!
//! A value is run through a serializer that stops at the first call: named containers (structs,
//! unit and newtype structs, enums) report their name, everything else reports none.

use std::fmt;

use serde::Serialize;
use serde::ser::{self, Impossible};

/// The outcome of a probe, carried as the serializer's error so the probe stops at once.
#[derive(Debug)]
struct Found(Option<&'static str>);

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.unwrap_or("(unnamed)"))
    }
}

impl std::error::Error for Found {}

impl ser::Error for Found {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Self(None)
    }
}

struct Probe;

type Stop<T = ()> = Result<T, Found>;

macro_rules! nameless {
    ($($f:ident($t:ty)),* $(,)?) => {
        $(fn $f(self, _: $t) -> Stop { Err(Found(None)) })*
    };
}

impl ser::Serializer for Probe {
    type Ok = ();
    type Error = Found;
    type SerializeSeq = Impossible<(), Found>;
    type SerializeTuple = Impossible<(), Found>;
    type SerializeTupleStruct = Impossible<(), Found>;
    type SerializeTupleVariant = Impossible<(), Found>;
    type SerializeMap = Impossible<(), Found>;
    type SerializeStruct = Impossible<(), Found>;
    type SerializeStructVariant = Impossible<(), Found>;

    nameless!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );

    fn serialize_none(self) -> Stop {
        Err(Found(None))
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Stop {
        // An `Option` of a named type is still that type on the wire.
        value.serialize(self)
    }

    fn serialize_unit(self) -> Stop {
        Err(Found(None))
    }

    fn serialize_unit_struct(self, name: &'static str) -> Stop {
        Err(Found(Some(name)))
    }

    fn serialize_unit_variant(self, name: &'static str, _: u32, _: &'static str) -> Stop {
        Err(Found(Some(name)))
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, name: &'static str, _: &T) -> Stop {
        Err(Found(Some(name)))
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Stop {
        Err(Found(Some(name)))
    }

    fn serialize_seq(self, _: Option<usize>) -> Stop<Self::SerializeSeq> {
        Err(Found(None))
    }

    fn serialize_tuple(self, _: usize) -> Stop<Self::SerializeTuple> {
        Err(Found(None))
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        _: usize,
    ) -> Stop<Self::SerializeTupleStruct> {
        Err(Found(Some(name)))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Stop<Self::SerializeTupleVariant> {
        Err(Found(Some(name)))
    }

    fn serialize_map(self, _: Option<usize>) -> Stop<Self::SerializeMap> {
        Err(Found(None))
    }

    fn serialize_struct(self, name: &'static str, _: usize) -> Stop<Self::SerializeStruct> {
        Err(Found(Some(name)))
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Stop<Self::SerializeStructVariant> {
        Err(Found(Some(name)))
    }
}

/// The name serde gives `value`'s type, or `None` for numbers, strings, sequences and maps.
pub(crate) fn serde_name<T: ?Sized + Serialize>(value: &T) -> Option<&'static str> {
    match value.serialize(Probe) {
        Err(Found(name)) => name,
        Ok(()) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::serde_name;

    #[derive(Serialize)]
    struct Parcel {
        weight: u32,
    }

    #[derive(Serialize)]
    #[serde(rename = "acme.Label")]
    struct Label(String);

    #[test]
    fn named_types_report_their_serde_name() {
        assert_eq!(serde_name(&Parcel { weight: 1 }), Some("Parcel"));
        assert_eq!(serde_name(&Label("x".into())), Some("acme.Label"));
        assert_eq!(serde_name(&Some(Parcel { weight: 1 })), Some("Parcel"));
        assert_eq!(serde_name(&7), None);
        assert_eq!(serde_name(&vec![1]), None);
        assert_eq!(serde_name("text"), None);
    }
}
