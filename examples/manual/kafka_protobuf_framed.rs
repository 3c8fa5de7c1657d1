//! The garage of `kafka_protobuf_framed`, without macros: a `Handle` impl, a hand-built
//! subscription, the wire formats still given by `#[wire]` hooks on the `prost` types.
//!
//! ```text
//! $ cargo test --example manual_kafka_protobuf_framed --features testing,protobuf
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

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
#[outgoing(name = "work-tickets.proto-manual")]
struct WorkTicket {
    #[prost(string, tag = "1")]
    plate: String,
    #[prost(bool, tag = "2")]
    major_service: bool,
}

struct BookIn;

impl Handle<Booking, WorkTicket> for BookIn {
    fn handle(
        &self,
        booking: &Booking,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<WorkTicket, HandlerOutcome>> {
        ready(Ok(WorkTicket {
            plate: booking.plate.clone(),
            major_service: booking.mileage >= 60_000,
        }))
    }
}

fn bookings() -> KafkaTopic {
    KafkaTopic::new("bookings.proto-manual").group("garage.proto-manual")
}

/// The service: tickets leave framed under `work-tickets.proto-manual-value`.
fn app(registry: SchemaRegistry) -> impl App {
    RustStream::new(AppInfo::new("garage", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        move |b| {
            b.include(subscriber(bookings(), BookIn).reply().build())
                .out_reply(
                    Publish::framed(&registry)
                        .message("work-tickets.proto-manual", "garage.WorkTicket"),
                );
        },
    )
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
    async fn framed_and_bare_bookings_get_framed_tickets() -> Result<(), Box<dyn std::error::Error>>
    {
        super::checks::bookings_get_framed_tickets(super::app, "proto-manual").await
    }
}
