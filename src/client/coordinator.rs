//! Finding the broker that coordinates a consumer group or a transactional id.
//!
//! Answers are cached per key; a caller that hears `NOT_COORDINATOR` (or loses the
//! connection) forgets the entry and asks again. `COORDINATOR_NOT_AVAILABLE` and
//! `COORDINATOR_LOAD_IN_PROGRESS` (the internal topic is being created or loaded) are retried
//! here with backoff, within the socket timeout.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::client::Client;
use crate::client::error::{Error, Result};
use crate::client::outlined::Outlined;

const FIND_COORDINATOR_VERSIONS: VersionRange = VersionRange { min: 1, max: 6 };

/// What a coordinator coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoordinatorKind {
    /// A consumer group (`group.id`).
    Group,
    /// A transactional producer (`transactional.id`).
    Transaction,
}

impl CoordinatorKind {
    fn wire(self) -> i8 {
        match self {
            CoordinatorKind::Group => 0,
            CoordinatorKind::Transaction => 1,
        }
    }
}

/// The cache of coordinators, by kind and key.
#[derive(Debug, Default)]
pub(crate) struct Coordinators {
    known: Mutex<HashMap<(CoordinatorKind, String), i32>>,
}

impl Coordinators {
    fn get(&self, kind: CoordinatorKind, key: &str) -> Option<i32> {
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        known.get(&(kind, key.to_owned())).copied()
    }

    fn set(&self, kind: CoordinatorKind, key: &str, node: i32) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        known.insert((kind, key.to_owned()), node);
    }

    pub(crate) fn forget(&self, kind: CoordinatorKind, key: &str) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        known.remove(&(kind, key.to_owned()));
    }
}

impl Client {
    /// The node id of the coordinator of `key`, asking the cluster when it is not cached.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: `FindCoordinator` only looks up, and the answer is cached in the poll it
    /// arrives in, so a dropped call leaves the cache as it was or holding that answer.
    pub async fn coordinator(&self, kind: CoordinatorKind, key: &str) -> Result<i32> {
        if let Some(node) = self.coordinators().get(kind, key)
            && self.with_metadata(|m| m.brokers.contains_key(&node))
        {
            return Ok(node);
        }
        self.look_up_coordinator(kind, key).await
    }

    /// Asks the cluster for the coordinator of `key` until it answers or `socket.timeout.ms`
    /// passes, and caches the answer; compiled once (see [`Outlined`]).
    #[inline(never)]
    fn look_up_coordinator<'a>(
        &'a self,
        kind: CoordinatorKind,
        key: &'a str,
    ) -> Outlined<'a, Result<i32>> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + self.socket_timeout();
            let mut backoff = self.retry_backoff();
            loop {
                match self.find_coordinator(kind, key).await {
                    Ok(node) => {
                        self.coordinators().set(kind, key, node);
                        if !self.with_metadata(|m| m.brokers.contains_key(&node)) {
                            self.refresh_metadata(&[]).await?;
                        }
                        return Ok(node);
                    }
                    Err(e) if e.is_retriable() && tokio::time::Instant::now() < deadline => {
                        tracing::debug!(key, error = %e, "coordinator not found yet");
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        })
    }

    /// Forgets the cached coordinator of `key` (after `NOT_COORDINATOR` or a broken connection).
    pub fn forget_coordinator(&self, kind: CoordinatorKind, key: &str) {
        self.coordinators().forget(kind, key);
    }

    async fn find_coordinator(&self, kind: CoordinatorKind, key: &str) -> Result<i32> {
        let conn = self.any_connection().await?;
        let version = conn.version_of::<FindCoordinatorRequest>(FIND_COORDINATOR_VERSIONS)?;
        let mut request = FindCoordinatorRequest::default().with_key_type(kind.wire());
        if version >= 4 {
            request = request.with_coordinator_keys(vec![StrBytes::from_string(key.to_owned())]);
        } else {
            request = request.with_key(StrBytes::from_string(key.to_owned()));
        }
        let response = conn.send(&request, version, self.socket_timeout()).await?;
        let (code, node) = if version >= 4 {
            let c = response
                .coordinators
                .iter()
                .find(|c| c.key.as_str() == key)
                .ok_or_else(|| Error::protocol("FindCoordinator answer lacks the key asked for"))?;
            (c.error_code, c.node_id.0)
        } else {
            (response.error_code, response.node_id.0)
        };
        match ResponseError::try_from_code(code) {
            None => Ok(node),
            Some(code) => Err(Error::Broker {
                code,
                context: format!("finding the coordinator of {key}"),
            }),
        }
    }
}
