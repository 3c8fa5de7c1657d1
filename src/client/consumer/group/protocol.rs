//! The classic `consumer` protocol's payloads: what a member says about itself in `JoinGroup`
//! (its subscription) and what the leader hands each member through `SyncGroup` (its
//! assignment).
//!
//! Both are opaque bytes to the broker, which relays them unchecked: another group member wrote
//! them, so they are as untrusted as anything on the wire. `kafka-protocol` sizes its vectors
//! from the counts it reads, so every payload is first walked by `Shape`, which proves that
//! each count fits in the bytes that follow it; only then is it decoded.
//!
//! Each payload is an `i16` version followed by the message at that version. A version newer
//! than we know is read as the newest we know and trailing bytes are ignored: that is Kafka's
//! rule for these two messages, so that later versions can only append fields.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

use crate::client::error::{Error, Result};

/// The subscription version we write: v1 added owned partitions, v2 the generation (which
/// cooperative-sticky needs to tell stale claims apart) and v3 the rack.
const SUBSCRIPTION_VERSION: i16 = 3;
/// The assignment body is the same at every version; we write the newest, as Kafka's own
/// consumer does.
const ASSIGNMENT_VERSION: i16 = 3;

/// One member's subscription as the group leader sees it in the `JoinGroup` response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    /// The member id the coordinator gave the member.
    pub member_id: String,
    /// Its `group.instance.id` when it is a static member.
    pub instance_id: Option<String>,
    /// The topics it wants to consume.
    pub topics: Vec<String>,
    /// The partitions it consumes now, by topic (subscription v1 and later).
    pub owned: Vec<(String, Vec<i32>)>,
    /// The generation in which it got `owned`, or -1 when unknown (subscription v2 and later).
    pub generation: i32,
    /// Its `client.rack` (subscription v3 and later).
    pub rack: Option<String>,
    /// Data the member's assignor added for the leader's assignor.
    pub user_data: Option<Bytes>,
}

/// Encodes this member's subscription for the `consumer` protocol of `JoinGroup`.
///
/// `owned` are the partitions the member holds now and `generation` the generation they were
/// assigned in (-1 when it holds none): the cooperative-sticky leader keeps them where they are
/// and trusts the claim with the newest generation.
pub fn encode_subscription(
    topics: &[String],
    owned: &[(String, Vec<i32>)],
    generation: i32,
    rack: Option<&str>,
) -> Result<Bytes> {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| str_bytes(t)).collect())
        .with_user_data(None)
        .with_owned_partitions(
            owned
                .iter()
                .map(|(topic, partitions)| {
                    OwnedTopic::default()
                        .with_topic(TopicName(str_bytes(topic)))
                        .with_partitions(partitions.clone())
                })
                .collect(),
        )
        .with_generation_id(generation)
        .with_rack_id(rack.map(str_bytes));
    // Only names too long for Kafka's 16-bit string lengths fail here, and those come from
    // the consumer's own subscription or `client.rack`.
    encode(&message, SUBSCRIPTION_VERSION)
        .map_err(|e| Error::Config(format!("the consumer subscription cannot be encoded: {e}")))
}

/// Decodes a member's subscription from the `JoinGroup` response the leader receives.
///
/// Versions 0 to 3 are read with their fields; newer ones as version 3. Fields a version lacks
/// keep their defaults: no owned partitions, generation -1, no rack.
pub fn decode_subscription(
    member_id: &str,
    instance_id: Option<&str>,
    metadata: &[u8],
) -> Result<MemberSubscription> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::protocol(format!("subscription of group member {member_id:?}: {e}"))
    };
    let (version, body) = split_version(metadata).ok_or_else(|| failed(&"no version"))?;
    let version = known_version(version, ConsumerProtocolSubscription::VERSIONS.max)
        .ok_or_else(|| failed(&format_args!("version {version}")))?;
    subscription_shape(body, version).map_err(|e| failed(&e))?;
    let decoded = ConsumerProtocolSubscription::decode(&mut Bytes::copy_from_slice(body), version)
        .map_err(|e| failed(&e))?;
    Ok(MemberSubscription {
        member_id: member_id.to_owned(),
        instance_id: instance_id.map(str::to_owned),
        topics: decoded.topics.iter().map(ToString::to_string).collect(),
        owned: decoded
            .owned_partitions
            .into_iter()
            .map(|tp| (tp.topic.0.to_string(), tp.partitions))
            .collect(),
        generation: decoded.generation_id,
        rack: decoded.rack_id.map(|r| r.to_string()),
        user_data: decoded.user_data,
    })
}

