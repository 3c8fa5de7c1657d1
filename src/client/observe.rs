//! Observers: what the client tells of its work to whoever registered to listen.
//!
//! The model is franz-go's hooks: a service registers observers on the [`ClientConfig`]
//! (`ClientConfig::observers`), and at each point where something happens (a connection opens or
//! is lost, a request is answered) the client builds a typed [`Event`] and hands it to each of
//! them, synchronously, on the task where it happened.
//!
//! Invariants:
//! - an event is built only when a registered observer asked for its [`Interest`]: with nobody
//!   listening, a site costs one test of a mask the registration computed;
//! - observers see borrowed, read-only views; nothing they do changes what the client does,
//!   short of taking time (they must be fast: copy what is needed and go on elsewhere);
//! - every connection reports [`Event::ConnectionLost`] at most once, whichever side closed it.
//!
//! [`ClientConfig`]: crate::client::ClientConfig

use std::fmt;
use std::ops::BitOr;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Error;
use crate::client::topic_partition::TopicPartition;

/// The families of events an observer may ask for.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Interest(u32);

impl Interest {
    /// None at all.
    pub const NONE: Interest = Interest(0);
    /// Connections dialled, refused and lost.
    pub const CONNECTIONS: Interest = Interest(1);
    /// Every request answered, or failed, with its latency.
    pub const REQUESTS: Interest = Interest(1 << 1);
    /// Produced batches: written, failed, sent again; a producer's fatal error.
    pub const PRODUCE: Interest = Interest(1 << 2);
    /// Each partition of each fetch answer: records, bytes, high watermark, lag.
    pub const FETCH: Interest = Interest(1 << 3);
    /// Group work: partitions assigned, revoked and lost; offset commits.
    pub const GROUP: Interest = Interest(1 << 4);
    /// Periodic snapshots of a producer's queue ([`Event::ProducerQueue`]), every
    /// `statistics.interval.ms` (every second when that is 0).
    pub const STATISTICS: Interest = Interest(1 << 5);
    /// Each record handed to a handler, and how the handler settled it (the adapter's
    /// subscriptions; one event per record, so built only when asked for).
    pub const DELIVERY: Interest = Interest(1 << 6);
    /// The records handed to handlers and their settlements, counted per partition and told
    /// as sums ([`Event::DeliveryCounts`]) about once a second and when the subscription
    /// closes: what a metrics observer needs, for a relaxed atomic add per record.
    pub const DELIVERY_COUNTS: Interest = Interest(1 << 7);
    /// Every family, those added later included.
    pub const ALL: Interest = Interest(u32::MAX);

    /// Whether every family of `other` is in `self`.
    #[must_use]
    pub const fn contains(self, other: Interest) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share a family.
    #[must_use]
    pub const fn intersects(self, other: Interest) -> bool {
        self.0 & other.0 != 0
    }
}

impl BitOr for Interest {
    type Output = Interest;

    fn bitor(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
}

impl fmt::Debug for Interest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Interest::ALL {
            return f.write_str("Interest(ALL)");
        }
        let names: Vec<&str> = [
            (Interest::CONNECTIONS, "CONNECTIONS"),
            (Interest::REQUESTS, "REQUESTS"),
            (Interest::PRODUCE, "PRODUCE"),
            (Interest::FETCH, "FETCH"),
            (Interest::GROUP, "GROUP"),
            (Interest::STATISTICS, "STATISTICS"),
            (Interest::DELIVERY, "DELIVERY"),
        ]
        .into_iter()
        .filter(|(i, _)| self.contains(*i))
        .map(|(_, n)| n)
        .collect();
        write!(f, "Interest({})", names.join(" | "))
    }
}

/// The broker an event concerns, as the client knows it at that point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerRef<'a> {
    /// Its `host:port`, as dialled.
    pub address: &'a str,
    /// The client's number for the connection (unique in the process), where there is one.
    pub connection: Option<u64>,
}

/// How a request ended.
#[derive(Debug, Clone, Copy)]
pub enum RequestOutcome<'a> {
    /// The answer arrived and decoded (a Kafka error code inside it is the caller's to report).
    Answered,
    /// No answer: the connection closed, the time ran out, or the answer did not decode.
    Failed(&'a Error),
}

