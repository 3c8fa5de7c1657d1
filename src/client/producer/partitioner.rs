//! Key-to-partition placement, exactly as librdkafka's `partitioner` property does it.
//!
//! A service that moves off librdkafka keeps its placement: every record with the same key
//! lands on the same partition number as before, because [`Partitioner::partition_for`]
//! reproduces librdkafka's partitioners bit for bit, including their treatment of a null key
//! (no key at all) and of an empty key (a key of zero bytes), which differ:
//!
//! | partitioner         | hash of a key                         | null key       | empty key      |
//! |---------------------|---------------------------------------|----------------|----------------|
//! | `random`            | none                                  | random         | random         |
//! | `consistent`        | [`crc32`]                             | partition 0    | partition 0    |
//! | `consistent_random` | [`crc32`]                             | random         | random         |
//! | `murmur2`           | [`murmur2`] `& 0x7fff_ffff`           | hash of `""`   | hash of `""`   |
//! | `murmur2_random`    | [`murmur2`] `& 0x7fff_ffff`           | random         | hash of `""`   |
//! | `fnv1a`             | [`fnv1a`] read as `i32`, absolute     | hash of `""`   | hash of `""`   |
//! | `fnv1a_random`      | [`fnv1a`] read as `i32`, absolute     | random         | hash of `""`   |
//!
//! The partition is the hash, an unsigned 32-bit number, modulo the partition count; "random"
//! is left to the caller ([`Partitioner::partition_for`] returns `None`), which librdkafka
//! fills with a sticky partition (one random partition for a while, per
//! `sticky.partitioning.linger.ms`) or, with sticky partitioning off, a random partition per
//! record. `murmur2` places non-null keys where Java's `KafkaProducer` (its
//! `BuiltInPartitioner`, formerly `DefaultPartitioner`) does; `fnv1a` is librdkafka's match
//! for Sarama's `NewHashPartitioner`.
//!
//! The test vectors next to this file (`partitioner_vectors.tsv`) were recorded from
//! librdkafka itself by `scripts/partitioner-vectors.py`: the partition of each delivery
//! report of a real librdkafka producer, against librdkafka's mock cluster.

/// librdkafka's `partitioner` property values.
///
/// The default, as in librdkafka, is [`Partitioner::ConsistentRandom`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partitioner {
    /// `random`: every record goes to a random partition, whatever its key.
    Random,
    /// `consistent`: the [`crc32`] of the key; a null or empty key goes to partition 0.
    Consistent,
    /// `consistent_random`: the [`crc32`] of the key; a null or empty key goes to a random
    /// partition. librdkafka's default.
    #[default]
    ConsistentRandom,
    /// `murmur2`: Java's placement, the [`murmur2`] of the key made positive; a null key is
    /// hashed as an empty one.
    Murmur2,
    /// `murmur2_random`: Java's placement, the [`murmur2`] of the key made positive; a null
    /// key goes to a random partition (an empty key is hashed).
    Murmur2Random,
    /// `fnv1a`: Sarama's placement, the absolute value of the [`fnv1a`] of the key; a null key
    /// is hashed as an empty one.
    Fnv1a,
    /// `fnv1a_random`: Sarama's placement, the absolute value of the [`fnv1a`] of the key; a
    /// null key goes to a random partition (an empty key is hashed).
    Fnv1aRandom,
}

