//! In-process testing (feature `testing`): an embedded Kafka cluster that speaks the wire
//! protocol to this crate's own client, so a test runs the production client and adapter
//! code with no broker to start.
//!
//! `TestApp::start(app)` connects every [`KafkaBroker`](crate::KafkaBroker) of the app to an
//! embedded cluster of its own ([`InProcess`](ruststream::testing::InProcess)), and drives it
//! through [`TestableBroker`](ruststream::testing::TestableBroker). [`EmbeddedCluster`] is
//! also usable on its own, by any client of this crate, in memory or over loopback TCP.

pub mod cluster;
pub mod faults;
pub(crate) mod link;
mod testable;

pub use cluster::{ClusterOptions, EmbeddedCluster, MskIamAuthority, Refusal, iso8601};
pub use faults::Faults;
