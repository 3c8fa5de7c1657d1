//! Statistics in librdkafka's shape: an [`Observer`] that tallies the client's events and
//! renders them as the JSON document `statistics.interval.ms` makes librdkafka emit, with its
//! field names (the main ones; see [`StatisticsObserver::to_json`]).
//!
//! Invariants:
//! - every figure comes from an event, so it agrees with what any other observer heard;
//! - totals only grow; the round-trip figures (`rtt`) cover the window since the last
//!   rendering, as librdkafka's do, and each rendering starts a new window;
//! - what is tallied is bounded by the topics, partitions, brokers and groups in use.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::client::observe::{Event, Interest, Observer, PartitionChange, RequestOutcome};

/// Tallies the client's events for librdkafka-style statistics.
///
/// Register it as an observer (the adapter does so for `statistics.interval.ms` and logs a
/// rendering at INFO every interval), then call [`to_json`](Self::to_json) when a report is
/// due.
#[derive(Debug)]
pub struct StatisticsObserver {
    name: String,
    started: Instant,
    tally: Mutex<Tally>,
}

#[derive(Debug, Default)]
struct Tally {
    /// Per `client.id` of a producer: its last queue sample (records, bytes).
    queues: BTreeMap<String, (usize, usize)>,
    tx: u64,
    rx: u64,
    txerrs: u64,
    txmsgs: u64,
    txmsg_bytes: u64,
    rxmsgs: u64,
    rxmsg_bytes: u64,
    txretries: u64,
    brokers: BTreeMap<String, BrokerTally>,
    partitions: BTreeMap<(String, i32), PartitionTally>,
    groups: BTreeMap<String, GroupTally>,
}

impl Tally {
    fn request(&mut self, address: &str, latency: Duration, answered: bool) {
        self.tx += 1;
        if answered {
            self.rx += 1;
        } else {
            self.txerrs += 1;
        }
        let b = self.brokers.entry(address.to_owned()).or_default();
        b.tx += 1;
        if answered {
            b.rx += 1;
            b.rtt.add(latency);
        } else {
            b.txerrs += 1;
        }
    }

    fn write_brokers(&mut self, out: &mut String) {
        key(out, "brokers");
        out.push('{');
        for (address, b) in &mut self.brokers {
            key(out, address);
            out.push('{');
            field_str(out, "name", address);
            field_str(out, "state", if b.connections > 0 { "UP" } else { "DOWN" });
            for (k, v) in [
                ("connects", b.connects),
                ("connect_fails", b.connect_fails),
                ("disconnects", b.disconnects),
                ("tx", b.tx),
                ("rx", b.rx),
                ("txerrs", b.txerrs),
            ] {
                field_num(out, k, v);
            }
            key(out, "rtt");
            let _ = write!(
                out,
                "{{\"min\":{},\"max\":{},\"avg\":{},\"cnt\":{}}}",
                b.rtt.min,
                b.rtt.max,
                b.rtt.avg(),
                b.rtt.count
            );
            b.rtt = Window::default();
            close(out);
        }
        close(out);
    }

    fn write_topics(&self, out: &mut String) {
        key(out, "topics");
        out.push('{');
        let mut topic: Option<&str> = None;
        for ((name, partition), p) in &self.partitions {
            if topic != Some(name.as_str()) {
                if topic.is_some() {
                    close(out); // partitions
                    close(out); // topic
                }
                key(out, name);
                out.push('{');
                field_str(out, "topic", name);
                key(out, "partitions");
                out.push('{');
                topic = Some(name);
            }
            key(out, &partition.to_string());
            let _ = write!(
                out,
                "{{\"partition\":{partition},\"consumer_lag\":{},\"hi_offset\":{},\"txmsgs\":{},\
             \"txbytes\":{},\"rxmsgs\":{},\"rxbytes\":{}}},",
                p.consumer_lag, p.hi_offset, p.txmsgs, p.txbytes, p.rxmsgs, p.rxbytes
            );
        }
        if topic.is_some() {
            close(out);
            close(out);
        }
        close(out);
    }

