//! [`SchemaFrame`]: a publish layer that writes outgoing JSON in its subject's format.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;

use ruststream::Publisher;
use ruststream::runtime::{Outgoing, PublishLayer, PublishNext, PublishPipeline};

use super::transcode::json_to_datum;
use super::{SchemaRegistry, SubjectMap, SubjectStrategy, encode_envelope, parse_envelope};
use crate::error::KafkaError;

/// App-wide publish middleware: every outgoing JSON payload whose topic has a registered
/// subject is converted to the subject's format (JSON Schema, Avro or Protobuf) and framed
/// with its id. Topics without a subject publish unchanged (the miss is remembered and logged
/// once), as do payloads already framed; registry failures fail the publish.
///
/// The counterpart of [`KafkaBroker::schema_registry`](crate::KafkaBroker::schema_registry),
/// which turns framed deliveries back into JSON.
#[derive(Clone)]
pub struct SchemaFrame {
    subjects: SubjectMap,
    record_names: HashMap<String, String>,
}

impl fmt::Debug for SchemaFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaFrame")
            .field("strategy", &self.subjects.naming())
            .field("subjects", self.subjects.pinned())
            .field("record_names", &self.record_names)
            .finish_non_exhaustive()
    }
}

impl SchemaFrame {
    /// A layer resolving subjects through `registry` by [`SubjectStrategy::TopicName`].
    #[must_use]
    pub fn new(registry: SchemaRegistry) -> Self {
        Self {
            subjects: SubjectMap::over(registry),
            record_names: HashMap::new(),
        }
    }

    /// Names subjects by `strategy` for topics without a pinned subject.
    #[must_use]
    pub fn subject_strategy(mut self, strategy: SubjectStrategy) -> Self {
        self.subjects.choose_strategy(strategy);
        self
    }

    /// Publishes `topic` under `subject`, whatever the strategy says.
    #[must_use]
    pub fn subject(mut self, topic: impl Into<String>, subject: impl Into<String>) -> Self {
        self.subjects.fix_subject(topic.into(), subject.into());
        self
    }

    /// For a Protobuf subject of `topic`, writes the message `message` (fully qualified,
    /// package included) instead of the schema's first one.
    #[must_use]
    pub fn message(mut self, topic: impl Into<String>, message: impl Into<String>) -> Self {
        self.record_names.insert(topic.into(), message.into());
        self
    }

    async fn reframe(&self, out: &mut Outgoing<'_>) -> Result<(), KafkaError> {
        // JSON never starts with a zero byte: such a payload was framed upstream.
        if parse_envelope(out.payload()).is_some() {
            return Ok(());
        }
        let topic = out.name().to_owned();
        let message = self.record_names.get(&topic).map(String::as_str);
        let Some(schema) = self.subjects.schema_for(&topic, message).await? else {
            return Ok(());
        };
        let datum = json_to_datum(self.subjects.source(), &schema, message, out.payload())?;
        out.set_payload(encode_envelope(schema.id(), &datum).as_slice());
        Ok(())
    }
}

impl PublishLayer for SchemaFrame {
    async fn on_publish<'a, N: PublishPipeline, P: Publisher>(
        &'a self,
        out: &'a mut Outgoing<'a>,
        next: PublishNext<'a, N, P>,
    ) -> Result<(), Box<dyn StdError + Send + Sync>> {
        self.reframe(out).await?;
        next.run(out).await
    }
}
