//! Group membership: the classic protocol (`JoinGroup`, `SyncGroup`, `Heartbeat` with
//! client-side assignors) and the KIP-848 consumer protocol (`ConsumerGroupHeartbeat`,
//! server-side assignors). Either drives the consumer's assignment through its rebalance
//! hooks (`Shared::assign_partitions`, `revoke_partitions`, `lose_partitions`).
//!
//! [`protocol`] encodes and decodes the classic `consumer` protocol's subscription and
//! assignment bytes; [`assignor`] turns the members' subscriptions into the leader's plan.

pub mod assignor;
mod classic;
mod kip848;
mod matcher;
pub mod protocol;

use std::sync::Arc;

pub(crate) use matcher::TopicMatcher;

use super::{GroupProtocol, Shared};

/// Runs the membership until the consumer closes (then leaves the group).
pub(crate) async fn run(shared: Arc<Shared>, matcher: TopicMatcher) {
    match shared.config.group_protocol {
        GroupProtocol::Classic => classic::run(shared, matcher).await,
        GroupProtocol::Consumer => kip848::run(shared, matcher).await,
    }
}
