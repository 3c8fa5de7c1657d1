//! One publish on a producer: the outgoing message made a record ([`KafkaOptions`] per
//! record), sent, and its delivery report awaited. The plain, transactional and exactly-once
//! publishers all publish through here.
//!
//! A record's destination is the message's name. The `kafka-partition-key` header becomes the
//! native key and is not sent as a header; the `kafka-eos-source` header never reaches the
//! wire; every other header is sent as a wire header, and a message without headers sends no
//! header list at all. Size is checked as librdkafka checks it against `message.max.bytes`.

use std::future::Future;
use std::pin::Pin;
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
/// the transport promises it (in process); `None`, nothing to wait for, on a live connection.
///
/// The wait is boxed: only the in-process transport has one, and a publish's future (which a
/// caller with many publishes in flight keeps one of per record) stays small without it.
pub(crate) fn hand_over<'a>(
    state: &'a BrokerState,
    report: &'a RecordMetadata,
) -> Option<Pin<Box<impl Future<Output = ()> + Send + 'a>>> {
    let handover = state.handover()?;
    Some(Box::pin(crate::handover::handed_over(
        Some(handover),
        Some((&report.topic, report.partition)),
    )))
}

/// Sends `record` and waits for its delivery report.
pub(crate) async fn send(
    producer: &Producer,
    record: Outgoing<'_>,
    queue_timeout: Option<Duration>,
) -> Result<RecordMetadata, KafkaError> {
    let queued = match queue(producer, record, queue_timeout) {
        Queued::Now(queued) => queued,
        Queued::Waiting(wait) => wait.await,
    };
    let delivery = queued.map_err(KafkaError::publish)?;
    delivery.await.map_err(KafkaError::publish)
}

/// Queues `record`: the delivery future, or why it was not queued, at once, or the wait for
/// them.
///
/// Called in the poll of the publish that owns the record, it queues the record there and
/// then where its topic's partitions are known and the queue has room, the common case, and
/// the record is not kept. Otherwise the record moves into a boxed future that learns the
/// topic or waits for room (bounded by `queue_timeout`): rare, and kept out of every publish's
/// future, which a caller with many publishes in flight keeps one of per record.
pub(crate) fn queue<'a>(
    producer: &'a Producer,
    record: Outgoing<'a>,
    queue_timeout: Option<Duration>,
) -> Queued<'a> {
    match producer.try_send_ref(record.borrowed()) {
        Ok(Some(delivery)) => Queued::Now(Ok(delivery)),
        Err(e) => Queued::Now(Err(e)),
        Ok(None) => Queued::Waiting(Box::pin(async move {
            match queue_timeout {
                Some(bound) => producer.send_ref_timeout(record.borrowed(), bound).await,
                None => producer.send_ref(record.borrowed()).await,
            }
        })),
    }
}

/// What [`queue`] gives: the outcome at once, or the boxed wait for it.
pub(crate) enum Queued<'a> {
    /// Queued, or refused, in the call.
    Now(Result<DeliveryFuture, ClientError>),
    /// Learning the topic's partitions, or waiting for room in the queue.
    Waiting(Pin<Box<dyn Future<Output = Result<DeliveryFuture, ClientError>> + Send + 'a>>),
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
    headers: HeaderMap,
    options: Option<&KafkaOptions>,
) -> Result<Outgoing<'a>, KafkaError> {
    check_destination(topic)?;
    Ok(record_for(topic, payload, headers, options))
}

/// Refuses a destination that is no valid topic name, as a publish error.
pub(crate) fn check_destination(topic: &str) -> Result<(), KafkaError> {
    check_topic_name(topic).map_err(|e| KafkaError::Publish(KafkaError::text(e)))
}

/// [`producer_record`] for a destination already checked.
pub(crate) fn record_for<'a>(
    topic: &'a str,
    payload: &'a [u8],
    mut headers: HeaderMap,
    options: Option<&KafkaOptions>,
) -> Outgoing<'a> {
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
    Outgoing {
        topic,
        partition: options.and_then(|o| o.partition_setting()),
        key,
        payload,
        headers: wire,
    }
}
