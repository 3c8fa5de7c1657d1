//! The box office of `kafka_protobuf_transcode`, without macros: a `Handle` impl, a hand-built
//! subscription, and the destination and header contract of the ticket written out. The edge
//! and the `SchemaFrame` layer do the Protobuf work as before.
//!
//! ```text
//! $ cargo test --example manual_kafka_protobuf_transcode --features testing,protobuf
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry, SchemaType};

/// The ticket schema this service owns; the registry stores Protobuf as `.proto` text.
const TICKET_PROTO: &str = r#"
syntax = "proto3";
package cinema;
message Ticket { string screening = 1; uint32 seats = 2; bool group_rate = 3; }
"#;

/// Parties of this size or more pay the group rate.
const GROUP_SIZE: u32 = 5;

/// A seat request, read from the JSON the edge made of the Protobuf message.
#[derive(Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct SeatRequest {
    screening: String,
    seats: u32,
}

/// The ticket, serialized as JSON and written as `cinema.Ticket` by the layer.
#[derive(Serialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Ticket {
    screening: String,
    seats: u32,
    group_rate: bool,
}

impl OutgoingDestination for Ticket {
    type Form = FixedName;
    const DESTINATION: &'static str = "tickets.proto-transcode-manual";
}

impl MessageHeaders for Ticket {
    type Contract = NoHeaders;
}

struct Sell;

impl Handle<SeatRequest, Ticket> for Sell {
    fn handle(
        &self,
        request: &SeatRequest,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Ticket, HandlerOutcome>> {
        ready(Ok(Ticket {
            screening: request.screening.clone(),
            seats: request.seats,
            group_rate: request.seats >= GROUP_SIZE,
        }))
    }
}

fn seat_requests() -> KafkaTopic {
    KafkaTopic::new("seat-requests.proto-transcode-manual")
        .group("box-office.proto-transcode-manual")
}

/// The box office over `registry`: framed deliveries become JSON, and the ticket subject is
/// registered at startup so the layer finds a Protobuf schema for the replies.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("box-office", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry.clone()))
        .on_startup(async move |()| {
            registry
                .register(
                    "tickets.proto-transcode-manual-value",
                    SchemaType::Protobuf,
                    TICKET_PROTO,
                )
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(subscriber(seat_requests(), Sell).reply().build());
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
    async fn a_protobuf_seat_request_is_sold_a_framed_ticket()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::protobuf_seat_request_transcoded(super::app, "proto-transcode-manual").await
    }
}
