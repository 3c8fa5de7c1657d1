//! The tally behind a client's KIP-714 pushes: an [`Observer`] of that one client that keeps
//! what its standard metrics need, and renders them under the Java client's names.
//!
//! Invariants:
//! - counts only grow; a push reports a sum as the count since the previous push (delta
//!   temporality) or since the tally began (cumulative), as the broker asked;
//! - averages and maxima cover the requests answered since the previous push, and start
//!   again after it;
//! - it counts from the client's start until a subscription answer says no metric is
//!   wanted; while none is, the tally is idle: each event costs one atomic load and nothing is
//!   kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::ClientRole;
use super::otlp::{Attribute, Data, Metric, Point, Value};
use crate::client::observe::{Event, Interest, Observer, PartitionChange, RequestOutcome};

/// `n` as a float, exact up to 2^32 (more than any count between two pushes).
fn as_f64(n: u64) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Latencies of a stretch of requests.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    count: u64,
    sum: Duration,
    max: Duration,
}

impl Window {
    fn add(&mut self, latency: Duration) {
        self.count += 1;
        self.sum += latency;
        self.max = self.max.max(latency);
    }

    fn avg_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum.as_secs_f64() * 1000.0 / as_f64(self.count))
    }

    fn max_ms(&self) -> f64 {
        self.max.as_secs_f64() * 1000.0
    }
}

/// Counts that only grow, by series; with the values of the previous push that the broker
/// took, and those of the push under way.
#[derive(Debug, Default)]
struct Counts {
    now: BTreeMap<String, u64>,
    pushed: BTreeMap<String, u64>,
    pending: Option<BTreeMap<String, u64>>,
}

impl Counts {
    fn add(&mut self, key: &str, n: u64) {
        if let Some(v) = self.now.get_mut(key) {
            *v += n;
        } else {
            self.now.insert(key.to_owned(), n);
        }
    }

    /// Each series' count: since the previous push the broker took when `delta`, else since
    /// the start. The values become the previous ones only when this push is taken
    /// ([`Counts::taken`]): a refused push's counts go out with the next one.
    fn report(&mut self, delta: bool) -> Vec<(String, u64)> {
        let out = self
            .now
            .iter()
            .map(|(k, v)| {
                let before = if delta {
                    self.pushed.get(k).copied().unwrap_or(0)
                } else {
                    0
                };
                (k.clone(), v.saturating_sub(before))
            })
            .collect();
        self.pending = Some(self.now.clone());
        out
    }

    fn taken(&mut self) {
        if let Some(p) = self.pending.take() {
            self.pushed = p;
        }
    }
}

#[derive(Debug, Default)]
struct State {
    connections_created: Counts,
    connections_closed: Counts,
    /// Request latencies by broker address.
    by_broker: BTreeMap<String, Window>,
    produce_latency: Window,
    fetch_latency: Window,
    commit_latency: Window,
    sent_records: Counts,
    sent_bytes: Counts,
    retried_records: Counts,
    failed_records: Counts,
    consumed_records: Counts,
    consumed_bytes: Counts,
    rebalances: Counts,
    commits: Counts,
    lag: BTreeMap<(String, i32), i64>,
    assigned: BTreeSet<(String, i32)>,
}

/// What one client did since its pushes began.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    active: AtomicBool,
    state: Mutex<State>,
}

/// How to render one push.
pub(super) struct Render<'a> {
    pub(super) role: ClientRole,
    /// Sums since the previous push (else since the start).
    pub(super) delta: bool,
    /// Now, and the start of the sums' counting, in Unix nanoseconds.
    pub(super) now_nanos: u64,
    pub(super) start_nanos: u64,
    /// The seconds since the previous push, for rates.
    pub(super) elapsed: Duration,
    /// A broker's node id from its address, as the metadata knows it.
    pub(super) node_of: &'a dyn Fn(&str) -> Option<i32>,
}

impl Tally {
    /// A tally that counts from now on.
    pub(super) fn counting() -> Self {
        let tally = Tally::default();
        tally.set_active(true);
        tally
    }