/// What happened to a group member's partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionChange {
    /// The group gave them to this member.
    Assigned,
    /// The group took them back in an orderly way (their offsets were committed first, with
    /// `enable.auto.commit`).
    Revoked,
    /// The membership ended without a handover (a session expired, the member was fenced):
    /// another member may own them already, so nothing was committed.
    Lost,
}

/// How a handler settled a delivered record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// `ack`: handled.
    Acked,
    /// `nack(false)`: refused for good; it counts as settled.
    Rejected,
    /// `nack(true)`: to be delivered again.
    Requeued,
}

/// Something the client did or saw.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A connection was dialled, and its version handshake (and TLS and SASL) passed.
    ConnectionOpened {
        /// The broker, with the new connection's number.
        broker: BrokerRef<'a>,
        /// From the start of the dial to the connection being ready.
        took: Duration,
    },
    /// A dial failed; the next one to this broker waits `backoff`.
    ConnectFailed {
        /// The broker (no connection number: there is none).
        broker: BrokerRef<'a>,
        /// Why.
        error: &'a Error,
        /// How long dials to it now fail at once.
        backoff: Duration,
    },
    /// An open connection ended: the broker or the network closed it, a request timed out, or
    /// the client let it go.
    ConnectionLost {
        /// The broker and the connection's number.
        broker: BrokerRef<'a>,
        /// What ended it.
        reason: &'a str,
    },
    /// A request came back, or failed without an answer.
    Request {
        /// The broker and the connection the request went on.
        broker: BrokerRef<'a>,
        /// The API key (`kafka_protocol::messages::ApiKey` as a number).
        api_key: i16,
        /// The version it was sent in.
        api_version: i16,
        /// From the request being queued for the wire to its answer (or failure).
        latency: Duration,
        /// The answer, or why there was none.
        outcome: RequestOutcome<'a>,
    },
    /// The broker acknowledged a produced batch (with `acks=0`, the request left).
    BatchWritten {
        /// The leader it went to.
        node: i32,
        /// Its topic.
        topic: &'a str,
        /// Its partition.
        partition: i32,
        /// How many records it held.
        records: usize,
        /// The records' bytes as the caller gave them (keys, values, headers).
        bytes: usize,
        /// The offset of its first record, `-1` with `acks=0`.
        base_offset: i64,
        /// Times it was sent again before this.
        retries: u32,
        /// From its first record being queued to the acknowledgement.
        latency: Duration,
    },
    /// A batch was given up: each of its records' deliveries reports `error`.
    BatchFailed {
        /// Its topic.
        topic: &'a str,
        /// Its partition.
        partition: i32,
        /// How many records it held.
        records: usize,
        /// Why.
        error: &'a Error,
    },
    /// A batch failed retriably and goes out again after `delay`.
    ProduceRetry {
        /// Its topic.
        topic: &'a str,
        /// Its partition.
        partition: i32,
        /// How many records it holds.
        records: usize,
        /// The attempt about to be made (1 for the first retry).
        attempt: u32,
        /// What failed.
        error: &'a Error,
        /// The wait before the retry.
        delay: Duration,
    },
    /// The producer hit an error it cannot go on from: every record it held failed, and it
    /// refuses sends until it starts over (an idempotent producer, after a wait) or for good.
    ProducerFatal {
        /// Why.
        error: &'a Error,
    },
    /// One partition of a fetch answer, decoded.
    Fetched {
        /// The broker that answered.
        node: i32,
        /// Its topic.
        topic: &'a str,
        /// Its partition.
        partition: i32,
        /// The records it held for the consumer (after the `read_committed` filter).
        records: usize,
        /// The bytes of the partition's record data on the wire.
        bytes: usize,
        /// The partition's high watermark (`-1` when the answer is an error).
        high_watermark: i64,
        /// The high watermark less the offset fetched next: how far the consumer is behind the
        /// end of the log once these records are handled (`None` on an error).
        lag: Option<i64>,
        /// The partition's error code (0 for none).
        error_code: i16,
    },
    /// A group member's partitions changed.
    Rebalance {
        /// The group.
        group: &'a str,
        /// How they changed.
        change: PartitionChange,
        /// Which partitions.
        partitions: &'a [TopicPartition],
    },
    /// A producer's queue, sampled periodically (see [`Interest::STATISTICS`]) and once more
    /// when it closes.
    ProducerQueue {
        /// Its client's `client.id`.
        client_id: &'a str,
        /// Records accepted and not yet settled (queued or in flight): librdkafka's `msg_cnt`.
        records: usize,
        /// Their bytes (keys, values, headers): librdkafka's `msg_size`.
        bytes: usize,
        /// Produce requests sent and not yet answered.
        requests_in_flight: usize,
    },
    /// A subscription handed a record to its handler.
    Delivered {
        /// Its topic.
        topic: &'a str,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
    },
    /// A handler settled a delivered record.
    Settled {
        /// Its topic.
        topic: &'a str,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// How.
        outcome: Settlement,
        /// Whether the subscription took the settlement (a requeue under `Commit::Auto`, or
        /// a store after the partition left, is refused).
        accepted: bool,
    },
    /// What a subscription handed out and its handlers settled of one partition since the
    /// last such event (see [`Interest::DELIVERY_COUNTS`]); never all zero.
    DeliveryCounts {
        /// Its topic.
        topic: &'a str,
        /// Its partition.
        partition: i32,
        /// Records handed to handlers.
        delivered: u64,
        /// Settlements taken, by outcome.
        acked: u64,
        /// Rejections taken (`nack(false)`).
        rejected: u64,
        /// Requeues taken (`nack(true)`).
        requeued: u64,
        /// Settlements refused (see [`Event::Settled`]'s `accepted`).
        refused: u64,
    },
    /// An offset commit came back.
    Commit {
        /// The group.
        group: &'a str,
        /// How many partitions' offsets it carried.
        partitions: usize,
        /// From the commit's start to its answer, retries included.
        latency: Duration,
        /// Why it failed, if it did.
        error: Option<&'a Error>,
    },
}

