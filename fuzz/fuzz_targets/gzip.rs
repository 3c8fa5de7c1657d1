//! Fuzz target `gzip`: see `ruststream_kafka::fuzzing::gzip` for what the bytes mean.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ruststream_kafka::fuzzing::gzip(data));
