//! [`SchemaPrefetch`]: the asynchronous half of the registry codecs. Codecs run synchronously,
//! so what they need from the registry is resolved ahead of them: their subjects at connect,
//! and the writer schema of each framed delivery before its decode.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::{SchemaRegistry, SchemaType};
use crate::error::KafkaError;

/// What connect does when a subject a registry codec publishes under is not in the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MissingSubject {
    /// Fail connect, naming the subject.
    #[default]
    Refuse,
    /// Register the codec's schema under the subject again, with a warning.
    AutoRegister,
    /// Warn, and publish that subject's records with no envelope.
    PublishUnframed,
}

/// A subject a codec declared, with the schema it writes.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) subject: String,
    pub(crate) schema_type: SchemaType,
    pub(crate) definition: String,
}

/// Resolves what registry codecs need before they run. Attach it with
/// [`KafkaBroker::schema_prefetch`](crate::KafkaBroker::schema_prefetch) and build the codecs
/// from it ([`SchemaFramed::new`](super::SchemaFramed::new),
/// `AvroCodec::registry` with feature `avro`). Clones share the declared subjects.
#[derive(Clone)]
pub struct SchemaPrefetch {
    registry: SchemaRegistry,
    declared: Arc<Mutex<Vec<Registration>>>,
    missing: MissingSubject,
    check_compatibility: bool,
}

impl fmt::Debug for SchemaPrefetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let subjects: Vec<String> = self.declared().into_iter().map(|r| r.subject).collect();
        f.debug_struct("SchemaPrefetch")
            .field("registry", &self.registry)
            .field("subjects", &subjects)
            .field("on_missing_subject", &self.missing)
            .field("check_compatibility", &self.check_compatibility)
            .finish_non_exhaustive()
    }
}

impl SchemaPrefetch {
    /// A prefetch over `registry`: missing subjects refused, compatibility checked.
    #[must_use]
    pub fn new(registry: SchemaRegistry) -> Self {
        Self {
            registry,
            declared: Arc::new(Mutex::new(Vec::new())),
            missing: MissingSubject::default(),
            check_compatibility: true,
        }
    }

    /// Whether connect asks the registry if each codec's schema is compatible with its
    /// subject (on by default; an incompatible schema fails connect with the registry's
    /// reasons). A client that cannot tell lets connect go on.
    #[must_use]
    pub fn check_compatibility(mut self, check: bool) -> Self {
        self.check_compatibility = check;
        self
    }

    /// What connect does about a declared subject the registry does not hold.
    #[must_use]
    pub fn on_missing_subject(mut self, policy: MissingSubject) -> Self {
        self.missing = policy;
        self
    }

    /// The registry it resolves through.
    #[must_use]
    pub fn registry(&self) -> &SchemaRegistry {
        &self.registry
    }

    pub(crate) fn when_missing(&self) -> MissingSubject {
        self.missing
    }

    pub(crate) fn declare(&self, registration: Registration) {
        self.declared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(registration);
    }

    fn declared(&self) -> Vec<Registration> {
        self.declared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Connect's step: every declared subject resolved (and checked), or the policy applied.
    pub(crate) async fn resolve_declared(&self) -> Result<(), KafkaError> {
        for declared in self.declared() {
            let subject = declared.subject.as_str();
            let registered = self.registry.latest(subject).await?;
            if registered.is_some() {
                if self.check_compatibility {
                    self.registry
                        .is_compatible(subject, declared.schema_type, declared.definition)
                        .await?;
                }
                continue;
            }
            match self.missing {
                MissingSubject::Refuse => {
                    return Err(KafkaError::registry_text(format!(
                        "subject {subject:?}, which a codec of this app publishes under, is not \
                         in the registry, so its records have no schema id to carry; register \
                         it (or restore it), point the codec at the subject that holds the \
                         schema, or pick another MissingSubject policy"
                    )));
                }
                MissingSubject::AutoRegister => {
                    let id = self
                        .registry
                        .register(subject, declared.schema_type, declared.definition)
                        .await?;
                    tracing::warn!(
                        subject,
                        schema_id = id,
                        "a subject this app publishes under was missing from the registry and \
                         was registered again from the app's own schema; records framed with \
                         the subject's earlier ids need those ids to still exist"
                    );
                }
                MissingSubject::PublishUnframed => {
                    tracing::warn!(
                        subject,
                        "a subject this app publishes under is missing from the registry; its \
                         records are published without the Confluent envelope, which \
                         registry-aware consumers cannot read"
                    );
                }
            }
        }
        Ok(())
    }

    /// A delivery's step: its writer schema cached before the codec needs it. A failure is
    /// logged; the codec then reports the missing schema and the failure policy settles it.
    pub(crate) async fn resolve_writer(&self, id: u32) {
        if self.registry.cached_schema(id).is_some() {
            return;
        }
        if let Err(failure) = self.registry.schema_by_id(id).await {
            tracing::warn!(
                schema_id = id,
                error = %failure,
                "the writer schema of a framed delivery could not be resolved"
            );
        }
    }
}
