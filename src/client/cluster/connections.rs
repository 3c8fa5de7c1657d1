//! One shared connection per broker address, dialled lazily and again after failures.
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

struct Slot {
    live: Option<Arc<Connection>>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    last_error: Option<Error>,
}

/// The client's connections, by broker address.
pub struct Connections {
    options: ConnectionOptions,
    backoff: Backoff,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
}

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
        }
    }

    /// The live connection to `address`, dialling it if needed.
    ///
    /// Cancel safety: cancelling a caller that is dialling abandons the attempt; the next
    /// caller dials again.
    pub async fn get(&self, address: &str) -> Result<Arc<Connection>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots
                .entry(address.to_owned())
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
        if let Some(at) = slot.retry_at
            && Instant::now() < at
        {
            return Err(slot
                .last_error
                .clone()
                .unwrap_or_else(|| Error::Closed(format!("{address} is backing off"))));
        }
        match Connection::connect(address, &self.options).await {
            Ok(conn) => {
                let conn = Arc::new(conn);
                slot.live = Some(conn.clone());
                slot.backoff.reset();
                slot.retry_at = None;
                slot.last_error = None;
                tracing::debug!(broker = %address, "connected");
                Ok(conn)
            }
            Err(e) => {
                let delay = slot.backoff.next_delay();
                slot.retry_at = Some(Instant::now() + delay);
                slot.last_error = Some(e.clone());
                tracing::debug!(broker = %address, error = %e, ?delay, "connect failed");
                Err(e)
            }
        }
    }

    /// Drops the connection to `address` (after an error that leaves it unusable).
    pub async fn discard(&self, address: &str) {
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.get(address).cloned()
        };
        if let Some(slot) = slot {
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
