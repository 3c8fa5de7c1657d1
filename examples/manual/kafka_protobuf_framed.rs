//! The garage of `kafka_protobuf_framed`, without macros: a `Handle` impl, a hand-built
//! subscription, the wire formats still given by `#[wire]` hooks on the `prost` types.
//!
//! ```text
//! cargo test --example manual_kafka_protobuf_framed --features testing,protobuf
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../../tests/support/registry.rs"]
mod registry;

use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::prelude::*;
use ruststream_kafka::protobuf::decode_confluent;

/// A car booked in for a service.
#[derive(Clone, PartialEq, prost::Message, Deserialized)]
#[wire(decode = decode_confluent)]
struct Booking {
    #[prost(string, tag = "1")]
    plate: String,
    #[prost(uint32, tag = "2")]
    mileage: u32,
}

/// The ticket the workshop works from.
#[derive(Clone, PartialEq, prost::Message, Serialized, Outgoing)]
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
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use prost::Message as _;
    use ruststream::testing::TestApp;
    use ruststream_kafka::SchemaRegistry;
    use ruststream_kafka::prelude::*;
    use ruststream_kafka::protobuf::decode_confluent;
    use ruststream_kafka::schema_registry::{encode_envelope, parse_envelope};

    use super::{Booking, WorkTicket, app, live, readback, registry::RegistryDouble};

    const GARAGE_PROTO: &str = r#"
syntax = "proto3";
package garage;
message Booking { string plate = 1; uint32 mileage = 2; }
message WorkTicket { string plate = 1; bool major_service = 2; }
"#;

    /// Bytes published exactly as given.
    #[derive(Serialized, Outgoing)]
    #[outgoing(name = "bookings.proto-manual")]
    struct Raw(Vec<u8>);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn framed_and_bare_bookings_get_framed_tickets() -> Result<(), Box<dyn Error>> {
        live::ensure_topic("bookings.proto-manual", 1).await?;
        live::ensure_topic("work-tickets.proto-manual", 1).await?;
        let before = readback::log_ends("work-tickets.proto-manual", 1).await?;
        let double = RegistryDouble::start().await;
        let bookings = double.register("bookings.proto-manual-value", "PROTOBUF", GARAGE_PROTO);
        let tickets = double.register("work-tickets.proto-manual-value", "PROTOBUF", GARAGE_PROTO);
        assert_eq!(bookings, tickets, "one schema, one id");
        let registry = SchemaRegistry::new(double.url());

        let tb = TestApp::start_live_within(app(registry.clone()), Duration::from_secs(30)).await?;
        let framed = Booking {
            plate: "KX-1".into(),
            mileage: 61_000,
        };
        // Booking is the first message: its index path is the single byte 0.
        let mut datum = vec![0];
        datum.extend(framed.encode_to_vec());
        let kafka = tb.broker::<KafkaBroker>();
        kafka
            .message(&Raw(encode_envelope(bookings, &datum)))
            .publish()
            .await?;
        let bare = Booking {
            plate: "KX-2".into(),
            mileage: 900,
        };
        kafka.message(&Raw(bare.encode_to_vec())).publish().await?;
        kafka.subscriber("bookings.proto-manual").assert_called(2);
        tb.shutdown().await?;

        let landed = readback::records_since(
            "work-tickets.proto-manual",
            0,
            before[0],
            ruststream_kafka::client::IsolationLevel::ReadCommitted,
        )
        .await?;
        let mut plates = Vec::new();
        for record in &landed {
            let value = record.value.clone().ok_or("no value")?;
            let (id, datum) = parse_envelope(&value).ok_or("a ticket is not framed")?;
            assert_eq!(id, tickets);
            assert_eq!(&datum[..2], &[2, 2], "WorkTicket is message [1]");
            let ticket = decode_confluent::<WorkTicket>(&value)?;
            plates.push((ticket.plate, ticket.major_service));
        }
        plates.sort();
        assert_eq!(
            plates,
            [("KX-1".to_owned(), true), ("KX-2".to_owned(), false)]
        );
        Ok(())
    }
}
