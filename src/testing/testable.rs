//! [`InProcess`] for [`KafkaBroker`] and [`TestableBroker`] for [`ConnectedKafkaBroker`]:
//! how `RustStream`'s `TestApp` runs a service on the embedded cluster.

use ruststream::testing::{Coordinator, InProcess, TestableBroker};
use ruststream::{HeaderMap, OutgoingMessage, RawMessage, Str};

use super::cluster::{ClusterOptions, EmbeddedCluster};
use super::link::InProcessLink;
use crate::broker::KafkaBroker;
use crate::client::{Header, Record};
use crate::connection::ConnectedKafkaBroker;
use crate::error::KafkaError;
use crate::message::{PARTITION_KEY_HEADER, is_partition_key};

/// librdkafka's default `message.max.bytes`, which the cluster takes as its own limit unless
/// the producer is allowed more.
const DEFAULT_MESSAGE_MAX: usize = 1_000_000;

impl InProcess for KafkaBroker {
    /// Connects the production broker to a fresh embedded cluster of its own: every
    /// subscription, publisher and transaction then runs the production code over in-memory
    /// pipes. The configured servers are never dialled, but refused as `connect` refuses them
    /// (none at all), and the producer configuration is validated exactly as `connect` does.
    async fn connect_in_process(self) -> Result<ConnectedKafkaBroker, KafkaError> {
        self.check_servers()?;
        let producer = self.producer_settings()?;
        let allowed = producer
            .producer_config()
            .message_max_bytes
            .max(DEFAULT_MESSAGE_MAX);
        let cluster = EmbeddedCluster::new(ClusterOptions {
            nodes: 1,
            auto_create_topics: true,
            num_partitions: 1,
            // The broker's limit counts batch framing: leave the producer's own check to
            // refuse first, as a broker configured to match it would.
            message_max_bytes: allowed + 1024,
            ..ClusterOptions::default()
        });
        // No session lapses on a test's clock: members leave when their subscriptions close.
        cluster.shared().hold_sessions();
        self.open(Some(InProcessLink::new(cluster))).await
    }
}

fn link_of(connected: &ConnectedKafkaBroker) -> &InProcessLink {
    match connected.state().in_process() {
        Some(link) => link,
        None => panic!(
            "this ConnectedKafkaBroker is connected to a live cluster; the harness reaches a \
             live broker through `publish`, not `inject`/`published`"
        ),
    }
}

impl TestableBroker for ConnectedKafkaBroker {
    fn install_coordinator(&self, coordinator: Coordinator) {
        if let Some(link) = self.state().in_process() {
            link.attach(coordinator);
        }
    }

    /// Writes the record as an external producer: the `kafka-partition-key` header becomes
    /// the key, no partition is pinned, no transaction. Panics if the cluster refuses it (an
    /// illegal topic name, a record over `message.max.bytes`).
    fn inject(&self, message: OutgoingMessage<'_>) {
        let link = link_of(self);
        let mut key = None;
        let mut headers = Vec::new();
        for (name, _) in message.headers().iter() {
            let value = message.headers().get_shared(name).unwrap_or_default();
            if is_partition_key(name) {
                key = Some(value);
            } else {
                headers.push(Header::new(
                    bytes::Bytes::copy_from_slice(name.as_bytes()),
                    Some(value),
                ));
            }
        }
        if let Err(refusal) =
            link.cluster
                .produce(message.name(), key.as_deref(), message.payload(), &headers)
        {
            panic!("the embedded cluster refused an injected record: {refusal}");
        }
    }

    /// Every visible record of `name`, with the headers a delivery reports (wire headers
    /// and the key as `kafka-partition-key`).
    fn published(&self, name: &str) -> Vec<RawMessage> {
        let link = link_of(self);
        let topic = Str::from(name.to_owned());
        link.cluster
            .records_in_order(name)
            .into_iter()
            .map(|record| {
                RawMessage::new(topic.clone(), record.value.clone().unwrap_or_default())
                    .with_headers(delivery_headers(&record))
            })
            .collect()
    }

    /// Kafka's routing, from the subscriptions opened: each consumer group owes a record to
    /// the first of its subscriptions (in registration order) that reads the topic, and every
    /// reader of named partitions owes it too.
    fn routes(&self, destination: &str, subscriptions: &[&str]) -> Vec<usize> {
        let opened = self.state().opened();
        let mut used = vec![false; opened.len()];
        let mut groups: Vec<Option<String>> = Vec::new();
        let mut routed = Vec::new();
        for (position, name) in subscriptions.iter().enumerate() {
            let found = opened
                .iter()
                .enumerate()
                .find(|(i, o)| !used[*i] && o.name == *name)
                .map(|(i, o)| (i, o.clone()));
            let Some((index, subscription)) = found else {
                continue;
            };
            used[index] = true;
            if !subscription.reads(destination) {
                continue;
            }
            if subscription.partitions {
                routed.push(position);
            } else if !groups.contains(&subscription.group) {
                groups.push(subscription.group.clone());
                routed.push(position);
            }
        }
        routed
    }
}

/// The headers a delivery of `record` reports.
fn delivery_headers(record: &Record) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(record.headers.len() + 1);
    for header in &record.headers {
        let name = String::from_utf8_lossy(&header.key).into_owned();
        if is_partition_key(&name) {
            continue;
        }
        map.insert(Str::from(name), header.value.unwrap_or_default());
    }
    if let Some(key) = &record.key {
        map.insert(PARTITION_KEY_HEADER, key.clone());
    }
    map
}

ruststream::register_testable_broker!(KafkaBroker);
