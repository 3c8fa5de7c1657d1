//! What the client knows of the cluster: brokers, their connections, topics and leaders.

mod connections;
mod metadata;

pub use connections::{Connections, SHARED_LANE};
pub(crate) use metadata::uuid_bytes::{NIL as NIL_TOPIC_ID, Uuid as TopicId};
pub use metadata::{BrokerInfo, LeaderHint, Metadata, PartitionInfo, TopicInfo};
