//! A Produce request's body as pieces: the fields encoded into one small buffer, and each
//! batch's encoded bytes referenced where they go, not copied. A request of 500 KB of batches
//! reaches the socket without a second copy of them in a frame of its own.
//!
//! A request of one batch (what a service that publishes one record at a time sends) has its
//! own form, [`one_batch_body`]: the fields before the batch are written into a buffer the
//! sender keeps from request to request, and what follows the batch is a constant, so that the
//! connection puts the frame's head and those fields in one buffer and the request allocates
//! nothing else.
//!
//! The invariant: the pieces, put end to end, are byte for byte what `kafka-protocol` encodes
//! for the same `ProduceRequest` at the same version (versions 3 to 12 name topics, 13 gives
//! their ids); the tests hold this for every version, with and without a transactional id, for
//! several topics and partitions in the order the batches come, and for one batch in both
//! forms.

use bytes::{BufMut, Bytes, BytesMut};

use super::super::accumulator::ClosedBatch;
use crate::client::cluster::NIL_TOPIC_ID;
use crate::client::error::{Error, Result};

/// The body of a Produce request at `version` (3 to 13) carrying `batches` (each encoded),
/// grouped by topic in the order the topics first appear: by name up to version 12, by topic
/// id from 13 (every batch must then have one), so that two batches of one name but of two
/// ids (the topic was created again) are two topics of the request.
pub(super) fn produce_body(
    version: i16,
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    batches: &[ClosedBatch],
) -> Result<Vec<Bytes>> {
    if !(3..=13).contains(&version) {
        return Err(Error::protocol("Produce body: version outside 3 to 13"));
    }
    let flexible = version >= 9;
    let by_id = version >= 13;
    if by_id && batches.iter().any(|b| b.topic_id == NIL_TOPIC_ID) {
        return Err(Error::protocol("Produce v13 for a topic without an id"));
    }
    let same = |a: &ClosedBatch, b: &ClosedBatch| {
        if by_id {
            a.topic_id == b.topic_id
        } else {
            a.topic == b.topic
        }
    };
    // The topics in order of first appearance (by a batch of each), each with its count of
    // batches (a request carries few topics: each is looked up in this list, and its batches
    // found again below).
    let mut topics: Vec<(&ClosedBatch, usize)> = Vec::with_capacity(1);
    for b in batches {
        match topics.iter_mut().find(|(t, _)| same(t, b)) {
            Some((_, count)) => *count += 1,
            None => topics.push((b, 1)),
        }
    }
    let names: usize = topics.iter().map(|(t, _)| t.topic.len() + 17).sum();
    let mut small = BytesMut::with_capacity(64 + names + batches.len() * 16);
    // Room for the frame's head too, which the connection puts in front.
    let mut pieces = Vec::with_capacity(2 * batches.len() + 2);
    put_string(&mut small, transactional_id, flexible)?;
    small.put_i16(acks);
    small.put_i32(timeout_ms);
    put_count(&mut small, topics.len(), flexible)?;
    for &(topic, count) in &topics {
        if by_id {
            small.put_slice(&topic.topic_id);
        } else {
            put_string(&mut small, Some(&topic.topic), flexible)?;
        }
        put_count(&mut small, count, flexible)?;
        for batch in batches.iter().filter(|b| same(topic, b)) {
            let records = batch
                .encoded
                .as_ref()
                .ok_or_else(|| Error::protocol("a batch sent before it was encoded"))?;
            small.put_i32(batch.partition);
            put_length(&mut small, records.len(), flexible)?;
            pieces.push(small.split().freeze());
            pieces.push(records.clone());
            if flexible {
                small.put_u8(0); // the partition's tagged fields
            }
        }
        if flexible {
            small.put_u8(0); // the topic's tagged fields
        }
    }
    if flexible {
        small.put_u8(0); // the request's tagged fields
    }
    if !small.is_empty() {
        pieces.push(small.freeze());
    }
    Ok(pieces)
}

/// The tagged fields that close a one-batch request of a flexible version: the partition's,
/// the topic's and the request's, each empty.
const FLEXIBLE_END: &[u8] = &[0, 0, 0];

