//! Deterministic faults for tests of an [`EmbeddedCluster`](super::EmbeddedCluster).
//!
//! [`Faults`] arms faults that the brokers apply to the requests they receive, before they
//! handle them: fail the next requests of an API with a Kafka error code, delay them, close
//! connections, move a partition's leader or a coordinator to another node. Each fault fires
//! a set number of times, in the order armed, so a test knows exactly what its client meets.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
//! use ruststream_kafka::testing::faults::{ApiKey, ResponseError};
//!
//! let cluster = EmbeddedCluster::new(ClusterOptions { nodes: 3, ..ClusterOptions::default() });
//! let faults = cluster.faults();
//! // The next two produce requests fail with a retriable error; the client retries them.
//! faults.fail_next(ApiKey::Produce, 2, ResponseError::NotEnoughReplicas);
//! // The next fetch waits a second before it is handled.
//! faults.delay_next(ApiKey::Fetch, 1, Duration::from_secs(1));
//! // Every connection to node 1 is closed now.
//! faults.drop_connections(1);
//! // Partition 0 of `orders` is led by node 2 from now on: its old leader answers
//! // NOT_LEADER_OR_FOLLOWER and the client refreshes its metadata.
//! assert!(faults.move_leader("orders", 0, 2));
//! // The group's coordinator moves to node 0: group requests elsewhere get NOT_COORDINATOR.
//! faults.move_coordinator("billing", 0);
//! # }
//! ```

mod responses;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use super::cluster::Shared;

pub use crate::client::ResponseError;
pub use kafka_protocol::messages::ApiKey;

pub(crate) use responses::{add_partitions_answer, error_response, txn_offset_commit_answer};

/// `FindCoordinator`'s key types, as the coordinator overrides are keyed.
const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

/// Arms faults on one embedded cluster; from
/// [`EmbeddedCluster::faults`](super::EmbeddedCluster::faults). Cheap to clone; every clone
/// arms the same cluster.
#[derive(Clone)]
pub struct Faults {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("cluster", &self.shared.id)
            .finish_non_exhaustive()
    }
}

/// A fault that fires on the next `remaining` requests of `api`.
#[derive(Debug)]
struct Armed<T> {
    api: ApiKey,
    remaining: usize,
    what: T,
}

/// Takes one shot of the first fault armed for `api`.
fn take<T: Copy>(armed: &mut Vec<Armed<T>>, api: ApiKey) -> Option<T> {
    let index = armed.iter().position(|a| a.api == api && a.remaining > 0)?;
    let fault = &mut armed[index];
    fault.remaining -= 1;
    let what = fault.what;
    if fault.remaining == 0 {
        armed.remove(index);
    }
    Some(what)
}

#[derive(Debug, Default)]
struct Plan {
    fail: Vec<Armed<i16>>,
    delay: Vec<Armed<Duration>>,
    /// Connections to close when they send the API (the value is unused).
    close: Vec<Armed<()>>,
    /// (key type, key) -> the node that coordinates it.
    coordinators: HashMap<(i8, String), i32>,
    /// (topic, partition) -> how many more fetch answers with records are corrupted.
    corrupt: HashMap<(String, i32), usize>,
}

/// What the brokers of one cluster consult before each request.
#[derive(Debug)]
pub(crate) struct FaultState {
    plan: Mutex<Plan>,
    /// One generation counter per node; bumping it closes the node's open connections.
    drops: Vec<watch::Sender<u64>>,
}

/// What to do to one request.
#[derive(Debug, Default)]
pub(crate) struct Planned {
    /// Close the connection without answering.
    pub(crate) close: bool,
    /// Wait this long before handling it.
    pub(crate) delay: Option<Duration>,
    /// Answer with this error code instead of handling it.
    pub(crate) fail: Option<i16>,
}

impl FaultState {
    pub(crate) fn new(nodes: u16) -> Self {
        FaultState {
            plan: Mutex::new(Plan::default()),
            drops: (0..nodes).map(|_| watch::Sender::new(0)).collect(),
        }
    }

    fn plan(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.plan.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the faults armed for the next request of `api`.
    pub(crate) fn next(&self, api: ApiKey) -> Planned {
        let mut plan = self.plan();
        Planned {
            close: take(&mut plan.close, api).is_some(),
            delay: take(&mut plan.delay, api),
            fail: take(&mut plan.fail, api),
        }
    }

    /// Whether this fetch answer's records of `topic`/`partition` are to be corrupted (one
    /// shot of the armed count).
    pub(crate) fn corrupts(&self, topic: &str, partition: i32) -> bool {
        let mut plan = self.plan();
        let key = (topic.to_owned(), partition);
        let Some(left) = plan.corrupt.get_mut(&key) else {
            return false;
        };
        *left -= 1;
        if *left == 0 {
            plan.corrupt.remove(&key);
        }
        true
    }

    /// Follows the drops of `node`: the receiver changes when the node's connections must
    /// close.
    pub(crate) fn watch(&self, node: i32) -> Option<watch::Receiver<u64>> {
        let index = usize::try_from(node).ok()?;
        self.drops.get(index).map(watch::Sender::subscribe)
    }
}

/// The node a fault moved the coordinator of `key` to (`key_type` as in `FindCoordinator`: 0 for
/// a group, 1 for a transactional id), if one did. The groups module answers `FindCoordinator`
/// with it and group requests reaching another node with `NOT_COORDINATOR`.
pub(crate) fn coordinator_override(shared: &Shared, key_type: i8, key: &str) -> Option<i32> {
    shared
        .faults
        .plan()
        .coordinators
        .get(&(key_type, key.to_owned()))
        .copied()
}

impl Faults {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Faults { shared }
    }

