//! One shared connection per broker address, dialled lazily and again after failures; and
//! private lanes: extra connections for traffic that must not queue behind others.
//!
//! A broker answers a connection's requests one at a time, in order. A consumer's long-polling
//! Fetch or a `JoinGroup` that waits for a whole rebalance would hold up every other request
//! on a shared connection (another member's heartbeat, a producer's batch), so each consumer
//! takes lanes of its own for them, as every Kafka client has separate connections per
//! consumer.
//!
//! Callers ask for an address; the first caller dials while later ones wait for the same
//! attempt, so a broker never gets two sockets from one client. A failed attempt arms an
//! exponential backoff: callers inside the backoff window fail at once instead of hammering a
//! broker that is down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use crate::client::error::{Error, Result};
use crate::client::net::{Backoff, Connection, ConnectionOptions};
use crate::client::observe::{BrokerRef, Event, Interest};
use crate::client::outlined::Outlined;

struct Slot {
    live: Option<Arc<Connection>>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    last_error: Option<Error>,
}

/// A slot, locked while it dials.
type SharedSlot = Arc<tokio::sync::Mutex<Slot>>;

/// The client's connections, by broker address and lane.
pub struct Connections {
    options: ConnectionOptions,
    backoff: Backoff,
    slots: Mutex<HashMap<(String, u64), SharedSlot>>,
    next_lane: std::sync::atomic::AtomicU64,
}

/// The lane every part of a client shares.
pub const SHARED_LANE: u64 = 0;

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections").finish_non_exhaustive()
    }
}

impl Connections {
    /// A pool dialling with `options`, backing off per `backoff` after failures.
    #[must_use]
    pub fn new(options: ConnectionOptions, backoff: Backoff) -> Self {
        Connections {
            options,
            backoff,
            slots: Mutex::new(HashMap::new()),
            next_lane: std::sync::atomic::AtomicU64::new(SHARED_LANE + 1),
        }
    }

    /// A new private lane.
    pub fn new_lane(&self) -> u64 {
        self.next_lane
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Closes the connections of `lane`.
    pub fn release_lane(&self, lane: u64) {
        let slots: Vec<_> = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            let keys: Vec<_> = slots.keys().filter(|k| k.1 == lane).cloned().collect();
            keys.into_iter().filter_map(|k| slots.remove(&k)).collect()
        };
        for slot in slots {
            if let Ok(mut slot) = slot.try_lock()
                && let Some(conn) = slot.live.take()
            {
                conn.close("lane released");
            }
        }
    }

    /// The live connection to `address`, dialling it if needed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a caller dropped while it waits for the slot only stops waiting; one dropped
    /// while dialling leaves the slot without a connection and without a backoff, so the next
    /// caller dials again.
    pub async fn get(&self, address: &str) -> Result<Arc<Connection>> {
        self.get_on(address, SHARED_LANE).await
    }

    /// The live connection to `address` on `lane`, dialling it if needed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a caller dropped while it waits for the slot only stops waiting; one dropped
    /// while dialling leaves the slot without a connection and without a backoff, so the next
    /// caller dials again.
    pub async fn get_on(&self, address: &str, lane: u64) -> Result<Arc<Connection>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots
                .entry((address.to_owned(), lane))
                .or_insert_with(|| {
                    Arc::new(tokio::sync::Mutex::new(Slot {
                        live: None,
                        backoff: self.backoff.clone(),
                        retry_at: None,
                        last_error: None,
                    }))
                })
                .clone()
        };
        let mut slot = slot.lock().await;
        if let Some(conn) = &slot.live {
            if !conn.is_closed() {
                return Ok(conn.clone());
            }
            slot.live = None;
        }
        self.dial_into(&mut slot, address).await
    }

    /// Dials `address` for `slot`, unless it is backing off; compiled once (see [`Outlined`]).
    #[inline(never)]
    fn dial_into<'a>(
        &'a self,
        slot: &'a mut Slot,
        address: &'a str,
    ) -> Outlined<'a, Result<Arc<Connection>>> {
        Box::pin(async move {
            if let Some(at) = slot.retry_at
                && Instant::now() < at
            {
                return Err(slot
                    .last_error
                    .clone()
                    .unwrap_or_else(|| Error::Closed(format!("{address} is backing off"))));
            }
            let dialled = Instant::now();
            let observers = &self.options.observers;
            match Connection::connect(address, &self.options).await {
                Ok(conn) => {
                    let conn = Arc::new(conn);
                    slot.live = Some(conn.clone());
                    slot.backoff.reset();
                    slot.retry_at = None;
                    // One line per incident: the failure that began it (below) and this recovery.
                    if let Some(was) = slot.last_error.take() {
                        tracing::info!(broker = %address, after = %was, "connected again");
                    } else {
                        tracing::debug!(broker = %address, "connected");
                    }
                    if observers.wants(Interest::CONNECTIONS) {
                        observers.emit(&Event::ConnectionOpened {
                            broker: BrokerRef {
                                address,
                                connection: Some(conn.id()),
                            },
                            took: dialled.elapsed(),
                        });
                    }
                    Ok(conn)
                }
                Err(e) => {
                    let delay = slot.backoff.next_delay();
                    slot.retry_at = Some(Instant::now() + delay);
                    if slot.last_error.replace(e.clone()).is_none() {
                        tracing::warn!(broker = %address, error = %e, ?delay, "cannot connect; retrying with backoff");
                    } else {
                        tracing::debug!(broker = %address, error = %e, ?delay, "connect failed");
                    }
                    if observers.wants(Interest::CONNECTIONS) {
                        observers.emit(&Event::ConnectFailed {
                            broker: BrokerRef {
                                address,
                                connection: None,
                            },
                            error: &e,
                            backoff: delay,
                        });
                    }
                    Err(e)
                }
            }
        })
    }

    /// Drops the connections to `address`, on every lane (after an error that leaves it
    /// unusable).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only closes connections, one lane at a time; dropped midway, the lanes not
    /// reached yet keep theirs, and calling it again closes them.
    pub async fn discard(&self, address: &str) {
        let found: Vec<_> = {
            let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots
                .iter()
                .filter(|(k, _)| k.0 == address)
                .map(|(_, s)| s.clone())
                .collect()
        };
        for slot in found {
            let mut slot = slot.lock().await;
            if let Some(conn) = slot.live.take() {
                conn.close("discarded");
            }
        }
    }

    /// Closes every connection.
    pub fn close_all(&self) {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, s)| s)
            .collect();
        for slot in slots {
            if let Ok(mut slot) = slot.try_lock()
                && let Some(conn) = slot.live.take()
            {
                conn.close("client closed");
            }
        }
    }
}
