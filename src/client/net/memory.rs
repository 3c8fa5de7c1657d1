//! In-memory endpoints: brokers that live in this process and are dialled through a pipe.
//!
//! An embedded cluster registers one endpoint per node under a host name no resolver knows
//! (`embedded-7-0:9092`); a connection to that address gets one end of an in-memory duplex
//! pipe and the endpoint serves the other. Nothing else in the client changes: the same
//! handshake, framing and limits run over the pipe as over TCP.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, Weak};

use tokio::io::DuplexStream;

/// Bytes buffered in each direction of a pipe: enough for a full default fetch response to be
/// written without waiting for the reader.
pub const PIPE_CAPACITY: usize = 1 << 20;

/// Something that serves connections made to a registered in-memory address.
pub trait MemoryEndpoint: Send + Sync {
    /// Serves the broker's end of a new connection.
    fn accept(&self, stream: DuplexStream);
}

type Endpoints = HashMap<String, Weak<dyn MemoryEndpoint>>;

static ENDPOINTS: Mutex<Option<Endpoints>> = Mutex::new(None);

fn with_endpoints<T>(f: impl FnOnce(&mut Endpoints) -> T) -> T {
    // Inserts and removes leave the map whole even if a holder panicked.
    let mut guard = ENDPOINTS.lock().unwrap_or_else(PoisonError::into_inner);
    f(guard.get_or_insert_with(HashMap::new))
}

/// Registers `endpoint` under `address` (`host:port`). The registry holds it weakly: once the
/// endpoint is dropped, dialling the address fails like dialling a stopped broker.
pub fn register(address: String, endpoint: Weak<dyn MemoryEndpoint>) {
    with_endpoints(|endpoints| {
        endpoints.retain(|_, e| e.strong_count() > 0);
        endpoints.insert(address, endpoint);
    });
}

/// Removes `address` from the registry.
pub fn unregister(address: &str) {
    with_endpoints(|endpoints| endpoints.remove(address));
}

/// Opens a pipe to the endpoint registered under `address`, if there is one alive.
pub(crate) fn dial(address: &str) -> Option<std::io::Result<DuplexStream>> {
    let endpoint = with_endpoints(|endpoints| endpoints.get(address).map(Weak::upgrade))?;
    let Some(endpoint) = endpoint else {
        return Some(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            format!("the embedded broker at {address} has stopped"),
        )));
    };
    let (ours, theirs) = tokio::io::duplex(PIPE_CAPACITY);
    endpoint.accept(theirs);
    Some(Ok(ours))
}
