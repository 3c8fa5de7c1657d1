//! Exactly-once pipelines: [`KafkaEosPublish`] and its [`EosPipeline`], fed by
//! `Commit::Transactional` subscriptions; [`SourceOffset`], the [`EOS_SOURCE_HEADER`] that
//! carries a consumed record's coordinates from a delivery to its replies, and [`EosReplies`].
//!
//! The header's value is `"{partition}:{offset}:{topic}"`: the topic goes last because it may
//! itself contain `:`. The header never reaches the wire.

mod pipeline;
pub(crate) mod sources;

use bytes::Bytes;
use ruststream::Str;
use ruststream::runtime::{ForReply, Outgoing, PublishContext, PublishTransform, Reads};

pub use pipeline::{EosPipeline, KafkaEosPublish};
pub(crate) use sources::{EosGroup, EosRegistry};

/// The header that carries a consumed record's coordinates onto its replies.
pub const EOS_SOURCE_HEADER: &str = "kafka-eos-source";

/// The consumed coordinates a published record answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOffset {
    topic: Str,
    partition: i32,
    offset: i64,
}

impl SourceOffset {
    /// The record at `offset` of `partition` of `topic`.
    #[must_use]
    pub fn new(topic: impl Into<Str>, partition: i32, offset: i64) -> Self {
        Self {
            topic: topic.into(),
            partition,
            offset,
        }
    }

    /// The topic.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition.
    #[must_use]
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The offset.
    #[must_use]
    pub fn offset(&self) -> i64 {
        self.offset
    }
}

/// The header value for a source.
pub(crate) fn source_header_value(topic: &str, partition: i32, offset: i64) -> String {
    format!("{partition}:{offset}:{topic}")
}

/// Reads a header value written by [`source_header_value`]; `None` when malformed.
pub(crate) fn parse_source_header(value: &[u8]) -> Option<(i32, i64, &str)> {
    let text = std::str::from_utf8(value).ok()?;
    let (partition, rest) = text.split_once(':')?;
    let (offset, topic) = rest.split_once(':')?;
    if topic.is_empty() {
        return None;
    }
    Some((partition.parse().ok()?, offset.parse().ok()?, topic))
}

/// The source a header value names, sharing the value's bytes for the topic.
pub(crate) fn decode_shared_source(value: Bytes) -> Option<SourceOffset> {
    let text = Str::from_inner(value).ok()?;
    let (partition, offset, topic) = parse_source_header(text.as_bytes())?;
    Some(SourceOffset {
        topic: text.slice_ref(topic),
        partition,
        offset,
    })
}

/// A publish transform copying the delivery's [`EOS_SOURCE_HEADER`] onto its reply, so that
/// an exactly-once pipeline publishing the reply knows which record it answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct EosReplies;

impl<C, Options> PublishTransform<ForReply<C>, Options> for EosReplies {
    type Destination = Reads;

    fn apply(
        &self,
        out: &mut Outgoing<'_>,
        _options: &mut Option<Options>,
        cx: &PublishContext<'_, C>,
    ) {
        // A reply to a delivery that came through no pipeline carries no source: left as is.
        let Some(source) = cx.headers().get_shared(EOS_SOURCE_HEADER) else {
            return;
        };
        out.headers_mut().insert(EOS_SOURCE_HEADER, source);
    }
}

#[cfg(test)]
mod tests {
    use super::{SourceOffset, decode_shared_source, parse_source_header, source_header_value};

    #[test]
    fn the_source_header_round_trips_topics_with_colons() {
        let value = source_header_value("a:b:c", 3, 42);
        assert_eq!(
            parse_source_header(value.as_bytes()),
            Some((3, 42, "a:b:c"))
        );
        for bad in ["", "3", "3:x:orders", "x:42:orders", "3:42:"] {
            assert_eq!(parse_source_header(bad.as_bytes()), None, "{bad:?}");
            assert_eq!(decode_shared_source(bad.as_bytes().to_vec().into()), None);
        }
        assert_eq!(
            decode_shared_source(value.into_bytes().into()),
            Some(SourceOffset::new("a:b:c", 3, 42))
        );
    }
}
