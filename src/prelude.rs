//! What a service needs, in one `use ruststream_kafka::prelude::*;`: the framework's prelude,
//! the core traits Kafka services use, the context keys most handlers read, and the crate's
//! service-facing items (publish policies also under the framework's uniform names).
//!
//! `Partitioned` is left out on purpose: its `partition_key` would clash with
//! `IncomingMessage::partition_key` in method calls.

pub use ruststream::prelude::*;

pub use ruststream::{Positioned, Seeker, TransactionalPublisher};

pub use crate::context::keys::{Partition, Position, SeekHandle, Source, Topic};
pub use crate::{
    Assignment, Commit, EosReplies, KafkaBroker, KafkaEosPublish as EosPublish, KafkaOptions,
    KafkaPartitionedPublish as PartitionedPublish, KafkaPartitions, KafkaPosition,
    KafkaPublish as Publish, KafkaPublishSteps, KafkaSeeker, KafkaTopic, KafkaTopics,
    KafkaTransactionalPublish as TransactionalPublish, LaneKey, PartitionLanes, RoundRobin,
    StartOffset, ToSourceTopic,
};
