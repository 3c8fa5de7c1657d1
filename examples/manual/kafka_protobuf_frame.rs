//! The loading dock of `kafka_protobuf_frame`, without macros: the out slot, the handler over
//! its `Out` entry and the subscription are written by hand; the `ProtobufFrame` layer frames
//! the stock movements exactly as before.
//!
//! ```text
//! $ cargo test --example manual_kafka_protobuf_frame --features testing,protobuf
//! ```

use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use ruststream::runtime::{ListOffer, OutSlot, PublishedThrough};

#[path = "../support/live.rs"]
mod live;

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
#[outgoing(name = "stock-moves.proto-frame-manual")]
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

/// The slot stock movements leave through.
struct Inventory;

impl OutSlot for Inventory {
    const NAME: &'static str = "Inventory";
    type Destination = <(StockMove, ()) as ListOffer>::Offer;
}

impl PublishedThrough<Inventory> for StockMove {}

struct Unload;

impl<Entry> Handle<PalletScan, (), Outs<(Entry,)>> for Unload
where
    Entry: OutEntry<Inventory, Wire: Publisher>,
{
    async fn handle(
        &self,
        scan: &PalletScan,
        outs: &Outs<(Entry,)>,
        _ctx: &mut Context<'_>,
    ) -> Result<(), HandlerOutcome> {
        let units = i32::try_from(scan.cases.saturating_mul(UNITS_PER_CASE))
            .map_err(|_| HandlerOutcome::drop())?;
        let movement = StockMove {
            sku: scan.sku.clone(),
            units,
            bay: scan.bay.clone(),
        };
        // A registry that cannot be reached fails the publish: try the scan again later.
        outs.get(Inventory)
            .message(&movement)
            .publish()
            .await
            .map_err(|_| HandlerOutcome::retry())
    }
}

fn scans() -> KafkaTopic {
    KafkaTopic::new("pallet-scans.proto-frame-manual").group("dock.proto-frame-manual")
}

/// The dock over `registry`: whatever leaves for a topic with a Protobuf subject is framed.
fn app(registry: SchemaRegistry) -> impl App {
    RustStream::new(AppInfo::new("dock", "0.1.0"))
        .publish_layer(ProtobufFrame::new(registry))
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            b.include(subscriber(scans(), Unload).build())
                .out(Inventory, Publish::default())
                .build();
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
    async fn a_stock_move_from_the_slot_leaves_framed() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::slot_publish_framed(super::app, "proto-frame-manual").await
    }
}
