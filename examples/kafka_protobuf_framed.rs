//! Confluent Protobuf replies: a garage answers each service booking with a work ticket. The
//! booking arrives framed (or bare) and `decode_confluent` reads it with the generated `prost`
//! type; the ticket is written by `prost` and the `Publish::framed` policy puts the ticket
//! subject's id and the message-index path in front of it.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_protobuf_framed \
//!     --features protobuf -- run
//! $ cargo test --example kafka_protobuf_framed --features testing,protobuf
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::prelude::*;
use ruststream_kafka::protobuf::decode_confluent;

/// A car booked in for a service.
#[derive(prost::Message, Deserialized, Clone, PartialEq)]
#[wire(decode = decode_confluent)]
struct Booking {
    #[prost(string, tag = "1")]
    plate: String,
    #[prost(uint32, tag = "2")]
    mileage: u32,
}

/// The ticket the workshop works from.
#[derive(prost::Message, Serialized, Outgoing, Clone, PartialEq)]
#[wire(encode = prost::Message::encode)]
#[outgoing(name = "work-tickets.proto-framed")]
struct WorkTicket {
    #[prost(string, tag = "1")]
    plate: String,
    #[prost(bool, tag = "2")]
    major_service: bool,
}

#[subscriber(KafkaTopic::new("bookings.proto-framed").group("garage.proto-framed"), reply)]
async fn book_in(booking: &Booking) -> WorkTicket {
    WorkTicket {
        plate: booking.plate.clone(),
        major_service: booking.mileage >= 60_000,
    }
}

/// The service: tickets leave framed under `work-tickets.proto-framed-value`.
fn app(registry: SchemaRegistry) -> impl App {
    RustStream::new(AppInfo::new("garage", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        move |b| {
            // The subject's file declares several messages; the ticket is `garage.WorkTicket`.
            b.include(book_in).out_reply(
                Publish::framed(&registry)
                    .message("work-tickets.proto-framed", "garage.WorkTicket"),
            );
        },
    )
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
    async fn framed_and_bare_bookings_get_framed_tickets() -> Result<(), Box<dyn std::error::Error>>
    {
        super::checks::bookings_get_framed_tickets(super::app, "proto-framed").await
    }
}
