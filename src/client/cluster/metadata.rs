//! The metadata cache: brokers, topics, partitions, leaders and their epochs.
//!
//! A response only replaces what it describes: a refresh of one topic leaves the others as
//! they were. Leader epochs never go backwards: an answer from a broker that lags behind the
//! controller cannot undo a newer leader we already know.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::MetadataResponse;

use crate::client::error::{Error, Result};

/// A broker of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// `node.id`.
    pub id: i32,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: i32,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`, as dialled.
    #[must_use]
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Its index.
    pub partition: i32,
    /// The leader's node id, -1 while there is none.
    pub leader: i32,
    /// The leader epoch, -1 when the broker does not say.
    pub leader_epoch: i32,
    /// Every replica's node id.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// The partition-level error the broker reported (e.g. `LEADER_NOT_AVAILABLE`).
    pub error: Option<ResponseError>,
}

/// A topic as the cluster last described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic's name.
    pub name: Arc<str>,
    /// The topic id (KIP-516), nil on brokers that do not send it.
    pub id: uuid_bytes::Uuid,
    /// Whether it is internal (`__consumer_offsets`, ...).
    pub internal: bool,
    /// Partitions, indexed by partition number.
    pub partitions: Vec<PartitionInfo>,
    /// The topic-level error, if any (`UNKNOWN_TOPIC_OR_PARTITION`, ...).
    pub error: Option<ResponseError>,
}

pub(crate) mod uuid_bytes {
    /// A topic id as the broker sends it.
    pub type Uuid = [u8; 16];
}

/// Everything the client knows of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The node id of the controller the broker named (-1 if none).
    pub controller_id: i32,
    /// Brokers by node id.
    pub brokers: HashMap<i32, BrokerInfo>,
    /// Topics by name.
    pub topics: HashMap<String, Arc<TopicInfo>>,
}

impl Metadata {
    /// The leader's node id and epoch for a partition, if it currently has a leader.
    #[must_use]
    pub fn leader(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        let info = self.topics.get(topic)?;
        let p = info.partitions.get(usize::try_from(partition).ok()?)?;
        (p.leader >= 0 && self.brokers.contains_key(&p.leader))
            .then_some((p.leader, p.leader_epoch))
    }

    /// The address of a broker.
    #[must_use]
    pub fn address_of(&self, node: i32) -> Option<String> {
        self.brokers.get(&node).map(BrokerInfo::address)
    }

    /// Folds a Metadata response into the cache.
    ///
    /// `all_topics` says the request asked for every topic: topics the answer omits are then
    /// gone from the cluster and leave the cache too.
    pub fn merge(&mut self, response: MetadataResponse, all_topics: bool) -> Result<()> {
        let mut brokers = HashMap::with_capacity(response.brokers.len());
        for b in response.brokers {
            let port = b.port;
            if !(1..=65535).contains(&port) {
                return Err(Error::protocol(format_args!(
                    "broker {} has port {port}",
                    b.node_id.0
                )));
            }
            brokers.insert(
                b.node_id.0,
                BrokerInfo {
                    id: b.node_id.0,
                    host: b.host.to_string(),
                    port,
                    rack: b.rack.map(|r| r.to_string()),
                },
            );
        }
        if !brokers.is_empty() {
            self.brokers = brokers;
        }
        if let Some(id) = response.cluster_id {
            self.cluster_id = Some(id.to_string());
        }
        self.controller_id = response.controller_id.0;
        if all_topics {
            self.topics.clear();
        }
        for t in response.topics {
            let Some(mut topic) = topic_from(t)? else {
                continue;
            };
            if let Some(old) = self.topics.get(topic.name.as_ref()) {
                // Keep the newer leader where a lagging broker answered with an older epoch.
                for p in &mut topic.partitions {
                    if let Some(known) = old.partitions.get(p.partition as usize)
                        && p.leader_epoch >= 0
                        && known.leader_epoch > p.leader_epoch
                    {
                        *p = known.clone();
                    }
                }
            }
            if topic.error == Some(ResponseError::UnknownTopicOrPartition) {
                self.topics.remove(topic.name.as_ref());
            } else {
                self.topics.insert(topic.name.to_string(), Arc::new(topic));
            }
        }
        Ok(())
    }
}

/// Reads one topic of a Metadata response; `None` for an entry without a name.
fn topic_from(
    t: kafka_protocol::messages::metadata_response::MetadataResponseTopic,
) -> Result<Option<TopicInfo>> {
    let Some(name) = t.name else {
        return Ok(None);
    };
    let name: Arc<str> = Arc::from(name.as_str());
    let count = t.partitions.len();
    let mut partitions: Vec<Option<PartitionInfo>> = vec![None; count];
    for p in t.partitions {
        let index = usize::try_from(p.partition_index)
            .ok()
            .filter(|i| *i < count)
            .ok_or_else(|| {
                Error::protocol(format_args!(
                    "topic {name} lists partition {} of {count}",
                    p.partition_index
                ))
            })?;
        if partitions[index].is_some() {
            return Err(Error::protocol(format_args!(
                "topic {name} lists partition {index} twice"
            )));
        }
        partitions[index] = Some(PartitionInfo {
            partition: p.partition_index,
            leader: p.leader_id.0,
            leader_epoch: p.leader_epoch,
            replicas: p.replica_nodes.iter().map(|n| n.0).collect(),
            isr: p.isr_nodes.iter().map(|n| n.0).collect(),
            error: ResponseError::try_from_code(p.error_code),
        });
    }
    // Every slot is filled: `count` distinct indexes below `count`.
    let partitions = partitions.into_iter().flatten().collect();
    Ok(Some(TopicInfo {
        name,
        id: *t.topic_id.as_bytes(),
        internal: t.is_internal,
        partitions,
        error: ResponseError::try_from_code(t.error_code),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn response(partitions: &[(i32, i32, i32)]) -> MetadataResponse {
        let topic = MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(index, leader, epoch)| {
                        MetadataResponsePartition::default()
                            .with_partition_index(index)
                            .with_leader_id(BrokerId(leader))
                            .with_leader_epoch(epoch)
                    })
                    .collect(),
            );
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(9092),
            ])
            .with_topics(vec![topic])
    }

    #[test]
    fn a_lagging_answer_cannot_undo_a_newer_leader() {
        let mut m = Metadata::default();
        assert!(m.merge(response(&[(0, 1, 5), (1, 1, 2)]), false).is_ok());
        assert!(m.merge(response(&[(0, 1, 4), (1, 1, 3)]), false).is_ok());
        let t = &m.topics["t"];
        assert_eq!(t.partitions[0].leader_epoch, 5);
        assert_eq!(t.partitions[1].leader_epoch, 3);
        assert_eq!(m.leader("t", 1), Some((1, 3)));
        assert_eq!(m.leader("t", 2), None);
    }

    #[test]
    fn partition_indexes_are_checked() {
        let mut m = Metadata::default();
        assert!(m.merge(response(&[(0, 1, 0), (7, 1, 0)]), false).is_err());
        assert!(m.merge(response(&[(0, 1, 0), (0, 1, 0)]), false).is_err());
        assert!(m.merge(response(&[(-1, 1, 0)]), false).is_err());
    }
}
