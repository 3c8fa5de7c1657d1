//! The schema prefetch at work: a lending library answers each loan with a due notice framed
//! under the `due-notices` subject the notices team owns. `SchemaPrefetch` is the async half of
//! the registry codecs: while the broker connects it resolves every subject a codec registered
//! and checks the app's model against it, so no delivery ever waits for the first lookup.
//!
//! ```text
//! $ scripts/kafka up
//! $ SCHEMA_REGISTRY_URL=http://localhost:8081 cargo run --example kafka_registry_prefetch \
//!     --features avro -- run
//! $ cargo test --example kafka_registry_prefetch --features testing,avro
//! ```

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A member borrows a book.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
struct Loan {
    book: i64,
    member: String,
}

/// When it has to come back.
#[derive(Serialize, Deserialize, AvroSchema, Outgoing, Debug, PartialEq)]
#[outgoing(name = "due-notices.registry-prefetch")]
struct DueNotice {
    book: i64,
    days: i32,
}

#[subscriber(
    KafkaTopic::new("loans.registry-prefetch").group("lending.registry-prefetch"),
    reply
)]
async fn lend(loan: &Loan) -> DueNotice {
    tracing::info!(loan.book, loan.member, "book lent");
    DueNotice {
        book: loan.book,
        days: 21,
    }
}

/// The service over `registry`: connect resolves `due-notices` and checks `DueNotice` fits it.
fn app(registry: SchemaRegistry) -> impl App {
    let schemas = SchemaPrefetch::new(registry).check_compatibility(true);
    let codec =
        AvroCodec::registry(&schemas).register::<DueNotice>("due-notices.registry-prefetch-value");
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(schemas);
    let notices = codec.clone();
    RustStream::new(AppInfo::new("lending", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(lend).out_reply(Publish::default()).codec(notices);
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
    async fn connect_resolves_the_due_notice_subject() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::connect_resolves_the_subject::<super::DueNotice, _>(
            super::app,
            "registry-prefetch",
        )
        .await
    }
}