    /// The next `n` requests of `api` (to any node) are answered with `error` instead of being
    /// handled: the response carries the code wherever the API has one, in every topic and
    /// partition entry when it answers per partition. A Produce with `acks=0` gets no answer,
    /// as ever.
    pub fn fail_next(&self, api: ApiKey, n: usize, error: ResponseError) {
        self.shared.faults.plan().fail.push(Armed {
            api,
            remaining: n,
            what: error.code(),
        });
    }

    /// The next `n` requests of `api` (to any node) wait `delay` (tokio time, so a paused
    /// clock applies) before they are handled. The connection answers nothing else meanwhile,
    /// as a busy broker would.
    pub fn delay_next(&self, api: ApiKey, n: usize, delay: Duration) {
        self.shared.faults.plan().delay.push(Armed {
            api,
            remaining: n,
            what: delay,
        });
    }

    /// The next `n` fetch answers that carry records of `topic`/`partition` have the last byte
    /// of those records flipped, as a bit error on the way or on disk would: the last batch's
    /// CRC-32C no longer matches (a client sees it with `check.crcs`). The log itself is
    /// untouched. `usize::MAX` corrupts every answer from now on; `0` stops corrupting.
    pub fn corrupt_fetched(&self, topic: &str, partition: i32, n: usize) {
        let mut plan = self.shared.faults.plan();
        let key = (topic.to_owned(), partition);
        if n == 0 {
            plan.corrupt.remove(&key);
        } else {
            plan.corrupt.insert(key, n);
        }
    }

    /// The next connection (to any node) that sends a request of `api` is closed instead of
    /// answered; the request has no effect.
    pub fn drop_next_connection(&self, api: ApiKey) {
        self.shared.faults.plan().close.push(Armed {
            api,
            remaining: 1,
            what: (),
        });
    }

    /// Closes every connection open to `node` now, including ones waiting in a long poll.
    /// New connections are accepted as usual.
    pub fn drop_connections(&self, node: i32) {
        if let Some(drops) = usize::try_from(node)
            .ok()
            .and_then(|n| self.shared.faults.drops.get(n))
        {
            drops.send_modify(|generation| *generation += 1);
        }
    }

    /// Makes `to` the leader of `partition` of `topic` and bumps the partition's leader epoch:
    /// Metadata reports the new leader, and produce and fetch requests that reach the old one
    /// get `NOT_LEADER_OR_FOLLOWER`. Returns `false` (and changes nothing) when the partition
    /// or the node does not exist.
    #[must_use = "false when the partition or the node does not exist"]
    pub fn move_leader(&self, topic: &str, partition: i32, to: i32) -> bool {
        if !self.shared.node_ids().any(|n| n == to) {
            return false;
        }
        let moved = {
            let mut state = self.shared.state();
            match state.topics.partition_mut(topic, partition) {
                Some(p) => {
                    p.leader = to;
                    p.leader_epoch += 1;
                    true
                }
                None => false,
            }
        };
        if moved {
            self.shared.changed.notify_waiters();
        }
        moved
    }

    /// Moves the coordinator of consumer group `group` to node `to`: `FindCoordinator` names it,
    /// and group requests (`JoinGroup`, `SyncGroup`, Heartbeat, `OffsetCommit`, `OffsetFetch`,
    /// `ConsumerGroupHeartbeat`, `TxnOffsetCommit`, ...) reaching any other node get
    /// `NOT_COORDINATOR`, so clients look the coordinator up again. The group keeps its state,
    /// as after a real coordinator move.
    pub fn move_coordinator(&self, group: &str, to: i32) {
        self.shared
            .faults
            .plan()
            .coordinators
            .insert((GROUP_KEY, group.to_owned()), to);
    }

    /// Moves the transaction coordinator of `transactional_id` to node `to`: transactional
    /// requests for it reaching any other node get `NOT_COORDINATOR`.
    pub fn move_transaction_coordinator(&self, transactional_id: &str, to: i32) {
        self.shared
            .faults
            .plan()
            .coordinators
            .insert((TRANSACTION_KEY, transactional_id.to_owned()), to);
    }

    /// The member ids of consumer group `group` as its coordinator holds them (a classic
    /// group's in join order); empty when the group is unknown.
    #[must_use]
    pub fn group_members(&self, group: &str) -> Vec<String> {
        crate::testing::cluster::groups::member_ids(&self.shared.state(), group)
    }

    /// Ends the session of `member_id` in group `group` now, as the coordinator does when no
    /// heartbeat came within the session timeout: a classic member leaves and the others
    /// rejoin; a KIP-848 member is fenced (its next heartbeat gets `UNKNOWN_MEMBER_ID`, its
    /// partitions go to the others). The client notices at its next heartbeat, rejoins, and
    /// loses the partitions it held meanwhile. Returns `false` when there is no such member.
    #[must_use = "false when the group has no such member"]
    pub fn expire_session(&self, group: &str, member_id: &str) -> bool {
        crate::testing::cluster::groups::expire_session(&self.shared, group, member_id)
    }

    /// Disarms every fault not fired yet. Moved leaders and coordinators stay where they are.
    pub fn clear(&self) {
        let mut plan = self.shared.faults.plan();
        plan.fail.clear();
        plan.delay.clear();
        plan.close.clear();
    }
}
