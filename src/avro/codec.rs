//! [`AvroCodec`]: Avro on the typed lanes, with a pinned schema or through the registry.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use apache_avro::schema_compatibility::SchemaCompatibility;
use apache_avro::{AvroSchema, Schema};
use ruststream::BytesMut;
use ruststream::codec::{Codec, CodecError};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{parsed, read_value, schema_text, write_value};
use crate::error::KafkaError;
use crate::schema_registry::{
    MissingSubject, Registration, SchemaPrefetch, SchemaType, parse_envelope, preview, push_header,
    serde_name,
};

/// A type registered on a registry codec.
struct Typed {
    subject: String,
    /// Its own schema, written when its subject is missing and published unframed.
    schema: Arc<Schema>,
}

#[derive(Clone)]
enum Source {
    /// One schema for every value, bare datums.
    Local(Arc<Schema>),
    /// Schemas from the registry, framed datums; the key is the Avro record name.
    Registry {
        prefetch: SchemaPrefetch,
        types: Arc<HashMap<String, Arc<Typed>>>,
    },
}

/// Avro as a [`Codec`].
///
/// - [`local`](Self::local): every value is written and read with one pinned schema, as a bare
///   datum (no envelope, no registry).
/// - [`registry`](Self::registry): values are written with their subject's registered schema
///   behind the Confluent envelope, and read with the writer schema the envelope's id names
///   (resolved by the broker's [`SchemaPrefetch`] before the codec runs).
///
/// [`resolve_onto`](Self::resolve_onto) adds a reader schema: records are resolved onto it
/// (defaults fill fields the writer lacked) before they are deserialized.
#[derive(Clone)]
pub struct AvroCodec {
    source: Source,
    reader: Option<Arc<Schema>>,
}

impl fmt::Debug for AvroCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("AvroCodec");
        match &self.source {
            Source::Local(_) => out.field("mode", &"local"),
            Source::Registry { types, .. } => {
                let subjects: Vec<&str> = types.values().map(|t| t.subject.as_str()).collect();
                out.field("mode", &"registry").field("subjects", &subjects)
            }
        };
        out.field("resolves", &self.reader.is_some())
            .finish_non_exhaustive()
    }
}

/// The name a record schema is known by on the publish path.
fn record_name(schema: &Schema) -> Option<String> {
    match schema {
        Schema::Record(record) => Some(record.name.name().to_owned()),
        _ => None,
    }
}

fn encode_failure(message: String) -> CodecError {
    CodecError::Encode(Box::new(KafkaError::wire_text(message)))
}

fn decode_failure(message: String) -> CodecError {
    CodecError::Decode(Box::new(KafkaError::wire_text(message)))
}

impl AvroCodec {
    /// A codec writing and reading bare datums of `schema`.
    pub fn local(schema: Schema) -> Result<Self, KafkaError> {
        // Writing out the schema proves it complete before the first record needs it.
        schema_text(&schema)?;
        Ok(Self {
            source: Source::Local(Arc::new(schema)),
            reader: None,
        })
    }

    /// A codec framing values with their subjects' registered schemas, resolved through
    /// `prefetch`.
    #[must_use]
    pub fn registry(prefetch: &SchemaPrefetch) -> Self {
        Self {
            source: Source::Registry {
                prefetch: prefetch.clone(),
                types: Arc::new(HashMap::new()),
            },
            reader: None,
        }
    }

    /// Publishes values of record type `T` under `subject`, declaring `T`'s schema to the
    /// prefetch (which resolves, checks or registers the subject at connect).
    ///
    /// # Panics
    ///
    /// On a [`local`](Self::local) codec, when `T`'s schema is not a record, or when another
    /// registered type has the same record name under a different subject.
    #[must_use]
    pub fn register<T: Serialize + AvroSchema>(mut self, subject: impl Into<String>) -> Self {
        let subject = subject.into();
        let Source::Registry { prefetch, types } = &mut self.source else {
            panic!(
                "AvroCodec::register is for a registry codec; a local codec writes bare datums \
                 of its one schema"
            );
        };
        let schema = T::get_schema();
        let Some(name) = record_name(&schema) else {
            panic!(
                "the Avro schema registered under {subject:?} is not a record, so values of \
                 it cannot be told apart on publish; register a record type"
            );
        };
        let definition = schema_text(&schema)
            .unwrap_or_else(|e| panic!("the Avro schema of {name} cannot be written: {e}"));
        if let Some(earlier) = types.get(&name)
            && earlier.subject != subject
        {
            panic!(
                "two registered types are named {name:?}, under subjects {:?} and {subject:?}; \
                 a publish could not tell which is meant. Rename one (serde and Avro names)",
                earlier.subject
            );
        }
        let typed = Arc::new(Typed {
            subject: subject.clone(),
            schema: Arc::new(schema),
        });
        Arc::make_mut(types).insert(name, typed);
        prefetch.declare(Registration {
            subject,
            schema_type: SchemaType::Avro,
            definition,
        });
        self
    }

    /// Reads every record resolved onto `schema` (Avro schema resolution: defaults fill what
    /// the writer lacked, fields the reader lacks are skipped).
    ///
    /// On a local codec the pinned writer schema must be readable as `schema`.
    pub fn resolve_onto(mut self, schema: Schema) -> Result<Self, KafkaError> {
        if let Source::Local(writer) = &self.source {
            SchemaCompatibility::can_read(writer, &schema).map_err(|e| {
                KafkaError::InvalidOptions(format!(
                    "records of the codec's schema cannot be read as the reader schema: {e}"
                ))
            })?;
        }
        self.reader = Some(Arc::new(schema));
        Ok(self)
    }

