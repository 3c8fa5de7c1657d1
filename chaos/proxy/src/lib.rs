//! `chaos-proxy`: network faults between Kafka clients and each broker, for the fault campaign.
//!
//! Each route is a TCP listener in front of one broker (the address the broker advertises on its
//! `CHAOS` listener, see `scripts/kafka`) that forwards to the broker's own listen address. The
//! control port sets each route's fault: `pass`, `drop`, `blackhole`, `reset`, `latency`,
//! `bandwidth` ([`fault::Mode`]). The proxy does not parse Kafka: it moves byte chunks.
//!
//! Guarantees: order is kept per direction in every mode; a command has taken effect on every
//! connection of its routes by the time `ok` is answered (connections react to the change
//! before forwarding another chunk); a reset is a real RST (`SO_LINGER` 0); all state is per
//! process and nothing is written to disk.

pub mod cli;
pub mod control;
pub mod fault;
pub mod route;
pub mod shaping;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::cli::Config;
use crate::route::Route;

/// Writes one line to stderr, prefixed `chaos-proxy: `.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("chaos-proxy: {}", format_args!($($arg)*))
    };
}

/// A proxy whose listeners are all bound (and so accept connections), not yet serving.
#[derive(Debug)]
pub struct Proxy {
    routes: Arc<Vec<Arc<Route>>>,
    listeners: Vec<TcpListener>,
    control: TcpListener,
}

impl Proxy {
    /// Binds the control port and every route's listener (port 0 picks a free port; see
    /// [`Proxy::control_addr`] and [`Proxy::routes`] for the addresses bound).
    pub async fn bind(config: &Config) -> io::Result<Self> {
        let control = TcpListener::bind(config.control).await.map_err(|e| {
            io::Error::new(e.kind(), format!("control address {}: {e}", config.control))
        })?;
        let mut routes = Vec::new();
        let mut listeners = Vec::new();
        for spec in &config.routes {
            let listener = TcpListener::bind(spec.listen).await.map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("route {} on {}: {e}", spec.name, spec.listen),
                )
            })?;
            let listen = listener.local_addr()?;
            routes.push(Arc::new(Route::new(spec.name.clone(), listen, spec.target)));
            listeners.push(listener);
        }
        Ok(Self {
            routes: Arc::new(routes),
            listeners,
            control,
        })
    }

    /// The control port's bound address.
    pub fn control_addr(&self) -> io::Result<SocketAddr> {
        self.control.local_addr()
    }

    /// The routes, in command-line order.
    #[must_use]
    pub fn routes(&self) -> &[Arc<Route>] {
        &self.routes
    }

    /// Serves every route and the control port until the process ends.
    pub async fn run(self) {
        for (route, listener) in self.routes.iter().zip(self.listeners) {
            log!(
                "{}: listening on {}, forwarding to {}",
                route.name(),
                route.listen(),
                route.target()
            );
            tokio::spawn(Arc::clone(route).serve(listener));
        }
        if let Ok(addr) = self.control.local_addr() {
            log!("control on {addr}");
        }
        control::serve(self.control, self.routes).await;
    }
}
