//! The reference's commit and seek semantics, for this crate: the scenarios of
//! `parity/scenarios.rs`, which `scripts/parity` also runs against ruststream-rdkafka 0.7.1
//! from the same text. The live tests reach the broker `KAFKA_TEST_URL` names (the embedded
//! cluster under `KAFKA_TEST_TARGET=embedded`); the in-process ones need nothing.
#![cfg(feature = "testing")]

#[path = "../../examples/support/live.rs"]
mod live;

include!("../../parity/scenarios.rs");

commit_semantics!(
    ours,
    ruststream_kafka,
    crate::commit_semantics::live::bootstrap
);