impl Partitioner {
    /// The partitioner that librdkafka's `partitioner` property value `name` selects:
    /// `random`, `consistent`, `consistent_random`, `murmur2`, `murmur2_random`, `fnv1a` or
    /// `fnv1a_random`, spelled exactly so (librdkafka compares case-sensitively); `None` for
    /// any other string.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "random" => Self::Random,
            "consistent" => Self::Consistent,
            "consistent_random" => Self::ConsistentRandom,
            "murmur2" => Self::Murmur2,
            "murmur2_random" => Self::Murmur2Random,
            "fnv1a" => Self::Fnv1a,
            "fnv1a_random" => Self::Fnv1aRandom,
            _ => return None,
        })
    }

    /// The `partitioner` property value that selects this partitioner in librdkafka; the
    /// inverse of [`Partitioner::from_name`].
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::Consistent => "consistent",
            Self::ConsistentRandom => "consistent_random",
            Self::Murmur2 => "murmur2",
            Self::Murmur2Random => "murmur2_random",
            Self::Fnv1a => "fnv1a",
            Self::Fnv1aRandom => "fnv1a_random",
        }
    }

    /// The partition for `key` among `partition_count` (> 0) partitions, or `None` when the
    /// partitioner leaves the choice to the caller (a random/sticky pick): e.g.
    /// `consistent_random` with a null or empty key.
    ///
    /// `key` is `None` for a null key and `Some(&[])` for an empty one; librdkafka treats
    /// them differently (see the [module documentation](self)). A returned partition is in
    /// `0..partition_count`.
    ///
    /// A `partition_count` of zero or less has no partition to choose from: the result is
    /// then `None` for every partitioner (librdkafka never calls a partitioner then; it
    /// holds the record until the topic has partitions).
    #[must_use]
    pub fn partition_for(self, key: Option<&[u8]>, partition_count: i32) -> Option<i32> {
        let count = u32::try_from(partition_count)
            .ok()
            .filter(|&count| count > 0)?;
        let hash = match (self, key) {
            (Self::Random, _)
            | (Self::ConsistentRandom, None | Some([]))
            | (Self::Murmur2Random | Self::Fnv1aRandom, None) => return None,
            (Self::Consistent | Self::ConsistentRandom, key) => crc32(key.unwrap_or_default()),
            (Self::Murmur2 | Self::Murmur2Random, key) => {
                murmur2(key.unwrap_or_default()) & 0x7fff_ffff
            }
            // FNV-1a as a signed 32-bit number, made non-negative as Sarama does; i32::MIN
            // stays 0x8000_0000 (librdkafka's `-h` wraps there too).
            (Self::Fnv1a | Self::Fnv1aRandom, key) => {
                (fnv1a(key.unwrap_or_default()) as i32).unsigned_abs()
            }
        };
        // `hash % count < count <= i32::MAX`, so the conversion cannot fail.
        i32::try_from(hash % count).ok()
    }
}

/// CRC-32 (IEEE 802.3, the zlib/PNG CRC) of `key`: the hash of librdkafka's `consistent` and
/// `consistent_random` partitioners.
#[must_use]
pub fn crc32(key: &[u8]) -> u32 {
    crc32fast::hash(key)
}

