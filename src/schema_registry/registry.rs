//! [`SchemaRegistry`]: the cached, shareable face of a registry client.

#[cfg(any(feature = "avro", feature = "protobuf"))]
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::http::{Credentials, HttpSettings};
use super::{
    HttpRegistryClient, JsonSchema, MemorySchemaCache, RegisteredSchema, RegistryClient,
    SchemaCache, SchemaCachePolicy, SchemaType,
};
use crate::error::KafkaError;

/// Forms derived from a schema's text, kept per id so a schema is parsed once.
#[derive(Default)]
pub(crate) struct Derived {
    #[cfg(feature = "avro")]
    pub(crate) avro: HashMap<u32, Arc<apache_avro::Schema>>,
    #[cfg(feature = "protobuf")]
    pub(crate) proto: HashMap<u32, Arc<prost_reflect::DescriptorPool>>,
}

struct Shared {
    client: Arc<dyn RegistryClient>,
    cache: Arc<dyn SchemaCache>,
    /// How the shipped client was built; `None` for a caller's own client.
    http: Option<HttpSettings>,
    derived: Mutex<Derived>,
}

/// A schema registry client with a cache, cheap to clone: clones share the client and the
/// cache, so what one resolves the others see.
///
/// Lookups by id are cached for good (an id never changes meaning); subject resolutions are
/// cached per the [`SchemaCachePolicy`].
#[derive(Clone)]
pub struct SchemaRegistry {
    shared: Arc<Shared>,
}

impl fmt::Debug for SchemaRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("SchemaRegistry");
        match &self.shared.http {
            Some(http) => out.field("url", &http.public_url()),
            None => out.field("client", &"custom"),
        };
        out.finish_non_exhaustive()
    }
}

impl SchemaRegistry {
    /// A registry at `base_url` (e.g. `http://registry:8081`) through the shipped HTTP
    /// client, with the default cache. Nothing is sent until a lookup needs it.
    #[must_use]
    pub fn new(base_url: impl Into<String>) -> Self {
        Self::with_http(HttpSettings::new(&base_url.into()))
    }

    /// A registry reached through the caller's `client`, with the default cache.
    #[must_use]
    pub fn with_client(client: Arc<dyn RegistryClient>) -> Self {
        Self::assemble(client, default_cache(), None)
    }

    fn with_http(settings: HttpSettings) -> Self {
        let client = Arc::new(HttpRegistryClient::new(settings.clone()));
        Self::assemble(client, default_cache(), Some(settings))
    }

