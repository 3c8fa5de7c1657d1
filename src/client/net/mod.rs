//! Talking to brokers: one multiplexed connection per broker, version negotiation, backoff.

mod backoff;
mod connection;
pub mod memory;
mod shape_check;
mod shapes;
mod versions;

pub use backoff::Backoff;
pub use connection::{Connection, ConnectionOptions, InFlight};
pub use shape_check::check_response;
pub use versions::ApiVersions;
