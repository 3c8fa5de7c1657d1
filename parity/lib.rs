//! The reference's commit and seek semantics, side by side: `tests/parity.rs` expands the
//! scenarios of `scenarios.rs` once for ruststream-kafka and once for ruststream-rdkafka 0.7.1.
//! The library itself is empty; run it with `scripts/parity`.
