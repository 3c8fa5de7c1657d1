//! Metrics: an [`Observer`] that turns the client's events into metrics of the `metrics`
//! facade, for whatever exporter the service installs (Prometheus, `StatsD`, OpenTelemetry).
//!
//! Invariants:
//! - every figure comes from an [`Event`]: the observer keeps no state of its own, so two
//!   observers (or two clients) never disagree with the events they heard;
//! - labels carry only bounded sets: topics, partitions, groups, brokers, API names and error
//!   names; never a key, an offset or a message;
//! - a gauge that an event raises, an event lowers (connections opened and lost, partitions
//!   assigned and revoked or lost), so the gauge is the current count while events keep
//!   their at-most-once promise.
//!
//! The names, their kinds and labels are listed on [`MetricsObserver`].

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;
use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

use crate::client::Error;
use crate::client::observe::{Event, Interest, Observer, PartitionChange, RequestOutcome};

/// Records the client's events as metrics through the [`metrics`] facade.
///
/// Register it on a client (`ClientConfig::observers`) or on a `KafkaBroker`
/// (`KafkaBroker::observer`), after installing the exporter's recorder: the descriptions are
/// given to the recorder installed when [`new`](Self::new) runs.
///
/// | name | kind | labels | what |
/// |---|---|---|---|
/// | `kafka_client_connections_opened_total` | counter | `broker` | connections ready (TLS and SASL done) |
/// | `kafka_client_connection_failures_total` | counter | `broker`, `error` | dials that failed |
/// | `kafka_client_connections_lost_total` | counter | `broker` | open connections that ended |
/// | `kafka_client_connections` | gauge | `broker` | connections open now |
/// | `kafka_client_request_duration_seconds` | histogram | `api`, `broker` | request to answer |
/// | `kafka_client_request_failures_total` | counter | `api`, `broker`, `error` | requests with no answer |
/// | `kafka_producer_records_total` | counter | `topic` | records acknowledged |
/// | `kafka_producer_bytes_total` | counter | `topic` | their keys, values and headers |
/// | `kafka_producer_batches_total` | counter | `topic` | batches acknowledged |
/// | `kafka_producer_batch_duration_seconds` | histogram | `topic` | first record queued to acknowledgement |
/// | `kafka_producer_retries_total` | counter | `topic`, `error` | batches sent again |
/// | `kafka_producer_failed_records_total` | counter | `topic`, `error` | records whose delivery failed |
/// | `kafka_producer_fatal_errors_total` | counter | `error` | producer-wide fatal errors |
/// | `kafka_producer_queued_records` | gauge | `client_id` | records not yet settled |
/// | `kafka_producer_queued_bytes` | gauge | `client_id` | their bytes |
/// | `kafka_producer_requests_in_flight` | gauge | `client_id` | produce requests awaiting an answer |
/// | `kafka_consumer_records_total` | counter | `topic` | records fetched for the consumer |
/// | `kafka_consumer_bytes_total` | counter | `topic` | record data fetched |
/// | `kafka_consumer_fetch_errors_total` | counter | `topic`, `error` | partitions answered with an error |
/// | `kafka_consumer_lag` | gauge | `topic`, `partition` | high watermark (or last stable offset) less the next offset |
/// | `kafka_consumer_rebalances_total` | counter | `group`, `change` | `assigned`, `revoked`, `lost` |
/// | `kafka_consumer_assigned_partitions` | gauge | `group` | partitions owned now |
/// | `kafka_consumer_commit_duration_seconds` | histogram | `group` | commit to answer, retries included |
/// | `kafka_consumer_commit_failures_total` | counter | `group`, `error` | commits that failed |
/// | `kafka_consumer_delivered_total` | counter | `topic` | records handed to handlers |
/// | `kafka_consumer_settled_total` | counter | `topic`, `outcome` | settlements: `acked`, `rejected`, `requeued`, `refused` (not taken) |
///
/// The delivered and settled counters move about once a second (from the per-partition sums
/// of [`Interest::DELIVERY_COUNTS`]). The queue gauges are sampled every
/// `statistics.interval.ms` (every second when it is 0). A
/// partition's lag changes when a fetch answer names the partition; once the partition moves
/// to another member its last value stays until the exporter retires idle series (for the
/// Prometheus exporter, its `idle_timeout`).
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsObserver {
    _private: (),
}

