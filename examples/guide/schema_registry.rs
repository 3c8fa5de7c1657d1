//! The veterinary clinic of the Schema Registry guide. Visits arrive as Avro in the Confluent
//! envelope and are answered with Avro receipts framed under their own subject; complaints
//! arrive as JSON Schema-framed JSON; and a second, registry-free service archives visits
//! written as bare Avro datums with one pinned schema.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example guide_schema_registry \
//!     --features avro -- run
//! $ cargo test --example guide_schema_registry --features testing,avro
//! ```

#[path = "../support/live.rs"]
mod live;

use ruststream::codec::JsonCodec;
use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::JsonSchema;
use ruststream_kafka::{SchemaFramed, SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

// --8<-- [start:models]
/// A visit as the clinic reads it. `species` arrived with the schema's second version: visits
/// from desks still on the first one take the default.
#[derive(Serialize, Deserialize, AvroSchema, Debug, Clone, PartialEq)]
struct Visit {
    chart: i64,
    fee_cents: i64,
    #[avro(default = r#""unknown""#)]
    species: String,
}

/// What the owner gets, framed under `visit-receipts.guide-sr-value`.
#[derive(Serialize, Deserialize, AvroSchema, Outgoing, Debug, Clone, PartialEq)]
#[outgoing(name = "visit-receipts.guide-sr")]
struct VisitReceipt {
    chart: i64,
    fee_cents: i64,
    species: String,
}
// --8<-- [end:models]

// --8<-- [start:handler]
#[subscriber(KafkaTopic::new("visits.guide-sr").group("clinic.guide-sr"), reply)]
async fn write_receipt(visit: &Visit) -> VisitReceipt {
    tracing::info!(
        visit.chart,
        visit.fee_cents,
        visit.species,
        "receipt issued"
    );
    VisitReceipt {
        chart: visit.chart,
        fee_cents: visit.fee_cents,
        species: visit.species.clone(),
    }
}
// --8<-- [end:handler]

// --8<-- [start:complaints]
/// An owner's complaint; the model is closed, so its JSON Schema allows nothing else.
#[derive(Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
struct Complaint {
    chart: i64,
    reason: String,
}

#[subscriber(KafkaTopic::new("complaints.guide-sr").group("clinic.guide-sr"))]
async fn hear_complaint(complaint: &Complaint) -> HandlerOutcome {
    if complaint.reason.trim().is_empty() {
        tracing::warn!(complaint.chart, "a complaint without a reason is dropped");
        return HandlerOutcome::drop();
    }
    tracing::info!(complaint.chart, complaint.reason, "complaint heard");
    HandlerOutcome::ack()
}
// --8<-- [end:complaints]

// --8<-- [start:service]
/// The clinic over `registry`. Connect resolves the receipt subject and checks `VisitReceipt`
/// against it; visits are read with their writer's schema and resolved onto `Visit`.
fn service(registry: SchemaRegistry) -> impl App {
    let prefetch = SchemaPrefetch::new(registry);
    let avro = AvroCodec::registry(&prefetch)
        .register::<VisitReceipt>("visit-receipts.guide-sr-value")
        .resolve_onto(Visit::get_schema())
        .unwrap_or_else(|e| panic!("the visit model is a valid reader schema: {e}"));
    let complaint_codec = SchemaFramed::new(&prefetch, JsonCodec);
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(prefetch);
    let receipts = avro.clone();
    RustStream::new(AppInfo::new("clinic", "0.1.0")).with_broker_codec(broker, avro, |b| {
        b.include(write_receipt)
            .out_reply(Publish::default())
            .codec(receipts);
        b.include_router(
            Router::new()
                .with_codec(complaint_codec)
                .include(hear_complaint),
        );
    })
}

#[ruststream::app]
fn app() -> impl App {
    service(SchemaRegistry::new(live::registry_url()))
}
// --8<-- [end:service]

// --8<-- [start:archive]
/// The archive: bare Avro visits, one pinned schema, no registry.
#[cfg_attr(
    not(test),
    allow(dead_code, reason = "the guide shows it; its test runs it")
)]
fn archive() -> impl App {
    let pinned =
        AvroCodec::local(Visit::get_schema()).unwrap_or_else(|e| panic!("the visit schema: {e}"));
    RustStream::new(AppInfo::new("clinic-archive", "0.1.0")).with_broker_codec(
        KafkaBroker::new([live::bootstrap()]),
        pinned,
        |b| {
            b.include(file_visit);
        },
    )
}

#[subscriber(KafkaTopic::new("visits-archive.guide-sr").group("clinic-archive.guide-sr"))]
async fn file_visit(visit: &Visit) -> HandlerOutcome {
    tracing::info!(visit.chart, "visit archived");
    HandlerOutcome::ack()
}
// --8<-- [end:archive]

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    use super::{VisitReceipt, archive, checks, service};

    const SUFFIX: &str = "guide-sr";

    type Outcome = Result<(), Box<dyn std::error::Error>>;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_visit_gets_a_receipt_under_its_subject() -> Outcome {
        checks::guide_receipt_under_its_subject::<VisitReceipt, _>(service, SUFFIX).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_visit_from_an_older_desk_reads_with_the_default_species() -> Outcome {
        checks::guide_older_producer_read_with_default::<VisitReceipt, _>(service, SUFFIX).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_missing_receipt_subject_stops_the_service() -> Outcome {
        checks::guide_missing_subject_stops_the_service(service, SUFFIX).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_receipt_model_the_registry_refuses_stops_the_service() -> Outcome {
        checks::guide_incompatible_model_stops_the_service(service, SUFFIX).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_complaint_reads_and_a_required_addition_is_refused() -> Outcome {
        checks::guide_json_schema_dispute::<VisitReceipt, _>(service, SUFFIX).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_archived_visit_reads_with_the_pinned_schema() -> Outcome {
        checks::guide_archive_reads_with_the_pinned_schema::<super::Visit, _>(archive(), SUFFIX)
            .await
    }
}