/// Kafka's murmur2 of `key`: the 32-bit `MurmurHash2` with seed `0x9747b28c` that the Java
/// client's `Utils.murmur2` computes (its `int` result, here as the same 32 bits unsigned) and
/// librdkafka's `murmur2` partitioners use.
///
/// The partitioners clear the top bit (`& 0x7fff_ffff`, Java's `Utils.toPositive`) before
/// taking the remainder.
#[must_use]
pub fn murmur2(key: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java hashes an `int` length and librdkafka a `uint32_t` one: both keep the low 32 bits.
    let mut h = SEED ^ (key.len() as u32);
    let (words, tail) = key.as_chunks::<4>();
    for word in words {
        let mut k = u32::from_le_bytes(*word);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u32::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// The 32-bit FNV-1a hash of `key` (offset basis `0x811c9dc5`, prime `0x01000193`).
///
/// librdkafka's `fnv1a` partitioners, like Sarama's `NewHashPartitioner`, read it as an `i32`
/// and take its absolute value before taking the remainder; this function returns the hash
/// itself.
#[must_use]
pub fn fnv1a(key: &[u8]) -> u32 {
    key.iter().fold(0x811c_9dc5, |h, &byte| {
        (h ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::{Partitioner, crc32, fnv1a, murmur2};

    const ALL: [Partitioner; 7] = [
        Partitioner::Random,
        Partitioner::Consistent,
        Partitioner::ConsistentRandom,
        Partitioner::Murmur2,
        Partitioner::Murmur2Random,
        Partitioner::Fnv1a,
        Partitioner::Fnv1aRandom,
    ];

    /// Recorded from librdkafka by `scripts/partitioner-vectors.py`.
    const VECTORS: &str = include_str!("partitioner_vectors.tsv");

    fn unhex(hex: &str) -> Vec<u8> {
        assert!(hex.len().is_multiple_of(2), "odd hex {hex:?}");
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex key in the vectors"))
            .collect()
    }

    #[test]
    fn librdkafka_vectors() {
        let mut rows = 0;
        let mut random_rows = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for line in VECTORS.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split('\t').collect();
            let [name, count, key, expected] = fields[..] else {
                panic!("malformed vector {line:?}");
            };
            let partitioner = Partitioner::from_name(name).expect("partitioner name");
            let count: i32 = count.parse().expect("partition count");
            let key = (key != "-").then(|| unhex(key));
            let got = partitioner.partition_for(key.as_deref(), count);
            if expected == "*" {
                // librdkafka picked at random: exactly where we leave the pick to the caller.
                assert_eq!(got, None, "{line:?}: librdkafka picks at random here");
                random_rows.push((name, count, key));
            } else {
                let expected: i32 = expected.parse().expect("partition");
                assert_eq!(got, Some(expected), "{line:?}");
            }
            seen.insert((name, count));
            rows += 1;
        }
        // 6 partitioners x 5 partition counts x (1000 keys + the null key).
        assert_eq!(rows, 6 * 5 * 1001);
        assert_eq!(seen.len(), 6 * 5);
        // The random rows are the null key for each *_random partitioner and the empty key
        // for consistent_random, at every partition count; no other row is random.
        assert_eq!(random_rows.len(), 4 * 5, "{random_rows:?}");
        for (name, _, key) in &random_rows {
            match key.as_deref() {
                None => assert!(name.ends_with("_random"), "{name}"),
                Some(key) => assert!(key.is_empty() && *name == "consistent_random", "{name}"),
            }
        }
    }

    #[test]
    fn java_utils_test_murmur2() {
        // Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
        // testMurmur2: Utils.murmur2 of these keys (as a Java int).
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key) as i32, expected, "{key:?}");
        }
    }

    #[test]
    fn librdkafka_unittest_murmur2_and_fnv1a() {
        // librdkafka's src/rdmurmur2.c unittest_murmur2 (values from the Java client) and
        // src/rdfnv1a.c unittest_fnv1a (values from Go's hash/fnv, made non-negative as
        // rd_fnv1a does), for the same keys; the last is the empty key.
        let cases: [(&[u8], u32, u32); 11] = [
            (b"kafka", 0xd067_cf64, 0x0d33_c4e1),
            (b"giberish123456789", 0x8f55_2b0c, 0x77a5_8295),
            (b"1234", 0x9fc9_7b14, 0x023b_dd03),
            (b"234", 0xe7c0_09ca, 0x2dea_3cd2),
            (b"34", 0x8739_30da, 0x740f_a83e),
            (b"4", 0x5a4b_5ca1, 0x310c_a263),
            (
                b"PreAmbleWillBeRemoved,ThePrePartThatIs",
                0x7842_4f1c,
                0x65cb_d69c,
            ),
            (
                b"reAmbleWillBeRemoved,ThePrePartThatIs",
                0x4a62_b377,
                0x6e49_c79a,
            ),
            (
                b"eAmbleWillBeRemoved,ThePrePartThatIs",
                0xe0e4_e09e,
                0x69ee_d356,
            ),
            (
                b"AmbleWillBeRemoved,ThePrePartThatIs",
                0x62b8_b43f,
                0x6abc_c023,
            ),
            (b"", 0x106e_08d9, 0x7ee3_623b),
        ];
        for (key, murmur, fnv_abs) in cases {
            assert_eq!(murmur2(key), murmur, "murmur2 {key:?}");
            assert_eq!((fnv1a(key) as i32).unsigned_abs(), fnv_abs, "fnv1a {key:?}");
        }
    }

    #[test]
    fn java_placement() {
        // Java's BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % partitions.
        // murmur2("kafka") = 0xd067cf64 -> 0x5067cf64 = 1_348_980_580; murmur2("abc") =
        // 479_470_107 (already positive).
        for partitioner in [Partitioner::Murmur2, Partitioner::Murmur2Random] {
            for count in [1, 3, 6, 12, 100, 1000] {
                assert_eq!(
                    partitioner.partition_for(Some(b"kafka"), count),
                    Some(1_348_980_580 % count)
                );
                assert_eq!(
                    partitioner.partition_for(Some(b"abc"), count),
                    Some(479_470_107 % count)
                );
            }
        }
    }

    #[test]
    fn standard_hash_check_values() {
        // The CRC-32 check value (CRC catalogue: CRC-32/ISO-HDLC of "123456789").
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
        // FNV-1a 32-bit reference values (Noll's test suite).
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn unsigned_remainders() {
        // crc32 above i32::MAX is reduced as an unsigned number.
        let key = b"123456789"; // crc32 0xcbf43926 = 3_421_780_262
        assert_eq!(
            Partitioner::Consistent.partition_for(Some(key), 7),
            Some((3_421_780_262_u32 % 7) as i32)
        );
        // A key whose FNV-1a is 0x8000_0000 (i32::MIN): its absolute value stays 2^31.
        let key = b"fnv-int-min-0-\x39\x41\xfc\x1a";
        assert_eq!(fnv1a(key), 0x8000_0000);
        assert_eq!(Partitioner::Fnv1a.partition_for(Some(key), 100), Some(48));
        assert_eq!(Partitioner::Fnv1a.partition_for(Some(key), 3), Some(2));
    }

    #[test]
    fn null_and_empty_keys() {
        for count in [1, 2, 3, 100] {
            assert_eq!(Partitioner::Consistent.partition_for(None, count), Some(0));
            assert_eq!(
                Partitioner::Consistent.partition_for(Some(b""), count),
                Some(0)
            );
            assert_eq!(
                Partitioner::ConsistentRandom.partition_for(None, count),
                None
            );
            assert_eq!(
                Partitioner::ConsistentRandom.partition_for(Some(b""), count),
                None
            );
            for (keyed, random) in [
                (Partitioner::Murmur2, Partitioner::Murmur2Random),
                (Partitioner::Fnv1a, Partitioner::Fnv1aRandom),
            ] {
                let empty = keyed.partition_for(Some(b""), count);
                assert!(empty.is_some());
                assert_eq!(keyed.partition_for(None, count), empty);
                assert_eq!(random.partition_for(Some(b""), count), empty);
                assert_eq!(random.partition_for(None, count), None);
            }
        }
        for key in [None, Some(&b""[..]), Some(&b"key"[..])] {
            assert_eq!(Partitioner::Random.partition_for(key, 10), None);
        }
    }

    #[test]
    fn no_partitions_means_none() {
        for partitioner in ALL {
            for count in [0, -1, i32::MIN] {
                for key in [None, Some(&b""[..]), Some(&b"key-1"[..])] {
                    assert_eq!(partitioner.partition_for(key, count), None);
                }
            }
            // The largest count works too.
            if let Some(partition) = partitioner.partition_for(Some(b"key-1"), i32::MAX) {
                assert!((0..i32::MAX).contains(&partition));
            }
        }
    }

    #[test]
    fn names() {
        assert_eq!(Partitioner::default(), Partitioner::ConsistentRandom);
        for partitioner in ALL {
            assert_eq!(
                Partitioner::from_name(partitioner.name()),
                Some(partitioner)
            );
        }
        for name in ["", "Murmur2", "murmur2 ", "murmur3", "sticky", "default"] {
            assert_eq!(Partitioner::from_name(name), None, "{name:?}");
        }
    }
}
