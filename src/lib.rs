//! Apache Kafka for `RustStream`, on a native Kafka client written in pure Rust.
//!
//! The crate has two layers. [`client`] is a Kafka wire-protocol client built on
//! `kafka-protocol` and tokio; it knows nothing of `RustStream` and could stand on its own.
//! The adapter on top of it (later) keeps the public API of `ruststream-rdkafka` 0.7.1 so that
//! a service moves over by renaming the crate.
#![forbid(unsafe_code)]

pub mod client;
pub mod properties;
