//! Which subscriptions feed which exactly-once pipeline: the `Commit::Transactional(id)`
//! subscriptions of one connection, grouped by pipeline id.
//!
//! A group holds its subscriptions weakly: being a pipeline's source must not keep a dropped
//! subscription's consumer alive (it would stay in its consumer group and stall rebalances).
//! Dead entries are pruned when a source is added. The group also carries the two signals a
//! window waits on: a source's stored watermark moved, or one of its partitions was
//! repositioned; and whether a producer with the id was initialized on this connection, which
//! is what fences an earlier instance: until then, a transaction it left open holds the
//! committed offsets its sources read (`UNSTABLE_OFFSET_COMMIT`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::Notify;

use crate::client::consumer::{GroupMetadata, TopicPartition};
use crate::error::KafkaError;
use crate::position::KafkaPosition;
use crate::subscriber::partition::Partition;

/// A subscription feeding a pipeline, as the pipeline sees it.
pub(crate) trait Source: Send + Sync {
    /// The subscription's name, for errors.
    fn name(&self) -> &str;

    /// The assigned partition `partition` of `topic`, if this subscription reads it.
    fn partition_of(&self, topic: &str, partition: i32) -> Option<Arc<Partition>>;

    /// The next offset to read of every assigned partition with a stored position: what a
    /// window commits for this subscription.
    fn stored_positions(&self) -> Vec<(TopicPartition, i64)>;

    /// Its consumer group's member identity, for a transaction's offsets (`None` without a
    /// group).
    fn group_metadata(&self) -> Option<GroupMetadata>;

    /// Moves the subscription; resolves once its next delivery reflects the position.
    fn seek(
        &self,
        to: KafkaPosition,
    ) -> Pin<Box<dyn Future<Output = Result<(), KafkaError>> + Send + '_>>;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `Commit::Transactional` subscriptions of one pipeline id.
#[derive(Debug, Default)]
pub(crate) struct EosGroup {
    sources: Mutex<Vec<Weak<dyn Source>>>,
    /// A source's stored watermark moved.
    pub settled: Notify,
    /// A source's partition was repositioned (assignment, revocation, seek).
    pub repositioned: Notify,
    /// A producer with the id was initialized on this connection. The lock is held across
    /// each initialization, so that a fence and the pipeline's own `InitProducerId` never
    /// overlap (the later one would fence the earlier).
    initialized: tokio::sync::Mutex<bool>,
}

impl EosGroup {
    /// Runs `init`, the initialization of a producer with this id, one at a time; once it
    /// succeeds, the id counts as fenced on this connection.
    pub(crate) async fn initializing<T, E>(
        &self,
        init: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let mut initialized = self.initialized.lock().await;
        let outcome = init.await;
        if outcome.is_ok() {
            *initialized = true;
        }
        outcome
    }

    /// Runs `fence` unless a producer with this id was initialized on this connection
    /// already; a subscription calls it before it reads committed offsets.
    pub(crate) async fn fence_once<E>(
        &self,
        fence: impl Future<Output = Result<(), E>>,
    ) -> Result<(), E> {
        let mut initialized = self.initialized.lock().await;
        if *initialized {
            return Ok(());
        }
        fence.await?;
        *initialized = true;
        Ok(())
    }

    pub(crate) fn add(&self, source: Weak<dyn Source>) {
        let mut sources = lock(&self.sources);
        sources.retain(|s| s.strong_count() > 0);
        sources.push(source);
    }

    /// The sources still alive.
    pub(crate) fn live(&self) -> Vec<Arc<dyn Source>> {
        lock(&self.sources)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The source reading `partition` of `topic`, and its partition.
    pub(crate) fn locate(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<(Arc<dyn Source>, Arc<Partition>)> {
        lock(&self.sources)
            .iter()
            .filter_map(Weak::upgrade)
            .find_map(|source| {
                let part = source.partition_of(topic, partition)?;
                Some((source, part))
            })
    }
}

/// The pipeline groups of one connection.
#[derive(Debug, Default)]
pub(crate) struct EosRegistry {
    groups: Mutex<HashMap<String, Arc<EosGroup>>>,
}

impl EosRegistry {
    /// The group of pipeline `id`, created on first use by either side (a subscription or the
    /// pipeline may come first).
    pub(crate) fn group(&self, id: &str) -> Arc<EosGroup> {
        let mut groups = lock(&self.groups);
        if let Some(group) = groups.get(id) {
            return Arc::clone(group);
        }
        let group = Arc::new(EosGroup::default());
        groups.insert(id.to_owned(), Arc::clone(&group));
        group
    }
}
