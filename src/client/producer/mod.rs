//! The producer: records in, delivery reports out.
//!
//! [`Producer::send`] places a record in its partition's open batch (the accumulator) and
//! returns a [`DeliveryFuture`]; one sender task per producer closes batches when they are
//! full or have lingered long enough, sends them to the partition leaders and settles every
//! record's future with its offset or its error.
//!
//! Guarantees:
//! - The local queue is bounded (`queue.buffering.max.messages` and `.kbytes`): a full queue
//!   makes `send` wait (or time out, with [`Producer::send_timeout`]); nothing is dropped.
//! - Every record's future resolves exactly once: delivered, failed, or timed out after
//!   `message.timeout.ms`.
//! - With idempotence, batches of a partition carry consecutive sequence numbers, retries keep
//!   their numbers (so the broker drops duplicates) and go out in order, and at most five
//!   requests per connection are in flight.

mod accumulator;
mod completion;
pub mod partitioner;
mod sender;
mod transaction;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

pub use partitioner::Partitioner;
pub use transaction::{
    TransactionError, TransactionErrorKind, TransactionProtocol, TransactionalProducer,
};

use crate::client::Client;
use crate::client::config::ProducerConfig;
use crate::client::error::{Error, Result};
use crate::client::records::Header;
use accumulator::Shared;
#[cfg(feature = "testing")]
pub(crate) use accumulator::message_size;

/// A record to send.
#[derive(Debug, Clone, Default)]
pub struct ProducerRecord {
    /// The destination topic.
    pub topic: String,
    /// A fixed partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key (`None` is a null key).
    pub key: Option<Bytes>,
    /// The value (`None` is a null value).
    pub value: Option<Bytes>,
    /// Headers, in order (repeated keys allowed).
    pub headers: Vec<Header>,
    /// The timestamp in ms since the epoch; `None` takes the current time.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record for `topic` with `value` and nothing else.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            value: Some(value.into()),
            ..ProducerRecord::default()
        }
    }

    /// Sets the key.
    #[must_use]
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Pins the partition.
    #[must_use]
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, key: impl Into<Bytes>, value: Option<Bytes>) -> Self {
        self.headers.push(Header::new(key, value));
        self
    }

    /// Sets the timestamp.
    #[must_use]
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }
}

/// A record to send, borrowed: [`Producer::send_ref`] copies its parts straight into their
/// batch, so a caller that holds them as slices sends without building a [`ProducerRecord`]
/// (no topic string, no value buffer of its own).
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    /// The destination topic.
    pub topic: &'a str,
    /// A fixed partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key (`None` is a null key).
    pub key: Option<&'a [u8]>,
    /// The value (`None` is a null value).
    pub value: Option<&'a [u8]>,
    /// Headers, in order (repeated keys allowed).
    pub headers: &'a [Header],
    /// The timestamp in ms since the epoch; `None` takes the current time.
    pub timestamp: Option<i64>,
}

impl<'a> RecordRef<'a> {
    /// A record for `topic` with `value` and nothing else.
    #[must_use]
    pub fn new(topic: &'a str, value: &'a [u8]) -> Self {
        RecordRef {
            topic,
            partition: None,
            key: None,
            value: Some(value),
            headers: &[],
            timestamp: None,
        }
    }
}

impl ProducerRecord {
    /// The record, borrowed.
    #[must_use]
    pub fn borrowed(&self) -> RecordRef<'_> {
        RecordRef {
            topic: &self.topic,
            partition: self.partition,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: &self.headers,
            timestamp: self.timestamp,
        }
    }
}

/// Where a record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The offset; -1 with `acks=0`, where the broker does not say.
    pub offset: i64,
    /// The record's timestamp: the broker's log-append time on topics that use it, else
    /// the creation time sent.
    pub timestamp: i64,
}

/// Resolves to a record's delivery report.
///
/// Dropping it does not cancel the delivery; the record is still sent.
#[derive(Debug)]
pub struct DeliveryFuture {
    /// The outcome of the record's batch, and the record's place in it.
    completion: Arc<completion::Completion>,
    index: u32,
    /// The creation time it was sent with (its report's timestamp unless the broker gives one).
    timestamp: i64,
    /// The record's topic and partition, known when it was queued: the report is made where
    /// it is awaited, so the sender settling a thousand records does not touch the topic's
    /// shared count a thousand times from another core.
    topic: Arc<str>,
    partition: i32,
}

/// Where the broker wrote a record, as the sender settles it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written {
    offset: i64,
    timestamp: i64,
}

impl Written {
    /// At `offset` (-1 with `acks=0`), with `timestamp` (the log-append time on topics that
    /// keep it, else the creation time sent).
    pub(crate) fn new(offset: i64, timestamp: i64) -> Self {
        Written { offset, timestamp }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        this.completion
            .poll_record(this.index, this.timestamp, cx)
            .map(|written| {
                let written = written?;
                Ok(RecordMetadata {
                    topic: Arc::clone(&this.topic),
                    partition: this.partition,
                    offset: written.offset,
                    timestamp: written.timestamp,
                })
            })
    }
}