    fn write_groups(&self, out: &mut String) {
        key(out, "cgrp");
        out.push('{');
        for (group, g) in &self.groups {
            key(out, group);
            let _ = write!(
                out,
                "{{\"rebalance_cnt\":{},\"assignment_size\":{},\"commits\":{},\"commit_errors\":{}}},",
                g.rebalance_cnt, g.assignment_size, g.commits, g.commit_errors
            );
        }
        close(out);
    }
}

#[derive(Debug, Default)]
struct BrokerTally {
    connections: i64,
    connects: u64,
    connect_fails: u64,
    disconnects: u64,
    tx: u64,
    rx: u64,
    txerrs: u64,
    /// Round trips of this window, in microseconds.
    rtt: Window,
}

#[derive(Debug, Default)]
struct Window {
    count: u64,
    sum: u64,
    min: u64,
    max: u64,
}

impl Window {
    fn add(&mut self, sample: Duration) {
        let us = u64::try_from(sample.as_micros()).unwrap_or(u64::MAX);
        self.min = if self.count == 0 {
            us
        } else {
            self.min.min(us)
        };
        self.max = self.max.max(us);
        self.sum = self.sum.saturating_add(us);
        self.count += 1;
    }

    fn avg(&self) -> u64 {
        self.sum.checked_div(self.count).unwrap_or(0)
    }
}

#[derive(Debug)]
struct PartitionTally {
    consumer_lag: i64,
    hi_offset: i64,
    txmsgs: u64,
    txbytes: u64,
    rxmsgs: u64,
    rxbytes: u64,
}

impl Default for PartitionTally {
    fn default() -> Self {
        // librdkafka's "unknown" for the offsets it has not learnt
        PartitionTally {
            consumer_lag: -1,
            hi_offset: -1,
            txmsgs: 0,
            txbytes: 0,
            rxmsgs: 0,
            rxbytes: 0,
        }
    }
}

#[derive(Debug, Default)]
struct GroupTally {
    rebalance_cnt: u64,
    assignment_size: i64,
    commits: u64,
    commit_errors: u64,
}

fn n(count: usize) -> u64 {
    u64::try_from(count).unwrap_or(u64::MAX)
}

impl StatisticsObserver {
    /// An observer whose renderings carry `name` as librdkafka's `name` and `client_id`.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        StatisticsObserver {
            name: name.into(),
            started: Instant::now(),
            tally: Mutex::new(Tally::default()),
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The statistics so far as one JSON object, with librdkafka's field names: `name`,
    /// `client_id`, `type`, `ts` and `age` (µs since the observer started), `time` (Unix
    /// seconds), `msg_cnt` and `msg_size` (records and bytes queued in the producers), `tx`,
    /// `rx`, `txerrs` (requests sent, answered, failed), `txmsgs`, `txmsg_bytes`, `rxmsgs`,
    /// `rxmsg_bytes`, `txretries`; `brokers` by address (`name`, `state`, `connects`,
    /// `connect_fails`, `disconnects`, `tx`, `rx`, `txerrs`, `rtt` with `min`, `max`, `avg`,
    /// `cnt` in µs over the window since the last rendering); `topics` with their `partitions`
    /// (`partition`, `consumer_lag`, `hi_offset`, `txmsgs`, `txbytes`, `rxmsgs`, `rxbytes`);
    /// and `cgrp` by group (`rebalance_cnt`, `assignment_size`, `commits`, `commit_errors`;
    /// librdkafka has one group per handle, so its `cgrp` is the object, here it is keyed).
    ///
    /// Each rendering starts a new `rtt` window.
    #[must_use]
    pub fn to_json(&self) -> String {
        let age = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut t = self.tally();
        let (msg_cnt, msg_size) = t
            .queues
            .values()
            .fold((0, 0), |(r, b), (qr, qb)| (r + qr, b + qb));
        let mut out = String::with_capacity(512);
        out.push('{');
        field_str(&mut out, "name", &self.name);
        field_str(&mut out, "client_id", &self.name);
        field_str(&mut out, "type", "client");
        for (key, value) in [
            ("ts", age),
            ("time", time),
            ("age", age),
            ("msg_cnt", n(msg_cnt)),
            ("msg_size", n(msg_size)),
            ("tx", t.tx),
            ("rx", t.rx),
            ("txerrs", t.txerrs),
            ("txmsgs", t.txmsgs),
            ("txmsg_bytes", t.txmsg_bytes),
            ("rxmsgs", t.rxmsgs),
            ("rxmsg_bytes", t.rxmsg_bytes),
            ("txretries", t.txretries),
        ] {
            field_num(&mut out, key, value);
        }
        t.write_brokers(&mut out);
        t.write_topics(&mut out);
        t.write_groups(&mut out);
        close(&mut out);
        // the object's own trailing comma
        if out.ends_with(',') {
            out.pop();
        }
        out
    }

