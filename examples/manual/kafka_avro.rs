//! The museum of `kafka_avro`, without macros: a `Handle` impl, a hand-built subscription, and
//! the pass topic named through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_avro --features testing,avro
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::avro::AvroSchema;
use ruststream_kafka::prelude::*;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A group booking for a guided tour, read as JSON.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct TourBooking {
    tour: i64,
    visitors: i32,
}

/// The pass the group shows at the gate; its Avro schema comes from the derive.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct TourPass {
    tour: i64,
    visitors: i32,
    gate: String,
}

impl OutgoingDestination for TourPass {
    type Form = FixedName;
    const DESTINATION: &'static str = "tour-passes.avro-mw-manual";
}

impl MessageHeaders for TourPass {
    type Contract = NoHeaders;
}

struct Admit;

impl Handle<TourBooking, TourPass> for Admit {
    fn handle(
        &self,
        booking: &TourBooking,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<TourPass, HandlerOutcome>> {
        // Big groups queue at the east gate, which has the cloakroom.
        let gate = if booking.visitors > 4 { "east" } else { "main" };
        tracing::info!(booking.tour, booking.visitors, gate, "tour pass issued");
        ready(Ok(TourPass {
            tour: booking.tour,
            visitors: booking.visitors,
            gate: gate.to_owned(),
        }))
    }
}

fn bookings() -> KafkaTopic {
    KafkaTopic::new("tour-bookings.avro-mw-manual").group("museum.avro-mw-manual")
}

/// The service over `registry`: JSON handlers, Avro on the wire both ways.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("museum", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry.clone()))
        .on_startup(async move |()| {
            registry
                .register_avro::<TourPass>("tour-passes.avro-mw-manual-value")
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(subscriber(bookings(), Admit).reply().build());
        })
}

fn main() -> ExitCode {
    run_main(|| app(SchemaRegistry::new(live::registry_url())))
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_avro_booking_is_answered_with_an_avro_pass()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::avro_through_the_middleware::<super::TourPass, _>(
            super::app,
            "avro-mw-manual",
        )
        .await
    }
}
