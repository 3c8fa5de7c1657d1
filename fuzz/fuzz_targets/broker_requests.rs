//! Fuzz target `broker_requests`: see `ruststream_kafka::fuzzing::broker_requests` for what the bytes mean.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ruststream_kafka::fuzzing::broker_requests(data));
