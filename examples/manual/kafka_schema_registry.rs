//! The front desk of `kafka_schema_registry`, without macros: the handler is a `Handle`
//! impl, the subscription is built by hand, the reply type names its topic through
//! `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_schema_registry --features testing,schema-registry
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A guest asks to hold a room.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Hold {
    room: u32,
    guest: String,
}

/// The desk's answer, framed under `hold-confirmations.sr-manual-value`.
#[derive(Serialize, Deserialize, JsonSchema, Debug, PartialEq)]
struct HoldConfirmed {
    room: u32,
    guest: String,
    nights_left: u32,
}

impl OutgoingDestination for HoldConfirmed {
    type Form = FixedName;
    const DESTINATION: &'static str = "hold-confirmations.sr-manual";
}

impl MessageHeaders for HoldConfirmed {
    type Contract = NoHeaders;
}

struct Confirm;

impl Handle<Hold, HoldConfirmed> for Confirm {
    fn handle(
        &self,
        hold: &Hold,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<HoldConfirmed, HandlerOutcome>> {
        ready(Ok(HoldConfirmed {
            room: hold.room,
            guest: hold.guest.clone(),
            nights_left: 3,
        }))
    }
}

fn holds() -> KafkaTopic {
    KafkaTopic::new("holds.sr-manual").group("front-desk.sr-manual")
}

/// The service over `registry`: framed deliveries in, framed replies out.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("front-desk", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry.clone()))
        .on_startup(async move |()| {
            registry
                .register_json::<HoldConfirmed>("hold-confirmations.sr-manual-value")
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(subscriber(holds(), Confirm).reply().build());
        })
}

fn main() -> ExitCode {
    run_main(|| {
        let url =
            std::env::var("SCHEMA_REGISTRY_URL").unwrap_or_else(|_| "http://localhost:8081".into());
        app(SchemaRegistry::new(url))
    })
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_framed_hold_gets_a_framed_confirmation() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_hold_confirmed(super::app, "sr-manual").await
    }
}
