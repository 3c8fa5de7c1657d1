//! The circulation desk of `kafka_registry_cache`, without macros: the handler is a `Handle`
//! impl, the subscription is built by hand, the slip names its topic through
//! `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_cache --features testing,schema-registry
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::{SchemaFrame, SchemaRegistry};
use serde::{Deserialize, Serialize};

/// A member takes a book home; other producers frame these under
/// `loans.sr-cache-manual-value`.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Loan {
    book: u32,
    member: String,
}

/// The slip that goes with the book, framed under `loan-slips.sr-cache-manual-value`.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct LoanSlip {
    book: u32,
    member: String,
    due_in_days: u32,
}

impl OutgoingDestination for LoanSlip {
    type Form = FixedName;
    const DESTINATION: &'static str = "loan-slips.sr-cache-manual";
}

impl MessageHeaders for LoanSlip {
    type Contract = NoHeaders;
}

struct Lend;

impl Handle<Loan, LoanSlip> for Lend {
    fn handle(
        &self,
        loan: &Loan,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<LoanSlip, HandlerOutcome>> {
        ready(Ok(LoanSlip {
            book: loan.book,
            member: loan.member.clone(),
            due_in_days: 21,
        }))
    }
}

fn loans() -> KafkaTopic {
    KafkaTopic::new("loans.sr-cache-manual").group("circulation.sr-cache-manual")
}

/// The desk over `registry`; the edge, the layer and the caller share one cache.
fn app(registry: SchemaRegistry) -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()]).schema_registry(registry.clone());
    RustStream::new(AppInfo::new("circulation", "0.1.0"))
        .publish_layer(SchemaFrame::new(registry))
        .with_broker(broker, |b| {
            b.include(subscriber(loans(), Lend).reply().build());
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
    async fn what_the_edges_resolved_stays_cached() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::resolved_schemas_stay_cached(super::app, "sr-cache-manual").await
    }
}
