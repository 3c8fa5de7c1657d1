//! In-process testing (feature `testing`): an embedded Kafka cluster that speaks the wire
//! protocol to this crate's own client, so a test runs the production client and adapter
//! code with no broker to start.

pub mod cluster;
pub mod faults;

pub use cluster::{ClusterOptions, EmbeddedCluster};
pub use faults::Faults;