    fn encode_registry<T: Serialize>(
        prefetch: &SchemaPrefetch,
        types: &HashMap<String, Arc<Typed>>,
        value: &T,
    ) -> Result<BytesMut, CodecError> {
        let Some(name) = serde_name(value) else {
            return Err(encode_failure(
                "this codec finds a value's subject by its record name, and this value is not \
                 a named struct"
                    .to_owned(),
            ));
        };
        let Some(entry) = types.get(name) else {
            let known: Vec<&String> = types.keys().collect();
            return Err(encode_failure(format!(
                "no subject is registered for record {name:?}; add .register::<{name}>(subject) \
                 to the codec (it knows {known:?}; the serde name must equal the Avro record \
                 name)"
            )));
        };
        let registry = prefetch.registry();
        let Some(registered) = registry.cached_subject(&entry.subject) else {
            if prefetch.when_missing() == MissingSubject::PublishUnframed {
                let datum = write_value(&entry.schema, value)
                    .map_err(|e| CodecError::Encode(Box::new(e)))?;
                return Ok(BytesMut::from(datum.as_slice()));
            }
            return Err(encode_failure(format!(
                "subject {:?} of record {name:?} is not resolved; attach the codec's \
                 SchemaPrefetch to the broker (KafkaBroker::schema_prefetch) so connect \
                 resolves it, and if it was deleted since, MissingSubject decides what happens",
                entry.subject
            )));
        };
        let writer = parsed(registry, &registered).map_err(|e| CodecError::Encode(Box::new(e)))?;
        let datum = write_value(&writer, value).map_err(|e| CodecError::Encode(Box::new(e)))?;
        let mut framed = BytesMut::with_capacity(5 + datum.len());
        push_header(&mut framed, registered.id());
        framed.extend_from_slice(&datum);
        Ok(framed)
    }
}

impl Codec for AvroCodec {
    fn encode<T: Serialize>(&self, value: &T) -> Result<BytesMut, CodecError> {
        match &self.source {
            Source::Local(schema) => {
                let datum =
                    write_value(schema, value).map_err(|e| CodecError::Encode(Box::new(e)))?;
                Ok(BytesMut::from(datum.as_slice()))
            }
            Source::Registry { prefetch, types } => Self::encode_registry(prefetch, types, value),
        }
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        let reader = self.reader.as_deref();
        let value = match &self.source {
            Source::Local(writer) => read_value(writer, reader, bytes),
            Source::Registry { prefetch, .. } => {
                let Some((id, datum)) = parse_envelope(bytes) else {
                    return Err(decode_failure(format!(
                        "the payload has no Confluent envelope, so its writer schema is \
                         unknown; it starts {}",
                        preview(bytes)
                    )));
                };
                let registry = prefetch.registry();
                let Some(registered) = registry.cached_schema(id) else {
                    return Err(decode_failure(format!(
                        "writer schema id {id} is not cached: attach the SchemaPrefetch to the \
                         broker (KafkaBroker::schema_prefetch) so deliveries resolve it, and \
                         check the registry is reachable"
                    )));
                };
                parsed(registry, &registered).and_then(|w| read_value(&w, reader, datum))
            }
        }
        .map_err(|e| CodecError::Decode(Box::new(e)))?;
        apache_avro::from_value(&value).map_err(|e| CodecError::Decode(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use apache_avro::AvroSchema;
    use ruststream::codec::Codec;
    use serde::{Deserialize, Serialize};

    use super::AvroCodec;

    #[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
    struct Ticket {
        seat: String,
        row: i32,
    }

    #[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
    #[serde(rename = "Ticket")]
    struct TicketV2 {
        seat: String,
        row: i32,
        #[avro(default = r#""standard""#)]
        class: String,
    }

    #[derive(Serialize)]
    struct Stray {
        noise: bool,
    }

    #[test]
    fn a_local_codec_round_trips_bare_datums() {
        let codec = AvroCodec::local(Ticket::get_schema()).unwrap();
        let ticket = Ticket {
            seat: "14C".into(),
            row: 14,
        };
        let bytes = codec.encode(&ticket).unwrap();
        assert_eq!(
            bytes[0], 6,
            "the datum starts with the seat's length, no envelope"
        );
        assert_eq!(codec.decode::<Ticket>(&bytes).unwrap(), ticket);
        assert!(codec.encode(&Stray { noise: true }).is_err());
    }

    #[test]
    fn resolution_onto_a_reader_schema_fills_defaults() {
        let old = AvroCodec::local(Ticket::get_schema()).unwrap();
        let bytes = old
            .encode(&Ticket {
                seat: "2A".into(),
                row: 2,
            })
            .unwrap();
        assert!(old.decode::<TicketV2>(&bytes).is_err());
        let reading = AvroCodec::local(Ticket::get_schema())
            .unwrap()
            .resolve_onto(TicketV2::get_schema())
            .unwrap();
        assert_eq!(
            reading.decode::<TicketV2>(&bytes).unwrap(),
            TicketV2 {
                seat: "2A".into(),
                row: 2,
                class: "standard".into()
            }
        );
    }

    #[test]
    fn a_reader_the_writer_cannot_reach_is_refused() {
        #[derive(Serialize, AvroSchema)]
        #[allow(dead_code)]
        struct Ticket {
            gate: i64,
        }
        let err = AvroCodec::local(TicketV2::get_schema())
            .unwrap()
            .resolve_onto(Ticket::get_schema())
            .unwrap_err();
        assert!(matches!(err, crate::KafkaError::InvalidOptions(_)), "{err}");
    }
}