impl MetricsObserver {
    /// An observer recording every family of events; describes the metrics to the recorder
    /// installed now.
    #[must_use]
    pub fn new() -> Self {
        describe();
        MetricsObserver { _private: () }
    }
}

fn describe() {
    describe_counter!(
        "kafka_client_connections_opened_total",
        "Connections to brokers that became ready"
    );
    describe_counter!(
        "kafka_client_connection_failures_total",
        "Dials to brokers that failed"
    );
    describe_counter!(
        "kafka_client_connections_lost_total",
        "Open connections to brokers that ended"
    );
    describe_gauge!(
        "kafka_client_connections",
        "Connections to brokers open now"
    );
    describe_histogram!(
        "kafka_client_request_duration_seconds",
        Unit::Seconds,
        "Time from a request being queued for the wire to its answer"
    );
    describe_counter!(
        "kafka_client_request_failures_total",
        "Requests that got no answer"
    );
    describe_producer();
    describe_consumer();
}

fn describe_producer() {
    describe_counter!(
        "kafka_producer_records_total",
        "Records the brokers acknowledged"
    );
    describe_counter!(
        "kafka_producer_bytes_total",
        Unit::Bytes,
        "Bytes of the acknowledged records (keys, values, headers)"
    );
    describe_counter!(
        "kafka_producer_batches_total",
        "Batches the brokers acknowledged"
    );
    describe_histogram!(
        "kafka_producer_batch_duration_seconds",
        Unit::Seconds,
        "Time from a batch's first record being queued to its acknowledgement"
    );
    describe_counter!("kafka_producer_retries_total", "Batches sent again");
    describe_counter!(
        "kafka_producer_failed_records_total",
        "Records whose delivery failed"
    );
    describe_counter!(
        "kafka_producer_fatal_errors_total",
        "Errors the producer could not go on from"
    );
    describe_gauge!(
        "kafka_producer_queued_records",
        "Records accepted and not yet settled"
    );
    describe_gauge!(
        "kafka_producer_queued_bytes",
        Unit::Bytes,
        "Bytes of the records accepted and not yet settled"
    );
    describe_gauge!(
        "kafka_producer_requests_in_flight",
        "Produce requests awaiting an answer"
    );
}

fn describe_consumer() {
    describe_counter!(
        "kafka_consumer_records_total",
        "Records fetched for the consumer"
    );
    describe_counter!(
        "kafka_consumer_bytes_total",
        Unit::Bytes,
        "Bytes of record data fetched"
    );
    describe_counter!(
        "kafka_consumer_fetch_errors_total",
        "Partitions a fetch answered with an error"
    );
    describe_gauge!(
        "kafka_consumer_lag",
        "Records between the consumer's next offset and the end of the partition"
    );
    describe_counter!(
        "kafka_consumer_rebalances_total",
        "Changes of a member's partitions"
    );
    describe_gauge!(
        "kafka_consumer_assigned_partitions",
        "Partitions a group gave this process"
    );
    describe_histogram!(
        "kafka_consumer_commit_duration_seconds",
        Unit::Seconds,
        "Time from an offset commit's start to its answer"
    );
    describe_counter!(
        "kafka_consumer_commit_failures_total",
        "Offset commits that failed"
    );
    describe_counter!(
        "kafka_consumer_delivered_total",
        "Records handed to handlers"
    );
    describe_counter!(
        "kafka_consumer_settled_total",
        "Deliveries the handlers settled, by outcome"
    );
}

impl Observer for MetricsObserver {
    /// Every family but the per-record [`Interest::DELIVERY`]: deliveries and settlements
    /// are counted from their per-partition sums ([`Interest::DELIVERY_COUNTS`]), so that
    /// watching costs a consumer next to nothing per record.
    fn interest(&self) -> Interest {
        Interest::CONNECTIONS
            | Interest::REQUESTS
            | Interest::PRODUCE
            | Interest::FETCH
            | Interest::GROUP
            | Interest::STATISTICS
            | Interest::DELIVERY_COUNTS
    }

