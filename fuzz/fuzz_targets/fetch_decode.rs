//! Fuzz target `fetch_decode`: see `ruststream_kafka::fuzzing::fetch_decode` for what the bytes mean.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ruststream_kafka::fuzzing::fetch_decode(data));
