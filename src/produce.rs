//! One publish on a producer: the outgoing message made a record ([`KafkaOptions`] per
//! record), sent, and its delivery report awaited. The plain, transactional and exactly-once
//! publishers all publish through here.
//!
//! A record's destination is the message's name. The `kafka-partition-key` header becomes the
//! native key and is not sent as a header; the `kafka-eos-source` header never reaches the
//! wire; every other header is sent as a wire header, and a message without headers sends no
//! header list at all. Size is checked as librdkafka checks it against `message.max.bytes`.

use std::time::Duration;

use bytes::Bytes;
use ruststream::HeaderMap;

use crate::client::records::Header;
use crate::client::{DeliveryFuture, Error as ClientError, Producer, RecordMetadata, RecordRef};
use crate::connection::BrokerState;
use crate::eos::EOS_SOURCE_HEADER;
use crate::error::KafkaError;
use crate::message::PARTITION_KEY_HEADER;
use crate::subscription::check_topic_name;

/// Per-record settings. Unset fields keep the policy's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct KafkaOptions {
    partition: Option<i32>,
}

impl KafkaOptions {
    /// Places the record on `partition`, ahead of its key and the partitioner.
    pub const fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// The pinned partition, if any.
    #[must_use]
    pub const fn partition_setting(self) -> Option<i32> {
        self.partition
    }
}

/// Marks a publish under way for as long as the value lives, where the transport counts
/// publishes (in process); nothing on a live connection.
pub(crate) fn under_way(state: &BrokerState) -> Option<crate::handover::Mark> {
    crate::handover::publishing(state.handover())
}

/// Waits until the subscriptions of this connection hold the delivered record ready, where
/// the transport promises it (in process); nothing on a live connection.
pub(crate) async fn hand_over(state: &BrokerState, report: &RecordMetadata) {
    crate::handover::handed_over(state.handover(), Some((&report.topic, report.partition))).await;
}

/// Sends `record` and waits for its delivery report.
pub(crate) async fn send(
    producer: &Producer,
    record: &Outgoing<'_>,
    queue_timeout: Option<Duration>,
) -> Result<RecordMetadata, KafkaError> {
    let queued = match queue_timeout {
        Some(bound) => producer.send_ref_timeout(record.borrowed(), bound).await,
        None => producer.send_ref(record.borrowed()).await,
    };
    report(queued).await
}

/// Waits for the delivery report of a record that was queued, or reports why it was not.
pub(crate) async fn delivered(
    queued: Result<DeliveryFuture, ClientError>,
) -> Result<(), KafkaError> {
    report(queued).await.map(drop)
}

/// The delivery report of a record that was queued, or why it was not queued or delivered.
pub(crate) async fn report(
    queued: Result<DeliveryFuture, ClientError>,
) -> Result<RecordMetadata, KafkaError> {
    queued
        .map_err(KafkaError::publish)?
        .await
        .map_err(KafkaError::publish)
}

/// A message made a record: the key and the wire headers taken out of its headers, the topic
/// and the payload still borrowed, so that they are copied once, into the batch.
#[derive(Debug)]
pub(crate) struct Outgoing<'a> {
    topic: &'a str,
    partition: Option<i32>,
    key: Option<Bytes>,
    payload: &'a [u8],
    headers: Vec<Header>,
}

impl Outgoing<'_> {
    /// The record as the producer takes it.
    pub(crate) fn borrowed(&self) -> RecordRef<'_> {
        RecordRef {
            topic: self.topic,
            partition: self.partition,
            key: self.key.as_deref(),
            value: Some(self.payload),
            headers: &self.headers,
            timestamp: None,
        }
    }
}

/// The native record for a message: the key header becomes the key, the source header is
/// dropped, the rest are wire headers.
pub(crate) fn producer_record<'a>(
    topic: &'a str,
    payload: &'a [u8],
    mut headers: HeaderMap,
    options: Option<&KafkaOptions>,
) -> Result<Outgoing<'a>, KafkaError> {
    check_topic_name(topic).map_err(|e| KafkaError::Publish(KafkaError::text(e)))?;
    // Most messages carry no headers: nothing to look up then.
    let key = if headers.is_empty() {
        None
    } else {
        headers.remove(EOS_SOURCE_HEADER);
        headers.remove(PARTITION_KEY_HEADER)
    };
    let wire: Vec<Header> = if headers.is_empty() {
        Vec::new()
    } else {
        headers
            .iter()
            .map(|(name, _)| {
                Header::new(
                    Bytes::copy_from_slice(name.as_bytes()),
                    Some(headers.get_shared(name).unwrap_or_default()),
                )
            })
            .collect()
    };
    Ok(Outgoing {
        topic,
        partition: options.and_then(|o| o.partition_setting()),
        key,
        payload,
        headers: wire,
    })
}
