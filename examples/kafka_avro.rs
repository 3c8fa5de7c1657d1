//! Avro through the middleware: a city museum turns tour bookings into tour passes, and neither
//! the handler nor the codec knows Avro. The broker's registry edge turns each framed Avro
//! booking into JSON before the handler reads it; the `SchemaFrame` publish layer writes the
//! pass as Avro because the pass topic's subject holds an Avro schema, which the service
//! registers from the `TourPass` type at startup.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_avro --features avro -- run
//! $ cargo test --example kafka_avro --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::avro::AvroSchema;
use ruststream_kafka::prelude::*;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A group booking for a guided tour, read as JSON.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct TourBooking {
    tour: i64,
    visitors: i32,
}

/// The pass the group shows at the gate; its Avro schema comes from the derive.
#[derive(Serialize, Deserialize, AvroSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "tour-passes.avro-mw")]
struct TourPass {
    tour: i64,
    visitors: i32,
    gate: String,
}

#[subscriber(KafkaTopic::new("tour-bookings.avro-mw").group("museum.avro-mw"), reply)]
async fn admit(booking: &TourBooking) -> TourPass {
    // Big groups queue at the east gate, which has the cloakroom.
    let gate = if booking.visitors > 4 { "east" } else { "main" };
    tracing::info!(booking.tour, booking.visitors, gate, "tour pass issued");
    TourPass {
        tour: booking.tour,
        visitors: booking.visitors,
        gate: gate.to_owned(),
    }
}

/// The service over `registry`: JSON handlers, Avro on the wire both ways.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("museum", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry.clone()))
        .on_startup(async move |()| {
            registry
                .register_avro::<TourPass>("tour-passes.avro-mw-value")
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(admit);
        })
}

#[ruststream::app]
fn service() -> impl App {
    app(SchemaRegistry::new(live::registry_url()))
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_avro_booking_is_answered_with_an_avro_pass()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::avro_through_the_middleware::<super::TourPass, _>(super::app, "avro-mw")
            .await
    }
}
