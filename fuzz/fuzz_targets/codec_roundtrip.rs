//! Fuzz target `codec_roundtrip`: see `ruststream_kafka::fuzzing::codec_roundtrip` for what
//! the bytes mean.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ruststream_kafka::fuzzing::codec_roundtrip(data));
