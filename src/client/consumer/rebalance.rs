//! The consumer's side of a rebalance, as the group membership drives it: partitions join,
//! are revoked (after the caller has had its say), or are lost.

use std::time::Duration;

use tokio::sync::oneshot;

use super::{ConsumerEvent, Revocation, Shared, StartAt, TopicPartition, commit_stored};
use crate::client::observe::{Event, Interest, PartitionChange};

impl Shared {
    /// Adds `partitions` (those not owned yet) to the assignment, starting from the committed
    /// offsets. The caller hears [`ConsumerEvent::Assigned`] before any of their records.
    pub(crate) fn assign_partitions(&self, partitions: &[TopicPartition]) {
        let mut state = self.lock();
        self.assigned_once.send_replace(true);
        let new: Vec<TopicPartition> = partitions
            .iter()
            .filter(|tp| !state.parts.contains_key(*tp))
            .cloned()
            .collect();
        if new.is_empty() {
            return;
        }
        state.add(&new, StartAt::Committed);
        // Queued under the same lock that added them, so the caller hears of them before any
        // of their records; the observers hear after the lock.
        let reported = self.reporting().then(|| new.clone());
        state.events.push_back(ConsumerEvent::Assigned(new));
        drop(state);
        if let Some(new) = reported {
            self.report_change(PartitionChange::Assigned, &new);
        }
        self.poll_wake.notify_one();
        self.fetch_wake.notify_one();
    }

    /// Revokes `partitions`: fetching and handing out stop at once, the caller hears
    /// [`ConsumerEvent::Revoked`], and when it is done (or after `limit`) the stored offsets
    /// are committed (with `enable.auto.commit`) and the partitions leave.
    pub(crate) async fn revoke_partitions(&self, partitions: &[TopicPartition], limit: Duration) {
        let (done, acknowledged) = oneshot::channel();
        let owned: Vec<TopicPartition> = {
            let mut state = self.lock();
            let owned = state.owned_of(partitions);
            if owned.is_empty() {
                return;
            }
            for tp in &owned {
                if let Some(part) = state.parts.get_mut(tp) {
                    part.revoking = true;
                }
            }
            state.events.push_back(ConsumerEvent::Revoked(Revocation {
                partitions: owned.clone(),
                done: Some(done),
            }));
            owned
        };
        self.report_change(PartitionChange::Revoked, &owned);
        self.poll_wake.notify_one();
        if tokio::time::timeout(limit, acknowledged).await.is_err() {
            tracing::warn!(
                ?owned,
                "the caller did not finish with revoked partitions in time; going on"
            );
        }
        if self.config.enable_auto_commit
            && let Err(e) = commit_stored(self, Some(&owned)).await
        {
            tracing::warn!(error = %e, "committing revoked partitions failed");
        }
        self.lock().remove(&owned);
    }

    /// Drops `partitions` the group already gave away: the caller hears
    /// [`ConsumerEvent::Lost`]; nothing is committed.
    pub(crate) fn lose_partitions(&self, partitions: &[TopicPartition]) {
        let mut state = self.lock();
        let owned = state.owned_of(partitions);
        if owned.is_empty() {
            return;
        }
        state.remove(&owned);
        let reported = self.reporting().then(|| owned.clone());
        state.events.push_back(ConsumerEvent::Lost(owned));
        drop(state);
        if let Some(owned) = reported {
            self.report_change(PartitionChange::Lost, &owned);
        }
        self.poll_wake.notify_one();
    }

    /// Whether an observer wants group events (then a change's partitions are kept for it).
    fn reporting(&self) -> bool {
        self.client.config().observers.wants(Interest::GROUP)
    }

    /// Tells the observers of a change of partitions (the group membership logs it).
    fn report_change(&self, change: PartitionChange, partitions: &[TopicPartition]) {
        let group = self.config.group_id.as_deref().unwrap_or_default();
        let observers = &self.client.config().observers;
        if observers.wants(Interest::GROUP) {
            observers.emit(&Event::Rebalance {
                group,
                change,
                partitions,
            });
        }
    }

    /// The partitions owned now, sorted.
    pub(crate) fn owned_partitions(&self) -> Vec<TopicPartition> {
        self.lock().assignment()
    }

    /// How long since the caller last polled; zero while a poll waits for events (an idle
    /// caller is not a stuck one).
    pub(crate) fn since_last_poll(&self) -> Duration {
        let state = self.lock();
        if state.polling {
            Duration::ZERO
        } else {
            state.last_poll.elapsed()
        }
    }
}
