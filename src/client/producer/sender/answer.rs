//! A Produce answer read where it lies: the sender's view of a `ProduceResponse` body.
//!
//! `kafka-protocol`'s decoder builds a `Vec` for the topics and one for each topic's
//! partitions (two allocations per answer, about 250 bytes, on every publish's path). The
//! sender needs each partition's error, base offset and append time, and, only when a
//! partition failed because its leader moved, the leader the answer names (KIP-951) and the
//! nodes it describes. This view walks the body once to check it, then reads those fields in
//! place on demand; it allocates only for what an error path asks (the described nodes).
//!
//! The invariant: for every Produce version the sender speaks (3 to 13), what the view reads
//! is what `kafka-protocol` decodes from the same bytes (the tests hold this field by field
//! against its encoder and decoder); a body the walk cannot read is an error, never a panic.
//! The body was checked against Kafka's schema (`shape_check`) before it reaches here.

use bytes::Bytes;

use crate::client::cluster::{BrokerInfo, NIL_TOPIC_ID, TopicId};
use crate::client::error::{Error, Result};

/// One partition's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PartitionAnswer<'a> {
    /// The topic's name (empty in a v13 answer, which gives ids only).
    pub topic: &'a str,
    /// The topic's id (nil below v13).
    pub topic_id: TopicId,
    pub index: i32,
    pub error_code: i16,
    pub base_offset: i64,
    pub log_append_time: i64,
    /// The leader the answer names (id, epoch), from v10: `(-1, -1)` when it names none.
    pub leader: (i32, i32),
}

/// A checked Produce answer at `version`.
#[derive(Debug)]
pub(super) struct ProduceAnswer {
    body: Bytes,
    version: i16,
}

impl ProduceAnswer {
    /// Checks that `body` reads as a Produce answer at `version` to its end.
    pub(super) fn read(body: Bytes, version: i16) -> Result<Self> {
        let answer = ProduceAnswer { body, version };
        let mut walk = Walk::new(&answer.body, version);
        while walk.next_partition()?.is_some() {}
        walk.trailer()?;
        if walk.at < answer.body.len() {
            return Err(malformed("bytes after its end"));
        }
        Ok(answer)
    }

    /// Whether the answer gives topics by id (v13 on) rather than by name.
    pub(super) fn by_id(&self) -> bool {
        self.version >= 13
    }

    /// Every partition's answer, in the order of the body.
    pub(super) fn partitions(&self) -> impl Iterator<Item = PartitionAnswer<'_>> + '_ {
        let mut walk = Walk::new(&self.body, self.version);
        // `read` walked the same bytes to their end: the walk cannot fail here.
        std::iter::from_fn(move || walk.next_partition().ok().flatten())
    }

    /// The nodes the answer describes (v10 on, for the leaders it names).
    pub(super) fn node_endpoints(&self) -> Vec<BrokerInfo> {
        let mut walk = Walk::new(&self.body, self.version);
        while let Ok(Some(_)) = walk.next_partition() {}
        walk.trailer().unwrap_or_default()
    }
}

fn malformed(what: &str) -> Error {
    Error::protocol(format_args!("Produce response: {what}"))
}

/// A cursor over the body, topic by topic and partition by partition.
struct Walk<'a> {
    body: &'a [u8],
    at: usize,
    version: i16,
    flexible: bool,
    /// Topics not yet entered.
    topics_left: usize,
    /// The topic being read, and its partitions not yet read.
    topic: (&'a str, TopicId),
    partitions_left: usize,
    started: bool,
}

impl<'a> Walk<'a> {
    fn new(body: &'a [u8], version: i16) -> Self {
        Walk {
            body,
            at: 0,
            version,
            flexible: version >= 9,
            topics_left: 0,
            topic: ("", NIL_TOPIC_ID),
            partitions_left: 0,
            started: false,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.body.len())
            .ok_or_else(|| malformed("cut short"))?;
        let bytes = &self.body[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn uvarint(&mut self) -> Result<u32> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let [byte] = self.array()?;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("a varint longer than five bytes"))
    }

    /// An array's length (`None` for a null array).
    fn length(&mut self) -> Result<Option<usize>> {
        if self.flexible {
            let n = self.uvarint()?;
            Ok(n.checked_sub(1).map(|n| n as usize))
        } else {
            let n = self.i32()?;
            Ok(usize::try_from(n).ok())
        }
    }

