//! One route: a listener in front of one broker, and the connections through it.
//!
//! Every accepted connection reads the route's [`FaultState`] once, when it opens, and follows
//! every later change through a watch channel. Guarantees, per connection:
//!
//! - bytes of one direction leave in the order they came, whatever the mode (one writer per
//!   direction, fed by one reader through a bounded queue, which is also the back-pressure: a
//!   slow or paused writer stops its reader);
//! - nothing is forwarded while the route is in `blackhole`, and a connection that was silent
//!   is reset when the blackhole ends (see [`crate::fault`]);
//! - `drop` resets every connection at once, whatever it is doing, and resets new ones right
//!   after accepting them;
//! - a reset by a fault or by one peer reaches the other peer as a reset too (`SO_LINGER` 0),
//!   an orderly close (FIN) as an orderly close, direction by direction.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::fault::{FaultState, Mode, Opened, latency_delay, reset_prefix};
use crate::log;
use crate::shaping::{Schedule, TokenBucket};

/// Bytes read from a socket at once (and so the largest chunk).
const READ_CHUNK: usize = 64 * 1024;
/// Chunks queued between a direction's reader and writer (latency needs room for the chunks in
/// flight: up to this many times [`READ_CHUNK`] per direction).
const QUEUE: usize = 64;
/// How long to wait for the broker to accept the upstream connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// After a reset fault's prefix is written, how long to let it reach the client before the RST
/// (a RST discards whatever the kernel has not sent yet).
const RESET_GRACE: Duration = Duration::from_millis(20);

/// One proxied broker: its name, addresses, fault and counters.
#[derive(Debug)]
pub struct Route {
    name: String,
    listen: SocketAddr,
    target: SocketAddr,
    state: watch::Sender<FaultState>,
    conns: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    next_id: AtomicU64,
    client_closed: AtomicU64,
}

/// Why a connection ended.
#[derive(Debug)]
enum End {
    /// Both directions finished with an orderly close.
    Closed,
    /// Reset because of the route's fault.
    Fault(String),
    /// One side failed (reset, refused, timed out); the other side is reset.
    Io(&'static str, io::Error),
}

/// Which socket a pump reads or writes, for the logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    /// Client to broker.
    Up,
    /// Broker to client.
    Down,
}

/// Bytes read from one side, with the time they were read (latency counts from there).
struct Chunk {
    data: Vec<u8>,
    arrival: Instant,
}

impl Route {
    /// A route named `name` whose listener is bound to `listen`, forwarding to `target`.
    #[must_use]
    pub fn new(name: String, listen: SocketAddr, target: SocketAddr) -> Self {
        Self {
            name,
            listen,
            target,
            state: watch::Sender::new(FaultState::new()),
            conns: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            client_closed: AtomicU64::new(0),
        }
    }

