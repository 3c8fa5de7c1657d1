//! The courier depot of `examples/guide/protobuf.rs` without macros: the handler is a type
//! implementing `Handle`, the reply is mounted with `.reply()` and framed by the same
//! `Publish::framed` policy, and `main` runs the command line by hand.
//!
//! ```text
//! $ cargo test --example manual_guide_protobuf --features testing,protobuf
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../../support/live.rs"]
mod live;

use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::prelude::*;
use ruststream_kafka::protobuf::decode_confluent;

/// `courier.Parcel` as `prost-build` would generate it, plus the decode hook that reads it
/// past the envelope.
#[derive(prost::Message, Deserialized, Clone, PartialEq)]
#[wire(decode = decode_confluent)]
struct Parcel {
    #[prost(string, tag = "1")]
    tracking: String,
    #[prost(string, tag = "2")]
    address: String,
    #[prost(uint32, tag = "3")]
    grams: u32,
}

/// `courier.Label`, written by `prost`; the policy frames it on the way out.
#[derive(prost::Message, Serialized, Outgoing, Clone, PartialEq)]
#[wire(encode = prost::Message::encode)]
#[outgoing(name = "labels.guide-protobuf-manual")]
struct Label {
    #[prost(string, tag = "1")]
    tracking: String,
    #[prost(string, tag = "2")]
    address: String,
    #[prost(string, tag = "3")]
    service: String,
}

/// Parcels from this weight on travel on the heavy van.
const HEAVY_GRAMS: u32 = 2_000;

struct PrintLabel;

impl Handle<Parcel, Label> for PrintLabel {
    fn handle(
        &self,
        parcel: &Parcel,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Label, HandlerOutcome>> {
        if parcel.address.is_empty() {
            tracing::warn!(parcel.tracking, "no address: the parcel is dropped");
            return ready(Err(HandlerOutcome::drop()));
        }
        let service = if parcel.grams >= HEAVY_GRAMS {
            "heavy"
        } else {
            "standard"
        };
        ready(Ok(Label {
            tracking: parcel.tracking.clone(),
            address: parcel.address.clone(),
            service: service.to_owned(),
        }))
    }
}

fn parcels() -> KafkaTopic {
    KafkaTopic::new("parcels.guide-protobuf-manual").group("depot.guide-protobuf-manual")
}

/// The depot over `registry`; the label topic carries the file's second message.
fn app(registry: SchemaRegistry) -> impl App {
    RustStream::new(AppInfo::new("depot", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        move |b| {
            b.include(subscriber(parcels(), PrintLabel).reply().build())
                .out_reply(
                    Publish::framed(&registry)
                        .message("labels.guide-protobuf-manual", "courier.Label"),
                );
        },
    )
}

fn main() -> ExitCode {
    run_main(|| app(SchemaRegistry::new(live::registry_url())))
}

#[cfg(test)]
#[path = "../../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    type Outcome = Result<(), Box<dyn std::error::Error>>;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parcel_with_no_address_gets_no_label() -> Outcome {
        super::checks::parcel_without_address_dropped(super::app, "guide-protobuf-manual").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_label_leaves_framed_under_its_subject() -> Outcome {
        super::checks::label_framed_under_subject(super::app, "guide-protobuf-manual").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_label_goes_out_while_its_subject_is_unregistered() -> Outcome {
        super::checks::label_without_subject_unpublished(super::app, "guide-protobuf-manual").await
    }
}
