//! Apache Avro (feature `avro`): the [`AvroCodec`], bare-datum [`encode`] / [`decode`] for
//! `#[wire(..)]` hooks, and the Avro side of registry transcoding.

mod codec;

/// The derive and trait that give a type its Avro schema (re-exported from `apache_avro`).
pub use apache_avro::AvroSchema;
pub use codec::AvroCodec;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value;
use apache_avro::writer::datum::GenericDatumWriter;
use ruststream::BytesMut;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::KafkaError;
use crate::schema_registry::{RegisteredSchema, SchemaRegistry};

/// Each type's schema, derived once: `get_schema` builds it anew on every call.
fn schema_of<T: AvroSchema + 'static>() -> Arc<Schema> {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, Arc<Schema>>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Mutex::default);
    let mut schemas = schemas.lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(
        schemas
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::get_schema())),
    )
}

/// Writes `value` as a bare Avro datum (no envelope, no container header) with `T`'s own
/// schema, appending to `buf`.
pub fn encode<T>(value: &T, buf: &mut BytesMut) -> Result<(), KafkaError>
where
    T: AvroSchema + Serialize + Send + Sync + 'static,
{
    let schema = schema_of::<T>();
    let datum = write_value(&schema, value)?;
    buf.extend_from_slice(&datum);
    Ok(())
}

/// Reads a bare Avro datum written with `T`'s own schema.
pub fn decode<T>(payload: &[u8]) -> Result<T, KafkaError>
where
    T: AvroSchema + DeserializeOwned + Send + Sync + 'static,
{
    let schema = schema_of::<T>();
    let value = read_value(&schema, None, payload)?;
    apache_avro::from_value(&value).map_err(KafkaError::wire)
}

/// `value` conformed to `schema` and written as a datum.
pub(crate) fn write_value<T: Serialize + ?Sized>(
    schema: &Schema,
    value: &T,
) -> Result<Vec<u8>, KafkaError> {
    let value = apache_avro::to_value(value)
        .map_err(KafkaError::wire)?
        .resolve(schema)
        .map_err(|e| {
            KafkaError::wire_text(format!("the value does not fit the Avro schema: {e}"))
        })?;
    GenericDatumWriter::builder(schema)
        .build()
        .and_then(|w| w.write_value_to_vec(value))
        .map_err(KafkaError::wire)
}

/// A datum written with `writer`, resolved onto `reader` when given.
pub(crate) fn read_value(
    writer: &Schema,
    reader: Option<&Schema>,
    mut datum: &[u8],
) -> Result<Value, KafkaError> {
    GenericDatumReader::builder(writer)
        .maybe_reader_schema(reader)
        .build()
        .and_then(|r| r.read_value(&mut datum))
        .map_err(KafkaError::wire)
}

/// The full JSON text of `schema`, as the registry stores it.
pub(crate) fn schema_text(schema: &Schema) -> Result<String, KafkaError> {
    serde_json::to_string(schema).map_err(KafkaError::wire)
}

/// The parsed form of a registered Avro schema, parsed once per id.
pub(crate) fn parsed(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
) -> Result<Arc<Schema>, KafkaError> {
    if let Some(found) = registry.derived().avro.get(&schema.id()) {
        return Ok(Arc::clone(found));
    }
    let parsed = Arc::new(Schema::parse_str(schema.definition()).map_err(|e| {
        KafkaError::registry_text(format!(
            "schema id {} is not a valid Avro schema: {e}",
            schema.id()
        ))
    })?);
    registry
        .derived()
        .avro
        .insert(schema.id(), Arc::clone(&parsed));
    Ok(parsed)
}

/// An Avro datum as a JSON document.
pub(crate) fn datum_to_json(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
    datum: &[u8],
) -> Result<Vec<u8>, KafkaError> {
    let writer = parsed(registry, schema)?;
    let value = read_value(&writer, None, datum)?;
    let json = serde_json::Value::try_from(value).map_err(KafkaError::wire)?;
    serde_json::to_vec(&json).map_err(KafkaError::wire)
}

/// A JSON document as an Avro datum of `schema`.
pub(crate) fn json_to_datum(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
    json: &[u8],
) -> Result<Vec<u8>, KafkaError> {
    let writer = parsed(registry, schema)?;
    let json: serde_json::Value = serde_json::from_slice(json).map_err(KafkaError::wire)?;
    let value = Value::try_from(json)
        .map_err(KafkaError::wire)?
        .resolve(&writer)
        .map_err(|e| {
            KafkaError::wire_text(format!(
                "the document does not fit schema id {}: {e}",
                schema.id()
            ))
        })?;
    GenericDatumWriter::builder(&writer)
        .build()
        .and_then(|w| w.write_value_to_vec(value))
        .map_err(KafkaError::wire)
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::{AvroSchema, decode, encode};
    use ruststream::BytesMut;

    #[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
    struct Reading {
        sensor: String,
        celsius: f64,
        seq: i64,
    }

    #[test]
    fn a_bare_datum_reads_back_and_is_not_json() {
        let reading = Reading {
            sensor: "t-1".into(),
            celsius: 21.5,
            seq: 1 << 40,
        };
        let mut buf = BytesMut::new();
        encode(&reading, &mut buf).unwrap();
        assert_ne!(buf.first(), Some(&b'{'));
        // "t-1" is a zigzag length 3 (6) then the bytes.
        assert_eq!(&buf[..4], &[6, b't', b'-', b'1']);
        assert_eq!(decode::<Reading>(&buf).unwrap(), reading);
    }

    #[test]
    fn a_truncated_datum_is_a_wire_format_error() {
        let mut buf = BytesMut::new();
        encode(
            &Reading {
                sensor: "t".into(),
                celsius: 1.0,
                seq: 2,
            },
            &mut buf,
        )
        .unwrap();
        let err = decode::<Reading>(&buf[..3]).unwrap_err();
        assert!(matches!(err, crate::KafkaError::WireFormat(_)), "{err}");
    }
}