    fn on_event(&self, event: &Event<'_>) {
        match event.interest() {
            Interest::CONNECTIONS | Interest::REQUESTS => connections(event),
            Interest::PRODUCE | Interest::STATISTICS => produce(event),
            Interest::DELIVERY_COUNTS => delivery(event),
            _ => consume(event),
        }
    }
}

/// Connections and requests.
fn connections(event: &Event<'_>) {
    match *event {
        Event::ConnectionOpened { broker, .. } => {
            counter!("kafka_client_connections_opened_total", "broker" => broker.address.to_owned())
                .increment(1);
            gauge!("kafka_client_connections", "broker" => broker.address.to_owned())
                .increment(1.0);
        }
        Event::ConnectFailed { broker, error, .. } => {
            counter!(
                "kafka_client_connection_failures_total",
                "broker" => broker.address.to_owned(),
                "error" => error_name(error)
            )
            .increment(1);
        }
        Event::ConnectionLost { broker, .. } => {
            counter!("kafka_client_connections_lost_total", "broker" => broker.address.to_owned())
                .increment(1);
            gauge!("kafka_client_connections", "broker" => broker.address.to_owned())
                .decrement(1.0);
        }
        Event::Request {
            broker,
            api_key,
            latency,
            outcome,
            ..
        } => {
            histogram!(
                "kafka_client_request_duration_seconds",
                "api" => api_name(api_key),
                "broker" => broker.address.to_owned()
            )
            .record(latency.as_secs_f64());
            if let RequestOutcome::Failed(error) = outcome {
                counter!(
                    "kafka_client_request_failures_total",
                    "api" => api_name(api_key),
                    "broker" => broker.address.to_owned(),
                    "error" => error_name(error)
                )
                .increment(1);
            }
        }
        _ => {}
    }
}

/// The producer: batches, retries, failures and its queue.
fn produce(event: &Event<'_>) {
    match *event {
        Event::BatchWritten {
            topic,
            records,
            bytes,
            latency,
            ..
        } => {
            counter!("kafka_producer_records_total", "topic" => topic.to_owned())
                .increment(count(records));
            counter!("kafka_producer_bytes_total", "topic" => topic.to_owned())
                .increment(count(bytes));
            counter!("kafka_producer_batches_total", "topic" => topic.to_owned()).increment(1);
            histogram!("kafka_producer_batch_duration_seconds", "topic" => topic.to_owned())
                .record(seconds(latency));
        }
        Event::BatchFailed {
            topic,
            records,
            error,
            ..
        } => {
            counter!(
                "kafka_producer_failed_records_total",
                "topic" => topic.to_owned(),
                "error" => error_name(error)
            )
            .increment(count(records));
        }
        Event::ProduceRetry { topic, error, .. } => {
            counter!(
                "kafka_producer_retries_total",
                "topic" => topic.to_owned(),
                "error" => error_name(error)
            )
            .increment(1);
        }
        Event::ProducerFatal { error } => {
            counter!("kafka_producer_fatal_errors_total", "error" => error_name(error))
                .increment(1);
        }
        Event::ProducerQueue {
            client_id,
            records,
            bytes,
            requests_in_flight,
        } => {
            gauge!("kafka_producer_queued_records", "client_id" => client_id.to_owned())
                .set(as_f64(records));
            gauge!("kafka_producer_queued_bytes", "client_id" => client_id.to_owned())
                .set(as_f64(bytes));
            gauge!("kafka_producer_requests_in_flight", "client_id" => client_id.to_owned())
                .set(as_f64(requests_in_flight));
        }
        _ => {}
    }
}

/// The adapter's deliveries and their settlements, from their per-partition sums.
fn delivery(event: &Event<'_>) {
    if let Event::DeliveryCounts {
        topic,
        delivered,
        acked,
        rejected,
        requeued,
        refused,
        ..
    } = *event
    {
        if delivered > 0 {
            counter!("kafka_consumer_delivered_total", "topic" => topic.to_owned())
                .increment(delivered);
        }
        for (outcome, n) in [
            ("acked", acked),
            ("rejected", rejected),
            ("requeued", requeued),
            ("refused", refused),
        ] {
            if n > 0 {
                counter!(
                    "kafka_consumer_settled_total",
                    "topic" => topic.to_owned(),
                    "outcome" => outcome
                )
                .increment(n);
            }
        }
    }
}

