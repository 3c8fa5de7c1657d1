//! What a library's circulation desk learns from the registry, it keeps: the schema of a framed
//! loan is fetched by id the first time the consume edge meets it, the subject the loan slips
//! are framed under is resolved the first time the publish layer needs it, and both answers
//! then live in the cache every clone of the `SchemaRegistry` shares.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_registry_cache \
//!     --features schema-registry -- run
//! $ cargo test --example kafka_registry_cache --features testing,schema-registry
//! ```
//!
//! The tests start a registry double in the test process and use the broker at
//! `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A member takes a book home; other producers frame these under `loans.sr-cache-value`.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Loan {
    book: u32,
    member: String,
}

/// The slip that goes with the book, framed under `loan-slips.sr-cache-value`.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "loan-slips.sr-cache")]
struct LoanSlip {
    book: u32,
    member: String,
    due_in_days: u32,
}

#[subscriber(KafkaTopic::new("loans.sr-cache").group("circulation.sr-cache"), reply)]
async fn lend(loan: &Loan) -> LoanSlip {
    LoanSlip {
        book: loan.book,
        member: loan.member.clone(),
        due_in_days: 21,
    }
}

/// The desk over `registry`. The broker's edge and the layer hold clones of it, so a schema
/// either of them resolved is one the caller's own clone finds with `cached_schema` or
/// `cached_subject`, without a request.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("circulation", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry))
        .with_broker(broker, |b| {
            b.include(lend);
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
    async fn what_the_edges_resolved_stays_cached() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::resolved_schemas_stay_cached(super::app, "sr-cache").await
    }
}
