//! The registry client as application state: a meter audit service notes which schema each
//! reading was written with. The `SchemaRegistry` is built at startup without a single request
//! (the app starts even when the registry is down), handed to the handler as state, and shared:
//! a lookup one clone made is a cache hit for every other.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_registry_client \
//!     --features schema-registry -- run
//! $ cargo test --example kafka_registry_client --features testing,schema-registry
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use std::convert::Infallible;
use std::time::Duration;

use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::parse_envelope;
use serde::{Deserialize, Serialize};

/// A meter reading as it arrived, envelope and all.
#[derive(Deserialized)]
struct Reading<'a>(&'a [u8]);

/// What the audit found out about one reading.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "meter-audit.sr-client")]
struct AuditLine {
    /// The schema id the reading was framed with; `None` for an unframed reading.
    schema_id: Option<u32>,
    format: String,
}

/// The state the handler reads the registry from.
#[derive(FromRef)]
struct Inspector {
    registry: SchemaRegistry,
}

#[subscriber(
    KafkaTopic::new("meter-readings.sr-client").group("meter-audit.sr-client"),
    reply
)]
async fn inspect(
    reading: &Reading<'_>,
    State(registry): State<SchemaRegistry>,
) -> Result<AuditLine, HandlerOutcome> {
    let Some((id, _)) = parse_envelope(reading.0) else {
        // Nothing to look up, so the registry is not asked.
        return Ok(AuditLine {
            schema_id: None,
            format: "unframed".to_owned(),
        });
    };
    match registry.schema_by_id(id).await {
        Ok(schema) => Ok(AuditLine {
            schema_id: Some(id),
            format: format!("{:?}", schema.schema_type()),
        }),
        Err(error) => {
            // The registry may be back soon; the reading waits for it.
            tracing::warn!(schema_id = id, %error, "the reading's schema is unknown for now");
            Err(HandlerOutcome::retry())
        }
    }
}

/// The audit over `registry`; building it and starting the app send nothing to the registry.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]);
    RustStream::new(AppInfo::new("meter-audit", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(Inspector { registry }))
        .with_broker(broker, |b| {
            b.include(inspect);
        })
}

#[ruststream::app]
fn service() -> impl App {
    // A slow registry holds up one reading for two seconds at most, not the whole partition
    // for the default ten.
    app(SchemaRegistry::new(live::registry_url()).request_timeout(Duration::from_secs(2)))
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_lookup_serves_every_clone() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::clones_share_one_lookup(super::app, "sr-client").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_app_starts_with_no_registry_reachable() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::starts_without_a_registry(super::app, "sr-client").await
    }
}