    fn broker<'t>(t: &'t mut Tally, address: &str) -> &'t mut BrokerTally {
        t.brokers.entry(address.to_owned()).or_default()
    }

    fn partition<'t>(t: &'t mut Tally, topic: &str, partition: i32) -> &'t mut PartitionTally {
        t.partitions
            .entry((topic.to_owned(), partition))
            .or_default()
    }
}

/// `"key":`, escaped.
fn key(out: &mut String, k: &str) {
    string(out, k);
    out.push(':');
}

fn field_str(out: &mut String, k: &str, v: &str) {
    key(out, k);
    string(out, v);
    out.push(',');
}

fn field_num(out: &mut String, k: &str, v: u64) {
    key(out, k);
    let _ = write!(out, "{v},");
}

/// Ends an object whose members each end with a comma.
fn close(out: &mut String) {
    if out.ends_with(',') {
        out.pop();
    }
    out.push_str("},");
}

fn string(out: &mut String, s: &str) {
    crate::client::json::push_string(out, s);
}

impl Observer for StatisticsObserver {
    fn interest(&self) -> Interest {
        // not the per-record deliveries: librdkafka's statistics have no such figure
        Interest::CONNECTIONS
            | Interest::REQUESTS
            | Interest::PRODUCE
            | Interest::FETCH
            | Interest::GROUP
            | Interest::STATISTICS
    }

