//! What the client knows of the cluster: brokers, their connections, topics and leaders.

mod connections;
mod metadata;

pub use connections::{Connections, SHARED_LANE};
pub use metadata::{BrokerInfo, Metadata, PartitionInfo, TopicInfo};
