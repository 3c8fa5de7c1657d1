//! The broker's registry edges: what a connected broker does with an attached
//! [`SchemaRegistry`] (transcode framed deliveries to JSON) and [`SchemaPrefetch`] (resolve
//! codec subjects at connect and writer schemas per delivery).

use std::sync::Arc;

use super::transcode::datum_to_json;
use super::{RegisteredSchema, SchemaPrefetch, SchemaRegistry, parse_envelope};
use crate::error::KafkaError;

/// The registry and prefetch a broker carries; both optional, both cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct Edges {
    pub(crate) registry: Option<SchemaRegistry>,
    pub(crate) prefetch: Option<SchemaPrefetch>,
}

impl Edges {
    /// Connect's part: the prefetch resolves the subjects its codecs declared.
    pub(crate) async fn on_connect(&self) -> Result<(), KafkaError> {
        match &self.prefetch {
            Some(prefetch) => prefetch.resolve_declared().await,
            None => Ok(()),
        }
    }

    fn is_idle(&self) -> bool {
        self.registry.is_none() && self.prefetch.is_none()
    }

    /// The schema id of `payload` that must be fetched before [`apply`](Self::apply) can run
    /// without waiting, if any.
    pub(crate) fn needs_fetch(&self, payload: &[u8]) -> Option<u32> {
        if self.is_idle() {
            return None;
        }
        let (id, _) = parse_envelope(payload)?;
        let cached = |r: &SchemaRegistry| r.cached_schema(id).is_some();
        let registry_ready = self.registry.as_ref().is_none_or(cached);
        let prefetch_ready = self.prefetch.as_ref().is_none_or(|p| cached(p.registry()));
        (!(registry_ready && prefetch_ready)).then_some(id)
    }

    /// Fetches schema `id` for both edges; answers what the transcoding registry got (a
    /// registry with no cache keeps nothing, so the answer is handed on directly).
    pub(crate) async fn fetch(&self, id: u32) -> Option<Arc<RegisteredSchema>> {
        if let Some(prefetch) = &self.prefetch {
            prefetch.resolve_writer(id).await;
        }
        let registry = self.registry.as_ref()?;
        match registry.schema_by_id(id).await {
            Ok(schema) => Some(schema),
            Err(err) => {
                tracing::warn!(
                    schema_id = id,
                    error = %err,
                    "the schema of a framed delivery could not be fetched; it is delivered as \
                     it arrived"
                );
                None
            }
        }
    }

    /// The JSON a framed delivery becomes, or `None` to deliver it as it is (not framed, no
    /// registry attached, or the transcoding failed and was logged).
    pub(crate) fn transcode(
        &self,
        payload: &[u8],
        fetched: Option<Arc<RegisteredSchema>>,
    ) -> Option<Vec<u8>> {
        let registry = self.registry.as_ref()?;
        let (id, datum) = parse_envelope(payload)?;
        let schema = fetched
            .filter(|s| s.id() == id)
            .or_else(|| registry.cached_schema(id))?;
        match datum_to_json(registry, &schema, datum) {
            Ok(json) => Some(json),
            Err(err) => {
                tracing::warn!(
                    schema_id = id,
                    error = %err,
                    "a framed delivery could not be turned into JSON; it is delivered as it \
                     arrived"
                );
                None
            }
        }
    }
}