    fn assemble(
        client: Arc<dyn RegistryClient>,
        cache: Arc<dyn SchemaCache>,
        http: Option<HttpSettings>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                client,
                cache,
                http,
                derived: Mutex::new(Derived::default()),
            }),
        }
    }

    /// The same client over `cache` instead of the current one (which is dropped).
    #[must_use]
    pub fn with_cache(self, cache: Arc<dyn SchemaCache>) -> Self {
        let client = Arc::clone(&self.shared.client);
        Self::assemble(client, cache, self.shared.http.clone())
    }

    /// The same client over a fresh [`MemorySchemaCache`] bounded by `policy`.
    #[must_use]
    pub fn cache_policy(self, policy: SchemaCachePolicy) -> Self {
        let fresh: Arc<dyn SchemaCache> = Arc::new(MemorySchemaCache::new(policy));
        self.with_cache(fresh)
    }

    /// Sends HTTP basic credentials with every request of the shipped client.
    ///
    /// # Panics
    ///
    /// On a registry built with [`with_client`](Self::with_client): that client carries its
    /// own credentials.
    #[must_use]
    pub fn basic_auth(self, user: impl Into<String>, password: impl Into<String>) -> Self {
        let credentials = Credentials::Basic {
            user: user.into(),
            password: password.into(),
        };
        self.rebuild("basic_auth", |s| s.credentials = credentials)
    }

    /// Sends `Authorization: Bearer <token>` with every request of the shipped client.
    ///
    /// # Panics
    ///
    /// On a registry built with [`with_client`](Self::with_client).
    #[must_use]
    pub fn bearer_token(self, token: impl Into<String>) -> Self {
        let credentials = Credentials::Bearer(token.into());
        self.rebuild("bearer_token", |s| s.credentials = credentials)
    }

    /// Bounds each request of the shipped client (10 s unless set); a request that takes
    /// longer fails with [`KafkaError::SchemaRegistryTimeout`].
    ///
    /// # Panics
    ///
    /// On a registry built with [`with_client`](Self::with_client).
    #[must_use]
    pub fn request_timeout(self, timeout: Duration) -> Self {
        self.rebuild("request_timeout", |s| s.timeout = timeout)
    }

    /// A new shipped client with changed settings and an empty default cache.
    fn rebuild(self, setting: &str, change: impl FnOnce(&mut HttpSettings)) -> Self {
        let Some(mut settings) = self.shared.http.clone() else {
            panic!(
                "SchemaRegistry::{setting} configures the HTTP client SchemaRegistry::new \
                 builds; a client passed to with_client is configured by whoever built it"
            );
        };
        change(&mut settings);
        Self::with_http(settings)
    }

    /// The base URL of the shipped client without credentials; `None` for a custom client.
    #[cfg_attr(not(feature = "asyncapi"), allow(dead_code))]
    pub(crate) fn public_url(&self) -> Option<String> {
        self.shared.http.as_ref().map(HttpSettings::public_url)
    }

    fn keep(&self, subject: Option<&str>, schema: &Arc<RegisteredSchema>) {
        self.shared.cache.store(subject, schema);
        let evicted = self.shared.cache.evicted_ids();
        if !evicted.is_empty() {
            self.forget_derived(&evicted);
        }
    }

    #[allow(clippy::unused_self)]
    fn forget_derived(&self, ids: &[u32]) {
        let mut derived = self.derived();
        for id in ids {
            #[cfg(feature = "avro")]
            derived.avro.remove(id);
            #[cfg(feature = "protobuf")]
            derived.proto.remove(id);
            let _ = (id, &mut derived);
        }
    }

    pub(crate) fn derived(&self) -> std::sync::MutexGuard<'_, Derived> {
        self.shared
            .derived
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The schema registered under `id`: from the cache, or asked once and then cached.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cache is written only once the registry's answer is in, so a dropped lookup
    /// leaves it as it was.
    pub async fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, KafkaError> {
        if let Some(found) = self.shared.cache.schema(id) {
            return Ok(found);
        }
        let schema = self.shared.client.schema_by_id(id).await?;
        if schema.id() != id {
            return Err(KafkaError::registry_text(format!(
                "asked for schema id {id}, the registry client answered id {}",
                schema.id()
            )));
        }
        self.keep(None, &schema);
        Ok(schema)
    }

    /// Registers `definition` under `subject` and caches the subject's new resolution. An
    /// identical schema keeps the id it already has.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cache is written only once the answer is in. The registry may still
    /// register the schema of a dropped call, but an identical schema keeps its id, so registering
    /// again answers the same id.
    pub async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: impl Into<String>,
    ) -> Result<u32, KafkaError> {
        let definition = definition.into();
        let id = self
            .shared
            .client
            .register(subject, schema_type, definition.clone())
            .await?;
        let schema = Arc::new(RegisteredSchema::new(id, schema_type, definition));
        self.keep(Some(subject), &schema);
        Ok(id)
    }

    /// Whether `definition` could be registered under `subject`, judged by the subject's
    /// compatibility level. `Ok(None)` when the client cannot tell or the subject is new; an
    /// incompatible schema is an error carrying the registry's reasons.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only asks the registry and caches nothing.
    pub async fn is_compatible(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: impl Into<String>,
    ) -> Result<Option<bool>, KafkaError> {
        self.shared
            .client
            .is_compatible(subject, schema_type, definition.into())
            .await
    }

    /// The id `subject` holds `definition` under, without registering it or caching the
    /// answer. A schema the subject does not hold is [`KafkaError::InvalidOptions`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only asks the registry and caches nothing.
    pub async fn lookup_id(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: impl Into<String>,
    ) -> Result<u32, KafkaError> {
        self.shared
            .client
            .lookup_id(subject, schema_type, definition.into())
            .await
    }

    /// Resolves `subject`'s latest version and caches it, so synchronous codecs find it. A
    /// subject the registry does not hold is an error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cache is written only once the registry's answer is in, so a dropped call
    /// leaves it as it was.
    pub async fn warm(&self, subject: &str) -> Result<Arc<RegisteredSchema>, KafkaError> {
        match self.latest(subject).await? {
            Some(schema) => Ok(schema),
            None => Err(KafkaError::registry_text(format!(
                "subject {subject:?} is not in the registry"
            ))),
        }
    }

    /// `subject`'s latest version, asked of the registry (not the cache) and then cached.
    pub(crate) async fn latest(
        &self,
        subject: &str,
    ) -> Result<Option<Arc<RegisteredSchema>>, KafkaError> {
        let found = self.shared.client.latest(subject).await?;
        if let Some(schema) = &found {
            self.keep(Some(subject), schema);
        }
        Ok(found)
    }

    /// The cached schema with id `id`, without asking the registry.
    #[must_use]
    pub fn cached_schema(&self, id: u32) -> Option<Arc<RegisteredSchema>> {
        self.shared.cache.schema(id)
    }

    /// The cached resolution of `subject`, without asking the registry.
    #[must_use]
    pub fn cached_subject(&self, subject: &str) -> Option<Arc<RegisteredSchema>> {
        self.shared.cache.subject(subject)
    }

    /// Registers the JSON Schema `schemars` derives for `T` under `subject`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`register`](Self::register): registering the same schema again answers the
    /// same id.
    pub async fn register_json<T: JsonSchema>(&self, subject: &str) -> Result<u32, KafkaError> {
        self.register(subject, SchemaType::Json, json_schema_of::<T>()?)
            .await
    }

    /// Registers `T`'s Avro schema under `subject`, written out in full (names, docs and
    /// defaults kept, not the canonical form).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`register`](Self::register): registering the same schema again answers the
    /// same id.
    #[cfg(feature = "avro")]
    pub async fn register_avro<T: apache_avro::AvroSchema>(
        &self,
        subject: &str,
    ) -> Result<u32, KafkaError> {
        let text = crate::avro::schema_text(&T::get_schema())?;
        self.register(subject, SchemaType::Avro, text).await
    }
}

fn default_cache() -> Arc<dyn SchemaCache> {
    Arc::new(MemorySchemaCache::new(SchemaCachePolicy::default()))
}

/// The JSON Schema document `schemars` derives for `T`.
pub(crate) fn json_schema_of<T: JsonSchema>() -> Result<String, KafkaError> {
    let root = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    serde_json::to_string(&root).map_err(KafkaError::registry)
}