/// The body of a Produce request at `version` (3 to 13) of `batch` alone, as three parts: the
/// fields before the batch's bytes, written into `before` (cleared first), the batch's bytes,
/// and the fixed bytes after them.
pub(super) fn one_batch_body(
    version: i16,
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    batch: &ClosedBatch,
    before: &mut Vec<u8>,
) -> Result<(Bytes, &'static [u8])> {
    if !(3..=13).contains(&version) {
        return Err(Error::protocol("Produce body: version outside 3 to 13"));
    }
    let flexible = version >= 9;
    if version >= 13 && batch.topic_id == NIL_TOPIC_ID {
        return Err(Error::protocol("Produce v13 for a topic without an id"));
    }
    let records = batch
        .encoded
        .as_ref()
        .ok_or_else(|| Error::protocol("a batch sent before it was encoded"))?;
    before.clear();
    put_string(before, transactional_id, flexible)?;
    before.put_i16(acks);
    before.put_i32(timeout_ms);
    put_count(before, 1, flexible)?;
    if version >= 13 {
        before.put_slice(&batch.topic_id);
    } else {
        put_string(before, Some(&batch.topic), flexible)?;
    }
    put_count(before, 1, flexible)?;
    before.put_i32(batch.partition);
    put_length(before, records.len(), flexible)?;
    Ok((records.clone(), if flexible { FLEXIBLE_END } else { &[] }))
}

/// A (nullable) string: a 16-bit length, or in a flexible version a varint of length + 1.
fn put_string(buf: &mut impl BufMut, s: Option<&str>, flexible: bool) -> Result<()> {
    match (s, flexible) {
        (None, false) => buf.put_i16(-1),
        (None, true) => put_varint(buf, 0),
        (Some(s), false) => {
            let len = i16::try_from(s.len()).map_err(|_| Error::protocol("string too long"))?;
            buf.put_i16(len);
            buf.put_slice(s.as_bytes());
        }
        (Some(s), true) => {
            put_varint(buf, len_plus_one(s.len())?);
            buf.put_slice(s.as_bytes());
        }
    }
    Ok(())
}

/// An array's count: 32 bits, or in a flexible version a varint of count + 1.
fn put_count(buf: &mut impl BufMut, count: usize, flexible: bool) -> Result<()> {
    if flexible {
        put_varint(buf, len_plus_one(count)?);
    } else {
        buf.put_i32(i32::try_from(count).map_err(|_| Error::protocol("array too long"))?);
    }
    Ok(())
}

/// The length of a bytes field that follows: 32 bits, or a varint of length + 1.
fn put_length(buf: &mut impl BufMut, len: usize, flexible: bool) -> Result<()> {
    put_count(buf, len, flexible)
}

fn len_plus_one(len: usize) -> Result<u32> {
    u32::try_from(len)
        .ok()
        .and_then(|n| n.checked_add(1))
        .ok_or_else(|| Error::protocol("length too large"))
}

