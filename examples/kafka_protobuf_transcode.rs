//! Protobuf through the registry edge: a cinema box office whose handler only knows serde.
//! Seat requests arrive as Confluent-framed Protobuf; the broker's `schema_registry` edge
//! looks up the writer's schema by the id in the envelope and hands the handler JSON. The
//! ticket it answers with is JSON too until the `SchemaFrame` layer finds the Protobuf schema
//! under `tickets.proto-transcode-value` and writes it as framed Protobuf.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_protobuf_transcode \
//!     --features protobuf,testing -- run
//! $ cargo test --example kafka_protobuf_transcode --features testing,protobuf
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::{KafkaError, SchemaFrame, SchemaRegistry, SchemaType};
use serde::{Deserialize, Serialize};

/// The ticket schema this service owns; the registry stores Protobuf as `.proto` text.
const TICKET_PROTO: &str = r#"
syntax = "proto3";
package cinema;
message Ticket { string screening = 1; uint32 seats = 2; bool group_rate = 3; }
"#;

/// Parties of this size or more pay the group rate.
const GROUP_SIZE: u32 = 5;

/// A seat request, read from the JSON the edge made of the Protobuf message: the field names
/// are the `.proto` ones.
#[derive(Deserialize, Debug, PartialEq)]
struct SeatRequest {
    screening: String,
    seats: u32,
}

/// The ticket, serialized as JSON and written as `cinema.Ticket` by the layer.
#[derive(Serialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "tickets.proto-transcode")]
struct Ticket {
    screening: String,
    seats: u32,
    group_rate: bool,
}

#[subscriber(
    KafkaTopic::new("seat-requests.proto-transcode").group("box-office.proto-transcode"),
    reply
)]
async fn sell(request: &SeatRequest) -> Ticket {
    Ticket {
        screening: request.screening.clone(),
        seats: request.seats,
        group_rate: request.seats >= GROUP_SIZE,
    }
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
                    "tickets.proto-transcode-value",
                    SchemaType::Protobuf,
                    TICKET_PROTO,
                )
                .await?;
            Ok::<_, KafkaError>(())
        })
        .with_broker(broker, |b| {
            b.include(sell);
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
    async fn a_protobuf_seat_request_is_sold_a_framed_ticket()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::protobuf_seat_request_transcoded(super::app, "proto-transcode").await
    }
}
