//! What the client knows of the cluster: brokers, their connections, topics and leaders.

mod connections;
mod metadata;

pub use connections::Connections;
pub use metadata::{BrokerInfo, Metadata, PartitionInfo, TopicInfo};
