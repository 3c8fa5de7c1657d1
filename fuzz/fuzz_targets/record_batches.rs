//! Fuzz target `record_batches`: see `ruststream_kafka::fuzzing::record_batches` for what the bytes mean.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ruststream_kafka::fuzzing::record_batches(data));
