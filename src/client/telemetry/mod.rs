//! KIP-714 client telemetry: with `enable.metrics.push` (on by default, as in librdkafka and
//! the Java client), a client asks a broker which of its metrics the cluster subscribes to
//! (`GetTelemetrySubscriptions`) and pushes them every interval (`PushTelemetry`), as OTLP
//! protobuf, under the Java client's metric names.
//!
//! Invariants:
//! - telemetry never holds the client up: it runs on a task of its own, and a broker without a
//!   telemetry receiver (it advertises neither API; a DEBUG line) or an error that retrying
//!   cannot fix (one WARN line) ends it for the client's life;
//! - the task holds the client only while a request is under way, so dropping the client
//!   ends the task;
//! - a push never exceeds the broker's `TelemetryMaxBytes`: whole metrics are left out until
//!   it fits;
//! - [`Client::push_final_metrics`](super::Client::push_final_metrics) sends the one push
//!   marked terminating, after which the client pushes no more.

mod otlp;
mod schedule;
mod tally;

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
};
use kafka_protocol::protocol::VersionRange;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use self::otlp::{Attribute, Metric};
use self::schedule::{Outcome, Step};
pub(crate) use self::tally::Tally;
use super::net::Connection;
use super::records::{Codec, compression};
use super::{Client, Inner};

/// The kind of client a [`Client`] stands for in its KIP-714 pushes, which names its metrics
/// (`org.apache.kafka.producer.*` or `org.apache.kafka.consumer.*`), as librdkafka's producer
/// and consumer handles do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientRole {
    /// A producer (and the admin work done beside it).
    #[default]
    Producer,
    /// A consumer.
    Consumer,
}

/// The only version of both APIs (KIP-714).
const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// The push interval when the broker names none (the Java client's default).
const DEFAULT_INTERVAL: Duration = Duration::from_mins(5);

/// How long the terminating push may take (a client being closed waits for it).
const FINAL_PUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Which metrics a subscription asks for.
#[derive(Debug, Clone)]
enum Selector {
    All,
    Prefixes(Vec<String>),
}

impl Selector {
    fn of(requested: &[String]) -> Option<Selector> {
        match requested {
            [] => None,
            [all] if all == "*" || all.is_empty() => Some(Selector::All),
            prefixes => Some(Selector::Prefixes(prefixes.to_vec())),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Selector::All => true,
            Selector::Prefixes(p) => p.iter().any(|p| name.starts_with(p.as_str())),
        }
    }
}

/// What the broker's last answer to `GetTelemetrySubscriptions` set.
#[derive(Debug, Clone)]
struct Subscription {
    id: i32,
    codec: Codec,
    interval: Duration,
    max_bytes: usize,
    delta: bool,
    selector: Option<Selector>,
}

#[derive(Debug)]
struct Shared {
    /// Nil until the broker assigns one.
    instance_id: Uuid,
    subscription: Option<Subscription>,
    /// The broker the client talks telemetry to while it answers.
    address: Option<String>,
    /// The previous push (or the start), for deltas and rates.
    last_push: (Instant, u64),
    /// The start of cumulative sums, in Unix nanoseconds.
    started_nanos: u64,
    /// Set by the terminating push: no push after it.
    over: bool,
}