    /// A (nullable) string: `None` for null.
    fn string(&mut self) -> Result<Option<&'a str>> {
        let len = if self.flexible {
            self.uvarint()?.checked_sub(1).map(|n| n as usize)
        } else {
            usize::try_from(self.i16()?).ok()
        };
        let Some(len) = len else {
            return Ok(None);
        };
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(Some)
            .map_err(|_| malformed("a string that is not UTF-8"))
    }

    /// Tagged fields, each handed to `tag` with its bytes (flexible versions only).
    fn tagged(&mut self, mut tag: impl FnMut(u32, &mut Walk<'a>) -> Result<()>) -> Result<()> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            let key = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let field = self.take(size)?;
            let mut inner = Walk::new(field, self.version);
            tag(key, &mut inner)?;
        }
        Ok(())
    }

    /// The next partition's answer, entering topics as they come; `None` after the last.
    fn next_partition(&mut self) -> Result<Option<PartitionAnswer<'a>>> {
        if !self.started {
            self.started = true;
            self.topics_left = self.length()?.unwrap_or(0);
        }
        while self.partitions_left == 0 {
            if self.topics_left == 0 {
                return Ok(None);
            }
            self.topics_left -= 1;
            self.enter_topic()?;
        }
        self.partitions_left -= 1;
        let answer = self.partition()?;
        if self.partitions_left == 0 {
            // The topic's own tagged fields follow its last partition.
            self.tagged(|_, _| Ok(()))?;
        }
        Ok(Some(answer))
    }

    fn enter_topic(&mut self) -> Result<()> {
        self.topic = if self.version >= 13 {
            ("", self.array()?)
        } else {
            (self.string()?.unwrap_or_default(), NIL_TOPIC_ID)
        };
        self.partitions_left = self.length()?.unwrap_or(0);
        if self.partitions_left == 0 {
            self.tagged(|_, _| Ok(()))?;
        }
        Ok(())
    }

    fn partition(&mut self) -> Result<PartitionAnswer<'a>> {
        let index = self.i32()?;
        let error_code = self.i16()?;
        let base_offset = self.i64()?;
        let log_append_time = if self.version >= 2 { self.i64()? } else { -1 };
        if self.version >= 5 {
            let _log_start_offset = self.i64()?;
        }
        if self.version >= 8 {
            for _ in 0..self.length()?.unwrap_or(0) {
                let _batch_index = self.i32()?;
                let _message = self.string()?;
                self.tagged(|_, _| Ok(()))?;
            }
            let _error_message = self.string()?;
        }
        let mut leader = (-1, -1);
        let version = self.version;
        self.tagged(|key, field| {
            if key == 0 && version >= 10 {
                leader = (field.i32()?, field.i32()?);
                field.tagged(|_, _| Ok(()))?;
            }
            Ok(())
        })?;
        Ok(PartitionAnswer {
            topic: self.topic.0,
            topic_id: self.topic.1,
            index,
            error_code,
            base_offset,
            log_append_time,
            leader,
        })
    }

    /// What follows the topics: the throttle time, and the described nodes (v10 on).
    fn trailer(&mut self) -> Result<Vec<BrokerInfo>> {
        let _throttle_ms = self.i32()?;
        let mut nodes = Vec::new();
        let version = self.version;
        self.tagged(|key, field| {
            if key == 0 && version >= 10 {
                for _ in 0..field.length()?.unwrap_or(0) {
                    let id = field.i32()?;
                    let host = field.string()?.unwrap_or_default();
                    let port = field.i32()?;
                    let rack = field.string()?;
                    field.tagged(|_, _| Ok(()))?;
                    nodes.push(BrokerInfo::described(id, host, port, rack));
                }
            }
            Ok(())
        })?;
        Ok(nodes)
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::produce_response::{
        BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
        TopicProduceResponse,
    };
    use kafka_protocol::messages::{BrokerId, ProduceResponse, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    use super::{PartitionAnswer, ProduceAnswer};
    use crate::client::cluster::NIL_TOPIC_ID;

    /// An answer of two topics of two partitions each, with every field a version may carry
    /// set to something other than its default.
    fn response() -> ProduceResponse {
        let partition = |index: i32, error: i16| {
            PartitionProduceResponse::default()
                .with_index(index)
                .with_error_code(error)
                .with_base_offset(1_000 + i64::from(index))
                .with_log_append_time_ms(1_700_000_000_000 + i64::from(index))
                .with_log_start_offset(7)
                .with_record_errors(vec![
                    BatchIndexAndErrorMessage::default()
                        .with_batch_index(3)
                        .with_batch_index_error_message(Some(StrBytes::from_static_str("bad"))),
                ])
                .with_error_message(Some(StrBytes::from_static_str("moved")))
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(2 + index))
                        .with_leader_epoch(9),
                )
        };
        let topic = |name: &'static str, id: u8| {
            TopicProduceResponse::default()
                .with_name(TopicName(StrBytes::from_static_str(name)))
                .with_topic_id(uuid::Uuid::from_bytes([id; 16]))
                .with_partition_responses(vec![partition(0, 0), partition(1, 6)])
        };
        ProduceResponse::default()
            .with_responses(vec![topic("orders", 1), topic("payments", 2)])
            .with_throttle_time_ms(12)
            .with_node_endpoints(vec![
                NodeEndpoint::default()
                    .with_node_id(BrokerId(2))
                    .with_host(StrBytes::from_static_str("b2.internal"))
                    .with_port(9093)
                    .with_rack(Some(StrBytes::from_static_str("az-2"))),
                NodeEndpoint::default()
                    .with_node_id(BrokerId(3))
                    .with_host(StrBytes::from_static_str("b3.internal"))
                    .with_port(9094),
            ])
    }

    fn encoded(response: &ProduceResponse, version: i16) -> Bytes {
        let mut buf = BytesMut::new();
        response.encode(&mut buf, version).expect("encodes");
        buf.freeze()
    }

    /// One partition's answer as the tests compare it: topic name and id, index, error, base
    /// offset, append time, leader.
    type Row = (String, [u8; 16], i32, i16, i64, i64, (i32, i32));

    /// What `kafka-protocol` decodes of each partition, as the view reports it.
    fn expected(body: &Bytes, version: i16) -> Vec<Row> {
        let decoded = ProduceResponse::decode(&mut body.clone(), version).expect("decodes");
        decoded
            .responses
            .iter()
            .flat_map(|t| {
                t.partition_responses.iter().map(move |p| {
                    (
                        t.name.0.to_string(),
                        *t.topic_id.as_bytes(),
                        p.index,
                        p.error_code,
                        p.base_offset,
                        p.log_append_time_ms,
                        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
                    )
                })
            })
            .collect()
    }

    fn seen(answer: &ProduceAnswer) -> Vec<Row> {
        answer
            .partitions()
            .map(|p: PartitionAnswer<'_>| {
                (
                    p.topic.to_owned(),
                    p.topic_id,
                    p.index,
                    p.error_code,
                    p.base_offset,
                    p.log_append_time,
                    p.leader,
                )
            })
            .collect()
    }

    #[test]
    fn every_version_reads_what_kafka_protocol_decodes() {
        for version in 3..=13 {
            let body = encoded(&response(), version);
            let answer = ProduceAnswer::read(body.clone(), version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
            let expected = expected(&body, version);
            assert_eq!(expected.len(), 4, "v{version}");
            assert_eq!(seen(&answer), expected, "v{version}");
            let decoded = ProduceResponse::decode(&mut body.clone(), version).expect("decodes");
            let nodes: Vec<(i32, String, i32, Option<String>)> = answer
                .node_endpoints()
                .into_iter()
                .map(|n| (n.id, n.host, n.port, n.rack))
                .collect();
            let want: Vec<(i32, String, i32, Option<String>)> = decoded
                .node_endpoints
                .iter()
                .map(|n| {
                    (
                        n.node_id.0,
                        n.host.to_string(),
                        n.port,
                        n.rack.as_ref().map(ToString::to_string),
                    )
                })
                .collect();
            assert_eq!(nodes, want, "v{version}");
        }
    }

    #[test]
    fn names_below_13_and_ids_from_it() {
        let body = encoded(&response(), 12);
        let answer = ProduceAnswer::read(body, 12).expect("reads");
        let first = answer.partitions().next().expect("a partition");
        assert_eq!((first.topic, first.topic_id), ("orders", NIL_TOPIC_ID));
        let body = encoded(&response(), 13);
        let answer = ProduceAnswer::read(body, 13).expect("reads");
        let first = answer.partitions().next().expect("a partition");
        assert_eq!((first.topic, first.topic_id), ("", [1; 16]));
    }

    #[test]
    fn an_empty_answer_has_no_partitions() {
        for version in [3, 9, 13] {
            let body = encoded(&ProduceResponse::default(), version);
            let answer = ProduceAnswer::read(body, version).expect("reads");
            assert_eq!(answer.partitions().count(), 0);
            assert!(answer.node_endpoints().is_empty());
        }
    }

    #[test]
    fn a_cut_or_extended_body_is_an_error_not_a_panic() {
        for version in [3, 8, 9, 10, 13] {
            let body = encoded(&response(), version);
            for end in 0..body.len() {
                assert!(
                    ProduceAnswer::read(body.slice(..end), version).is_err(),
                    "v{version} cut at {end} of {}",
                    body.len()
                );
            }
            let mut longer = BytesMut::from(&body[..]);
            longer.extend_from_slice(&[0]);
            assert!(ProduceAnswer::read(longer.freeze(), version).is_err());
        }
    }
}
