//! Everything the cluster keeps, behind one lock.

use super::ClusterOptions;
use super::fetch::Sessions;
use super::groups::Groups;
use super::producers::Producers;
use super::topics::Topics;
use super::txn::Transactions;

/// The cluster's state. Handlers lock it, act, and unlock before they await anything.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) topics: Topics,
    pub(crate) producers: Producers,
    pub(crate) transactions: Transactions,
    pub(crate) groups: Groups,
    /// Fetch sessions (KIP-227) of every node.
    pub(crate) fetch_sessions: Sessions,
}

impl State {
    pub(crate) fn new(_options: &ClusterOptions) -> Self {
        State {
            topics: Topics::default(),
            producers: Producers::default(),
            transactions: Transactions::default(),
            groups: Groups::default(),
            fetch_sessions: Sessions::default(),
        }
    }
}