/// The consumer: fetches, its group and its commits.
fn consume(event: &Event<'_>) {
    match *event {
        Event::Fetched {
            topic,
            partition,
            records,
            bytes,
            lag,
            error_code,
            ..
        } => {
            if records > 0 {
                counter!("kafka_consumer_records_total", "topic" => topic.to_owned())
                    .increment(count(records));
            }
            if bytes > 0 {
                counter!("kafka_consumer_bytes_total", "topic" => topic.to_owned())
                    .increment(count(bytes));
            }
            if error_code != 0 {
                counter!(
                    "kafka_consumer_fetch_errors_total",
                    "topic" => topic.to_owned(),
                    "error" => code_name(error_code)
                )
                .increment(1);
            }
            if let Some(lag) = lag {
                gauge!(
                    "kafka_consumer_lag",
                    "topic" => topic.to_owned(),
                    "partition" => partition.to_string()
                )
                .set(as_f64(usize::try_from(lag).unwrap_or(0)));
            }
        }
        Event::Rebalance {
            group,
            change,
            partitions,
        } => {
            let (name, delta) = match change {
                PartitionChange::Assigned => ("assigned", as_f64(partitions.len())),
                PartitionChange::Revoked => ("revoked", -as_f64(partitions.len())),
                PartitionChange::Lost => ("lost", -as_f64(partitions.len())),
            };
            counter!(
                "kafka_consumer_rebalances_total",
                "group" => group.to_owned(),
                "change" => name
            )
            .increment(1);
            gauge!("kafka_consumer_assigned_partitions", "group" => group.to_owned())
                .increment(delta);
        }
        Event::Commit {
            group,
            latency,
            error,
            ..
        } => {
            histogram!("kafka_consumer_commit_duration_seconds", "group" => group.to_owned())
                .record(seconds(latency));
            if let Some(error) = error {
                counter!(
                    "kafka_consumer_commit_failures_total",
                    "group" => group.to_owned(),
                    "error" => error_name(error)
                )
                .increment(1);
            }
        }
        _ => {}
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[allow(clippy::cast_precision_loss)] // counts of records, bytes, lags: far below 2^53
fn as_f64(n: usize) -> f64 {
    n as f64
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The API's name as Kafka's protocol guide spells it (`Produce`, `Fetch`, `OffsetCommit`).
fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|()| key.to_string(), |api| format!("{api:?}"))
}

/// A Kafka error code's name (`NotLeaderOrFollower`; `Unknown(-32000)` for a code Kafka does not
/// define).
fn code_name(code: i16) -> String {
    ResponseError::try_from_code(code).map_or_else(|| code.to_string(), |e| format!("{e:?}"))
}

/// A bounded name for what went wrong: the Kafka error's name, else the kind of failure.
fn error_name(error: &Error) -> String {
    if let Some(code) = error.code() {
        return format!("{code:?}");
    }
    match error {
        Error::Io { .. } => "io",
        Error::Protocol(_) => "protocol",
        Error::Timeout(_) => "timeout",
        Error::Config(_) => "config",
        Error::InvalidRecord(_) => "invalid_record",
        Error::Unsupported(_) => "unsupported",
        Error::Closed(_) => "closed",
        Error::Fatal(_) => "fatal",
        Error::Authentication { .. } => "authentication",
        Error::Tls { .. } => "tls",
        Error::Broker { .. } | Error::Transaction(_) => "transaction",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_and_readable() {
        assert_eq!(api_name(0), "Produce");
        assert_eq!(api_name(8), "OffsetCommit");
        assert_eq!(api_name(-7), "-7");
        assert_eq!(code_name(6), "NotLeaderOrFollower");
        assert_eq!(code_name(-32000), "Unknown(-32000)");
        assert_eq!(error_name(&Error::Timeout("a request".into())), "timeout");
        let broker = Error::check(6, || "produce".into()).unwrap_err();
        assert_eq!(error_name(&broker), "NotLeaderOrFollower");
    }
}
