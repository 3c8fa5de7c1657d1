//! The lending library of `kafka_registry_prefetch`, without macros: a `Handle` impl, a
//! hand-built subscription, and the notice topic named through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_prefetch --features testing,avro
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::avro::{AvroCodec, AvroSchema};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaPrefetch, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A member borrows a book.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Loan {
    book: i64,
    member: String,
}

/// When it has to come back.
#[derive(Serialize, Deserialize, AvroSchema, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct DueNotice {
    book: i64,
    days: i32,
}

impl OutgoingDestination for DueNotice {
    type Form = FixedName;
    const DESTINATION: &'static str = "due-notices.registry-prefetch-manual";
}

impl MessageHeaders for DueNotice {
    type Contract = NoHeaders;
}

struct Lend;

impl Handle<Loan, DueNotice> for Lend {
    fn handle(
        &self,
        loan: &Loan,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<DueNotice, HandlerOutcome>> {
        tracing::info!(loan.book, loan.member, "book lent");
        ready(Ok(DueNotice {
            book: loan.book,
            days: 21,
        }))
    }
}

fn loans() -> KafkaTopic {
    KafkaTopic::new("loans.registry-prefetch-manual").group("lending.registry-prefetch-manual")
}

/// The service over `registry`: connect resolves `due-notices` and checks `DueNotice` fits it.
fn app(registry: SchemaRegistry) -> impl App {
    let schemas = SchemaPrefetch::new(registry).check_compatibility(true);
    let codec = AvroCodec::registry(&schemas)
        .register::<DueNotice>("due-notices.registry-prefetch-manual-value");
    let broker = KafkaBroker::new([live::bootstrap()]).schema_prefetch(schemas);
    let notices = codec.clone();
    RustStream::new(AppInfo::new("lending", "0.1.0")).with_broker_codec(broker, codec, |b| {
        b.include(subscriber(loans(), Lend).reply().build())
            .out_reply(Publish::default())
            .codec(notices);
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
    async fn connect_resolves_the_due_notice_subject() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::connect_resolves_the_subject::<super::DueNotice, _>(
            super::app,
            "registry-prefetch-manual",
        )
        .await
    }
}