/// A Kafka producer. Cloning shares it.
///
/// Call [`close`](Producer::close) (or [`flush`](Producer::flush)) before dropping the last
/// clone: dropping it stops the sender, and records still queued then fail with `Closed`.
#[derive(Debug, Clone)]
pub struct Producer {
    shared: Arc<Shared>,
    _owner: Arc<Owner>,
}

/// Stops the sender task when the last clone of a producer goes away.
#[derive(Debug)]
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl Producer {
    /// A producer on `client`; starts its sender task on the current tokio runtime. A
    /// configuration with a `transactional_id` is refused: that is a
    /// [`TransactionalProducer`].
    pub fn new(client: Client, config: ProducerConfig) -> Result<Producer> {
        if config.transactional_id.is_some() {
            return Err(Error::Config(
                "a producer with `transactional.id` is a TransactionalProducer".into(),
            ));
        }
        Producer::start(client, config)
    }

    fn start(client: Client, config: ProducerConfig) -> Result<Producer> {
        config.validate()?;
        let shared = Arc::new(Shared::new(client, config.resolved()));
        crate::client::outlined::spawn(sender::run(shared.clone()));
        Ok(Producer {
            _owner: Arc::new(Owner(shared.clone())),
            shared,
        })
    }

    /// Queues `record`, waiting for queue space as long as it takes, and returns the future of
    /// its delivery report.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the record is queued only in the poll that returns, so a `send` dropped before
    /// it returns queued nothing. Once it has returned, the record is delivered even if the
    /// `DeliveryFuture` is dropped.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture> {
        self.shared.enqueue(record.borrowed(), None).await
    }

    /// Like [`send`](Self::send), from borrowed parts: they are copied into the batch and need
    /// not outlive the call.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: as [`send`](Self::send), the record is queued only in the poll that returns.
    pub async fn send_ref(&self, record: RecordRef<'_>) -> Result<DeliveryFuture> {
        self.shared.enqueue(record, None).await
    }

    /// Queues `record` now if it can be queued without waiting: its topic's partitions are
    /// known and the queue has room. `Ok(None)` otherwise, and nothing was queued (then
    /// [`send_ref`](Self::send_ref) learns the topic or waits for room).
    ///
    /// It is the common case of `send_ref` without a future around it: a caller that keeps
    /// one publish in flight per record (an `async` publish in a `FuturesUnordered`, say)
    /// keeps its own future small by awaiting `send_ref` only when this gives `None`.
    pub fn try_send_ref(&self, record: RecordRef<'_>) -> Result<Option<DeliveryFuture>> {
        self.shared.enqueue_now(&record)
    }

    /// Like [`send_ref`](Self::send_ref), but fails when no queue space frees up within
    /// `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: as [`send`](Self::send), the record is queued only in the poll that returns.
    pub async fn send_ref_timeout(
        &self,
        record: RecordRef<'_>,
        timeout: Duration,
    ) -> Result<DeliveryFuture> {
        self.shared.enqueue(record, Some(timeout)).await
    }

    /// Like [`send`](Self::send), but fails when no queue space frees up within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: as [`send`](Self::send), the record is queued only in the poll that returns.
    pub async fn send_timeout(
        &self,
        record: ProducerRecord,
        timeout: Duration,
    ) -> Result<DeliveryFuture> {
        self.shared.enqueue(record.borrowed(), Some(timeout)).await
    }

    /// Sends every queued record now (ignoring `linger.ms`) and waits until all are settled
    /// or `timeout` passes; returns how many were still outstanding then.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits; dropping it ends this caller's flush (linger applies again), and
    /// the records keep going.
    pub async fn flush(&self, timeout: Duration) -> usize {
        self.shared.flush(timeout).await
    }

    /// Records queued or in flight.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.shared.outstanding()
    }

    /// How many times a batch was sent again after a failed attempt.
    #[must_use]
    pub fn retries(&self) -> u64 {
        self.shared
            .retries
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The producer id and epoch in use (idempotent producers), `(-1, -1)` otherwise.
    #[must_use]
    pub fn producer_id(&self) -> (i64, i16) {
        self.shared.producer_id()
    }

    /// Flushes for up to `timeout`, then stops the sender; records still queued fail.
    /// Returns how many records did not get delivered.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the sender is stopped only after the flush, so a close dropped during it leaves
    /// the producer open and sending; calling it again closes it.
    pub async fn close(&self, timeout: Duration) -> usize {
        let left = self.shared.flush(timeout).await;
        self.shared.close();
        left
    }

    /// The client under this producer.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.shared.client
    }
}