impl Event<'_> {
    /// The family the event belongs to.
    #[must_use]
    pub fn interest(&self) -> Interest {
        match self {
            Event::ConnectionOpened { .. }
            | Event::ConnectFailed { .. }
            | Event::ConnectionLost { .. } => Interest::CONNECTIONS,
            Event::Request { .. } => Interest::REQUESTS,
            Event::BatchWritten { .. }
            | Event::BatchFailed { .. }
            | Event::ProduceRetry { .. }
            | Event::ProducerFatal { .. } => Interest::PRODUCE,
            Event::Fetched { .. } => Interest::FETCH,
            Event::Rebalance { .. } | Event::Commit { .. } => Interest::GROUP,
            Event::ProducerQueue { .. } => Interest::STATISTICS,
            Event::Delivered { .. } | Event::Settled { .. } => Interest::DELIVERY,
            Event::DeliveryCounts { .. } => Interest::DELIVERY_COUNTS,
        }
    }
}

/// One listener to the client's events.
///
/// It is called synchronously where the event happens, from any task and thread at once, so
/// it must be cheap and must not block: a slow observer slows the client. Events are told
/// after the lock of the state they describe is released (the producer's batches, the
/// consumer's assignment), so asking the client something from `on_event` (a producer's
/// [`in_flight`](crate::client::Producer::in_flight), say) is safe; awaiting the client is
/// not, since the task that reports may be the one that would answer.
pub trait Observer: Send + Sync + 'static {
    /// The families it wants; asked once, when it is registered.
    fn interest(&self) -> Interest {
        Interest::ALL
    }

    /// One event (only of the families [`interest`](Self::interest) named).
    fn on_event(&self, event: &Event<'_>);
}

/// The observers registered on a client, with the union of what they want.
///
/// Cheap to clone (one `Arc`); the empty set, the default, costs nothing at any site.
#[derive(Clone, Default)]
pub struct Observers {
    list: Arc<[(Interest, Arc<dyn Observer>)]>,
    wanted: Interest,
}

impl Observers {
    /// No observers.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// These observers and `observer`.
    #[must_use]
    pub fn with(&self, observer: Arc<dyn Observer>) -> Self {
        let interest = observer.interest();
        let list: Vec<_> = self
            .list
            .iter()
            .cloned()
            .chain(std::iter::once((interest, observer)))
            .collect();
        Observers {
            list: list.into(),
            wanted: self.wanted | interest,
        }
    }

