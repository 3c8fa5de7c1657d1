//! One text, two crates: every scenario of `scenarios.rs` runs against ruststream-kafka
//! (`ours::`) and ruststream-rdkafka 0.7.1 (`rd::`), live against `KAFKA_TEST_URL` and on each
//! crate's in-process cluster.

/// The live broker: `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else `localhost:9092`.
fn bootstrap() -> String {
    std::env::var("KAFKA_TEST_URL").unwrap_or_else(|_| "localhost:9092".to_owned())
}

include!("../scenarios.rs");

commit_semantics!(ours, ruststream_kafka, crate::bootstrap);
commit_semantics!(rd, ruststream_rdkafka, crate::bootstrap);