    /// Starts (or stops) keeping counts: on while a subscription asks for metrics.
    pub(super) fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::Relaxed);
    }

    /// The broker took the push last rendered: its counts are reported.
    pub(super) fn taken(&self) {
        let mut guard = self.state();
        let s = &mut *guard;
        for counts in [
            &mut s.connections_created,
            &mut s.connections_closed,
            &mut s.sent_records,
            &mut s.sent_bytes,
            &mut s.retried_records,
            &mut s.failed_records,
            &mut s.consumed_records,
            &mut s.consumed_bytes,
            &mut s.rebalances,
            &mut s.commits,
        ] {
            counts.taken();
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The metrics of a push, under the Java client's names for `role`; closes the averaging
    /// windows and marks the sums as reported.
    #[allow(
        clippy::too_many_lines,
        reason = "one table of the metrics, in the order a reader looks them up"
    )]
    pub(super) fn render(&self, r: &Render<'_>) -> Vec<Metric> {
        let mut s = self.state();
        let prefix = match r.role {
            ClientRole::Producer => "org.apache.kafka.producer.",
            ClientRole::Consumer => "org.apache.kafka.consumer.",
        };
        let mut out = Vec::new();
        let point = |attributes: Vec<(&'static str, Attribute)>, value: Value| Point {
            attributes,
            start_nanos: r.start_nanos,
            time_nanos: r.now_nanos,
            value,
        };
        let sum = |points: Vec<Point>| Data::Sum {
            points,
            delta: r.delta,
        };
        let mut push = |name: &str, data: Data| {
            if !data.points().is_empty() {
                out.push(Metric {
                    name: format!("{prefix}{name}"),
                    data,
                });
            }
        };
        let count = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
        let plain = |counts: &mut Counts| -> Vec<Point> {
            counts
                .report(r.delta)
                .into_iter()
                .map(|(_, n)| point(Vec::new(), count(n)))
                .collect()
        };
        let by_topic = |counts: &mut Counts| -> Vec<Point> {
            counts
                .report(r.delta)
                .into_iter()
                .map(|(topic, n)| point(vec![("topic", Attribute::Str(topic))], count(n)))
                .collect()
        };

        let created_now = s.connections_created.now.values().sum::<u64>();
        let created_before = s.connections_created.pushed.values().sum::<u64>();
        push(
            "connection.creation.total",
            sum(plain(&mut s.connections_created)),
        );
        let seconds = r.elapsed.as_secs_f64();
        if seconds > 0.0 {
            let rate = as_f64(created_now - created_before.min(created_now)) / seconds;
            push(
                "connection.creation.rate",
                Data::Gauge(vec![point(Vec::new(), Value::Double(rate))]),
            );
        }
        push(
            "connection.close.total",
            sum(plain(&mut s.connections_closed)),
        );
        let mut avg = Vec::new();
        let mut max = Vec::new();
        for (address, window) in std::mem::take(&mut s.by_broker) {
            let Some(node) = (r.node_of)(&address) else {
                continue;
            };
            if let Some(a) = window.avg_ms() {
                let attrs = || vec![("node_id", Attribute::Int(i64::from(node)))];
                avg.push(point(attrs(), Value::Double(a)));
                max.push(point(attrs(), Value::Double(window.max_ms())));
            }
        }
        push("node.request.latency.avg", Data::Gauge(avg));
        push("node.request.latency.max", Data::Gauge(max));
        let window = |name: &str, w: Window, push: &mut dyn FnMut(&str, Data)| {
            if let Some(a) = w.avg_ms() {
                push(
                    &format!("{name}.avg"),
                    Data::Gauge(vec![point(Vec::new(), Value::Double(a))]),
                );
                push(
                    &format!("{name}.max"),
                    Data::Gauge(vec![point(Vec::new(), Value::Double(w.max_ms()))]),
                );
            }
        };
        match r.role {
            ClientRole::Producer => {
                let produce = std::mem::take(&mut s.produce_latency);
                window("request.latency", produce, &mut push);
                push(
                    "topic.record.send.total",
                    sum(by_topic(&mut s.sent_records)),
                );
                push("topic.byte.total", sum(by_topic(&mut s.sent_bytes)));
                push(
                    "topic.record.retry.total",
                    sum(by_topic(&mut s.retried_records)),
                );
                push(
                    "topic.record.error.total",
                    sum(by_topic(&mut s.failed_records)),
                );
            }
            ClientRole::Consumer => {
                let fetch = std::mem::take(&mut s.fetch_latency);
                window("fetch.manager.fetch.latency", fetch, &mut push);
                push(
                    "fetch.manager.records.consumed.total",
                    sum(by_topic(&mut s.consumed_records)),
                );
                push(
                    "fetch.manager.bytes.consumed.total",
                    sum(by_topic(&mut s.consumed_bytes)),
                );
                let lag = s
                    .lag
                    .iter()
                    .map(|((topic, partition), lag)| {
                        point(
                            vec![
                                ("topic", Attribute::Str(topic.clone())),
                                ("partition", Attribute::Int(i64::from(*partition))),
                            ],
                            Value::Int(*lag),
                        )
                    })
                    .collect();
                push("fetch.manager.records.lag", Data::Gauge(lag));
                let assigned = i64::try_from(s.assigned.len()).unwrap_or(i64::MAX);
                push(
                    "coordinator.assigned.partitions",
                    Data::Gauge(vec![point(Vec::new(), Value::Int(assigned))]),
                );
                push("coordinator.rebalance.total", sum(plain(&mut s.rebalances)));
                let commit = std::mem::take(&mut s.commit_latency);
                window("coordinator.commit.latency", commit, &mut push);
                push("coordinator.commit.total", sum(plain(&mut s.commits)));
            }
        }
        out
    }
}

