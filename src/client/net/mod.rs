//! Talking to brokers: one multiplexed connection per broker, version negotiation, backoff.

mod backoff;
mod connection;
#[cfg(feature = "ssl")]
mod keystore;
pub mod memory;
#[cfg(any(test, feature = "testing"))]
mod request_shapes;
#[cfg(feature = "ssl")]
mod revocation;
#[cfg(feature = "ssl")]
mod rsa_order;
mod sasl;
mod shape;
mod shape_check;
mod shapes;
#[cfg(feature = "ssl")]
mod suites;
#[cfg(feature = "ssl")]
mod tls;
mod versions;

pub use backoff::Backoff;
pub use connection::{Connection, ConnectionOptions, InFlight};
#[cfg(fuzzing)]
pub(crate) use sasl::unsecured_token_now;
pub use sasl::{reauthentications, unsecured_jwt_provider};
#[cfg(feature = "testing")]
pub(crate) use shape_check::check_request;
pub use shape_check::check_response;
#[cfg(feature = "ssl")]
pub use tls::TlsConnector;
pub use versions::ApiVersions;
