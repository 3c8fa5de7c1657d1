//! The producer id of an idempotent producer: asked for with `InitProducerId` when the
//! producer starts, again (the same id, a new epoch) when a sequence gap needs a new epoch,
//! and anew when a producer that failed for good starts over.
//!
//! The invariant: an epoch changes only with nothing in flight, and every partition's
//! sequences then start again at zero; a batch whose outcome is unknown at that moment fails
//! rather than risk being written twice under the new epoch. (A transactional producer's id
//! comes from its `init`, through the transaction coordinator: none of this runs for it.)

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
use kafka_protocol::protocol::VersionRange;
use tokio::time::Instant;

use super::super::accumulator::State;
use super::settle::{Released, fail_batch};
use super::{Event, Sender};
use crate::client::error::{Error, Result};
use crate::client::observe::{Event as Observed, Interest};
use crate::client::unwind::unwound;

const INIT_PRODUCER_ID_VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// The first wait before a failed idempotent producer starts over; it doubles with every
/// failure in a row, up to [`MAX_REBUILD_WAIT`].
pub(super) const FIRST_REBUILD_WAIT: Duration = Duration::from_secs(1);
const MAX_REBUILD_WAIT: Duration = Duration::from_secs(30);

impl Sender {
    /// An idempotent producer that failed starts over once its wait is up: a new producer
    /// id, sequences from zero. Every record it held failed with the fatal error, loudly, and
    /// sends were refused meanwhile; none is sent twice or out of order across the restart,
    /// because none is carried over.
    pub(super) fn maybe_rebuild(&mut self) {
        let Some(at) = self.rebuild_at else {
            return;
        };
        if Instant::now() < at || self.batches_in_flight > 0 {
            return;
        }
        self.rebuild_at = None;
        let mut state = self.shared.lock();
        let Some(was) = state.fatal.take() else {
            return;
        };
        tracing::warn!(error = %was, "the idempotent producer starts over with a new producer id");
        state.producer_id = -1;
        state.producer_epoch = -1;
        state.bump_needed = false;
        let released = self.restart_sequences(&mut state);
        drop(state);
        released.tell(&self.shared.client.config().observers);
        self.init_backoff.reset();
        self.init_retry_at = None;
    }

    pub(super) fn maybe_init_producer_id(&mut self) {
        // A transactional producer's id comes from `init`, through its coordinator.
        if !self.idempotent() || self.transactional() || self.init_in_flight {
            return;
        }
        let (pid, epoch, bump) = {
            let s = self.shared.lock();
            (s.producer_id, s.producer_epoch, s.bump_needed)
        };
        if pid >= 0 && !bump {
            return;
        }
        if bump && self.batches_in_flight > 0 {
            return; // the bump waits until every outstanding answer is in
        }
        if self.init_retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        // Its time has come: no longer a reason to wake (the answer wakes the loop), or the
        // loop would wake for it again and again while the request is out.
        self.init_retry_at = None;
        self.init_in_flight = true;
        let client = self.shared.client.clone();
        let timeout = self.shared.config.request_timeout;
        self.tasks.spawn(async move {
            let outcome = unwound("InitProducerId", async {
                let conn = client.any_connection().await?;
                let version =
                    conn.version_of::<InitProducerIdRequest>(INIT_PRODUCER_ID_VERSIONS)?;
                let mut request = InitProducerIdRequest::default()
                    .with_transactional_id(None) // the default is "", which brokers refuse
                    .with_transaction_timeout_ms(60_000);
                if pid >= 0 && version >= 3 {
                    request = request
                        .with_producer_id(ProducerId(pid))
                        .with_producer_epoch(epoch);
                } else {
                    request = request
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1);
                }
                let response = conn.send(&request, version, timeout).await?;
                Error::check(response.error_code, || "InitProducerId".to_owned())?;
                Ok((response.producer_id.0, response.producer_epoch))
            })
            .await;
            Event::ProducerId(outcome)
        });
    }

    pub(super) fn on_producer_id(&mut self, outcome: Result<(i64, i16)>) {
        self.init_in_flight = false;
        let mut state = self.shared.lock();
        match outcome {
            Ok((pid, epoch)) => {
                self.init_backoff.reset();
                self.init_retry_at = None;
                self.rebuild_wait = FIRST_REBUILD_WAIT;
                let bumped = state.producer_id >= 0;
                tracing::debug!(producer_id = pid, epoch, bumped, "producer id assigned");
                state.producer_id = pid;
                state.producer_epoch = epoch;
                state.bump_needed = false;
                if bumped {
                    let released = self.restart_sequences(&mut state);
                    drop(state);
                    released.tell(&self.shared.client.config().observers);
                    return;
                }
            }
            Err(e)
                if e.is_retriable()
                    || matches!(e.code(), Some(ResponseError::CoordinatorNotAvailable)) =>
            {
                tracing::debug!(error = %e, "InitProducerId failed; retrying");
                self.init_retry_at = Some(Instant::now() + self.init_backoff.next_delay());
            }
            Err(e) => {
                let wait = self.rebuild_wait;
                tracing::error!(error = %e, retry_in = ?wait,
                    "InitProducerId failed: every record held fails, sends are refused until the producer starts over");
                let fatal = Error::Fatal(format!("cannot get a producer id: {e}"));
                state.fatal = Some(fatal.clone());
                drop(state);
                let observers = &self.shared.client.config().observers;
                if observers.wants(Interest::PRODUCE) {
                    observers.emit(&Observed::ProducerFatal { error: &fatal });
                }
                self.fail_everything(&fatal);
                self.rebuild_at = Some(Instant::now() + wait);
                self.rebuild_wait = (wait * 2).min(MAX_REBUILD_WAIT);
                return;
            }
        }
        drop(state);
    }

    /// After an epoch bump: every partition's sequences start again at zero; batches whose
    /// outcome is unknown fail instead of being sent again under the new epoch.
    /// The caller tells the observers what it settled once the lock is released.
    fn restart_sequences(&self, state: &mut State) -> Released {
        let mut released = Released::new(&self.shared.client.config().observers);
        for queues in state.topics.values_mut() {
            for queue in &mut queues.partitions {
                queue.restart_sequence();
                let mut keep = std::collections::VecDeque::with_capacity(queue.ready.len());
                while let Some(mut b) = queue.ready.pop_front() {
                    if b.maybe_written {
                        let e = Error::Fatal(format!(
                            "delivery of {} records to {}-{} is unknown and cannot be retried safely after a producer epoch bump",
                            b.count(),
                            b.topic,
                            b.partition
                        ));
                        fail_batch(&mut released, b, &e);
                    } else {
                        // A new sequence at its next send, written into its encoded bytes.
                        b.sequence = None;
                        keep.push_back(b);
                    }
                }
                queue.ready = keep;
            }
        }
        self.shared.release(state, released.records, released.bytes);
        released
    }
}
