//! The meter audit of `kafka_registry_client`, without macros: the handler is a `Handle` impl
//! over the app state, the subscription is built by hand, the audit line names its topic
//! through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_client --features testing,schema-registry
//! ```

use std::convert::Infallible;
use std::process::ExitCode;
use std::time::Duration;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::parse_envelope;
use serde::{Deserialize, Serialize};

/// A meter reading as it arrived, envelope and all.
#[derive(Deserialized)]
struct Reading<'a>(&'a [u8]);

/// What the audit found out about one reading.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct AuditLine {
    /// The schema id the reading was framed with; `None` for an unframed reading.
    schema_id: Option<u32>,
    format: String,
}

impl OutgoingDestination for AuditLine {
    type Form = FixedName;
    const DESTINATION: &'static str = "meter-audit.sr-client-manual";
}

impl MessageHeaders for AuditLine {
    type Contract = NoHeaders;
}

/// The state the handler reads the registry from.
struct Inspector {
    registry: SchemaRegistry,
}

struct Inspect;

impl Handle<Reading<'_>, AuditLine, (), (), Inspector> for Inspect {
    async fn handle(
        &self,
        reading: &Reading<'_>,
        _outs: &(),
        ctx: &mut Context<'_, (), Inspector>,
    ) -> Result<AuditLine, HandlerOutcome> {
        let Some((id, _)) = parse_envelope(reading.0) else {
            // Nothing to look up, so the registry is not asked.
            return Ok(AuditLine {
                schema_id: None,
                format: "unframed".to_owned(),
            });
        };
        let found = ctx.state().registry.schema_by_id(id).await;
        match found {
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
}

fn readings() -> KafkaTopic {
    KafkaTopic::new("meter-readings.sr-client-manual").group("meter-audit.sr-client-manual")
}

/// The audit over `registry`; building it and starting the app send nothing to the registry.
fn app(registry: SchemaRegistry) -> impl App<State = Inspector> {
    let broker = KafkaBroker::new([live::bootstrap()]);
    RustStream::new(AppInfo::new("meter-audit", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(Inspector { registry }))
        .with_broker(broker, |b| {
            b.include(subscriber(readings(), Inspect).reply().build());
        })
}

fn main() -> ExitCode {
    run_main(|| {
        let registry =
            SchemaRegistry::new(live::registry_url()).request_timeout(Duration::from_secs(2));
        app(registry)
    })
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_lookup_serves_every_clone() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::clones_share_one_lookup(super::app, "sr-client-manual").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_app_starts_with_no_registry_reachable() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::starts_without_a_registry(super::app, "sr-client-manual").await
    }
}
