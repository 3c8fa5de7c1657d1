//! Moving between plain JSON and a registry flavor: consumers see JSON, the wire carries the
//! subject's format.

use super::{RegisteredSchema, SchemaRegistry, SchemaType};
use crate::error::KafkaError;

/// The JSON form of `datum` (the bytes after the envelope), written under `schema`.
pub(crate) fn datum_to_json(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
    datum: &[u8],
) -> Result<Vec<u8>, KafkaError> {
    match schema.schema_type() {
        SchemaType::Json => Ok(datum.to_vec()),
        #[cfg(feature = "avro")]
        SchemaType::Avro => crate::avro::datum_to_json(registry, schema, datum),
        #[cfg(feature = "protobuf")]
        SchemaType::Protobuf => crate::protobuf::datum_to_json(registry, schema, datum),
        #[allow(unreachable_patterns)]
        other => {
            let _ = registry;
            Err(disabled(schema, other, "read"))
        }
    }
}

/// The datum (without envelope) `schema` writes for the JSON document `json`. `message`
/// picks the Protobuf message (fully qualified) when the schema declares several.
pub(crate) fn json_to_datum(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
    message: Option<&str>,
    json: &[u8],
) -> Result<Vec<u8>, KafkaError> {
    match schema.schema_type() {
        SchemaType::Json => Ok(json.to_vec()),
        #[cfg(feature = "avro")]
        SchemaType::Avro => crate::avro::json_to_datum(registry, schema, json),
        #[cfg(feature = "protobuf")]
        SchemaType::Protobuf => crate::protobuf::json_to_datum(registry, schema, message, json),
        #[allow(unreachable_patterns)]
        other => {
            let _ = (registry, message);
            Err(disabled(schema, other, "write"))
        }
    }
}

#[allow(dead_code)]
fn disabled(schema: &RegisteredSchema, kind: SchemaType, verb: &str) -> KafkaError {
    let feature = match kind {
        SchemaType::Protobuf => "protobuf",
        _ => "avro",
    };
    KafkaError::InvalidOptions(format!(
        "schema id {} is {kind:?}; to {verb} it, enable this crate's `{feature}` feature",
        schema.id()
    ))
}
