//! Administration: topics and offsets, what tests and the adapter need.

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DeleteTopicsRequest, DescribeGroupsRequest, GroupId,
    IncrementalAlterConfigsRequest, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::client::coordinator::CoordinatorKind;
use crate::client::error::{Error, Result};
use crate::client::isolation::IsolationLevel;
use crate::client::outlined::Outlined;
use crate::client::{Client, Metadata};

const CREATE_TOPICS_VERSIONS: VersionRange = VersionRange { min: 2, max: 7 };
const DELETE_TOPICS_VERSIONS: VersionRange = VersionRange { min: 1, max: 6 };
const LIST_OFFSETS_VERSIONS: VersionRange = VersionRange { min: 1, max: 8 };
const DESCRIBE_GROUPS_VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };
const INCREMENTAL_ALTER_CONFIGS_VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// The config resource type of a client-metrics subscription (KIP-714).
const CLIENT_METRICS_RESOURCE: i8 = 16;

/// What the group coordinator says of a classic consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// `Empty`, `PreparingRebalance`, `CompletingRebalance`, `Stable` or `Dead`.
    pub state: String,
    /// The protocol type (`consumer` for consumer groups).
    pub protocol_type: String,
    /// The assignment strategy the group settled on (`range`, `roundrobin`, ...); empty
    /// unless the group is stable.
    pub protocol: String,
    /// The member ids.
    pub members: Vec<String>,
}

