//! Compile-time checks that the constructors the reference marks `#[must_use]` are marked here
//! too: a service that builds a descriptor and drops it by mistake gets the same warning after
//! switching crates. Each `compile_fail` case drops one value under `deny(unused_must_use)`; the
//! passing case binds the same values, so a typo cannot make a failing case pass.
//!
//! Run with `cargo test -p ruststream-kafka --all-features --doc must_use`.

/// The same calls, their values bound, compile.
///
/// ```
/// #![deny(unused_must_use)]
/// let _ = ruststream_kafka::KafkaBroker::new(["localhost:9092"]);
/// let _ = ruststream_kafka::KafkaTopic::new("orders");
/// let _ = ruststream_kafka::KafkaTopics::new(["orders", "refunds"]);
/// let _ = ruststream_kafka::KafkaTopics::pattern("^orders-.*");
/// let _ = ruststream_kafka::KafkaPartitions::new("orders", [0, 1]);
/// let _ = ruststream_kafka::SourceOffset::new("orders", 0, 42);
/// ```
pub struct Bound;

/// The registry's constructor, its value bound, compiles.
///
/// ```
/// #![deny(unused_must_use)]
/// let _ = ruststream_kafka::RegisteredSchema::new(1, ruststream_kafka::SchemaType::Avro, "\"string\"");
/// ```
#[cfg(feature = "schema-registry")]
pub struct RegistryBound;

/// Dropping what `KafkaBroker::new` returns is refused.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// ruststream_kafka::KafkaBroker::new(["localhost:9092"]);
/// ```
pub struct KafkaBrokerNew;

/// Dropping what `KafkaTopic::new` returns is refused.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// ruststream_kafka::KafkaTopic::new("orders");
/// ```
pub struct KafkaTopicNew;

/// Dropping what `KafkaTopics::new` returns is refused.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// ruststream_kafka::KafkaTopics::new(["orders", "refunds"]);
/// ```
pub struct KafkaTopicsNew;

/// Dropping what `KafkaTopics::pattern` returns is refused.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// ruststream_kafka::KafkaTopics::pattern("^orders-.*");
/// ```
pub struct KafkaTopicsPattern;

/// Dropping what `KafkaPartitions::new` returns is refused.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// ruststream_kafka::KafkaPartitions::new("orders", [0, 1]);
/// ```
pub struct KafkaPartitionsNew;

/// Dropping what `SourceOffset::new` returns is refused.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// ruststream_kafka::SourceOffset::new("orders", 0, 42);
/// ```
pub struct SourceOffsetNew;

/// Dropping what `RegisteredSchema::new` returns is refused.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// ruststream_kafka::RegisteredSchema::new(1, ruststream_kafka::SchemaType::Avro, "\"string\"");
/// ```
#[cfg(feature = "schema-registry")]
pub struct RegisteredSchemaNew;
