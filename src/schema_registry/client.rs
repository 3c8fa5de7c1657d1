//! The [`RegistryClient`] seam: the questions a [`SchemaRegistry`](super::SchemaRegistry) asks
//! a registry, answered by the shipped [`HttpRegistryClient`](super::HttpRegistryClient) or by
//! the application's own implementation.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{RegisteredSchema, SchemaType};
use crate::error::KafkaError;

/// Talks to a schema registry. Implement it to put the registry behind something else (a
/// gateway, a catalog, a fixed table in tests) and pass it to
/// [`SchemaRegistry::with_client`](super::SchemaRegistry::with_client).
pub trait RegistryClient: Send + Sync + 'static {
    /// The schema registered under `id`; an unknown id is an error.
    fn schema_by_id(&self, id: u32) -> BoxFuture<'_, Result<Arc<RegisteredSchema>, KafkaError>>;

    /// The latest version of `subject`, or `Ok(None)` when the registry has no such subject.
    fn latest(
        &self,
        subject: &str,
    ) -> BoxFuture<'_, Result<Option<Arc<RegisteredSchema>>, KafkaError>>;

    /// Registers `definition` under `subject` and answers its id (the existing id when the
    /// subject already holds this exact schema).
    fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>>;

    /// The id of `definition` under `subject`, without registering it; absent is an error.
    fn lookup_id(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>>;

    /// Whether `definition` may be registered under `subject` as the subject's compatibility
    /// level judges it: `Ok(Some(true))` yes, an error carrying the registry's reasons no, and
    /// `Ok(None)` when this client cannot tell (the default) or the subject does not exist.
    fn is_compatible(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: String,
    ) -> BoxFuture<'_, Result<Option<bool>, KafkaError>> {
        let _ = (subject, schema_type, definition);
        Box::pin(async { Ok(None) })
    }
}
