//! Confluent Schema Registry support (feature `schema-registry`): the wire envelope, the
//! [`SchemaRegistry`] client with its cache, connect-time resolution ([`SchemaPrefetch`]),
//! the framing codec [`SchemaFramed`], the transcoding publish layer [`SchemaFrame`], and
//! subject naming ([`SubjectStrategy`]).
//!
//! A registry attached with [`KafkaBroker::schema_registry`](crate::KafkaBroker::schema_registry)
//! turns framed deliveries into plain JSON before handlers decode them; a prefetch attached
//! with [`KafkaBroker::schema_prefetch`](crate::KafkaBroker::schema_prefetch) resolves what the
//! registry codecs need at connect, and the writer schema of each framed delivery before its
//! codec runs.

mod cache;
mod client;
mod edge;
mod envelope;
mod frame;
mod framed;
mod http;
mod name;
mod prefetch;
mod registry;
mod strategy;
mod subjects;
mod transcode;

pub use cache::{MemorySchemaCache, SchemaCache, SchemaCachePolicy};
pub use client::RegistryClient;
pub use envelope::{encode_envelope, parse_envelope};
pub use frame::SchemaFrame;
pub use framed::SchemaFramed;
pub use http::HttpRegistryClient;
pub use prefetch::{MissingSubject, SchemaPrefetch};
pub use registry::SchemaRegistry;
/// The derive that gives a type its JSON Schema, for [`SchemaFramed::register`] and
/// [`SchemaRegistry::register_json`] (re-exported from `schemars`).
pub use schemars::JsonSchema;
pub use strategy::SubjectStrategy;

pub(crate) use edge::Edges;
pub(crate) use envelope::{preview, push_header};
pub(crate) use name::serde_name;
pub(crate) use prefetch::Registration;
pub(crate) use subjects::SubjectMap;

/// The schema language a registered schema is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SchemaType {
    /// Apache Avro (the registry's default when an answer names no type).
    Avro,
    /// Protocol Buffers `.proto` source.
    Protobuf,
    /// JSON Schema.
    Json,
}

impl SchemaType {
    /// The registry API's name for the type.
    pub(crate) fn api_name(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Protobuf => "PROTOBUF",
            Self::Json => "JSON",
        }
    }

    /// The type an answer names; the registry leaves the field out for Avro.
    pub(crate) fn from_api(name: Option<&str>) -> Self {
        match name {
            Some(n) if n.eq_ignore_ascii_case("PROTOBUF") => Self::Protobuf,
            Some(n) if n.eq_ignore_ascii_case("JSON") => Self::Json,
            _ => Self::Avro,
        }
    }
}

/// A schema as the registry holds it: its global id, its language and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    id: u32,
    schema_type: SchemaType,
    definition: String,
}

impl RegisteredSchema {
    /// A schema with registry id `id`; what a [`RegistryClient`] answers a lookup with.
    #[must_use]
    pub fn new(id: u32, schema_type: SchemaType, definition: impl Into<String>) -> Self {
        Self {
            id,
            schema_type,
            definition: definition.into(),
        }
    }

    /// The registry's id for it, the one framed payloads carry.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Its language.
    #[must_use]
    pub fn schema_type(&self) -> SchemaType {
        self.schema_type
    }

    /// Its text: Avro JSON, `.proto` source or a JSON Schema document.
    #[must_use]
    pub fn definition(&self) -> &str {
        &self.definition
    }
}

#[cfg(test)]
mod tests {
    use super::SchemaType;

    #[test]
    fn an_answer_without_a_type_is_avro() {
        assert_eq!(SchemaType::from_api(None), SchemaType::Avro);
        assert_eq!(SchemaType::from_api(Some("PROTOBUF")), SchemaType::Protobuf);
        assert_eq!(SchemaType::from_api(Some("JSON")), SchemaType::Json);
        assert_eq!(SchemaType::Protobuf.api_name(), "PROTOBUF");
    }
}