/// Encodes one member's share of the leader's plan for `SyncGroup`.
pub fn encode_assignment(assignment: &[(String, Vec<i32>)]) -> Result<Bytes> {
    let message = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            assignment
                .iter()
                .map(|(topic, partitions)| {
                    AssignedTopic::default()
                        .with_topic(TopicName(str_bytes(topic)))
                        .with_partitions(partitions.clone())
                })
                .collect(),
        )
        .with_user_data(None);
    encode(&message, ASSIGNMENT_VERSION)
        .map_err(|e| Error::protocol(format!("the assignment cannot be encoded: {e}")))
}

/// Decodes this member's assignment from the `SyncGroup` response.
///
/// Empty bytes are an empty assignment: the coordinator sends them to a member the leader's
/// plan left out (it joined after the leader read the member list, for one).
pub fn decode_assignment(bytes: &[u8]) -> Result<Vec<(String, Vec<i32>)>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let failed = |e: &dyn std::fmt::Display| Error::protocol(format!("assignment: {e}"));
    let (version, body) = split_version(bytes).ok_or_else(|| failed(&"no version"))?;
    let version = known_version(version, ConsumerProtocolAssignment::VERSIONS.max)
        .ok_or_else(|| failed(&format_args!("version {version}")))?;
    assignment_shape(body).map_err(|e| failed(&e))?;
    let decoded = ConsumerProtocolAssignment::decode(&mut Bytes::copy_from_slice(body), version)
        .map_err(|e| failed(&e))?;
    Ok(decoded
        .assigned_partitions
        .into_iter()
        .map(|tp| (tp.topic.0.to_string(), tp.partitions))
        .collect())
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn encode<M: Encodable>(message: &M, version: i16) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(2 + message.compute_size(version)?);
    buf.put_i16(version);
    message.encode(&mut buf, version)?;
    Ok(buf.freeze())
}

fn split_version(bytes: &[u8]) -> Option<(i16, &[u8])> {
    let (version, body) = bytes.split_first_chunk::<2>()?;
    Some((i16::from_be_bytes(*version), body))
}

/// The version to read a payload at: a newer one as the newest we know, a negative one not at
/// all.
fn known_version(version: i16, newest: i16) -> Option<i16> {
    (version >= 0).then_some(version.min(newest))
}

/// Walks a subscription at `version` (at most 3) without keeping anything.
fn subscription_shape(body: &[u8], version: i16) -> Result<(), String> {
    let mut shape = Shape { rest: body };
    for _ in 0..shape.count(STRING_MIN, "topics")? {
        shape.string(false, "topic")?;
    }
    shape.bytes("user data")?;
    if version >= 1 {
        shape.topic_partitions("owned partitions")?;
    }
    if version >= 2 {
        shape.int32("generation")?;
    }
    if version >= 3 {
        shape.string(true, "rack")?;
    }
    Ok(())
}

/// Walks an assignment (the same at every version) without keeping anything.
fn assignment_shape(body: &[u8]) -> Result<(), String> {
    let mut shape = Shape { rest: body };
    shape.topic_partitions("assigned partitions")?;
    shape.bytes("user data")
}

/// The smallest encoded string: its `i16` length.
const STRING_MIN: usize = 2;
/// The smallest encoded `[topic [partition]]` entry: an empty name and an empty array.
const TOPIC_PARTITIONS_MIN: usize = STRING_MIN + 4;

/// A cursor that checks lengths and counts, and skips what they cover.
///
/// Walking every element (not only checking each count against what is left) also proves the
/// nested counts, so that the decoder that follows never allocates more elements than there
/// are bytes.
struct Shape<'a> {
    rest: &'a [u8],
}

