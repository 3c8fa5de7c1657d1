//! The seed bank's registry: a catalog compiled into the binary, implementing `RegistryClient`.
//! Both twins of `kafka_registry_custom_client` use it.
#![allow(dead_code)]

use std::sync::Arc;

use futures::future::BoxFuture;
use ruststream_kafka::schema_registry::{RegisteredSchema, RegistryClient};
use ruststream_kafka::{KafkaError, SchemaType};

/// The id seed packets are framed with, fixed when the catalog was drawn up.
pub const PACKET_SCHEMA_ID: u32 = 5001;

/// The Avro schema seed packets are written with.
pub const PACKET_SCHEMA: &str = r#"{
  "type": "record",
  "name": "SeedPacket",
  "namespace": "seedbank",
  "fields": [
    {"name": "variety", "type": "string"},
    {"name": "grams", "type": "int"}
  ]
}"#;

/// A catalog compiled into the binary: it knows its schemas and changes only with a release.
pub struct SeedCatalog {
    packet: Arc<RegisteredSchema>,
}

impl SeedCatalog {
    pub fn new() -> Self {
        Self {
            packet: Arc::new(RegisteredSchema::new(
                PACKET_SCHEMA_ID,
                SchemaType::Avro,
                PACKET_SCHEMA,
            )),
        }
    }

    fn read_only<T: Send + 'static>() -> BoxFuture<'static, Result<T, KafkaError>> {
        Box::pin(async {
            Err(KafkaError::SchemaRegistry(
                "the seed catalog is read-only; new schemas ship with a release".into(),
            ))
        })
    }
}

impl RegistryClient for SeedCatalog {
    fn schema_by_id(&self, id: u32) -> BoxFuture<'_, Result<Arc<RegisteredSchema>, KafkaError>> {
        let found = (id == self.packet.id()).then(|| Arc::clone(&self.packet));
        Box::pin(async move {
            found.ok_or_else(|| {
                KafkaError::SchemaRegistry(format!("the seeded catalog has no schema {id}").into())
            })
        })
    }

    fn latest(
        &self,
        subject: &str,
    ) -> BoxFuture<'_, Result<Option<Arc<RegisteredSchema>>, KafkaError>> {
        let found = (subject == "seedbank.SeedPacket").then(|| Arc::clone(&self.packet));
        Box::pin(async move { Ok(found) })
    }

    fn register(
        &self,
        _subject: &str,
        _schema_type: SchemaType,
        _definition: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>> {
        Self::read_only()
    }

    fn lookup_id(
        &self,
        _subject: &str,
        _schema_type: SchemaType,
        _definition: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>> {
        Self::read_only()
    }
}
