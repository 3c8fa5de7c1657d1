//! Where resolved schemas are kept: the [`SchemaCache`] seam and the in-memory
//! [`MemorySchemaCache`] every registry starts with.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::RegisteredSchema;

/// Storage for schemas a [`SchemaRegistry`](super::SchemaRegistry) has resolved.
///
/// Reads are synchronous because the codecs that use them are; fetching belongs to the
/// [`RegistryClient`](super::RegistryClient), never to the cache.
pub trait SchemaCache: Send + Sync + 'static {
    /// The schema with registry id `id`, if kept.
    fn schema(&self, id: u32) -> Option<Arc<RegisteredSchema>>;

    /// The schema `subject` resolved to (its latest version when it was asked), if kept and
    /// still fresh.
    fn subject(&self, subject: &str) -> Option<Arc<RegisteredSchema>>;

    /// Keeps `schema`, and when `subject` is given, records that the subject resolves to it.
    fn store(&self, subject: Option<&str>, schema: &Arc<RegisteredSchema>);

    /// Ids dropped to make room since the last call, so the registry can forget what it
    /// derived from them (parsed schemas, descriptors). The default drops nothing.
    fn evicted_ids(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// How much a [`MemorySchemaCache`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaCachePolicy {
    /// Keep nothing: every lookup asks the registry. The synchronous codecs need cached
    /// schemas, so they cannot work under this policy.
    Disabled,
    /// Keep up to `capacity` schemas by id, dropping the oldest stored first when full, and
    /// trust a subject's resolution for `subject_ttl` (forever when `None`). Ids never
    /// expire: a registry id always names the same schema.
    Cached {
        /// The most ids kept at once.
        capacity: NonZeroUsize,
        /// How long a subject's resolution is trusted before the registry is asked again.
        subject_ttl: Option<Duration>,
    },
}

impl Default for SchemaCachePolicy {
    /// 1000 ids, subjects trusted until evicted.
    fn default() -> Self {
        Self::Cached {
            capacity: NonZeroUsize::new(1000).unwrap_or(NonZeroUsize::MIN),
            subject_ttl: None,
        }
    }
}

#[derive(Default)]
struct Kept {
    by_id: HashMap<u32, Arc<RegisteredSchema>>,
    /// Ids in the order they were first stored; the front is evicted first.
    arrival: VecDeque<u32>,
    subjects: HashMap<String, (u32, Instant)>,
    evicted: Vec<u32>,
}

/// The in-memory [`SchemaCache`], bounded by a [`SchemaCachePolicy`].
pub struct MemorySchemaCache {
    policy: SchemaCachePolicy,
    kept: Mutex<Kept>,
}

impl fmt::Debug for MemorySchemaCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemorySchemaCache")
            .field("policy", &self.policy)
            .field("ids", &self.kept().by_id.len())
            .finish_non_exhaustive()
    }
}

impl MemorySchemaCache {
    /// An empty cache bounded by `policy`.
    #[must_use]
    pub fn new(policy: SchemaCachePolicy) -> Self {
        Self {
            policy,
            kept: Mutex::new(Kept::default()),
        }
    }

    /// The policy it was built with.
    #[must_use]
    pub fn policy(&self) -> SchemaCachePolicy {
        self.policy
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        // Every update leaves the maps consistent, so a panic elsewhere cannot corrupt them.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SchemaCache for MemorySchemaCache {
    fn schema(&self, id: u32) -> Option<Arc<RegisteredSchema>> {
        self.kept().by_id.get(&id).cloned()
    }

    fn subject(&self, subject: &str) -> Option<Arc<RegisteredSchema>> {
        let SchemaCachePolicy::Cached { subject_ttl, .. } = self.policy else {
            return None;
        };
        let kept = self.kept();
        let (id, resolved) = *kept.subjects.get(subject)?;
        if subject_ttl.is_some_and(|ttl| resolved.elapsed() >= ttl) {
            return None;
        }
        kept.by_id.get(&id).cloned()
    }

    fn store(&self, subject: Option<&str>, schema: &Arc<RegisteredSchema>) {
        let SchemaCachePolicy::Cached { capacity, .. } = self.policy else {
            return;
        };
        let mut kept = self.kept();
        let id = schema.id();
        if kept.by_id.insert(id, Arc::clone(schema)).is_none() {
            kept.arrival.push_back(id);
        }
        while kept.arrival.len() > capacity.get() {
            let Some(oldest) = kept.arrival.pop_front() else {
                break;
            };
            kept.by_id.remove(&oldest);
            kept.evicted.push(oldest);
        }
        if let Some(subject) = subject {
            kept.subjects
                .insert(subject.to_owned(), (id, Instant::now()));
        }
    }

    fn evicted_ids(&self) -> Vec<u32> {
        std::mem::take(&mut self.kept().evicted)
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;
    use std::sync::Arc;
    use std::time::Duration;

    use super::{MemorySchemaCache, SchemaCache, SchemaCachePolicy};
    use crate::schema_registry::{RegisteredSchema, SchemaType};

    fn schema(id: u32) -> Arc<RegisteredSchema> {
        Arc::new(RegisteredSchema::new(id, SchemaType::Json, "{}"))
    }

    fn bounded(capacity: usize, ttl: Option<Duration>) -> MemorySchemaCache {
        MemorySchemaCache::new(SchemaCachePolicy::Cached {
            capacity: NonZeroUsize::new(capacity).unwrap(),
            subject_ttl: ttl,
        })
    }

    #[test]
    fn the_default_keeps_a_thousand_ids_and_subjects_forever() {
        assert_eq!(
            SchemaCachePolicy::default(),
            SchemaCachePolicy::Cached {
                capacity: NonZeroUsize::new(1000).unwrap(),
                subject_ttl: None
            }
        );
    }

    #[test]
    fn past_capacity_the_first_stored_id_goes_first() {
        let cache = bounded(2, None);
        cache.store(Some("a"), &schema(1));
        cache.store(None, &schema(2));
        // Storing an id again does not refresh its place.
        cache.store(None, &schema(1));
        cache.store(None, &schema(3));
        assert!(cache.schema(1).is_none());
        assert!(cache.schema(2).is_some() && cache.schema(3).is_some());
        assert!(cache.subject("a").is_none(), "its schema went with it");
        cache.store(None, &schema(4));
        assert_eq!(cache.evicted_ids(), vec![1, 2]);
        assert!(cache.evicted_ids().is_empty(), "reported once");
    }

    #[test]
    fn subjects_expire_after_their_ttl_but_ids_do_not() {
        let cache = bounded(10, Some(Duration::from_millis(30)));
        cache.store(Some("orders-value"), &schema(5));
        assert_eq!(cache.subject("orders-value").unwrap().id(), 5);
        std::thread::sleep(Duration::from_millis(50));
        assert!(cache.subject("orders-value").is_none());
        assert!(cache.schema(5).is_some());
    }

    #[test]
    fn a_disabled_cache_keeps_nothing() {
        let cache = MemorySchemaCache::new(SchemaCachePolicy::Disabled);
        cache.store(Some("s"), &schema(1));
        assert!(cache.schema(1).is_none() && cache.subject("s").is_none());
        assert_eq!(cache.policy(), SchemaCachePolicy::Disabled);
    }
}