/// A client's telemetry: its tally (an observer of the client) and the state its task shares
/// with the terminating push.
#[derive(Debug)]
pub(crate) struct Telemetry {
    tally: Arc<Tally>,
    shared: Mutex<Shared>,
    stop: Notify,
    /// True once the first subscription request has its outcome (or telemetry ended): the
    /// terminating push of a client closed right after its start waits for it.
    settled: tokio::sync::watch::Sender<bool>,
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl Telemetry {
    pub(crate) fn new() -> Self {
        let now = unix_nanos();
        Telemetry {
            // Counting from the start, so the first push has the connections of the start; the
            // first answer turns it off when no metric is wanted.
            tally: Arc::new(Tally::counting()),
            shared: Mutex::new(Shared {
                instance_id: Uuid::nil(),
                subscription: None,
                address: None,
                last_push: (Instant::now(), now),
                started_nanos: now,
                over: false,
            }),
            stop: Notify::new(),
            settled: tokio::sync::watch::Sender::new(false),
        }
    }

    /// The observer to register on the client's configuration.
    pub(crate) fn tally(&self) -> Arc<Tally> {
        Arc::clone(&self.tally)
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client instance id the broker gave, if it gave one yet.
    pub(crate) fn instance_id(&self) -> Option<Uuid> {
        let id = self.shared().instance_id;
        (!id.is_nil()).then_some(id)
    }

    /// The telemetry connection: the broker used before while it answers, else any.
    async fn connection(&self, client: &Client) -> super::Result<Arc<Connection>> {
        let address = self.shared().address.clone();
        if let Some(address) = address
            && let Ok(conn) = client.inner.connections.get(&address).await
        {
            return Ok(conn);
        }
        let conn = client.any_connection().await?;
        self.shared().address = Some(conn.address().to_owned());
        Ok(conn)
    }

    fn forget_broker(&self) {
        self.shared().address = None;
    }

    async fn subscribe(&self, client: &Client) -> Step {
        let floor = client.inner.config.retry_backoff;
        let Ok(conn) = self.connection(client).await else {
            return schedule::after_subscribe(Outcome::Unanswered, DEFAULT_INTERVAL, floor, 1.0);
        };
        if conn
            .version_of::<GetTelemetrySubscriptionsRequest>(VERSIONS)
            .is_err()
        {
            // Most clusters have no receiver: that is no incident, so DEBUG.
            tracing::debug!(
                broker = conn.address(),
                "client telemetry (KIP-714) is off: the broker has no telemetry receiver"
            );
            return Step::Disabled;
        }
        let instance_id = self.shared().instance_id;
        let request =
            GetTelemetrySubscriptionsRequest::default().with_client_instance_id(instance_id);
        let answer = conn
            .send(&request, 0, client.inner.config.socket_timeout)
            .await;
        let jitter = 0.5 + fastrand::f64();
        match answer {
            Err(e) => {
                tracing::debug!(error = %e, "GetTelemetrySubscriptions failed");
                self.forget_broker();
                schedule::after_subscribe(Outcome::Unanswered, self.interval(), floor, jitter)
            }
            Ok(r) if r.error_code != 0 => {
                let step = schedule::after_subscribe(
                    Outcome::Refused(r.error_code),
                    self.interval(),
                    floor,
                    jitter,
                );
                log_refusal("GetTelemetrySubscriptions", r.error_code, step);
                step
            }
            Ok(r) => {
                let subscription = self.adopt(&r);
                let wants = subscription.selector.is_some();
                self.tally.set_active(wants);
                let step = schedule::after_subscribe(
                    Outcome::Ok {
                        wants_metrics: wants,
                    },
                    subscription.interval,
                    floor,
                    jitter,
                );
                tracing::debug!(
                    instance = %self.shared().instance_id,
                    subscription = subscription.id,
                    interval = ?subscription.interval,
                    wants,
                    "client telemetry subscription"
                );
                self.shared().subscription = Some(subscription);
                step
            }
        }
    }

    fn interval(&self) -> Duration {
        self.shared()
            .subscription
            .as_ref()
            .map_or(DEFAULT_INTERVAL, |s| s.interval)
    }

    /// The subscription an answer describes; the instance id it assigns is kept.
    fn adopt(&self, r: &GetTelemetrySubscriptionsResponse) -> Subscription {
        if !r.client_instance_id.is_nil() {
            self.shared().instance_id = r.client_instance_id;
        }
        // The broker lists the codecs it accepts by preference; take the first this client has.
        let codec = r
            .accepted_compression_types
            .iter()
            .find_map(|id| {
                Codec::from_attributes(i16::from(*id))
                    .ok()
                    .filter(|c| *c != Codec::None)
            })
            .unwrap_or(Codec::None);
        let requested: Vec<String> = r
            .requested_metrics
            .iter()
            .map(|m| m.as_str().to_owned())
            .collect();
        Subscription {
            id: r.subscription_id,
            codec,
            interval: u64::try_from(r.push_interval_ms)
                .ok()
                .filter(|ms| *ms > 0)
                .map_or(DEFAULT_INTERVAL, Duration::from_millis),
            max_bytes: usize::try_from(r.telemetry_max_bytes)
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or(1 << 20),
            delta: r.delta_temporality,
            selector: Selector::of(&requested),
        }
    }

    /// The push's body: the subscribed metrics, whole ones left out from the end until the
    /// compressed body fits `max_bytes`.
    fn body(&self, client: &Client, subscription: &Subscription) -> (Codec, Bytes, (Instant, u64)) {
        let now = (Instant::now(), unix_nanos());
        let (now_nanos, elapsed, start_nanos) = {
            let shared = self.shared();
            let (before, before_nanos) = shared.last_push;
            let start = if subscription.delta {
                before_nanos
            } else {
                shared.started_nanos
            };
            (now.1, now.0.saturating_duration_since(before), start)
        };
        let node_of = |address: &str| {
            client.with_metadata(|m| {
                m.brokers
                    .iter()
                    .find(|(_, b)| b.address() == address)
                    .map(|(id, _)| *id)
            })
        };
        let mut metrics: Vec<Metric> = self.tally.render(&tally::Render {
            role: client.inner.config.role,
            delta: subscription.delta,
            now_nanos,
            start_nanos,
            elapsed,
            node_of: &node_of,
        });
        if let Some(selector) = &subscription.selector {
            metrics.retain(|m| selector.matches(&m.name));
        }
        let resource = [
            (
                "client_id",
                Attribute::Str(client.inner.config.client_id.clone()),
            ),
            (
                "client_software_name",
                Attribute::Str(env!("CARGO_PKG_NAME").to_owned()),
            ),
            (
                "client_software_version",
                Attribute::Str(env!("CARGO_PKG_VERSION").to_owned()),
            ),
        ];
        loop {
            let plain = otlp::metrics_data(&resource, &metrics);
            let mut packed = Vec::new();
            let (codec, bytes) =
                match compression::compress(subscription.codec, -1, &plain, &mut packed) {
                    Ok(()) if subscription.codec != Codec::None => (subscription.codec, packed),
                    _ => (Codec::None, plain),
                };
            if bytes.len() <= subscription.max_bytes || metrics.is_empty() {
                return (codec, Bytes::from(bytes), now);
            }
            metrics.pop();
        }
    }

    async fn push(&self, client: &Client, terminating: bool, timeout: Duration) -> Step {
        let floor = client.inner.config.retry_backoff;
        let (subscription, instance_id) = {
            let shared = self.shared();
            (shared.subscription.clone(), shared.instance_id)
        };
        let Some(subscription) = subscription else {
            return Step::Subscribe { after: floor };
        };
        let Ok(conn) = self.connection(client).await else {
            return schedule::after_push(Outcome::Unanswered, subscription.interval, floor);
        };
        let (codec, metrics, at) = self.body(client, &subscription);
        let request = PushTelemetryRequest::default()
            .with_client_instance_id(instance_id)
            .with_subscription_id(subscription.id)
            .with_terminating(terminating)
            .with_compression_type(i8::try_from(codec.id()).unwrap_or(0))
            .with_metrics(metrics);
        match conn.send(&request, 0, timeout).await {
            Err(e) => {
                tracing::debug!(error = %e, "PushTelemetry failed");
                self.forget_broker();
                schedule::after_push(Outcome::Unanswered, subscription.interval, floor)
            }
            Ok(r) if r.error_code != 0 => {
                let step = schedule::after_push(
                    Outcome::Refused(r.error_code),
                    subscription.interval,
                    floor,
                );
                log_refusal("PushTelemetry", r.error_code, step);
                step
            }
            Ok(_) => {
                self.shared().last_push = at;
                self.tally.taken();
                schedule::after_push(
                    Outcome::Ok {
                        wants_metrics: true,
                    },
                    subscription.interval,
                    floor,
                )
            }
        }
    }

    /// The terminating push, once; then the task stops. A client closed before its first
    /// subscription answer arrived waits for it (within the same bound), so that a short-lived
    /// client's metrics still reach a cluster that subscribes to them.
    pub(crate) async fn finish(&self, client: &Client) {
        let timeout = client.inner.config.socket_timeout.min(FINAL_PUSH_TIMEOUT);
        let deadline = Instant::now() + timeout;
        let mut settled = self.settled.subscribe();
        let _ = tokio::time::timeout_at(deadline, settled.wait_for(|s| *s)).await;
        let wanted = {
            let mut shared = self.shared();
            let first = !shared.over;
            shared.over = true;
            first
                && shared
                    .subscription
                    .as_ref()
                    .is_some_and(|s| s.selector.is_some())
        };
        self.stop.notify_one();
        if wanted {
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = tokio::time::timeout(left, self.push(client, true, left)).await;
        }
        self.tally.set_active(false);
    }

    fn is_over(&self) -> bool {
        self.shared().over
    }
}

/// One line for a refusal: WARN when it ends telemetry, DEBUG when it will be retried.
fn log_refusal(api: &str, code: i16, step: Step) {
    let error = kafka_protocol::error::ResponseError::try_from_code(code);
    if step == Step::Disabled {
        tracing::warn!(
            api,
            error = ?error,
            "client telemetry (KIP-714) is off for this client: the broker refused it"
        );
    } else {
        tracing::debug!(api, error = ?error, "client telemetry refused; trying again");
    }
}

/// The telemetry task of the client `inner` points to: subscribe, push every interval, until
/// the client is dropped (`lifeline` closes: at once, not at the next wake-up), telemetry ends,
/// or the terminating push was sent.
pub(super) async fn run(
    inner: Weak<Inner>,
    telemetry: Arc<Telemetry>,
    mut lifeline: tokio::sync::watch::Receiver<()>,
) {
    let mut step = Step::Subscribe {
        after: Duration::ZERO,
    };
    loop {
        let after = match step {
            Step::Subscribe { after } | Step::Push { after } => after,
            Step::Disabled => {
                telemetry.tally.set_active(false);
                telemetry.settled.send_replace(true);
                return;
            }
        };
        tokio::select! {
            () = tokio::time::sleep(after) => {}
            () = telemetry.stop.notified() => return,
            _ = lifeline.changed() => return,
        }
        if telemetry.is_over() {
            return;
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let client = Client { inner };
        let timeout = client.inner.config.socket_timeout;
        step = match step {
            Step::Subscribe { .. } => {
                let next = telemetry.subscribe(&client).await;
                telemetry.settled.send_replace(true);
                next
            }
            Step::Push { .. } => telemetry.push(&client, false, timeout).await,
            Step::Disabled => Step::Disabled,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_selects_all_none_or_prefixes() {
        assert!(Selector::of(&[]).is_none());
        assert!(matches!(Selector::of(&["*".into()]), Some(Selector::All)));
        let some = Selector::of(&["org.apache.kafka.producer.topic.".into()]);
        assert!(
            some.as_ref()
                .is_some_and(|s| s.matches("org.apache.kafka.producer.topic.byte.total"))
        );
        assert!(!some.is_some_and(|s| s.matches("org.apache.kafka.producer.request.latency.avg")));
    }
}