/// An unsigned varint.
fn put_varint(buf: &mut impl BufMut, mut n: u32) {
    while n >= 0x80 {
        buf.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    buf.put_u8(n as u8);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use tokio::time::Instant;
    use uuid::Uuid;

    use super::{one_batch_body, produce_body};
    use crate::client::producer::accumulator::ClosedBatch;
    use crate::client::records::BatchBuilder;

    fn batch(topic: &str, partition: i32, size: usize) -> ClosedBatch {
        // An id of its own per name (its first letter), as the broker gives them.
        let mut topic_id = [0u8; 16];
        topic_id[15] = topic.as_bytes()[0];
        topic_id[0] = 0x40;
        ClosedBatch {
            topic: Arc::from(topic),
            topic_id,
            partition,
            builder: BatchBuilder::new(0),
            promise: crate::client::producer::completion::Promise::new(),
            bytes: 0,
            created: Instant::now(),
            // Contents do not matter here, only where they go; sizes cross the varint steps.
            encoded: Some(Bytes::from(vec![partition as u8; size])),
            sequence: None,
            epoch: -1,
            attempts: 0,
            order: 0,
            maybe_written: false,
        }
    }

    /// What kafka-protocol encodes for the same request.
    fn reference(
        version: i16,
        id: Option<&str>,
        acks: i16,
        timeout: i32,
        batches: &[ClosedBatch],
    ) -> Bytes {
        let mut topics: Vec<TopicProduceData> = Vec::new();
        for b in batches {
            let data = PartitionProduceData::default()
                .with_index(b.partition)
                .with_records(b.encoded.clone());
            let id = Uuid::from_bytes(b.topic_id);
            match topics.iter_mut().find(|t| {
                if version >= 13 {
                    t.topic_id == id
                } else {
                    t.name.0.as_str() == b.topic.as_ref()
                }
            }) {
                Some(t) => t.partition_data.push(data),
                None => topics.push(
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(b.topic.to_string())))
                        .with_topic_id(id)
                        .with_partition_data(vec![data]),
                ),
            }
        }
        let request = ProduceRequest::default()
            .with_transactional_id(id.map(|i| TransactionalId(StrBytes::from_string(i.into()))))
            .with_acks(acks)
            .with_timeout_ms(timeout)
            .with_topic_data(topics);
        let mut out = BytesMut::new();
        request.encode(&mut out, version).expect("encodes");
        out.freeze()
    }

    #[test]
    fn the_pieces_are_what_kafka_protocol_encodes() {
        let sets: Vec<Vec<ClosedBatch>> = vec![
            vec![batch("orders", 0, 10)],
            vec![batch("t", 3, 127), batch("t", 1, 128)],
            vec![
                batch("a", 0, 200),
                batch("bb", 5, 16_384),
                batch("a", 2, 0),
                batch("ccc", 1, 70_000),
                batch("bb", 0, 1),
            ],
        ];
        // Two batches of one name and two ids: a topic created again while they waited.
        let mut again = batch("a", 1, 5);
        again.topic_id[1] = 9;
        let mut sets = sets;
        sets.push(vec![batch("a", 0, 3), again, batch("a", 2, 4)]);
        for version in 3..=13 {
            for id in [None, Some("txn-1")] {
                for batches in &sets {
                    if version < 13 && batches.iter().any(|b| b.topic_id[1] == 9) {
                        // Names cannot tell the two topics apart.
                        continue;
                    }
                    let pieces = produce_body(version, id, -1, 30_000, batches).expect("body");
                    let joined: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
                    let expected = reference(version, id, -1, 30_000, batches);
                    assert_eq!(joined, expected.to_vec(), "version {version}, id {id:?}");
                    // The batches are referenced, not copied.
                    for b in batches {
                        let encoded = b.encoded.as_ref().expect("encoded");
                        assert!(
                            pieces.iter().any(|p| p.as_ptr() == encoded.as_ptr()
                                && p.len() == encoded.len()),
                            "version {version}: a batch was copied"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn one_batch_reads_as_kafka_protocol_encodes_it() {
        let mut before = Vec::new();
        for version in 3..=13 {
            for id in [None, Some("txn-1")] {
                for size in [0, 10, 127, 128, 70_000] {
                    let b = batch("orders", 4, size);
                    let (records, after) =
                        one_batch_body(version, id, -1, 30_000, &b, &mut before).expect("body");
                    let mut joined = before.clone();
                    joined.extend_from_slice(&records);
                    joined.extend_from_slice(after);
                    let expected = reference(version, id, -1, 30_000, std::slice::from_ref(&b));
                    assert_eq!(joined, expected.to_vec(), "version {version}, id {id:?}");
                    let encoded = b.encoded.as_ref().expect("encoded");
                    assert_eq!(
                        records.as_ptr(),
                        encoded.as_ptr(),
                        "the batch is not copied"
                    );
                }
            }
        }
        let mut without_id = batch("t", 0, 1);
        without_id.topic_id = [0; 16];
        assert!(one_batch_body(13, None, 1, 1, &without_id, &mut before).is_err());
        assert!(one_batch_body(2, None, 1, 1, &batch("t", 0, 1), &mut before).is_err());
    }

    #[test]
    fn refuses_what_it_cannot_encode() {
        assert!(produce_body(14, None, 1, 1, &[batch("t", 0, 1)]).is_err());
        let mut without_id = batch("t", 0, 1);
        without_id.topic_id = [0; 16];
        assert!(produce_body(13, None, 1, 1, std::slice::from_ref(&without_id)).is_err());
        assert!(produce_body(12, None, 1, 1, &[without_id]).is_ok());
        let mut unencoded = batch("t", 0, 1);
        unencoded.encoded = None;
        assert!(produce_body(9, None, 1, 1, &[unencoded]).is_err());
    }
}
