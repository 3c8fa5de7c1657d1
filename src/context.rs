//! The per-delivery context handlers read: [`KafkaContext`], [`KafkaBatchContext`] and the
//! keys in [`keys`].
//!
//! Building a context allocates nothing: the topic name is shared per partition, the key is a
//! slice of the fetched buffer, and the seeker is a shared handle. Batch bodies get only what
//! belongs to the whole subscription (the seeker); per-record coordinates travel with the
//! elements.

use std::fmt;

use bytes::Bytes;
use ruststream::{BuildBatchContext, BuildContext, Str};

use crate::message::KafkaMessage;
use crate::position::KafkaPosition;
use crate::seek::KafkaSeeker;

/// What a handler knows about the delivery it handles.
#[derive(Clone)]
#[non_exhaustive]
pub struct KafkaContext {
    topic: Str,
    partition: i32,
    offset: i64,
    timestamp_millis: Option<i64>,
    key: Option<Bytes>,
    seeker: KafkaSeeker,
}

impl fmt::Debug for KafkaContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaContext")
            .field("topic", &self.topic())
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .field("timestamp_millis", &self.timestamp_millis)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl KafkaContext {
    /// The topic the record came from.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Its partition.
    #[must_use]
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Its offset.
    #[must_use]
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Its timestamp in ms since the epoch, when it has one.
    #[must_use]
    pub fn timestamp_millis(&self) -> Option<i64> {
        self.timestamp_millis
    }

    /// Its native key.
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    /// This record's position: seeking to it redelivers it and what follows.
    #[must_use]
    pub fn position(&self) -> KafkaPosition {
        let topic = self.topic();
        KafkaPosition::topic_offset(topic, self.partition, self.offset)
    }

    /// The subscription's seeker.
    #[must_use]
    pub fn seeker(&self) -> &KafkaSeeker {
        &self.seeker
    }
}

impl BuildContext<KafkaMessage> for KafkaContext {
    fn build(msg: &KafkaMessage) -> Self {
        Self {
            topic: msg.shared_topic().clone(),
            partition: msg.partition(),
            offset: msg.offset(),
            timestamp_millis: msg.timestamp_millis(),
            key: msg.shared_key().cloned(),
            seeker: KafkaSeeker::new(std::sync::Arc::clone(msg.core())),
        }
    }
}

/// What a batch handler knows: the subscription's seeker.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KafkaBatchContext {
    seeker: KafkaSeeker,
}

impl KafkaBatchContext {
    /// The subscription's seeker.
    #[must_use]
    pub fn seeker(&self) -> &KafkaSeeker {
        &self.seeker
    }
}

impl BuildBatchContext<KafkaMessage> for KafkaBatchContext {
    fn build(first: &KafkaMessage) -> Self {
        Self {
            seeker: KafkaSeeker::new(std::sync::Arc::clone(first.core())),
        }
    }
}

/// The context keys: bind them as `Ctx(x): Ctx<Key>` or read them with `ctx.context(Key)`.
pub mod keys {
    use bytes::Bytes;
    use ruststream::{ContextField, Field, Str};

    use super::{KafkaBatchContext, KafkaContext};
    use crate::eos::SourceOffset;
    use crate::position::KafkaPosition;
    use crate::seek::KafkaSeeker;

    /// The record's topic (a shared name: owning it copies nothing).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Topic;

    impl Field<KafkaContext> for Topic {
        type Value<'a> = &'a Str;

        fn get(self, src: &KafkaContext) -> &Str {
            &src.topic
        }
    }

    impl ContextField for Topic {
        type Context = KafkaContext;
        type Value = Str;

        fn read(self, src: &KafkaContext) -> Str {
            src.topic.clone()
        }
    }

    /// The record's partition.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Partition;

    impl Field<KafkaContext> for Partition {
        type Value<'a> = i32;

        fn get(self, src: &KafkaContext) -> i32 {
            src.partition
        }
    }

    impl ContextField for Partition {
        type Context = KafkaContext;
        type Value = i32;

        fn read(self, src: &KafkaContext) -> i32 {
            src.partition
        }
    }

    /// The record's offset.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Offset;

    impl Field<KafkaContext> for Offset {
        type Value<'a> = i64;

        fn get(self, src: &KafkaContext) -> i64 {
            src.offset
        }
    }

    impl ContextField for Offset {
        type Context = KafkaContext;
        type Value = i64;

        fn read(self, src: &KafkaContext) -> i64 {
            src.offset
        }
    }

    /// The record's timestamp in ms since the epoch, when it has one.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct TimestampMillis;

    impl Field<KafkaContext> for TimestampMillis {
        type Value<'a> = Option<i64>;

        fn get(self, src: &KafkaContext) -> Option<i64> {
            src.timestamp_millis
        }
    }

    impl ContextField for TimestampMillis {
        type Context = KafkaContext;
        type Value = Option<i64>;

        fn read(self, src: &KafkaContext) -> Option<i64> {
            src.timestamp_millis
        }
    }

    /// The record's native key (a slice of the fetched buffer: owning it copies nothing).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Key;

    impl Field<KafkaContext> for Key {
        type Value<'a> = Option<&'a [u8]>;

        fn get(self, src: &KafkaContext) -> Option<&[u8]> {
            src.key.as_deref()
        }
    }

    impl ContextField for Key {
        type Context = KafkaContext;
        type Value = Option<Bytes>;

        fn read(self, src: &KafkaContext) -> Option<Bytes> {
            src.key.clone()
        }
    }

    /// The record's coordinates as an exactly-once source ([`EosPipeline::publish`]).
    ///
    /// [`EosPipeline::publish`]: crate::EosPipeline::publish
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Source;

    impl Field<KafkaContext> for Source {
        type Value<'a> = SourceOffset;

        fn get(self, src: &KafkaContext) -> SourceOffset {
            SourceOffset::new(src.topic.clone(), src.partition, src.offset)
        }
    }

    impl ContextField for Source {
        type Context = KafkaContext;
        type Value = SourceOffset;

        fn read(self, src: &KafkaContext) -> SourceOffset {
            SourceOffset::new(src.topic.clone(), src.partition, src.offset)
        }
    }

    /// The record's position.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Position;

    impl Field<KafkaContext> for Position {
        type Value<'a> = KafkaPosition;

        fn get(self, src: &KafkaContext) -> KafkaPosition {
            src.position()
        }
    }

    impl ContextField for Position {
        type Context = KafkaContext;
        type Value = KafkaPosition;

        fn read(self, src: &KafkaContext) -> KafkaPosition {
            src.position()
        }
    }

    /// The subscription's seeker (in single and batch handlers).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct SeekHandle;

    impl Field<KafkaContext> for SeekHandle {
        type Value<'a> = &'a KafkaSeeker;

        fn get(self, src: &KafkaContext) -> &KafkaSeeker {
            &src.seeker
        }
    }

    impl ContextField for SeekHandle {
        type Context = KafkaContext;
        type Value = KafkaSeeker;

        fn read(self, src: &KafkaContext) -> KafkaSeeker {
            src.seeker.clone()
        }
    }

    impl Field<KafkaBatchContext> for SeekHandle {
        type Value<'a> = &'a KafkaSeeker;

        fn get(self, src: &KafkaBatchContext) -> &KafkaSeeker {
            &src.seeker
        }
    }
}
