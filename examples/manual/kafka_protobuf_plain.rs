//! The lending desk of `kafka_protobuf_plain`, without macros: a `Handle` impl and a hand-built
//! subscription; the `prost` types keep their `#[wire]` hooks, so requests still decode framed
//! or bare and slips still encode as plain `prost` bytes.
//!
//! ```text
//! $ cargo test --example manual_kafka_protobuf_plain --features testing,protobuf
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::protobuf::decode_confluent;

/// A member asks to borrow a tool for some days (`tools.LoanRequest`).
#[derive(prost::Message, Deserialized, Clone, PartialEq)]
#[wire(decode = decode_confluent)]
struct LoanRequest {
    #[prost(string, tag = "1")]
    tool: String,
    #[prost(uint32, tag = "2")]
    days: u32,
}

/// What the desk hands back (`tools.LoanSlip`): long loans leave a deposit.
#[derive(prost::Message, Serialized, Outgoing, Clone, PartialEq)]
#[wire(encode = prost::Message::encode)]
#[outgoing(name = "loan-slips.proto-plain-manual")]
struct LoanSlip {
    #[prost(string, tag = "1")]
    tool: String,
    #[prost(bool, tag = "2")]
    deposit: bool,
}

struct Lend;

impl Handle<LoanRequest, LoanSlip> for Lend {
    fn handle(
        &self,
        request: &LoanRequest,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<LoanSlip, HandlerOutcome>> {
        ready(Ok(LoanSlip {
            tool: request.tool.clone(),
            deposit: request.days > 7,
        }))
    }
}

fn loans() -> KafkaTopic {
    KafkaTopic::new("loans.proto-plain-manual").group("lending-desk.proto-plain-manual")
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("lending-desk", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(loans(), Lend).reply().build());
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_loan_request_in_the_envelope_is_read_past_it()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_loan_read(super::app(), "proto-plain-manual").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_loan_request_is_read_as_it_is() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::bare_loan_read(super::app(), "proto-plain-manual").await
    }
}
