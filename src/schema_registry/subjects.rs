//! Which subject a topic publishes under, and remembering topics that have none.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use super::{RegisteredSchema, SchemaRegistry, SubjectStrategy};
use crate::error::KafkaError;

/// Topic-to-subject resolution shared by the publish-side framers.
#[derive(Clone, Debug)]
pub(crate) struct SubjectMap {
    source: SchemaRegistry,
    strategy: SubjectStrategy,
    pinned: HashMap<String, String>,
    /// Subjects found missing: asked once, then published unframed without asking again.
    absent: Arc<Mutex<HashSet<String>>>,
}

impl SubjectMap {
    /// A map that asks `source` for the subjects it names.
    pub(crate) fn over(source: SchemaRegistry) -> Self {
        Self {
            source,
            strategy: SubjectStrategy::default(),
            pinned: HashMap::new(),
            absent: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    pub(crate) fn source(&self) -> &SchemaRegistry {
        &self.source
    }

    pub(crate) fn naming(&self) -> SubjectStrategy {
        self.strategy
    }

    pub(crate) fn choose_strategy(&mut self, strategy: SubjectStrategy) {
        self.strategy = strategy;
    }

    pub(crate) fn fix_subject(&mut self, topic: String, subject: String) {
        self.pinned.insert(topic, subject);
    }

    pub(crate) fn pinned(&self) -> &HashMap<String, String> {
        &self.pinned
    }

    /// The subject of `topic`: pinned, else named by the strategy. With no record name at
    /// hand the record-based strategies get `record` (the pinned message name, if any).
    pub(crate) fn subject_for(&self, topic: &str, record: Option<&str>) -> String {
        match self.pinned.get(topic) {
            Some(subject) => subject.clone(),
            None => self.strategy.subject(topic, record.unwrap_or_default()),
        }
    }

    /// The schema `topic` publishes under, or `None` when its subject is not registered (the
    /// miss is remembered and logged once). Registry failures are errors.
    pub(crate) async fn schema_for(
        &self,
        topic: &str,
        record: Option<&str>,
    ) -> Result<Option<Arc<RegisteredSchema>>, KafkaError> {
        let subject = self.subject_for(topic, record);
        if let Some(schema) = self.source.cached_subject(&subject) {
            return Ok(Some(schema));
        }
        if self.absent().contains(&subject) {
            return Ok(None);
        }
        let found = self.source.latest(&subject).await?;
        if found.is_none() && self.absent().insert(subject.clone()) {
            tracing::info!(
                topic,
                subject,
                "the topic's subject is not in the registry; its records go out unframed"
            );
        }
        Ok(found)
    }

    fn absent(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.absent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