    fn on_event(&self, event: &Event<'_>) {
        let mut t = self.tally();
        match *event {
            Event::ConnectionOpened { broker, .. } => {
                let b = Self::broker(&mut t, broker.address);
                b.connects += 1;
                b.connections += 1;
            }
            Event::ConnectFailed { broker, .. } => {
                Self::broker(&mut t, broker.address).connect_fails += 1;
            }
            Event::ConnectionLost { broker, .. } => {
                let b = Self::broker(&mut t, broker.address);
                b.disconnects += 1;
                b.connections -= 1;
            }
            Event::Request {
                broker,
                latency,
                outcome,
                ..
            } => t.request(
                broker.address,
                latency,
                matches!(outcome, RequestOutcome::Answered),
            ),
            Event::BatchWritten {
                topic,
                partition,
                records,
                bytes,
                ..
            } => {
                t.txmsgs += n(records);
                t.txmsg_bytes += n(bytes);
                let p = Self::partition(&mut t, topic, partition);
                p.txmsgs += n(records);
                p.txbytes += n(bytes);
            }
            Event::ProduceRetry { .. } => t.txretries += 1,
            Event::ProducerQueue {
                client_id,
                records,
                bytes,
                ..
            } => {
                t.queues.insert(client_id.to_owned(), (records, bytes));
            }
            Event::Fetched {
                topic,
                partition,
                records,
                bytes,
                high_watermark,
                lag,
                ..
            } => {
                t.rxmsgs += n(records);
                t.rxmsg_bytes += n(bytes);
                let p = Self::partition(&mut t, topic, partition);
                p.rxmsgs += n(records);
                p.rxbytes += n(bytes);
                if high_watermark >= 0 {
                    p.hi_offset = high_watermark;
                }
                if let Some(lag) = lag {
                    p.consumer_lag = lag;
                }
            }
            Event::Rebalance {
                group,
                change,
                partitions,
            } => {
                let g = t.groups.entry(group.to_owned()).or_default();
                g.rebalance_cnt += 1;
                let k = i64::try_from(partitions.len()).unwrap_or(i64::MAX);
                match change {
                    PartitionChange::Assigned => g.assignment_size += k,
                    PartitionChange::Revoked | PartitionChange::Lost => g.assignment_size -= k,
                }
            }
            Event::Commit { group, error, .. } => {
                let g = t.groups.entry(group.to_owned()).or_default();
                g.commits += 1;
                if error.is_some() {
                    g.commit_errors += 1;
                }
            }
            Event::BatchFailed { .. }
            | Event::ProducerFatal { .. }
            | Event::Delivered { .. }
            | Event::Settled { .. }
            | Event::DeliveryCounts { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::observe::BrokerRef;

    #[test]
    fn a_rendering_is_json_with_librdkafkas_names() {
        let stats = StatisticsObserver::new("svc \"a\"");
        let broker = BrokerRef {
            address: "b1:9092",
            connection: Some(1),
        };
        stats.on_event(&Event::ConnectionOpened {
            broker,
            took: Duration::from_millis(3),
        });
        for ms in [2, 4] {
            stats.on_event(&Event::Request {
                broker,
                api_key: 0,
                api_version: 9,
                latency: Duration::from_millis(ms),
                outcome: RequestOutcome::Answered,
            });
        }
        stats.on_event(&Event::BatchWritten {
            node: 1,
            topic: "t",
            partition: 0,
            records: 5,
            bytes: 50,
            base_offset: 0,
            retries: 0,
            latency: Duration::from_millis(4),
        });
        stats.on_event(&Event::Fetched {
            node: 1,
            topic: "t",
            partition: 1,
            records: 3,
            bytes: 90,
            high_watermark: 10,
            lag: Some(7),
            error_code: 0,
        });
        stats.on_event(&Event::ProducerQueue {
            client_id: "svc",
            records: 2,
            bytes: 20,
            requests_in_flight: 1,
        });
        let json = stats.to_json();
        let v: serde_json::Value = serde_json::from_str(&json).expect(&json);
        assert_eq!(v["name"], "svc \"a\"");
        assert_eq!(v["tx"], 2);
        assert_eq!(v["rx"], 2);
        assert_eq!(v["txmsgs"], 5);
        assert_eq!(v["rxmsg_bytes"], 90);
        assert_eq!(v["msg_cnt"], 2);
        assert_eq!(v["msg_size"], 20);
        assert_eq!(v["brokers"]["b1:9092"]["state"], "UP");
        assert_eq!(v["brokers"]["b1:9092"]["rtt"]["cnt"], 2);
        assert_eq!(v["brokers"]["b1:9092"]["rtt"]["avg"], 3000);
        assert_eq!(v["topics"]["t"]["partitions"]["1"]["consumer_lag"], 7);
        assert_eq!(v["topics"]["t"]["partitions"]["1"]["hi_offset"], 10);
        assert_eq!(v["topics"]["t"]["partitions"]["0"]["txmsgs"], 5);
        assert_eq!(v["topics"]["t"]["partitions"]["0"]["consumer_lag"], -1);
        // the next rendering starts a new rtt window; totals stay
        let v: serde_json::Value = serde_json::from_str(&stats.to_json()).expect("json");
        assert_eq!(v["brokers"]["b1:9092"]["rtt"]["cnt"], 0);
        assert_eq!(v["tx"], 2);
        // empty maps render as empty objects
        let empty: serde_json::Value =
            serde_json::from_str(&StatisticsObserver::new("x").to_json()).expect("json");
        assert_eq!(empty["topics"], serde_json::json!({}));
        assert_eq!(empty["cgrp"], serde_json::json!({}));
    }
}
