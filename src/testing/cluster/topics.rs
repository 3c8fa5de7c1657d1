//! Topics and partitions: what a log belongs to, who leads it, and the naming rules.

use std::collections::BTreeMap;

use super::log::PartitionLog;

/// Kafka's longest topic name.
pub(crate) const MAX_NAME: usize = 249;

/// One partition: its log and its leader.
#[derive(Debug, Default)]
pub(crate) struct Partition {
    pub(crate) log: PartitionLog,
    pub(crate) leader: i32,
    pub(crate) leader_epoch: i32,
}

/// One topic.
#[derive(Debug)]
pub(crate) struct Topic {
    pub(crate) id: uuid::Uuid,
    pub(crate) partitions: Vec<Partition>,
    /// How many nodes each partition lists as replicas (the leader first). Only the leader
    /// holds the log: the others are reported, never written to.
    pub(crate) replication_factor: i16,
    /// Topic-level configs set at creation, by name.
    pub(crate) configs: BTreeMap<String, String>,
}

impl Topic {
    /// The nodes listed as replicas of `partition`: the leader and the ones after it.
    pub(crate) fn replicas(&self, partition: &Partition, nodes: u16) -> Vec<i32> {
        let nodes = i32::from(nodes.max(1));
        let count = i32::from(self.replication_factor).clamp(1, nodes);
        (0..count).map(|i| (partition.leader + i) % nodes).collect()
    }

    /// A topic config, if it was set.
    pub(crate) fn config(&self, name: &str) -> Option<&str> {
        self.configs.get(name).map(String::as_str)
    }

    /// Whether records need keys: `cleanup.policy` includes `compact`.
    pub(crate) fn is_compacted(&self) -> bool {
        self.config("cleanup.policy")
            .is_some_and(|p| p.split(',').any(|s| s.trim() == "compact"))
    }
}

/// Every topic of the cluster, by name.
#[derive(Debug, Default)]
pub(crate) struct Topics {
    pub(crate) by_name: BTreeMap<String, Topic>,
    next_id: u64,
}

impl Topics {
    /// How many topics were ever created: it grows with every creation.
    pub(crate) fn created(&self) -> u64 {
        self.next_id
    }

    /// Creates `name` with `partitions` partitions led round robin over `nodes` nodes; the
    /// caller has checked the name and that the topic does not exist.
    pub(crate) fn create(&mut self, name: &str, partitions: i32, nodes: u16) -> &mut Topic {
        self.next_id += 1;
        // Ids only need to be unique and non-zero within the cluster.
        let id = uuid::Uuid::from_u64_pair(0x656d_6265_6464_6564, self.next_id);
        let nodes = i32::from(nodes.max(1));
        let offset = i32::try_from(self.next_id % 1024).unwrap_or(0);
        let topic = Topic {
            id,
            partitions: (0..partitions.max(1))
                .map(|p| Partition {
                    leader: (p + offset) % nodes,
                    ..Partition::default()
                })
                .collect(),
            replication_factor: 1,
            configs: BTreeMap::new(),
        };
        self.by_name.entry(name.to_owned()).or_insert(topic)
    }

    /// Creates `name` as [`create`](Self::create) does, with a replication factor and
    /// topic configs.
    pub(crate) fn create_with(
        &mut self,
        name: &str,
        partitions: i32,
        nodes: u16,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> &mut Topic {
        let topic = self.create(name, partitions, nodes);
        topic.replication_factor = replication_factor.max(1);
        topic.configs = configs;
        topic
    }

    /// Removes `name` with its logs.
    pub(crate) fn delete(&mut self, name: &str) -> Option<Topic> {
        self.by_name.remove(name)
    }

    /// An existing topic whose name equals `name` once `.` and `_` are treated alike (Kafka
    /// refuses such a pair, as their metric names would clash).
    pub(crate) fn colliding(&self, name: &str) -> Option<&str> {
        let folded = fold(name);
        self.by_name
            .keys()
            .find(|existing| existing.as_str() != name && fold(existing) == folded)
            .map(String::as_str)
    }

    /// The partition `partition` of `topic`, if both exist.
    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Option<&Partition> {
        let index = usize::try_from(partition).ok()?;
        self.by_name.get(topic)?.partitions.get(index)
    }

    /// The partition `partition` of `topic`, mutable, if both exist.
    pub(crate) fn partition_mut(&mut self, topic: &str, partition: i32) -> Option<&mut Partition> {
        let index = usize::try_from(partition).ok()?;
        self.by_name.get_mut(topic)?.partitions.get_mut(index)
    }

    /// The name of the topic with id `id`.
    pub(crate) fn name_of(&self, id: uuid::Uuid) -> Option<&str> {
        self.by_name
            .iter()
            .find(|(_, t)| t.id == id)
            .map(|(name, _)| name.as_str())
    }
}

fn fold(name: &str) -> String {
    name.replace('.', "_")
}

/// Kafka's rule for topic names: 1 to 249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}