    /// How many connections the route has accepted since it started (refused ones included).
    #[must_use]
    pub fn accepted(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed) - 1
    }

    /// How many connections the client side has closed or reset so far (seen as the client's
    /// end of stream or error), whatever the broker side did. A connection to a silent broker
    /// stays open on the proxy until the broker answers too, so [`Route::status`]'s count of
    /// open connections cannot tell whether the client gave one up: this can.
    #[must_use]
    pub fn client_closed(&self) -> u64 {
        self.client_closed.load(Ordering::Relaxed)
    }

    /// The route's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address its listener is bound to.
    #[must_use]
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// The broker address it forwards to.
    #[must_use]
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// The mode in force.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.state.borrow().mode
    }

    /// Sets the route's mode (replacing the one in force) and logs the change.
    pub fn set_mode(&self, mode: Mode) {
        let mut was = Mode::Pass;
        self.state.send_modify(|s| {
            was = s.mode;
            *s = s.with_mode(mode);
        });
        log!("{}: fault {mode} (was {was})", self.name);
    }

    /// The `status` line: `NAME MODE conns=N bytes_up=N bytes_down=N` (bytes forwarded so far,
    /// client to broker and broker to client; connections open now, silent ones included).
    #[must_use]
    pub fn status(&self) -> String {
        format!(
            "{} {} conns={} bytes_up={} bytes_down={}",
            self.name,
            self.mode(),
            self.conns.load(Ordering::Relaxed),
            self.bytes_up.load(Ordering::Relaxed),
            self.bytes_down.load(Ordering::Relaxed)
        )
    }

    /// Accepts connections forever, each handled in a task of its own.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((client, peer)) => {
                    tokio::spawn(Arc::clone(&self).handle(client, peer));
                }
                Err(e) => {
                    // EMFILE and the like: wait instead of spinning
                    log!("{}: accept failed: {e}", self.name);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    async fn handle(self: Arc<Self>, mut client: TcpStream, peer: SocketAddr) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = *self.state.borrow();
        let opened = state.opened();
        if state.mode == Mode::Drop {
            reset(&client);
            log!("{}: conn {id} from {peer} refused (drop)", self.name);
            return;
        }
        self.conns.fetch_add(1, Ordering::Relaxed);
        let silent = state.mode == Mode::Blackhole;
        log!(
            "{}: conn {id} from {peer} opened{}",
            self.name,
            if silent { " (blackhole: silent)" } else { "" }
        );
        let (end, up, down) = if silent {
            (self.silent(&mut client, opened).await, 0, 0)
        } else {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(self.target)).await {
                Ok(Ok(mut upstream)) => self.forward(&mut client, &mut upstream, opened).await,
                Ok(Err(e)) => {
                    reset(&client);
                    (End::Io("broker", e), 0, 0)
                }
                Err(_) => {
                    reset(&client);
                    (
                        End::Io(
                            "broker",
                            io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
                        ),
                        0,
                        0,
                    )
                }
            }
        };
        drop(client);
        self.conns.fetch_sub(1, Ordering::Relaxed);
        let why = match end {
            End::Closed => "closed".to_string(),
            End::Fault(why) => format!("reset: {why}"),
            End::Io(side, e) => format!("reset: {side} side: {e}"),
        };
        log!(
            "{}: conn {id} from {peer} {why} (up {up} B, down {down} B)",
            self.name
        );
    }

    /// A connection opened during a blackhole: read and discard until the client leaves or the
    /// blackhole ends (then reset).
    async fn silent(&self, client: &mut TcpStream, opened: Opened) -> End {
        let fate = self.state.subscribe();
        let mut buf = vec![0u8; READ_CHUNK];
        let discard = async {
            loop {
                match client.read(&mut buf).await {
                    Ok(0) => {
                        self.client_closed.fetch_add(1, Ordering::Relaxed);
                        return End::Closed;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.client_closed.fetch_add(1, Ordering::Relaxed);
                        return End::Io("client", e);
                    }
                }
            }
        };
        let end = tokio::select! {
            end = discard => end,
            end = doom(fate, opened) => end,
        };
        if !matches!(end, End::Closed) {
            reset(client);
        }
        end
    }

    /// Forwards both directions until both are closed, or resets both sockets.
    /// Returns how it ended and the bytes forwarded up and down.
    async fn forward(
        &self,
        client: &mut TcpStream,
        upstream: &mut TcpStream,
        opened: Opened,
    ) -> (End, u64, u64) {
        // Kafka requests and responses are small and latency-bound
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let up = AtomicU64::new(0);
        let down = AtomicU64::new(0);
        let result = {
            let (client_r, client_w) = client.split();
            let (broker_r, broker_w) = upstream.split();
            let (up_tx, up_rx) = mpsc::channel(QUEUE);
            let (down_tx, down_rx) = mpsc::channel(QUEUE);
            let pumps = async {
                let client_side = async {
                    let r = read_side(client_r, up_tx, "client").await;
                    self.client_closed.fetch_add(1, Ordering::Relaxed);
                    r
                };
                tokio::try_join!(
                    client_side,
                    self.write_side(broker_w, up_rx, Dir::Up, opened, &up),
                    read_side(broker_r, down_tx, "broker"),
                    self.write_side(client_w, down_rx, Dir::Down, opened, &down),
                )
            };
            tokio::select! {
                r = pumps => r.map(|_| ()),
                end = doom(self.state.subscribe(), opened) => Err(end),
            }
        };
        let end = match result {
            Ok(()) => End::Closed,
            Err(end) => {
                reset(client);
                reset(upstream);
                end
            }
        };
        (end, up.into_inner(), down.into_inner())
    }

    /// Writes what one direction's reader queued, as the route's mode says; shuts the write side
    /// down after the reader's EOF.
    async fn write_side(
        &self,
        mut w: WriteHalf<'_>,
        mut rx: mpsc::Receiver<Chunk>,
        dir: Dir,
        opened: Opened,
        forwarded: &AtomicU64,
    ) -> Result<(), End> {
        let fate = self.state.subscribe();
        let total = match dir {
            Dir::Up => &self.bytes_up,
            Dir::Down => &self.bytes_down,
        };
        let side = match dir {
            Dir::Up => "broker",
            Dir::Down => "client",
        };
        let mut schedule = Schedule::default();
        let mut bucket: Option<TokenBucket> = None;
        let io = |e| End::Io(side, e);
        while let Some(chunk) = rx.recv().await {
            let mut data = &chunk.data[..];
            while !data.is_empty() {
                let state = *fate.borrow();
                if state.must_reset(&opened) {
                    return Err(End::Fault(format!("{} while forwarding", state.mode)));
                }
                let n = match state.mode {
                    // discarded: the connection is reset when the blackhole ends
                    Mode::Blackhole => data.len(),
                    Mode::Reset if dir == Dir::Down => {
                        let n = reset_prefix(data.len());
                        w.write_all(&data[..n]).await.map_err(io)?;
                        w.flush().await.map_err(io)?;
                        add(forwarded, total, n);
                        tokio::time::sleep(RESET_GRACE).await;
                        return Err(End::Fault(format!(
                            "reset fault after {n} of a {} B chunk",
                            data.len()
                        )));
                    }
                    // client-to-broker data goes through a reset fault untouched
                    Mode::Pass | Mode::Drop | Mode::Reset => {
                        w.write_all(data).await.map_err(io)?;
                        data.len()
                    }
                    Mode::Latency { ms, jitter_ms } => {
                        let due = schedule.due(chunk.arrival, latency_delay(ms, jitter_ms));
                        tokio::time::sleep_until(due).await;
                        // the mode may have changed while this chunk waited: decide again
                        if fate.borrow().mode != state.mode {
                            continue;
                        }
                        w.write_all(data).await.map_err(io)?;
                        data.len()
                    }
                    Mode::Bandwidth { bytes_per_sec } => {
                        let b = match &mut bucket {
                            Some(b) if b.rate() == bytes_per_sec.max(1) => b,
                            _ => bucket.insert(TokenBucket::new(bytes_per_sec, Instant::now())),
                        };
                        let (n, wait) = b.take(data.len(), Instant::now());
                        tokio::time::sleep(wait).await;
                        w.write_all(&data[..n]).await.map_err(io)?;
                        n
                    }
                };
                if state.mode != Mode::Blackhole {
                    add(forwarded, total, n);
                }
                data = &data[n..];
            }
        }
        w.shutdown().await.map_err(io)
    }
}

