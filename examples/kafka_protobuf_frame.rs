//! The `ProtobufFrame` publish layer: a loading dock turns each pallet scan into a stock
//! movement and publishes it through an out slot. The handler writes plain `prost` bytes; the
//! app-wide layer finds the Protobuf schema under the destination's subject
//! (`stock-moves.proto-frame-value`) and puts its id and the message-index path in front.
//! Topics without a subject, and payloads already framed, would pass through untouched.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_protobuf_frame \
//!     --features protobuf,testing -- run
//! $ cargo test --example kafka_protobuf_frame --features testing,protobuf
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::protobuf::decode_confluent;
use ruststream_kafka::{ProtobufFrame, SchemaRegistry};

/// A hand scanner read a pallet coming off a truck.
#[derive(prost::Message, Deserialized, Clone, PartialEq)]
#[wire(decode = decode_confluent)]
struct PalletScan {
    #[prost(string, tag = "1")]
    sku: String,
    #[prost(uint32, tag = "2")]
    cases: u32,
    #[prost(string, tag = "3")]
    bay: String,
}

/// Units entering stock (`dock.StockMove`), framed by the layer on its way out.
#[derive(prost::Message, Serialized, Outgoing, Clone, PartialEq)]
#[wire(encode = prost::Message::encode)]
#[outgoing(name = "stock-moves.proto-frame")]
struct StockMove {
    #[prost(string, tag = "1")]
    sku: String,
    #[prost(int32, tag = "2")]
    units: i32,
    #[prost(string, tag = "3")]
    bay: String,
}

/// Every case on a pallet holds this many units.
const UNITS_PER_CASE: u32 = 24;

#[derive(OutSlot)]
#[publishes(StockMove)]
struct Inventory;

#[subscriber(KafkaTopic::new("pallet-scans.proto-frame").group("dock.proto-frame"))]
async fn unload(
    scan: &PalletScan,
    Out(inventory): Out<impl Publisher, Inventory>,
) -> HandlerOutcome {
    let Ok(units) = i32::try_from(scan.cases.saturating_mul(UNITS_PER_CASE)) else {
        return HandlerOutcome::drop();
    };
    let movement = StockMove {
        sku: scan.sku.clone(),
        units,
        bay: scan.bay.clone(),
    };
    // A registry that cannot be reached fails the publish: try the scan again later.
    match inventory.message(&movement).publish().await {
        Ok(()) => HandlerOutcome::ack(),
        Err(_) => HandlerOutcome::retry(),
    }
}

/// The dock over `registry`: whatever leaves for a topic with a Protobuf subject is framed.
fn app(registry: SchemaRegistry) -> impl App {
    RustStream::new(AppInfo::new("dock", "0.1.0"))
        .publish_layer(ProtobufFrame::new(registry))
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            b.include(unload).out(Inventory, Publish::default()).build();
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
    async fn a_stock_move_from_the_slot_leaves_framed() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::slot_publish_framed(super::app, "proto-frame").await
    }
}