impl Observer for Tally {
    fn interest(&self) -> Interest {
        Interest::CONNECTIONS
            | Interest::REQUESTS
            | Interest::PRODUCE
            | Interest::FETCH
            | Interest::GROUP
    }

    fn on_event(&self, event: &Event<'_>) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let mut s = self.state();
        match *event {
            Event::ConnectionOpened { .. } => s.connections_created.add("", 1),
            Event::ConnectionLost { .. } => s.connections_closed.add("", 1),
            Event::Request {
                broker,
                api_key,
                latency,
                outcome: RequestOutcome::Answered,
                ..
            } => {
                if let Some(w) = s.by_broker.get_mut(broker.address) {
                    w.add(latency);
                } else {
                    let mut w = Window::default();
                    w.add(latency);
                    s.by_broker.insert(broker.address.to_owned(), w);
                }
                if api_key == ApiKey::Produce as i16 {
                    s.produce_latency.add(latency);
                } else if api_key == ApiKey::Fetch as i16 {
                    s.fetch_latency.add(latency);
                }
            }
            Event::BatchWritten {
                topic,
                records,
                bytes,
                ..
            } => {
                s.sent_records.add(topic, records as u64);
                s.sent_bytes.add(topic, bytes as u64);
            }
            Event::ProduceRetry { topic, records, .. } => {
                s.retried_records.add(topic, records as u64);
            }
            Event::BatchFailed { topic, records, .. } => {
                s.failed_records.add(topic, records as u64);
            }
            Event::Fetched {
                topic,
                partition,
                records,
                bytes,
                lag,
                ..
            } => {
                s.consumed_records.add(topic, records as u64);
                s.consumed_bytes.add(topic, bytes as u64);
                if let Some(lag) = lag {
                    s.lag.insert((topic.to_owned(), partition), lag);
                }
            }
            Event::Rebalance {
                change, partitions, ..
            } => {
                s.rebalances.add("", 1);
                for tp in partitions {
                    let key = (tp.topic.to_string(), tp.partition);
                    if change == PartitionChange::Assigned {
                        s.assigned.insert(key);
                    } else {
                        s.lag.remove(&key);
                        s.assigned.remove(&key);
                    }
                }
            }
            Event::Commit { latency, error, .. } => {
                s.commits.add("", 1);
                if error.is_none() {
                    s.commit_latency.add(latency);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::observe::BrokerRef;
    use crate::client::topic_partition::TopicPartition;

    fn render(tally: &Tally, role: ClientRole, delta: bool) -> Vec<Metric> {
        tally.render(&Render {
            role,
            delta,
            now_nanos: 20,
            start_nanos: 10,
            elapsed: Duration::from_secs(2),
            node_of: &|a| (a == "b1:9092").then_some(1),
        })
    }

    fn value(metrics: &[Metric], name: &str) -> Vec<Value> {
        metrics
            .iter()
            .filter(|m| m.name == name)
            .flat_map(|m| m.data.points().iter().map(|p| p.value))
            .collect()
    }

    fn written(tally: &Tally, records: usize) {
        tally.on_event(&Event::BatchWritten {
            node: 1,
            topic: "orders",
            partition: 0,
            records,
            bytes: records * 10,
            base_offset: 0,
            retries: 0,
            latency: Duration::from_millis(3),
        });
    }

    #[test]
    fn an_idle_tally_keeps_nothing() {
        let tally = Tally::default();
        written(&tally, 5);
        tally.set_active(true);
        let metrics = render(&tally, ClientRole::Producer, true);
        assert!(
            value(
                &metrics,
                "org.apache.kafka.producer.topic.record.send.total"
            )
            .is_empty()
        );
    }

    #[test]
    fn delta_sums_count_since_the_previous_push_and_cumulative_ones_since_the_start() {
        for (delta, second) in [(true, 2), (false, 7)] {
            let tally = Tally::default();
            tally.set_active(true);
            written(&tally, 5);
            let first = render(&tally, ClientRole::Producer, delta);
            tally.taken();
            assert_eq!(
                value(&first, "org.apache.kafka.producer.topic.record.send.total"),
                [Value::Int(5)]
            );
            written(&tally, 2);
            let next = render(&tally, ClientRole::Producer, delta);
            assert_eq!(
                value(&next, "org.apache.kafka.producer.topic.record.send.total"),
                [Value::Int(second)]
            );
            assert_eq!(
                value(&next, "org.apache.kafka.producer.topic.byte.total"),
                [Value::Int(second * 10)]
            );
        }
    }

    #[test]
    fn a_refused_push_leaves_its_counts_to_the_next() {
        let tally = Tally::default();
        tally.set_active(true);
        written(&tally, 5);
        let refused = render(&tally, ClientRole::Producer, true);
        assert_eq!(
            value(
                &refused,
                "org.apache.kafka.producer.topic.record.send.total"
            ),
            [Value::Int(5)]
        );
        written(&tally, 1);
        let next = render(&tally, ClientRole::Producer, true);
        tally.taken();
        assert_eq!(
            value(&next, "org.apache.kafka.producer.topic.record.send.total"),
            [Value::Int(6)]
        );
        let after = render(&tally, ClientRole::Producer, true);
        assert_eq!(
            value(&after, "org.apache.kafka.producer.topic.record.send.total"),
            [Value::Int(0)]
        );
    }

    #[test]
    fn latencies_average_per_node_and_start_again_after_a_push() {
        let tally = Tally::default();
        tally.set_active(true);
        let answered = |address: &'static str, ms: u64| Event::Request {
            broker: BrokerRef {
                address,
                connection: Some(1),
            },
            api_key: ApiKey::Produce as i16,
            api_version: 9,
            latency: Duration::from_millis(ms),
            outcome: RequestOutcome::Answered,
        };
        tally.on_event(&answered("b1:9092", 2));
        tally.on_event(&answered("b1:9092", 4));
        // a bootstrap address not in the metadata has no node id: left out
        tally.on_event(&answered("bootstrap:9092", 100));
        let metrics = render(&tally, ClientRole::Producer, true);
        assert_eq!(
            value(
                &metrics,
                "org.apache.kafka.producer.node.request.latency.avg"
            ),
            [Value::Double(3.0)]
        );
        assert_eq!(
            value(
                &metrics,
                "org.apache.kafka.producer.node.request.latency.max"
            ),
            [Value::Double(4.0)]
        );
        assert_eq!(
            value(&metrics, "org.apache.kafka.producer.request.latency.max"),
            [Value::Double(100.0)]
        );
        let again = render(&tally, ClientRole::Producer, true);
        assert!(value(&again, "org.apache.kafka.producer.node.request.latency.avg").is_empty());
    }

    #[test]
    fn a_consumer_reports_lag_per_partition_until_the_partition_is_revoked() {
        let tally = Tally::default();
        tally.set_active(true);
        let tp = |p| TopicPartition {
            topic: "orders".into(),
            partition: p,
        };
        let assigned = [tp(0), tp(1)];
        tally.on_event(&Event::Rebalance {
            group: "g",
            change: PartitionChange::Assigned,
            partitions: &assigned,
        });
        for (partition, lag) in [(0, 7), (1, 0)] {
            tally.on_event(&Event::Fetched {
                node: 1,
                topic: "orders",
                partition,
                records: 3,
                bytes: 30,
                high_watermark: 10,
                lag: Some(lag),
                error_code: 0,
            });
        }
        let metrics = render(&tally, ClientRole::Consumer, true);
        assert_eq!(
            value(
                &metrics,
                "org.apache.kafka.consumer.fetch.manager.records.lag"
            ),
            [Value::Int(7), Value::Int(0)]
        );
        assert_eq!(
            value(
                &metrics,
                "org.apache.kafka.consumer.coordinator.assigned.partitions"
            ),
            [Value::Int(2)]
        );
        assert_eq!(
            value(
                &metrics,
                "org.apache.kafka.consumer.fetch.manager.records.consumed.total"
            ),
            [Value::Int(6)]
        );
        tally.taken();
        let revoked = [tp(0)];
        tally.on_event(&Event::Rebalance {
            group: "g",
            change: PartitionChange::Revoked,
            partitions: &revoked,
        });
        let metrics = render(&tally, ClientRole::Consumer, true);
        assert_eq!(
            value(
                &metrics,
                "org.apache.kafka.consumer.fetch.manager.records.lag"
            ),
            [Value::Int(0)]
        );
        assert_eq!(
            value(
                &metrics,
                "org.apache.kafka.consumer.coordinator.rebalance.total"
            ),
            [Value::Int(1)]
        );
    }
}
