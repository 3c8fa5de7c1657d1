//! The courier depot of the Protobuf guide: parcels arrive as Confluent-framed Protobuf and
//! each one with an address gets a shipping label, written by `prost` and framed by the
//! `Publish::framed` policy under the label subject's schema id. The subject is the topic's
//! contract: if nobody registered it, the policy refuses to publish rather than send bytes no
//! reader could place, and the parcel is settled as a retry.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example guide_protobuf \
//!     --features protobuf,testing -- run
//! $ cargo test --example guide_protobuf --features testing,protobuf
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "../support/live.rs"]
mod live;

// --8<-- [start:messages]
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
#[outgoing(name = "labels.guide-protobuf")]
struct Label {
    #[prost(string, tag = "1")]
    tracking: String,
    #[prost(string, tag = "2")]
    address: String,
    #[prost(string, tag = "3")]
    service: String,
}
// --8<-- [end:messages]

// --8<-- [start:handler]
/// Parcels from this weight on travel on the heavy van.
const HEAVY_GRAMS: u32 = 2_000;

#[subscriber(KafkaTopic::new("parcels.guide-protobuf").group("depot.guide-protobuf"), reply)]
async fn label(parcel: &Parcel) -> Result<Label, HandlerOutcome> {
    if parcel.address.is_empty() {
        tracing::warn!(parcel.tracking, "no address: the parcel is dropped");
        return Err(HandlerOutcome::drop());
    }
    let service = if parcel.grams >= HEAVY_GRAMS {
        "heavy"
    } else {
        "standard"
    };
    tracing::info!(parcel.tracking, service, "label printed");
    Ok(Label {
        tracking: parcel.tracking.clone(),
        address: parcel.address.clone(),
        service: service.to_owned(),
    })
}
// --8<-- [end:handler]

// --8<-- [start:service]
/// The depot over `registry`. The courier file declares `Parcel` then `Label`, so the policy
/// is told which message the label topic carries.
fn app(registry: SchemaRegistry) -> impl App {
    RustStream::new(AppInfo::new("depot", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        move |b| {
            b.include(label).out_reply(
                Publish::framed(&registry).message("labels.guide-protobuf", "courier.Label"),
            );
        },
    )
}

#[ruststream::app]
fn service() -> impl App {
    app(SchemaRegistry::new(live::registry_url()))
}
// --8<-- [end:service]

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    type Outcome = Result<(), Box<dyn std::error::Error>>;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parcel_with_no_address_gets_no_label() -> Outcome {
        super::checks::parcel_without_address_dropped(super::app, "guide-protobuf").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_label_leaves_framed_under_its_subject() -> Outcome {
        super::checks::label_framed_under_subject(super::app, "guide-protobuf").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_label_goes_out_while_its_subject_is_unregistered() -> Outcome {
        super::checks::label_without_subject_unpublished(super::app, "guide-protobuf").await
    }
}
