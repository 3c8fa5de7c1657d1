//! Exactly-once plumbing: [`SourceOffset`], the [`EOS_SOURCE_HEADER`] that carries a consumed
//! record's coordinates from a delivery to its replies, and [`EosReplies`].
//!
//! The header's value is `"{partition}:{offset}:{topic}"`: the topic goes last because it may
//! itself contain `:`. The header never reaches the wire.

use ruststream::Str;
use ruststream::runtime::{ForReply, Outgoing, PublishContext, PublishTransform, Reads};

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
pub(crate) fn encode_source(topic: &str, partition: i32, offset: i64) -> String {
    format!("{partition}:{offset}:{topic}")
}

/// Reads a header value written by [`encode_source`]; `None` when malformed.
#[allow(
    dead_code,
    reason = "read by the exactly-once pipeline (transactions work)"
)]
pub(crate) fn decode_source(value: &[u8]) -> Option<(i32, i64, &str)> {
    let text = std::str::from_utf8(value).ok()?;
    let (partition, rest) = text.split_once(':')?;
    let (offset, topic) = rest.split_once(':')?;
    if topic.is_empty() {
        return None;
    }
    Some((partition.parse().ok()?, offset.parse().ok()?, topic))
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
        if let Some(source) = cx.headers().get_shared(EOS_SOURCE_HEADER) {
            out.headers_mut().insert(EOS_SOURCE_HEADER, source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_source, encode_source};

    #[test]
    fn the_source_header_round_trips_topics_with_colons() {
        let value = encode_source("a:b:c", 3, 42);
        assert_eq!(decode_source(value.as_bytes()), Some((3, 42, "a:b:c")));
        for bad in ["", "3", "3:x:orders", "x:42:orders", "3:42:"] {
            assert_eq!(decode_source(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
