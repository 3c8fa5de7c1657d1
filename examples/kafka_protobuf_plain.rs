//! Protobuf without a registry: a tool-lending desk reads loan requests with a `prost` type and
//! answers each with a loan slip. `decode_confluent` takes a request in the Confluent envelope
//! (skipping the schema id and the message-index path) as readily as a bare one, and the slip
//! goes out as plain `prost` bytes: nothing here talks to a Schema Registry.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_protobuf_plain --features protobuf,testing -- run
//! $ cargo test --example kafka_protobuf_plain --features testing,protobuf
//! ```
//!
//! The tests use the broker at `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

#[path = "support/live.rs"]
mod live;

// --8<-- [start:app]
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
#[outgoing(name = "loan-slips.proto-plain")]
struct LoanSlip {
    #[prost(string, tag = "1")]
    tool: String,
    #[prost(bool, tag = "2")]
    deposit: bool,
}

#[subscriber(KafkaTopic::new("loans.proto-plain").group("lending-desk.proto-plain"), reply)]
async fn lend(request: &LoanRequest) -> LoanSlip {
    LoanSlip {
        tool: request.tool.clone(),
        deposit: request.days > 7,
    }
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("lending-desk", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(lend);
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_loan_request_in_the_envelope_is_read_past_it()
    -> Result<(), Box<dyn std::error::Error>> {
        super::checks::framed_loan_read(super::app(), "proto-plain").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bare_loan_request_is_read_as_it_is() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::bare_loan_read(super::app(), "proto-plain").await
    }
}
