//! [`SchemaFramed`]: any codec's bytes inside the Confluent envelope.

use std::collections::HashMap;
use std::sync::Arc;

use ruststream::BytesMut;
use ruststream::codec::{Codec, CodecError};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::registry::json_schema_of;
use super::{
    JsonSchema, MissingSubject, Registration, SchemaPrefetch, SchemaRegistry, SchemaType,
    parse_envelope, preview, push_header, serde_name,
};
use crate::error::KafkaError;

/// A codec that frames what its inner codec (typically JSON) writes with the schema id of the
/// value type's subject, and strips the envelope before the inner codec reads.
///
/// Each published type is registered with [`register`](Self::register); the
/// [`SchemaPrefetch`] it is built from resolves those subjects at connect, so encoding never
/// waits on the registry. Decoding refuses payloads without an envelope: on a registry-backed
/// topic those come from a producer that forgot to frame.
#[derive(Debug, Clone)]
pub struct SchemaFramed<C> {
    inner: C,
    prefetch: SchemaPrefetch,
    /// serde type name to subject.
    subjects: Arc<HashMap<String, String>>,
}

impl<C> SchemaFramed<C> {
    /// Frames `inner`'s output with subjects resolved through `prefetch`.
    #[must_use]
    pub fn new(prefetch: &SchemaPrefetch, inner: C) -> Self {
        Self {
            inner,
            prefetch: prefetch.clone(),
            subjects: Arc::new(HashMap::new()),
        }
    }

    /// Publishes values of `T` under `subject`, with the JSON Schema `schemars` derives for
    /// it (declared to the prefetch, which resolves or registers it at connect).
    ///
    /// # Panics
    ///
    /// When another type with the same serde name is registered under a different subject
    /// (publishing could not tell them apart), or `T`'s schema cannot be written out.
    #[must_use]
    pub fn register<T: Serialize + JsonSchema>(mut self, subject: impl Into<String>) -> Self {
        let subject = subject.into();
        let name = T::schema_name().into_owned();
        let definition = json_schema_of::<T>()
            .unwrap_or_else(|e| panic!("the JSON Schema of {name} cannot be written: {e}"));
        let subjects = Arc::make_mut(&mut self.subjects);
        if let Some(earlier) = subjects.get(&name)
            && *earlier != subject
        {
            panic!(
                "two registered types are named {name:?} by serde, under subjects {earlier:?} \
                 and {subject:?}; a publish could not tell which is meant. Rename one with \
                 #[serde(rename = \"...\")]"
            );
        }
        subjects.insert(name, subject.clone());
        self.prefetch.declare(Registration {
            subject,
            schema_type: SchemaType::Json,
            definition,
        });
        self
    }

    /// The wrapped codec.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    fn registry(&self) -> &SchemaRegistry {
        self.prefetch.registry()
    }
}

fn encode_failure(message: String) -> CodecError {
    CodecError::Encode(Box::new(KafkaError::wire_text(message)))
}

impl<C: Codec> Codec for SchemaFramed<C> {
    fn encode<T: Serialize>(&self, value: &T) -> Result<BytesMut, CodecError> {
        let Some(name) = serde_name(value) else {
            return Err(encode_failure(
                "this codec finds a value's subject by its type's serde name, and this value \
                 has none (a number, string, sequence or map); publish a named struct"
                    .to_owned(),
            ));
        };
        let Some(subject) = self.subjects.get(name) else {
            let known: Vec<&String> = self.subjects.keys().collect();
            return Err(encode_failure(format!(
                "no subject is registered for type {name:?}; add .register::<{name}>(subject) \
                 to the codec (it knows {known:?})"
            )));
        };
        let datum = self.inner.encode(value)?;
        match self.registry().cached_subject(subject) {
            Some(schema) => {
                let mut framed = BytesMut::with_capacity(5 + datum.len());
                push_header(&mut framed, schema.id());
                framed.extend_from_slice(&datum);
                Ok(framed)
            }
            None if self.prefetch.when_missing() == MissingSubject::PublishUnframed => Ok(datum),
            None => Err(encode_failure(format!(
                "subject {subject:?} of type {name:?} is not resolved; attach the codec's \
                 SchemaPrefetch to the broker (KafkaBroker::schema_prefetch) so connect \
                 resolves it, and if it was deleted since, MissingSubject decides what happens"
            ))),
        }
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        let Some((_, datum)) = parse_envelope(bytes) else {
            return Err(CodecError::Decode(Box::new(KafkaError::wire_text(
                format!(
                    "the payload has no Confluent envelope (zero byte and 4-byte schema id); it \
                 starts {}",
                    preview(bytes)
                ),
            ))));
        };
        self.inner.decode(datum)
    }
}
