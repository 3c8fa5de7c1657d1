//! Fuzz target `lz4`: see `ruststream_kafka::fuzzing::lz4` for what the bytes mean.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ruststream_kafka::fuzzing::lz4(data));