/// A topic to create.
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Its name.
    pub name: String,
    /// Partition count (-1: the broker's `num.partitions`).
    pub partitions: i32,
    /// Replication factor (-1: the broker's `default.replication.factor`).
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy`, `message.timestamp.type`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions and `replication_factor` replicas.
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> Self {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    /// Adds a topic config.
    #[must_use]
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// Which offset `ListOffsets` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark (or the last stable offset under `read_committed`).
    Latest,
    /// The first offset whose timestamp is at or after the given ms.
    Timestamp(i64),
}

/// Administrative operations on a cluster.
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    /// Admin operations through `client`.
    #[must_use]
    pub fn new(client: Client) -> Self {
        Admin { client }
    }

    /// Creates topics and waits until every partition has a leader (or `timeout` passes).
    /// A topic that already exists fails with `TOPIC_ALREADY_EXISTS`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: once the `CreateTopics` request is sent the controller may still create the
    /// topics, and a repeated call then fails with `TOPIC_ALREADY_EXISTS`. After a drop, check the
    /// metadata (or take that error as success) and call
    /// [`wait_for_leaders`](Self::wait_for_leaders).
    pub async fn create_topics(&self, topics: &[NewTopic], timeout: Duration) -> Result<()> {
        let conn = self.client.any_connection().await?;
        let version = conn.version_of::<CreateTopicsRequest>(CREATE_TOPICS_VERSIONS)?;
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(StrBytes::from_string(k.clone()))
                                            .with_value(Some(StrBytes::from_string(v.clone())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = conn
            .send(&request, version, timeout + self.client.socket_timeout())
            .await?;
        for t in &response.topics {
            Error::check(t.error_code, || {
                let message = t.error_message.as_ref().map_or("", |m| m.as_str());
                format!("creating topic {}: {message}", t.name.0.as_str())
            })?;
        }
        let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        self.wait_for_leaders(&names, timeout).await
    }

    /// Waits until the metadata shows every partition of `topics` with a leader.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only refreshes the metadata and waits.
    pub async fn wait_for_leaders(&self, topics: &[&str], timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let _ = self.client.refresh_metadata(topics).await;
            let ready = self.client.with_metadata(|m: &Metadata| {
                topics.iter().all(|t| {
                    m.topics.get(*t).is_some_and(|info| {
                        !info.partitions.is_empty()
                            && info
                                .partitions
                                .iter()
                                .all(|p| p.leader >= 0 && m.brokers.contains_key(&p.leader))
                    })
                })
            });
            if ready {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout(format!("waiting for leaders of {topics:?}")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Deletes topics. Deleting a topic that does not exist is an error
    /// (`UNKNOWN_TOPIC_OR_PARTITION`).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: once the `DeleteTopics` request is sent the controller may still delete the
    /// topics, and a repeated call then fails with `UNKNOWN_TOPIC_OR_PARTITION`; after a drop,
    /// check the metadata before deleting again.
    pub async fn delete_topics(&self, topics: &[&str], timeout: Duration) -> Result<()> {
        let conn = self.client.any_connection().await?;
        let version = conn.version_of::<DeleteTopicsRequest>(DELETE_TOPICS_VERSIONS)?;
        let names: Vec<TopicName> = topics
            .iter()
            .map(|t| TopicName(StrBytes::from_string((*t).to_owned())))
            .collect();
        let mut request = DeleteTopicsRequest::default()
            .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX));
        if version >= 6 {
            request = request.with_topics(
                names
                    .into_iter()
                    .map(|n| DeleteTopicState::default().with_name(Some(n)))
                    .collect(),
            );
        } else {
            request = request.with_topic_names(names);
        }
        let response = conn
            .send(&request, version, timeout + self.client.socket_timeout())
            .await?;
        for r in &response.responses {
            Error::check(r.error_code, || {
                format!(
                    "deleting topic {}",
                    r.name.as_ref().map_or("?", |n| n.0.as_str())
                )
            })?;
        }
        Ok(())
    }

    /// Sets (`Some`) or deletes (`None`) configs of the client-metrics subscription `name`
    /// (KIP-714: `metrics`, `interval.ms`, `match`), as `kafka-client-metrics.sh --alter`
    /// does. Deleting every config removes the subscription.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: once the request is sent the controller may still apply it; after a
    /// drop, set the configs again (setting is idempotent).
    pub async fn alter_client_metrics(
        &self,
        name: &str,
        configs: &[(&str, Option<&str>)],
    ) -> Result<()> {
        let conn = self.client.any_connection().await?;
        let version =
            conn.version_of::<IncrementalAlterConfigsRequest>(INCREMENTAL_ALTER_CONFIGS_VERSIONS)?;
        let configs = configs
            .iter()
            .map(|(key, value)| {
                AlterableConfig::default()
                    .with_name(StrBytes::from_string((*key).to_owned()))
                    // 0 SET, 1 DELETE
                    .with_config_operation(i8::from(value.is_none()))
                    .with_value(value.map(|v| StrBytes::from_string(v.to_owned())))
            })
            .collect();
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(CLIENT_METRICS_RESOURCE)
                .with_resource_name(StrBytes::from_string(name.to_owned()))
                .with_configs(configs),
        ]);
        let response = conn
            .send(&request, version, self.client.socket_timeout())
            .await?;
        for r in &response.responses {
            Error::check(r.error_code, || {
                format!(
                    "client metrics subscription {name}: {}",
                    r.error_message.as_ref().map_or("", |m| m.as_str())
                )
            })?;
        }
        Ok(())
    }

    /// The offset of a partition per `spec`, asked of its leader. Returns (offset, timestamp);
    /// offset -1 when no record has a timestamp that late.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: `ListOffsets` only reads, and nothing but the metadata cache (refreshed on a
    /// retry) changes.
    pub async fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<(i64, i64)> {
        self.list_offset_outlined(topic, partition, spec, isolation)
            .await
    }

    /// The look-up behind [`Admin::list_offset`], compiled once (see [`Outlined`]).
    #[inline(never)]
    fn list_offset_outlined<'a>(
        &'a self,
        topic: &'a str,
        partition: i32,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Outlined<'a, Result<(i64, i64)>> {
        Box::pin(async move {
            self.client
                .retry_at_leader(topic, || {
                    self.list_offset_once(topic, partition, spec, isolation)
                })
                .await
        })
    }

    async fn list_offset_once(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<(i64, i64)> {
        let (leader, epoch) = self.client.leader_of(topic, partition).await?;
        let timestamp = match spec {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        };
        let response = self
            .client
            .send_to(leader, LIST_OFFSETS_VERSIONS, |_| {
                ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_isolation_level(match isolation {
                        IsolationLevel::ReadUncommitted => 0,
                        IsolationLevel::ReadCommitted => 1,
                    })
                    .with_topics(vec![
                        ListOffsetsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                            .with_partitions(vec![
                                ListOffsetsPartition::default()
                                    .with_partition_index(partition)
                                    .with_current_leader_epoch(epoch)
                                    .with_timestamp(timestamp),
                            ]),
                    ])
            })
            .await?;
        let p = response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| Error::protocol("ListOffsets response lacks the partition asked for"))?;
        Error::check(p.error_code, || {
            format!("listing offsets of {topic}-{partition}")
        })?;
        Ok((p.offset, p.timestamp))
    }

    /// Describes a classic consumer group, asking its coordinator.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (the coordinator lookup caches nothing but its answer).
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        let node = self
            .client
            .coordinator(CoordinatorKind::Group, group)
            .await?;
        let response = self
            .client
            .send_to(node, DESCRIBE_GROUPS_VERSIONS, |_| {
                DescribeGroupsRequest::default()
                    .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))])
            })
            .await?;
        let described = response
            .groups
            .iter()
            .find(|g| g.group_id.0.as_str() == group)
            .ok_or_else(|| Error::protocol("DescribeGroups response lacks the group asked for"))?;
        Error::check(described.error_code, || format!("describing group {group}"))?;
        Ok(GroupDescription {
            state: described.group_state.as_str().to_owned(),
            protocol_type: described.protocol_type.as_str().to_owned(),
            protocol: described.protocol_data.as_str().to_owned(),
            members: described
                .members
                .iter()
                .map(|m| m.member_id.as_str().to_owned())
                .collect(),
        })
    }

    /// The cluster's brokers, controller and id, fresh from a broker.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only refreshes the metadata cache, which a drop leaves as it was.
    pub async fn describe_cluster(&self) -> Result<Metadata> {
        self.client.refresh_metadata(&[]).await?;
        Ok(self.client.metadata())
    }
}
