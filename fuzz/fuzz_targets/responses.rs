//! Fuzz target `responses`: see `ruststream_kafka::fuzzing::responses` for what the bytes mean.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ruststream_kafka::fuzzing::responses(data));