fn add(connection: &AtomicU64, route: &AtomicU64, n: usize) {
    connection.fetch_add(n as u64, Ordering::Relaxed);
    route.fetch_add(n as u64, Ordering::Relaxed);
}

/// Reads one side into its direction's queue until EOF (which closes the queue).
async fn read_side(
    mut r: ReadHalf<'_>,
    tx: mpsc::Sender<Chunk>,
    side: &'static str,
) -> Result<(), End> {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match r.read(&mut buf).await {
            Ok(0) => return Ok(()),
            Ok(n) => {
                let chunk = Chunk {
                    data: buf[..n].to_vec(),
                    arrival: Instant::now(),
                };
                if tx.send(chunk).await.is_err() {
                    // the writer is gone: it ended the connection's result already
                    return Ok(());
                }
            }
            Err(e) => return Err(End::Io(side, e)),
        }
    }
}

/// Resolves when the route's fault says this connection must be reset.
async fn doom(mut fate: watch::Receiver<FaultState>, opened: Opened) -> End {
    loop {
        let state = *fate.borrow_and_update();
        if state.must_reset(&opened) {
            return End::Fault(match state.mode {
                Mode::Drop => "drop".to_string(),
                Mode::Blackhole => "blackhole".to_string(),
                mode => format!("blackhole or drop ended by {mode}"),
            });
        }
        if fate.changed().await.is_err() {
            // the route is gone (the process is ending): nothing will doom this connection
            std::future::pending::<()>().await;
        }
    }
}

/// Makes the socket's close a RST (`SO_LINGER` 0); the caller then drops it.
fn reset(stream: &TcpStream) {
    if let Err(e) = stream.set_zero_linger() {
        log!("cannot set SO_LINGER 0 (the close will be a FIN): {e}");
    }
}