impl Shape<'_> {
    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let (head, tail) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or_else(|| format!("truncated at {what}"))?;
        self.rest = tail;
        Ok(*head)
    }

    fn skip(&mut self, len: usize, what: &str) -> Result<(), String> {
        self.rest = self
            .rest
            .get(len..)
            .ok_or_else(|| format!("{what} claims {len} bytes, {} are left", self.rest.len()))?;
        Ok(())
    }

    fn int32(&mut self, what: &str) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(what)?))
    }

    fn string(&mut self, nullable: bool, what: &str) -> Result<(), String> {
        let len = i16::from_be_bytes(self.take(what)?);
        if len == -1 && nullable {
            return Ok(());
        }
        let len = usize::try_from(len).map_err(|_| format!("{what} has length {len}"))?;
        self.skip(len, what)
    }

    /// A nullable byte string.
    fn bytes(&mut self, what: &str) -> Result<(), String> {
        let len = self.int32(what)?;
        if len == -1 {
            return Ok(());
        }
        let len = usize::try_from(len).map_err(|_| format!("{what} has length {len}"))?;
        self.skip(len, what)
    }

    /// An array count, checked against the bytes left for elements of at least `min_size`.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize, String> {
        let count = self.int32(what)?;
        let count = usize::try_from(count).map_err(|_| format!("{what} has count {count}"))?;
        if count.saturating_mul(min_size) > self.rest.len() {
            return Err(format!(
                "{what} claims {count} entries, {} bytes are left",
                self.rest.len()
            ));
        }
        Ok(count)
    }

    /// `[topic [partition]]`, as both messages carry partitions.
    fn topic_partitions(&mut self, what: &str) -> Result<(), String> {
        for _ in 0..self.count(TOPIC_PARTITIONS_MIN, what)? {
            self.string(false, what)?;
            let partitions = self.count(4, what)?;
            self.skip(partitions * 4, what)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use bytes::{BufMut, Bytes, BytesMut};

    use super::{
        MemberSubscription, decode_assignment, decode_subscription, encode_assignment,
        encode_subscription,
    };

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn put_str(buf: &mut BytesMut, s: &str) {
        buf.put_i16(i16::try_from(s.len()).expect("short test string"));
        buf.put_slice(s.as_bytes());
    }

    /// A subscription written by hand at `version`, fields in schema order.
    fn handmade_subscription(version: i16) -> BytesMut {
        let mut buf = BytesMut::new();
        buf.put_i16(version);
        buf.put_i32(2);
        put_str(&mut buf, "orders");
        put_str(&mut buf, "payments");
        buf.put_i32(3);
        buf.put_slice(b"abc");
        if version >= 1 {
            buf.put_i32(1);
            put_str(&mut buf, "orders");
            buf.put_i32(2);
            buf.put_i32(0);
            buf.put_i32(4);
        }
        if version >= 2 {
            buf.put_i32(17);
        }
        if version >= 3 {
            put_str(&mut buf, "rack-a");
        }
        buf
    }

    #[test]
    fn subscription_round_trip() {
        let topics = strings(&["a", "b"]);
        let owned = vec![("a".to_owned(), vec![0, 2]), ("b".to_owned(), vec![1])];
        let bytes = encode_subscription(&topics, &owned, 7, Some("eu-1")).expect("encode");
        assert_eq!(bytes[..2], [0, 3], "written at version 3");
        let decoded = decode_subscription("m-1", Some("i-1"), &bytes).expect("decode");
        assert_eq!(
            decoded,
            MemberSubscription {
                member_id: "m-1".to_owned(),
                instance_id: Some("i-1".to_owned()),
                topics,
                owned,
                generation: 7,
                rack: Some("eu-1".to_owned()),
                user_data: None,
            }
        );

        let bare = encode_subscription(&strings(&["a"]), &[], -1, None).expect("encode");
        let decoded = decode_subscription("m-2", None, &bare).expect("decode");
        assert_eq!(decoded.generation, -1);
        assert_eq!(decoded.rack, None);
        assert!(decoded.owned.is_empty());
    }

    #[test]
    fn subscription_every_known_version() {
        for version in 0..=3 {
            let bytes = handmade_subscription(version);
            let decoded = decode_subscription("m", None, &bytes).expect("decode");
            assert_eq!(
                decoded.topics,
                strings(&["orders", "payments"]),
                "v{version}"
            );
            assert_eq!(decoded.user_data, Some(Bytes::from_static(b"abc")));
            let owned = if version >= 1 {
                vec![("orders".to_owned(), vec![0, 4])]
            } else {
                vec![]
            };
            assert_eq!(decoded.owned, owned, "v{version}");
            assert_eq!(decoded.generation, if version >= 2 { 17 } else { -1 });
            let rack = (version >= 3).then(|| "rack-a".to_owned());
            assert_eq!(decoded.rack, rack, "v{version}");
        }
    }

    #[test]
    fn newer_subscription_read_as_v3() {
        // A future version appends fields; we read the ones we know and ignore the rest.
        let mut bytes = handmade_subscription(3);
        bytes[..2].copy_from_slice(&9i16.to_be_bytes());
        bytes.put_i64(-1);
        bytes.put_slice(b"fields from the future");
        let decoded = decode_subscription("m", None, &bytes).expect("decode");
        assert_eq!(decoded.generation, 17);
        assert_eq!(decoded.rack.as_deref(), Some("rack-a"));
        assert_eq!(decoded.owned, vec![("orders".to_owned(), vec![0, 4])]);
    }

    #[test]
    fn hostile_subscriptions_are_errors() {
        let started = Instant::now();
        // 2^31-1 topics claimed in 10 bytes.
        let mut huge = BytesMut::new();
        huge.put_i16(3);
        huge.put_i32(i32::MAX);
        huge.put_i32(0);
        assert_eq!(huge.len(), 10);
        let err = decode_subscription("m", None, &huge).expect_err("count beyond the bytes");
        assert!(err.to_string().contains("topics"), "{err}");

        // The same in a nested count: one owned topic claiming 2^31-1 partitions.
        let mut nested = BytesMut::new();
        nested.put_i16(1);
        nested.put_i32(0);
        nested.put_i32(-1);
        nested.put_i32(1);
        put_str(&mut nested, "t");
        nested.put_i32(i32::MAX);
        nested.put_i32(0);
        assert!(decode_subscription("m", None, &nested).is_err());

        let mut negative = BytesMut::new();
        negative.put_i16(0);
        negative.put_i32(-5);
        assert!(decode_subscription("m", None, &negative).is_err());

        let mut bad_utf8 = BytesMut::new();
        bad_utf8.put_i16(0);
        bad_utf8.put_i32(1);
        bad_utf8.put_i16(2);
        bad_utf8.put_slice(&[0xff, 0xfe]);
        bad_utf8.put_i32(-1);
        assert!(decode_subscription("m", None, &bad_utf8).is_err());

        assert!(decode_subscription("m", None, &[]).is_err());
        assert!(decode_subscription("m", None, &[0]).is_err());
        assert!(decode_subscription("m", None, &(-1i16).to_be_bytes()).is_err());

        // Every truncation of a valid subscription fails cleanly.
        let full = handmade_subscription(3);
        for len in 0..full.len() {
            assert!(
                decode_subscription("m", None, &full[..len]).is_err(),
                "truncated to {len}"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let valid = handmade_subscription(3);
        for _ in 0..20_000 {
            let mut bytes = valid.to_vec();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(..bytes.len());
                bytes[at] = rng.u8(..);
            }
            bytes.truncate(rng.usize(..=bytes.len()));
            let _ = decode_subscription("m", None, &bytes);
            let _ = decode_assignment(&bytes);
        }
    }

    #[test]
    fn assignment_round_trip() {
        let assignment = vec![("a".to_owned(), vec![0, 1]), ("b".to_owned(), vec![])];
        let bytes = encode_assignment(&assignment).expect("encode");
        assert_eq!(bytes[..2], [0, 3]);
        assert_eq!(decode_assignment(&bytes).expect("decode"), assignment);
        let empty = encode_assignment(&[]).expect("encode");
        assert_eq!(decode_assignment(&empty).expect("decode"), vec![]);
    }

    #[test]
    fn assignment_versions_and_edges() {
        // Brokers send nothing at all to a member the plan left out.
        assert_eq!(decode_assignment(&[]).expect("empty"), vec![]);
        for version in [0i16, 1, 2, 3, 4, i16::MAX] {
            let mut buf = BytesMut::new();
            buf.put_i16(version);
            buf.put_i32(1);
            put_str(&mut buf, "t");
            buf.put_i32(2);
            buf.put_i32(5);
            buf.put_i32(6);
            buf.put_i32(2);
            buf.put_slice(b"ud");
            buf.put_slice(b"trailing fields of a newer version");
            let decoded = decode_assignment(&buf).expect("decode");
            assert_eq!(decoded, vec![("t".to_owned(), vec![5, 6])], "v{version}");
        }
        let mut huge = BytesMut::new();
        huge.put_i16(0);
        huge.put_i32(i32::MAX);
        assert!(decode_assignment(&huge).is_err());
        assert!(decode_assignment(&[0]).is_err());
        assert!(decode_assignment(&(-3i16).to_be_bytes()).is_err());
    }

    #[test]
    fn oversized_names_are_refused() {
        let long = "x".repeat(40_000);
        assert!(encode_subscription(std::slice::from_ref(&long), &[], -1, None).is_err());
        assert!(encode_subscription(&[], &[], -1, Some(&long)).is_err());
        assert!(encode_assignment(&[(long, vec![0])]).is_err());
    }
}
