//! Publishing: [`KafkaPublish`] (the policy), [`KafkaPublisher`] (the live handle on the shared
//! producer), [`KafkaOptions`] and the [`KafkaPublishSteps::partition`] step.
//!
//! A record's destination is the message's name. The `kafka-partition-key` header becomes the
//! native key and is not sent as a header; the `kafka-eos-source` header never reaches the
//! wire; every other header is sent as a wire header, and a message without headers sends no
//! header list at all. Size is checked as librdkafka checks it against `message.max.bytes`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ruststream::runtime::{PublishBuilder, PublishSink};
use ruststream::{
    DefaultPublish, HeaderMap, Lend, OutgoingMessage, PairError, PublishPolicy, Publisher,
};

use crate::broker::{BrokerState, ConnectedKafkaBroker};
use crate::client::records::Header;
use crate::client::{
    DeliveryFuture, Error as ClientError, Producer, ProducerRecord, RecordMetadata,
};
use crate::eos::EOS_SOURCE_HEADER;
use crate::error::KafkaError;
use crate::message::PARTITION_KEY_HEADER;
use crate::subscription::check_topic_name;
use crate::transactional::KafkaTransactionalPublish;

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

/// Kafka's steps on the framework's publish builder: `out.message(&v).partition(2).publish()`.
pub trait KafkaPublishSteps {
    /// Places the record on `partition`, ahead of its key and the partitioner.
    #[must_use]
    fn partition(self, partition: i32) -> Self;
}

impl<Sink, Body, Enc, Hdrs, Dest> KafkaPublishSteps for PublishBuilder<Sink, Body, Enc, Hdrs, Dest>
where
    Sink: PublishSink<Options = KafkaOptions>,
{
    fn partition(mut self, partition: i32) -> Self {
        let options = self.options_mut().get_or_insert_with(KafkaOptions::default);
        *options = options.partition(partition);
        self
    }
}

/// The plain publish policy: records go through the broker's shared producer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct KafkaPublish {
    queue_timeout: Option<Duration>,
}

impl KafkaPublish {
    /// How long a publish may wait for room in the producer's local queue
    /// (`queue.buffering.max.messages`, `queue.buffering.max.kbytes`); unset waits as long as
    /// it takes.
    pub const fn queue_timeout(mut self, timeout: Duration) -> Self {
        self.queue_timeout = Some(timeout);
        self
    }

    /// Turns this into a transactional policy with transactional id `id`, keeping the queue
    /// timeout: the producer it pairs is fenced by `id` and publishes inside transactions.
    pub fn transactional_id(self, id: impl Into<String>) -> KafkaTransactionalPublish {
        KafkaTransactionalPublish::new(id.into(), self.queue_timeout)
    }

    /// A policy that frames Protobuf payloads in the Confluent format before this one sends
    /// them: the id of the topic's subject and the message-index path go in front of the
    /// message. A topic without a subject, or with a subject of another format, fails the
    /// publish. Pair it with `#[wire(decode = ruststream_kafka::protobuf::decode_confluent)]`
    /// on the reading side.
    #[cfg(feature = "protobuf")]
    pub fn framed(registry: &crate::SchemaRegistry) -> crate::KafkaFramedPublish {
        crate::KafkaFramedPublish::over(Self::default(), registry)
    }

    pub(crate) const fn queue_bound(self) -> Option<Duration> {
        self.queue_timeout
    }
}

impl PublishPolicy<ConnectedKafkaBroker> for KafkaPublish {
    type Live = KafkaPublisher;

    fn pair(
        self,
        connected: &ConnectedKafkaBroker,
    ) -> impl Future<Output = Result<KafkaPublisher, PairError>> + Send {
        std::future::ready(Ok(connected.publisher(self)))
    }

    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ruststream::asyncapi::Bindings {
        crate::bindings::channel(channel)
    }
}

impl DefaultPublish for ConnectedKafkaBroker {
    type Policy = KafkaPublish;
}

/// A live handle on the broker's shared producer. Cheap to clone.
#[derive(Clone)]
pub struct KafkaPublisher {
    state: Arc<BrokerState>,
    queue_timeout: Option<Duration>,
}

impl fmt::Debug for KafkaPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaPublisher")
            .field("queue_timeout", &self.queue_timeout)
            .finish_non_exhaustive()
    }
}

impl KafkaPublisher {
    pub(crate) fn new(state: Arc<BrokerState>, queue_timeout: Option<Duration>) -> Self {
        Self {
            state,
            queue_timeout,
        }
    }
}

impl Publisher for KafkaPublisher {
    type Payload = Lend;
    type Error = KafkaError;
    type Options = KafkaOptions;

    /// Publishes one record and waits for the cluster's delivery report (durability per
    /// `acks`). Not cancel-safe: a dropped call may still deliver the record.
    async fn publish(
        &self,
        msg: OutgoingMessage<'_, &[u8]>,
        options: Option<&KafkaOptions>,
    ) -> Result<(), KafkaError> {
        let _under_way = under_way(&self.state);
        let (name, payload, headers) = msg.into_parts();
        self.state.ensure_open(name)?;
        let record = producer_record(name, payload, headers, options)?;
        let producer = self.state.producer().await?;
        let report = send(producer, record, self.queue_timeout).await?;
        hand_over(&self.state, &report).await;
        Ok(())
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
    record: ProducerRecord,
    queue_timeout: Option<Duration>,
) -> Result<RecordMetadata, KafkaError> {
    let queued = match queue_timeout {
        Some(bound) => producer.send_timeout(record, bound).await,
        None => producer.send(record).await,
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

/// The native record for a message: the key header becomes the key, the source header is
/// dropped, the rest are wire headers.
pub(crate) fn producer_record(
    topic: &str,
    payload: &[u8],
    mut headers: HeaderMap,
    options: Option<&KafkaOptions>,
) -> Result<ProducerRecord, KafkaError> {
    check_topic_name(topic).map_err(|e| KafkaError::Publish(KafkaError::text(e)))?;
    let key = headers.remove(PARTITION_KEY_HEADER);
    headers.remove(EOS_SOURCE_HEADER);
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
    Ok(ProducerRecord {
        topic: topic.to_owned(),
        partition: options.and_then(|o| o.partition_setting()),
        key,
        value: Some(Bytes::copy_from_slice(payload)),
        headers: wire,
        timestamp: None,
    })
}
