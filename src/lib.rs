//! Apache Kafka for `RustStream`, on a native Kafka client written in pure Rust.
//!
//! The crate has two layers. [`client`] is a Kafka wire-protocol client built on
//! `kafka-protocol` and tokio; it knows nothing of `RustStream` and could stand on its own.
//! The adapter on top of it keeps the public API of `ruststream-rdkafka` 0.7.1, so a service
//! moves over by renaming the crate: [`KafkaBroker`] and its descriptors ([`KafkaTopic`],
//! [`KafkaTopics`], [`KafkaPartitions`]), deliveries ([`KafkaMessage`]) settled per
//! [`Commit`] mode, positions and seeking ([`KafkaPosition`], [`KafkaSeeker`]), publishing
//! ([`KafkaPublish`], [`KafkaOptions`], [`RoundRobin`]), transactions
//! ([`KafkaTransactionalPublish`], [`TransactionalPartitions`]), exactly-once pipelines
//! ([`KafkaEosPublish`] with [`Commit::Transactional`]), and librdkafka's property names
//! ([`properties`]).
#![forbid(unsafe_code)]

#[cfg(feature = "avro")]
pub mod avro;
#[cfg(feature = "asyncapi")]
mod bindings;
mod broker;
pub mod client;
mod connection;
pub mod context;
mod distribution;
mod eos;
mod error;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
mod handover;
mod message;
#[cfg(doctest)]
mod must_use;
mod position;
pub mod prelude;
mod produce;
pub mod properties;
#[cfg(feature = "protobuf")]
pub mod protobuf;
mod publisher;
mod redelivery;
#[cfg(feature = "schema-registry")]
pub mod schema_registry;
mod seek;
mod spans;
mod statistics;
mod subscriber;
mod subscription;
#[cfg(feature = "testing")]
pub mod testing;
mod tracker;
mod transactional;

pub use broker::{ClosedKafkaBroker, KafkaBroker};
pub use connection::ConnectedKafkaBroker;
pub use distribution::RoundRobin;
pub use eos::{EOS_SOURCE_HEADER, EosPipeline, EosReplies, KafkaEosPublish, SourceOffset};
pub use error::KafkaError;
pub use message::{KafkaMessage, PARTITION_KEY_HEADER};
pub use position::KafkaPosition;
pub use produce::KafkaOptions;
#[cfg(feature = "protobuf")]
pub use protobuf::{KafkaFramedPublish, KafkaFramedPublisher, ProtobufFrame};
pub use publisher::{KafkaPublish, KafkaPublishSteps, KafkaPublisher};
pub use redelivery::ToSourceTopic;
#[cfg(feature = "schema-registry")]
pub use schema_registry::{
    HttpRegistryClient, MemorySchemaCache, MissingSubject, RegisteredSchema, RegistryClient,
    SchemaCache, SchemaCachePolicy, SchemaFrame, SchemaFramed, SchemaPrefetch, SchemaRegistry,
    SchemaType, SubjectStrategy,
};
pub use seek::KafkaSeeker;
pub use spans::{KafkaTraced, KafkaTracing};
pub use subscriber::KafkaSubscriber;
pub use subscription::{
    Assignment, Commit, KafkaPartitions, KafkaTopic, KafkaTopics, LaneKey, StartOffset,
};
pub use transactional::{
    KafkaPartitionedPublish, KafkaTransactionalPublish, KafkaTransactionalPublisher,
    PartitionLanes, TransactionalPartitions,
};
