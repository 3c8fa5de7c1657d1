//! A cheap hasher for the client's per-record tables, keyed by topic names the cluster has
//! (never by arbitrary input, so no flooding to defend against). Its methods are `#[inline]`:
//! the tables that use it live in other modules, which may be compiled apart from this one.

use std::hash::Hasher;

/// A multiply-rotate hasher (as rustc's `FxHasher`) for the tables a record's path looks up
/// once per record: the consumer's partitions (storing an offset) and the producer's queues
/// by topic. `SipHash` over the topic name cost more than the rest of the lookup. The keys
/// are the client's own assignment or topics the cluster has, so there is no untrusted input
/// to flood a table with.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PartitionHasher(u64);

impl PartitionHasher {
    const K: u64 = 0xf135_7aea_2e62_a9c5;

    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::K).rotate_left(26);
    }
}

impl Hasher for PartitionHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0; 8];
        word[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.add(u64::from(i as u32));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}
