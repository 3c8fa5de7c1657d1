//! The adapter's integration tests, one binary: against the cluster under test (`KAFKA_TEST_URL`,
//! or the embedded cluster under `KAFKA_TEST_TARGET=embedded`) and in process.
//!
//! One binary rather than one per file: each test binary links the whole crate with its
//! dependencies, so CI built and linked the same code twenty-seven times. A file is a module
//! named after the concept it tests; `cargo test --test adapter smoke::` runs one of them. The
//! tests that need a process of their own stay apart: `delivery_cost` (its global allocator
//! counts every allocation of the process), `kcat` and `java_console` (they need tools outside
//! Rust).

#[path = "../live/mod.rs"]
mod live;
#[cfg(all(feature = "schema-registry", feature = "avro"))]
#[path = "../support/registry.rs"]
mod registry;
#[path = "../support/token_server.rs"]
mod token_server;

mod captured;
mod commit_semantics;
mod conformance;
mod delivery;
mod embedded_faults;
mod embedded_listen;
mod embedded_promises;
mod embedded_rebootstrap;
mod embedded_transactions;
mod embedded_wire_versions;
mod eos;
mod groups;
mod in_process;
mod in_process_handover;
mod in_process_smoke;
mod lifecycle;
mod msk_iam;
mod oidc;
mod positions;
mod prelude;
mod publishing;
#[cfg(all(feature = "schema-registry", feature = "avro", feature = "protobuf"))]
mod registry_live;
mod retries;
#[cfg(all(feature = "schema-registry", feature = "avro"))]
mod schema_registry;
mod settlement;
mod smoke;
mod spans;
mod subscriptions;
mod transactions;
