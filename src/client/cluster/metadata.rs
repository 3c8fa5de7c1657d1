//! The metadata cache: brokers, topics, partitions, leaders and their epochs.
//!
//! A response only replaces what it describes: a refresh of one topic leaves the others as
//! they were. Leader epochs never go backwards within one topic: an answer from a broker that
//! lags behind the controller cannot undo a newer leader we already know. A topic deleted and
//! created again under its name has a new id (KIP-516), and its epochs start again: nothing of
//! the old topic is kept for it.
//!
//! A leader named by a Produce or Fetch answer (KIP-951) is taken only when its epoch is newer
//! than the cached one, for the same topic id, and when the client can reach its node.

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
    /// A node as an answer described it (Metadata, or a Produce or Fetch answer's KIP-951
    /// node endpoints).
    #[must_use]
    pub fn described(id: i32, host: &str, port: i32, rack: Option<&str>) -> Self {
        BrokerInfo {
            id,
            host: host.to_owned(),
            port,
            rack: rack.map(str::to_owned),
        }
    }

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

    /// The id of no topic: what brokers before KIP-516 send.
    pub const NIL: Uuid = [0; 16];
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

/// A partition's new leader as a Produce or Fetch answer named it (KIP-951).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    /// The topic.
    pub topic: Arc<str>,
    /// The topic id the answer was for (nil when the request named topics).
    pub topic_id: uuid_bytes::Uuid,
    /// The partition.
    pub partition: i32,
    /// The new leader's node id.
    pub leader: i32,
    /// Its leader epoch.
    pub epoch: i32,
}

impl Metadata {
    /// The id of `topic` (KIP-516), when the cache knows the topic and the broker sent one.
    #[must_use]
    pub fn topic_id(&self, topic: &str) -> Option<uuid_bytes::Uuid> {
        self.topics
            .get(topic)
            .map(|t| t.id)
            .filter(|id| *id != uuid_bytes::NIL)
    }

    /// Takes the leaders that Produce or Fetch answers named (KIP-951), with the nodes those
    /// answers described; returns how many partitions changed leader.
    ///
    /// A hint counts only for a topic the cache knows under the same id, for a partition it
    /// has, with an epoch newer than the cached one, and for a node whose address is known
    /// (cached, or among `nodes`). The nodes an answer describes join the broker list, since
    /// a leader may be a broker the cache has not met yet.
    pub fn learn_leaders(&mut self, hints: &[LeaderHint], nodes: &[BrokerInfo]) -> usize {
        let mut changed = 0;
        for hint in hints {
            if hint.leader < 0 || hint.epoch < 0 {
                continue;
            }
            let reachable = self.brokers.contains_key(&hint.leader)
                || nodes.iter().any(|n| n.id == hint.leader);
            if !reachable {
                continue;
            }
            let Some(topic) = self.topics.get_mut(hint.topic.as_ref()) else {
                continue;
            };
            if hint.topic_id != uuid_bytes::NIL
                && topic.id != uuid_bytes::NIL
                && hint.topic_id != topic.id
            {
                continue;
            }
            let Ok(index) = usize::try_from(hint.partition) else {
                continue;
            };
            let newer = topic
                .partitions
                .get(index)
                .is_some_and(|p| hint.epoch > p.leader_epoch);
            if !newer {
                continue;
            }
            if let Some(p) = Arc::make_mut(topic).partitions.get_mut(index) {
                p.leader = hint.leader;
                p.leader_epoch = hint.epoch;
                p.error = None;
                changed += 1;
            }
        }
        if changed > 0 {
            for node in nodes {
                if (1..=65535).contains(&node.port) {
                    self.brokers.insert(node.id, node.clone());
                }
            }
        }
        changed
    }

    /// The leader's node id and epoch for a partition, if it currently has a leader.
    #[must_use]
    pub fn leader(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        self.leader_of(self.topics.get(topic)?, partition)
    }

    /// [`leader`](Self::leader) and [`topic_id`](Self::topic_id) with one lookup of the
    /// topic (the producer asks both for every partition it sends to).
    #[must_use]
    pub fn leader_and_topic_id(
        &self,
        topic: &str,
        partition: i32,
    ) -> (Option<(i32, i32)>, Option<uuid_bytes::Uuid>) {
        let Some(info) = self.topics.get(topic) else {
            return (None, None);
        };
        let id = Some(info.id).filter(|id| *id != uuid_bytes::NIL);
        (self.leader_of(info, partition), id)
    }

    fn leader_of(&self, info: &TopicInfo, partition: i32) -> Option<(i32, i32)> {
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
            if let Some(old) = self
                .topics
                .get(topic.name.as_ref())
                .filter(|old| old.id == topic.id)
            {
                // Keep the newer leader where a lagging broker answered with an older epoch
                // (of the same topic: a topic created again starts its epochs anew).
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

    fn with_id(mut r: MetadataResponse, id: u8) -> MetadataResponse {
        let mut bytes = [0u8; 16];
        bytes[0] = id;
        for t in &mut r.topics {
            t.topic_id = uuid::Uuid::from_bytes(bytes);
        }
        r
    }

    fn hint(leader: i32, epoch: i32, id: u8) -> LeaderHint {
        let mut topic_id = [0u8; 16];
        topic_id[0] = id;
        LeaderHint {
            topic: Arc::from("t"),
            topic_id,
            partition: 0,
            leader,
            epoch,
        }
    }

    /// A topic created again under its name starts its epochs anew: its leaders are taken,
    /// though their epochs are older than the old topic's.
    #[test]
    fn a_topic_created_again_is_not_mistaken_for_a_lagging_answer() {
        let mut m = Metadata::default();
        assert!(m.merge(with_id(response(&[(0, 1, 9)]), 1), false).is_ok());
        assert!(m.merge(with_id(response(&[(0, 1, 0)]), 2), false).is_ok());
        assert_eq!(m.leader("t", 0), Some((1, 0)));
        assert_eq!(m.topic_id("t").map(|id| id[0]), Some(2));
    }

    /// KIP-951: a newer leader named by an answer is taken, with the node it described; an
    /// older epoch, another topic id or an unknown node is not.
    #[test]
    fn a_named_leader_is_taken_only_when_newer_and_reachable() {
        let mut m = Metadata::default();
        assert!(m.merge(with_id(response(&[(0, 1, 4)]), 1), false).is_ok());
        // Node 2 is neither cached nor described.
        assert_eq!(m.learn_leaders(&[hint(2, 5, 1)], &[]), 0);
        let two = BrokerInfo {
            id: 2,
            host: "127.0.0.1".into(),
            port: 9093,
            rack: None,
        };
        assert_eq!(
            m.learn_leaders(&[hint(2, 4, 1)], std::slice::from_ref(&two)),
            0
        );
        assert_eq!(
            m.learn_leaders(&[hint(2, 5, 7)], std::slice::from_ref(&two)),
            0
        );
        assert_eq!(
            m.learn_leaders(&[hint(2, 5, 1)], std::slice::from_ref(&two)),
            1
        );
        assert_eq!(m.leader("t", 0), Some((2, 5)));
        assert_eq!(m.address_of(2).as_deref(), Some("127.0.0.1:9093"));
        // A refresh from a lagging broker cannot undo it.
        assert!(m.merge(with_id(response(&[(0, 1, 4)]), 1), false).is_ok());
        assert_eq!(m.topics["t"].partitions[0].leader, 2);
        assert_eq!(m.topics["t"].partitions[0].leader_epoch, 5);
    }
}
