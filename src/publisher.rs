//! Publishing: [`KafkaPublish`] (the policy), [`KafkaPublisher`] (the live handle on the shared
//! producer) and the [`KafkaPublishSteps::partition`] step. How one message becomes a record
//! and its delivery report is `produce`'s.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ruststream::runtime::{PublishBuilder, PublishSink};
use ruststream::{DefaultPublish, Lend, OutgoingMessage, PairError, PublishPolicy, Publisher};

use crate::connection::{BrokerState, ConnectedKafkaBroker};
use crate::error::KafkaError;
use crate::produce::{
    KafkaOptions, Queued, check_destination, hand_over, queue, record_for, under_way,
};
use crate::transactional::KafkaTransactionalPublish;

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
    ///
    /// Nothing happens before the first poll. The body is an `async move` block rather than an
    /// `async fn`, whose arguments would be stored twice in the future: a caller with many
    /// publishes in flight keeps one future per record, and moves each as it goes.
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn stores its arguments twice in its future"
    )]
    fn publish(
        &self,
        msg: OutgoingMessage<'_, &[u8]>,
        options: Option<&KafkaOptions>,
    ) -> impl Future<Output = Result<(), KafkaError>> + Send {
        async move {
            let _under_way = under_way(&self.state);
            self.state.ensure_open(msg.name())?;
            check_destination(msg.name())?;
            let producer = self.state.producer().await?;
            // The record is made after the last await before it is queued: nothing of it is
            // carried in this future's state.
            let (name, payload, headers) = msg.into_parts();
            let record = record_for(name, payload, headers, options);
            // Queued in this poll where it can be; the record is not kept across an await then.
            let queued = match queue(producer, record, self.queue_timeout) {
                Queued::Now(queued) => queued,
                Queued::Waiting(wait) => wait.await,
            };
            let delivery = queued.map_err(KafkaError::publish)?;
            let report = delivery.await.map_err(KafkaError::publish)?;
            if let Some(wait) = hand_over(&self.state, &report) {
                wait.await;
            }
            Ok(())
        }
    }
}