    /// How many are registered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether none is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether some observer wants events of `family`: a site builds its event only then.
    #[inline]
    #[must_use]
    pub fn wants(&self, family: Interest) -> bool {
        self.wanted.intersects(family)
    }

    /// Hands `event` to every observer that wants its family.
    pub fn emit(&self, event: &Event<'_>) {
        let family = event.interest();
        if !self.wants(family) {
            return;
        }
        for (interest, observer) in self.list.iter() {
            if interest.intersects(family) {
                observer.on_event(event);
            }
        }
    }
}

impl fmt::Debug for Observers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observers")
            .field("len", &self.list.len())
            .field("wanted", &self.wanted)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Seen {
        wants: Interest,
        events: Mutex<Vec<String>>,
    }

    impl Observer for Seen {
        fn interest(&self) -> Interest {
            self.wants
        }

        fn on_event(&self, event: &Event<'_>) {
            if let Ok(mut events) = self.events.lock() {
                events.push(format!("{:?}", event.interest()));
            }
        }
    }

    fn lost() -> Event<'static> {
        Event::ConnectionLost {
            broker: BrokerRef {
                address: "b:9092",
                connection: Some(1),
            },
            reason: "closed",
        }
    }

    #[test]
    fn nobody_listening_wants_nothing() {
        let none = Observers::new();
        assert!(!none.wants(Interest::CONNECTIONS));
        assert!(!none.wants(Interest::REQUESTS));
        none.emit(&lost());
    }

    #[test]
    fn each_observer_gets_only_the_families_it_asked_for() {
        let connections = Arc::new(Seen {
            wants: Interest::CONNECTIONS,
            ..Seen::default()
        });
        let requests = Arc::new(Seen {
            wants: Interest::REQUESTS,
            ..Seen::default()
        });
        let observers = Observers::new()
            .with(connections.clone())
            .with(requests.clone());
        assert_eq!(observers.len(), 2);
        assert!(observers.wants(Interest::CONNECTIONS | Interest::REQUESTS));
        observers.emit(&lost());
        let error = Error::Timeout("t".into());
        observers.emit(&Event::Request {
            broker: BrokerRef {
                address: "b:9092",
                connection: Some(1),
            },
            api_key: 3,
            api_version: 12,
            latency: Duration::from_millis(2),
            outcome: RequestOutcome::Failed(&error),
        });
        let got = |s: &Seen| s.events.lock().map(|e| e.clone()).unwrap_or_default();
        assert_eq!(got(&connections), ["Interest(CONNECTIONS)"]);
        assert_eq!(got(&requests), ["Interest(REQUESTS)"]);
    }

    #[test]
    fn each_event_belongs_to_one_family_and_a_mask_names_its_families() {
        let error = Error::Timeout("t".into());
        let retry = Event::ProduceRetry {
            topic: "t",
            partition: 0,
            records: 1,
            attempt: 1,
            error: &error,
            delay: Duration::from_millis(100),
        };
        assert_eq!(retry.interest(), Interest::PRODUCE);
        let fetched = Event::Fetched {
            node: 1,
            topic: "t",
            partition: 0,
            records: 0,
            bytes: 0,
            high_watermark: 5,
            lag: Some(5),
            error_code: 0,
        };
        assert_eq!(fetched.interest(), Interest::FETCH);
        let commit = Event::Commit {
            group: "g",
            partitions: 1,
            latency: Duration::ZERO,
            error: None,
        };
        assert_eq!(commit.interest(), Interest::GROUP);
        assert_eq!(
            format!("{:?}", Interest::PRODUCE | Interest::GROUP),
            "Interest(PRODUCE | GROUP)"
        );
        let producing = Observers::new().with(Arc::new(Seen {
            wants: Interest::PRODUCE,
            ..Seen::default()
        }));
        assert!(producing.wants(Interest::PRODUCE));
        assert!(!producing.wants(Interest::FETCH | Interest::GROUP));
    }

    #[test]
    fn an_observer_that_wants_none_is_never_called() {
        let deaf = Arc::new(Seen::default());
        let observers = Observers::new().with(deaf.clone());
        assert!(!observers.wants(Interest::ALL));
        observers.emit(&lost());
        assert!(deaf.events.lock().is_ok_and(|e| e.is_empty()));
    }
}
