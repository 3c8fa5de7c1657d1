//! One connection to one broker, shared by every user of a client.
//!
//! Requests are pipelined: each caller gets a correlation id and a slot in the pending table,
//! hands its encoded frame to the writer task and waits for the reader task to route the
//! answer back. Callers never touch the socket, so dropping a caller's future mid-request can
//! never leave half a frame on the wire: the connection stays usable for everybody else.
//!
//! Every frame the broker sends is length-checked against `max_response_size` before a byte
//! of it is allocated, and every response decodes against the version we asked for. A broken
//! socket, an oversized frame or an unknown correlation id closes the connection and fails
//! every request waiting on it, so nobody waits forever.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Request, StrBytes, VersionRange,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinHandle};

use super::versions::ApiVersions;
use crate::client::error::{Error, Result};
use crate::client::observe::{BrokerRef, Event, Interest, Observers, RequestOutcome};
use crate::client::outlined::Outlined;
use crate::client::security::SaslConfig;

/// How a connection behaves.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// `client.id`, sent in every request header.
    pub client_id: Option<String>,
    /// How long to wait for a TCP connect (and the version handshake).
    pub connect_timeout: Duration,
    /// The largest response frame accepted (librdkafka's `receive.message.max.bytes`).
    pub max_response_size: usize,
    /// The runtime connections are opened and served on; `None` is the caller's. A client
    /// used from short-lived runtimes (a handler's own thread) pins its sockets here so that
    /// they outlive the caller's runtime.
    pub runtime: Option<tokio::runtime::Handle>,
    /// TLS around every TCP connection (not around the embedded cluster's in-memory pipes).
    #[cfg(feature = "ssl")]
    pub tls: Option<super::tls::TlsConnector>,
    /// SASL authentication after the version handshake, and re-authentication before the
    /// session lifetime the broker gives runs out.
    pub sasl: Option<SaslConfig>,
    /// Who is told of connections lost and requests answered.
    pub observers: Observers,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            client_id: Some("rdkafka".to_owned()),
            connect_timeout: Duration::from_secs(30),
            max_response_size: 100_000_000,
            runtime: None,
            #[cfg(feature = "ssl")]
            tls: None,
            sasl: None,
            observers: Observers::default(),
        }
    }
}

struct Pending {
    tx: oneshot::Sender<Result<Bytes>>,
    // Whether the response header carries tagged fields (flexible header v1).
    flexible_header: bool,
}

type PendingTable = Arc<Mutex<HashMap<i32, Pending>>>;

/// What the writer task is handed.
enum Outgoing {
    /// A frame to write.
    Frame(Bytes),
    /// A frame in pieces, written one after the other: a body that references large buffers
    /// (a Produce request's batches) goes out without being copied into one frame.
    Pieces(Vec<Bytes>),
    /// A frame as its head with the body's first fields, a part referenced where it lies (a
    /// Produce request's one batch) and fixed closing bytes: no list to allocate.
    Around(Bytes, Bytes, &'static [u8]),
    /// Re-authentication: from here on only the frames of this channel go out, until it closes
    /// (the frames queued behind wait, in order).
    Exclusive(mpsc::UnboundedReceiver<Bytes>),
}

/// The sending side of a connection: what builds frames and queues them for the writer.
struct Wire {
    address: String,
    client_id: Option<StrBytes>,
    frames: mpsc::UnboundedSender<Outgoing>,
    pending: PendingTable,
    next_correlation: AtomicI32,
    closed: Arc<Lifeline>,
}

static NEXT_CONNECTION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A live connection to one broker.
pub struct Connection {
    id: u64,
    address: String,
    wire: Arc<Wire>,
    pending: PendingTable,
    closed: Arc<Lifeline>,
    versions: ApiVersions,
    reader: JoinHandle<()>,
    writer: AbortHandle,
    reauthenticator: Option<AbortHandle>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
        if let Some(task) = &self.reauthenticator {
            task.abort();
        }
        self.closed.mark_closed("connection dropped");
        fail_all(&self.pending, &self.address, "connection dropped");
    }
}

/// Whether a connection is closed, and the one report of its end to the observers.
struct Lifeline {
    closed: AtomicBool,
    /// Set once the set-up passed: a connection that never opened is not reported lost.
    opened: AtomicBool,
    id: u64,
    address: String,
    observers: Observers,
}

impl Lifeline {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the connection closed; the first of the closers (the reader, the writer, a
    /// request's timeout, the drop) reports why.
    fn mark_closed(&self, why: &str) {
        if !self.closed.swap(true, Ordering::AcqRel)
            && self.opened.load(Ordering::Acquire)
            && self.observers.wants(Interest::CONNECTIONS)
        {
            self.observers.emit(&Event::ConnectionLost {
                broker: self.broker(),
                reason: why,
            });
        }
    }

    /// When a request starts, if an observer wants to hear how long it took.
    fn request_started(&self) -> Option<Instant> {
        self.observers.wants(Interest::REQUESTS).then(Instant::now)
    }

    fn broker(&self) -> BrokerRef<'_> {
        BrokerRef {
            address: &self.address,
            connection: Some(self.id),
        }
    }
}

impl Connection {
    /// Opens a TCP connection to `address` (`host:port`) and negotiates API versions.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: whatever the set-up had opened is closed. With `options.runtime` set the set-up
    /// runs as a task there; it still finishes, and the connection nobody takes is then dropped,
    /// which closes it.
    pub async fn connect(address: &str, options: &ConnectionOptions) -> Result<Connection> {
        Self::connect_outlined(address, options).await
    }

    /// The set-up behind [`Connection::connect`], compiled once (see [`Outlined`]).
    #[inline(never)]
    fn connect_outlined<'a>(
        address: &'a str,
        options: &'a ConnectionOptions,
    ) -> Outlined<'a, Result<Connection>> {
        Box::pin(async move {
            if let Some(runtime) = &options.runtime {
                let (address, options) = (address.to_owned(), options.clone());
                return crate::client::outlined::spawn_on(runtime, async move {
                    Self::connect_here(&address, &options).await
                })
                .await
                .map_err(|e| Error::Closed(format!("the task opening a connection ended: {e}")))?;
            }
            Self::connect_here(address, options).await
        })
    }

    async fn connect_here(address: &str, options: &ConnectionOptions) -> Result<Connection> {
        if let Some(pipe) = super::memory::dial(address) {
            let pipe = pipe.map_err(|e| Error::io(address, e))?;
            // The embedded cluster speaks plaintext only: no TLS, no SASL on its pipes.
            let plain = ConnectionOptions {
                sasl: None,
                ..options.clone()
            };
            return Self::over(pipe, address, &plain).await;
        }
        // One deadline for TCP, TLS, versions and SASL: a broker that stalls anywhere in the
        // set-up fails the connect instead of holding it.
        tokio::time::timeout(options.connect_timeout, Self::dial(address, options))
            .await
            .map_err(|_| {
                Error::Timeout(format!(
                    "setting up a connection to {address} ({:?})",
                    options.connect_timeout
                ))
            })?
    }

    async fn dial(address: &str, options: &ConnectionOptions) -> Result<Connection> {
        let stream = TcpStream::connect(address)
            .await
            .map_err(|e| Error::io(address, e))?;
        // Small requests (heartbeats, acks) must not wait for Nagle.
        stream
            .set_nodelay(true)
            .map_err(|e| Error::io(address, e))?;
        #[cfg(feature = "ssl")]
        if let Some(tls) = &options.tls {
            let stream = tls.connect(address, stream).await?;
            return Self::over(stream, address, options)
                .await
                .map_err(|e| super::tls::refused_after_handshake(address, e));
        }
        Self::over(stream, address, options).await
    }

    /// Runs the protocol over an already open byte stream (TCP, TLS, or an in-memory pipe).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the stream is closed and the reader and writer tasks stop with the connection
    /// being built; the broker may have seen the version handshake or part of the SASL exchange,
    /// nothing else.
    pub async fn over<S>(
        stream: S,
        address: &str,
        options: &ConnectionOptions,
    ) -> Result<Connection>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read_half, write_half) = tokio::io::split(stream);
        let pending: PendingTable = Arc::new(Mutex::new(HashMap::new()));
        let id = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
        let closed = Arc::new(Lifeline {
            closed: AtomicBool::new(false),
            opened: AtomicBool::new(false),
            id,
            address: address.to_owned(),
            observers: options.observers.clone(),
        });
        // Unbounded: what waits here is bounded by the callers (the producer's queue limits,
        // one fetch per partition), and a synchronous hand-off is what keeps the wire order.
        let (frames, frames_rx) = mpsc::unbounded_channel::<Outgoing>();
        let writer = crate::client::outlined::spawn(write_frames(
            write_half,
            frames_rx,
            closed.clone(),
            pending.clone(),
            address.to_owned(),
        ));
        let reader = crate::client::outlined::spawn(read_frames(
            read_half,
            pending.clone(),
            closed.clone(),
            address.to_owned(),
            options.max_response_size,
        ));
        let wire = Arc::new(Wire {
            address: address.to_owned(),
            client_id: options.client_id.clone().map(StrBytes::from_string),
            frames,
            pending: pending.clone(),
            next_correlation: AtomicI32::new(0),
            closed: closed.clone(),
        });
        let mut connection = Connection {
            id,
            address: address.to_owned(),
            wire,
            pending,
            closed,
            versions: ApiVersions::default(),
            reader,
            writer: writer.abort_handle(),
            reauthenticator: None,
        };
        let handshake = connection.handshake();
        connection.versions = tokio::time::timeout(options.connect_timeout, handshake)
            .await
            .map_err(|_| Error::Timeout(format!("ApiVersions handshake with {address}")))??;
        if let Some(sasl) = &options.sasl {
            let link = Link {
                wire: connection.wire.clone(),
                closer: connection.closer(),
                route: None,
            };
            let timeout = options.connect_timeout;
            let lifetime =
                super::sasl::authenticate(&link, sasl, &connection.versions, timeout).await?;
            if let Some(lifetime) = lifetime {
                let task = crate::client::outlined::spawn(reauthenticate(
                    link,
                    sasl.clone(),
                    connection.versions.clone(),
                    lifetime,
                    timeout,
                ));
                connection.reauthenticator = Some(task.abort_handle());
            }
        }
        connection.closed.opened.store(true, Ordering::Release);
        Ok(connection)
    }

    async fn handshake(&self) -> Result<ApiVersions> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("ruststream-kafka"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let timeout = Duration::from_secs(30);
        let response: ApiVersionsResponse = self.send(&request, 3, timeout).await?;
        if response.error_code == 35 {
            // UNSUPPORTED_VERSION: the broker answered in v0 with what it does speak.
            let fallback: ApiVersionsResponse = self
                .send(&ApiVersionsRequest::default(), 0, timeout)
                .await?;
            Error::check(fallback.error_code, || {
                format!("ApiVersions with {}", self.address)
            })?;
            return Ok(ApiVersions::from_response(&fallback));
        }
        Error::check(response.error_code, || {
            format!("ApiVersions with {}", self.address)
        })?;
        Ok(ApiVersions::from_response(&response))
    }

    /// A number no other connection of this process has: tells a re-dialled connection to
    /// the same broker from the one before.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The broker's address, as dialled.
    #[must_use]
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether the socket has failed or been closed; a closed connection fails every request.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.closed.is_closed()
    }

    /// The versions the broker announced.
    #[must_use]
    pub fn versions(&self) -> &ApiVersions {
        &self.versions
    }

    /// The highest version of `R` that both sides speak, within `ours`.
    pub fn version_of<R: Request>(&self, ours: VersionRange) -> Result<i16> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|()| Error::Unsupported(format!("API key {}", R::KEY)))?;
        self.versions.pick(key, ours.intersect(&R::VERSIONS))
    }

    /// Sends `request` at `version` and waits up to `timeout` for its response.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for the connection: the request is queued for the wire on the first poll, and
    /// dropping the future after that only discards its answer when it arrives; the connection
    /// stays usable. The broker may still act on the request, so for a request with effects the
    /// caller cannot tell whether it applied.
    pub async fn send<R: Request>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        self.start(request, version, timeout)?.response().await
    }

    /// Puts `request` on the wire and returns its answer as a future to await later.
    ///
    /// The request is queued for the wire before this returns, so requests started one after
    /// the other on a connection reach the broker in that order, whatever order their answers
    /// are awaited in: this is what a producer with several batches of a partition in flight
    /// relies on.
    pub fn start<R: Request>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<InFlight<R>> {
        let submitted = self.submit(request, version, true)?;
        Waiting::for_answer(R::KEY, submitted, version, timeout, self.closer()).map(InFlight::wrap)
    }

    /// Like [`start`](Self::start), for a request whose body the caller encoded at `version`
    /// as `body`, pieces of one encoding that go on the wire one after the other (not copied
    /// into one frame): what a Produce request of large batches does. A `body` with spare
    /// capacity for one more piece takes the frame's head without a new list.
    pub fn start_encoded<R: Request>(
        &self,
        body: Vec<Bytes>,
        version: i16,
        timeout: Duration,
    ) -> Result<InFlight<R>> {
        let submitted = self.wire.submit_encoded(
            R::KEY,
            request_header_version::<R>(version),
            body,
            version,
            expected_answer::<R>(version, true),
        )?;
        Waiting::for_answer(R::KEY, submitted, version, timeout, self.closer()).map(InFlight::wrap)
    }

    /// Like [`start_encoded`](Self::start_encoded), for a body the caller encoded at `version`
    /// as three parts: `before` (copied behind the frame's head, into the one buffer the
    /// request allocates), `middle` (sent where it lies) and `after`.
    pub fn start_around<R: Request>(
        &self,
        (before, middle, after): (&[u8], Bytes, &'static [u8]),
        version: i16,
        timeout: Duration,
    ) -> Result<InFlight<R>> {
        let submitted = self.wire.submit_around(
            R::KEY,
            request_header_version::<R>(version),
            (before, middle, after),
            version,
            expected_answer::<R>(version, true),
        )?;
        Waiting::for_answer(R::KEY, submitted, version, timeout, self.closer()).map(InFlight::wrap)
    }

    /// Like [`start_encoded`](Self::start_encoded), for a request the broker does not answer
    /// (a Produce with `acks=0`); it is queued for the wire before this returns.
    pub fn start_encoded_without_response<R: Request>(
        &self,
        body: Vec<Bytes>,
        version: i16,
    ) -> Result<()> {
        self.wire
            .submit_encoded(
                R::KEY,
                request_header_version::<R>(version),
                body,
                version,
                None,
            )
            .map(|_| ())
    }

    fn closer(&self) -> Closer {
        Closer {
            pending: self.pending.clone(),
            closed: self.closed.clone(),
            reader: self.reader.abort_handle(),
            writer: self.writer.clone(),
        }
    }

    /// Sends a request for which the broker sends no answer (a Produce with `acks=0`); it is
    /// queued for the wire before this returns.
    pub fn start_without_response<R: Request>(&self, request: &R, version: i16) -> Result<()> {
        self.submit(request, version, false).map(|_| ())
    }

    fn submit<R: Request>(
        &self,
        request: &R,
        version: i16,
        expect_response: bool,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes>>>)> {
        self.wire.submit(request, version, expect_response, None)
    }

    /// Closes the connection, failing every request in flight on it.
    pub fn close(&self, why: &str) {
        self.closer().close(why);
    }
}

/// The header version of a request of `R` at `version`.
fn request_header_version<R: Request>(version: i16) -> i16 {
    <R as HeaderVersion>::header_version(version)
}

/// Whether the answer to a request of `R` at `version` has a flexible header, if it is
/// answered.
fn expected_answer<R: Request>(version: i16, expect_response: bool) -> Option<bool> {
    expect_response.then(|| <R::Response as HeaderVersion>::header_version(version) >= 1)
}

/// A request that could not be encoded.
fn encode_error(e: &anyhow::Error) -> Error {
    Error::InvalidRecord(format!("encoding request: {e}"))
}

impl Wire {
    fn is_closed(&self) -> bool {
        self.closed.is_closed()
    }

    /// A new correlation id and the start of its frame: the length (of a body of `body`
    /// bytes) and the request header, with room for `room` bytes of body after them.
    fn frame_head(
        &self,
        api_key: i16,
        header_version: i16,
        version: i16,
        body: usize,
        room: usize,
    ) -> Result<(i32, BytesMut)> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let header = RequestHeader::default()
            .with_request_api_key(api_key)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(self.client_id.clone());
        let head = header
            .compute_size(header_version)
            .map_err(|e| encode_error(&e))?;
        let length = i32::try_from(head + body)
            .map_err(|_| Error::InvalidRecord("request too large".into()))?;
        let mut frame = BytesMut::with_capacity(4 + head + room);
        frame.put_i32(length);
        header
            .encode(&mut frame, header_version)
            .map_err(|e| encode_error(&e))?;
        Ok((correlation, frame))
    }

    /// Registers the wait for the answer to `correlation`, if one comes (`answer`: whether
    /// its header is flexible, v1).
    fn wait_for_answer(
        &self,
        correlation: i32,
        answer: Option<bool>,
    ) -> Result<Option<oneshot::Receiver<Result<Bytes>>>> {
        let Some(flexible_header) = answer else {
            return Ok(None);
        };
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(
            correlation,
            Pending {
                tx,
                flexible_header,
            },
        );
        // A close between the check before and the insert would have missed this entry and
        // left its caller waiting for an answer no reader will deliver.
        self.queued(correlation, !self.is_closed())?;
        Ok(Some(rx))
    }

    /// Whether the wait of `correlation` stands: one whose frame cannot go out (the writer no
    /// longer takes it, or the connection closed as the wait was registered) is taken back.
    fn queued(&self, correlation: i32, queued: bool) -> Result<()> {
        if queued {
            return Ok(());
        }
        lock(&self.pending).remove(&correlation);
        Err(Error::Closed(format!("connection to {}", self.address)))
    }

    /// Queues a request whose body was encoded in `pieces`, in turn, with a wait for its answer
    /// if one comes.
    /// `answer`: whether the answer's header is flexible, if an answer comes.
    fn submit_encoded(
        &self,
        api_key: i16,
        header_version: i16,
        pieces: Vec<Bytes>,
        version: i16,
        answer: Option<bool>,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes>>>)> {
        if self.is_closed() {
            return Err(Error::Closed(format!("connection to {}", self.address)));
        }
        let body = pieces.iter().map(Bytes::len).sum();
        // The head alone: the body follows in its own pieces.
        let (correlation, head) = self.frame_head(api_key, header_version, version, body, 0)?;
        let rx = self.wait_for_answer(correlation, answer)?;
        // In front of the body's pieces: in place when the caller left room for it.
        let mut frame = pieces;
        frame.insert(0, head.freeze());
        self.queued(
            correlation,
            self.frames.send(Outgoing::Pieces(frame)).is_ok(),
        )?;
        Ok((correlation, rx))
    }

    /// Queues a request whose body is `before`, `middle` and `after` end to end: the frame's
    /// head and `before` in one buffer of their exact size, `middle` as it is.
    fn submit_around(
        &self,
        api_key: i16,
        header_version: i16,
        (before, middle, after): (&[u8], Bytes, &'static [u8]),
        version: i16,
        answer: Option<bool>,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes>>>)> {
        if self.is_closed() {
            return Err(Error::Closed(format!("connection to {}", self.address)));
        }
        let body = before.len() + middle.len() + after.len();
        let (correlation, mut head) =
            self.frame_head(api_key, header_version, version, body, before.len())?;
        head.put_slice(before);
        let rx = self.wait_for_answer(correlation, answer)?;
        self.queued(
            correlation,
            self.frames
                .send(Outgoing::Around(head.freeze(), middle, after))
                .is_ok(),
        )?;
        Ok((correlation, rx))
    }

    /// Encodes `request` and queues it: on `route` during re-authentication, else in turn.
    fn submit<R: Request>(
        &self,
        request: &R,
        version: i16,
        expect_response: bool,
        route: Option<&mpsc::UnboundedSender<Bytes>>,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes>>>)> {
        if self.is_closed() {
            return Err(Error::Closed(format!("connection to {}", self.address)));
        }
        let body = request
            .compute_size(version)
            .map_err(|e| encode_error(&e))?;
        let (correlation, mut frame) = self.frame_head(
            R::KEY,
            request_header_version::<R>(version),
            version,
            body,
            body,
        )?;
        request
            .encode(&mut frame, version)
            .map_err(|e| encode_error(&e))?;
        self.queue(
            correlation,
            frame,
            expected_answer::<R>(version, expect_response),
            route,
        )
    }

    /// Registers the wait for the answer to a frame just encoded, if one comes, and queues
    /// the frame (not generic: one copy for every API).
    fn queue(
        &self,
        correlation: i32,
        frame: BytesMut,
        answer: Option<bool>,
        route: Option<&mpsc::UnboundedSender<Bytes>>,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes>>>)> {
        let rx = self.wait_for_answer(correlation, answer)?;
        let queued = match route {
            Some(route) => route.send(frame.freeze()).is_ok(),
            None => self.frames.send(Outgoing::Frame(frame.freeze())).is_ok(),
        };
        self.queued(correlation, queued)?;
        Ok((correlation, rx))
    }
}

/// A way to exchange requests on a connection before it is handed out (authentication) or
/// while everybody else's requests wait (re-authentication).
pub(super) struct Link {
    wire: Arc<Wire>,
    closer: Closer,
    route: Option<mpsc::UnboundedSender<Bytes>>,
}

impl Link {
    /// The broker's address.
    pub(super) fn address(&self) -> &str {
        &self.wire.address
    }

    /// Sends `request` and waits for its answer.
    pub(super) async fn call<R: Request>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let submitted = self
            .wire
            .submit(request, version, true, self.route.as_ref())?;
        let waiting =
            Waiting::for_answer(R::KEY, submitted, version, timeout, self.closer.clone())?;
        InFlight::<R>::wrap(waiting).response().await
    }
}

impl super::sasl::Exchange for Link {
    fn address(&self) -> &str {
        Link::address(self)
    }

    fn call<R: Request + Sync>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> impl Future<Output = Result<R::Response>> + Send {
        Link::call(self, request, version, timeout)
    }
}

/// Re-authenticates (KIP-368) at 85 to 95 % of each session lifetime, as Kafka's clients do,
/// until the connection closes. A failure closes the connection: the broker would close it at
/// the session's end anyway, and a fresh dial authenticates from scratch.
async fn reauthenticate(
    link: Link,
    sasl: SaslConfig,
    versions: ApiVersions,
    mut lifetime: Duration,
    timeout: Duration,
) {
    loop {
        // Bounded both ways: a session of a few milliseconds must not spin, one of centuries
        // must not overflow a timer.
        let bounded = lifetime.clamp(Duration::from_millis(100), Duration::from_hours(365 * 24));
        let wait = bounded.mul_f64(0.85 + fastrand::f64() * 0.1);
        tokio::time::sleep(wait).await;
        if link.wire.is_closed() {
            return;
        }
        // A token due for a refresh is fetched before the connection is taken for the
        // exchange, so that requests do not wait for the identity provider's answer.
        if let Some(provider) = &sasl.token_provider {
            let _ = provider.token().await;
        }
        let (route, exclusive) = mpsc::unbounded_channel();
        if link
            .wire
            .frames
            .send(Outgoing::Exclusive(exclusive))
            .is_err()
        {
            return;
        }
        let turn = Link {
            wire: link.wire.clone(),
            closer: link.closer.clone(),
            route: Some(route),
        };
        let outcome = super::sasl::authenticate(&turn, &sasl, &versions, timeout).await;
        // Dropping the route lets the writer take the queued frames again.
        drop(turn);
        match outcome {
            Ok(next) => {
                super::sasl::count_reauthentication();
                tracing::debug!(broker = %link.address(), "re-authenticated");
                match next {
                    Some(next) => lifetime = next,
                    None => return,
                }
            }
            Err(e) => {
                tracing::warn!(broker = %link.address(), error = %e, "re-authentication failed");
                link.closer.close("re-authentication failed");
                return;
            }
        }
    }
}

/// What it takes to close a connection from a request's side (after its timeout).
#[derive(Clone)]
struct Closer {
    pending: PendingTable,
    closed: Arc<Lifeline>,
    reader: AbortHandle,
    writer: AbortHandle,
}

impl Closer {
    fn close(&self, why: &str) {
        self.closed.mark_closed(why);
        // Nothing more goes out on a closed connection: a frame still queued would reach the
        // broker after its caller was told it failed.
        self.writer.abort();
        self.reader.abort();
        fail_all(&self.pending, self.address(), why);
    }

    fn address(&self) -> &str {
        &self.closed.address
    }
}

/// A request on the wire whose answer has not been read yet.
pub struct InFlight<R: Request> {
    waiting: Waiting,
    _request: PhantomData<fn() -> R>,
}

/// What an [`InFlight`] holds, whatever its API: all of it but the decoding, in one copy
/// rather than one per request type.
struct Waiting {
    api_key: i16,
    correlation: i32,
    rx: oneshot::Receiver<Result<Bytes>>,
    version: i16,
    timeout: Duration,
    /// When the answer is due (the request's timeout, on tokio's clock).
    due: tokio::time::Instant,
    closer: Closer,
    /// When it was queued, if an observer wants to hear how long it took.
    started: Option<Instant>,
    /// The request's span, from its start to its answer.
    span: tracing::Span,
}

impl<R: Request> std::fmt::Debug for InFlight<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("api", &R::KEY)
            .field("correlation", &self.waiting.correlation)
            .field("broker", &self.waiting.closer.address())
            .finish_non_exhaustive()
    }
}

impl<R: Request> InFlight<R> {
    fn wrap(waiting: Waiting) -> Self {
        InFlight {
            waiting,
            _request: PhantomData,
        }
    }

    /// Waits for the answer (up to the request's timeout) and decodes it.
    ///
    /// A timeout closes the connection: a late answer would arrive out of any order the caller
    /// can reason about (an idempotent producer's retry in particular).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for the connection: the request is already on the wire; dropping this only
    /// discards its answer when it arrives, without closing the connection (only the timeout here
    /// closes it). The broker may still act on the request. Observers hear of it only when it is
    /// awaited to the end.
    pub async fn response(mut self) -> Result<R::Response> {
        let waiting = &mut self.waiting;
        let result = match tokio::time::timeout(waiting.timeout, &mut waiting.rx).await {
            Ok(answer) => waiting.span.in_scope(|| decode::<R>(waiting, answer)),
            Err(_) => Err(waiting.time_out()),
        };
        waiting.observe(result.as_ref().map(drop));
        result
    }

    /// When the answer is due: past it, [`expire`](Self::expire) is what is left to do.
    #[must_use]
    pub fn deadline(&self) -> tokio::time::Instant {
        self.waiting.due
    }

    /// The answer, decoded, if it has come; otherwise `cx` is woken when it does. For a caller
    /// that keeps many requests in one task without a timer each: it watches
    /// [`deadline`](Self::deadline) and calls [`expire`](Self::expire) past it. Once this has
    /// returned `Ready`, the request is done with and is dropped.
    pub fn poll_response(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<R::Response>> {
        let waiting = &mut self.waiting;
        let std::task::Poll::Ready(answer) = std::pin::Pin::new(&mut waiting.rx).poll(cx) else {
            return std::task::Poll::Pending;
        };
        let result = waiting.span.in_scope(|| decode::<R>(waiting, answer));
        waiting.observe(result.as_ref().map(drop));
        std::task::Poll::Ready(result)
    }

    /// Like [`poll_response`](Self::poll_response), for a caller that reads the answer in
    /// place: the body checked against the response's schema, and its version, not decoded.
    pub fn poll_body(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(Bytes, i16)>> {
        let waiting = &mut self.waiting;
        let std::task::Poll::Ready(answer) = std::pin::Pin::new(&mut waiting.rx).poll(cx) else {
            return std::task::Poll::Pending;
        };
        let result = waiting
            .span
            .in_scope(|| waiting.checked(answer))
            .map(|body| (body, waiting.version));
        waiting.observe(result.as_ref().map(drop));
        std::task::Poll::Ready(result)
    }

    /// Gives up on the answer as [`response`](Self::response) does at its timeout: the
    /// connection is closed and the timeout is the request's error.
    #[must_use]
    pub fn expire(self) -> Error {
        self.waiting.expire()
    }
}

/// The answer the reader routed to `waiting`, checked and decoded as `R`'s.
fn decode<R: Request>(
    waiting: &Waiting,
    answer: std::result::Result<Result<Bytes>, oneshot::error::RecvError>,
) -> Result<R::Response> {
    let mut body = waiting.checked(answer)?;
    R::Response::decode(&mut body, waiting.version).map_err(|e| waiting.malformed(&e))
}

impl Waiting {
    /// The wait for the answer to a request just queued, as its submission returned it.
    fn for_answer(
        api_key: i16,
        (correlation, rx): (i32, Option<oneshot::Receiver<Result<Bytes>>>),
        version: i16,
        timeout: Duration,
        closer: Closer,
    ) -> Result<Self> {
        let Some(rx) = rx else {
            return Err(Error::protocol("no response slot"));
        };
        Ok(Waiting::new(
            api_key,
            correlation,
            rx,
            version,
            timeout,
            closer,
        ))
    }

    fn new(
        api_key: i16,
        correlation: i32,
        rx: oneshot::Receiver<Result<Bytes>>,
        version: i16,
        timeout: Duration,
        closer: Closer,
    ) -> Self {
        // One span per request, at DEBUG: with no subscriber enabled there, it is not built.
        let span = tracing::debug_span!(
            "kafka.request",
            otel.kind = "client",
            messaging.system = "kafka",
            api = ?ApiKey::try_from(api_key).ok(),
            api.version = version,
            server.address = %closer.address(),
            correlation = correlation,
        );
        Waiting {
            api_key,
            correlation,
            rx,
            version,
            timeout,
            due: tokio::time::Instant::now() + timeout,
            started: closer.closed.request_started(),
            closer,
            span,
        }
    }

    /// The timeout as the request's error, the connection closed, the observers told.
    fn expire(self) -> Error {
        let error = self.span.in_scope(|| self.time_out());
        self.observe(Err(&error));
        error
    }

    /// Closes the connection for an answer that did not come in time, and says so.
    fn time_out(&self) -> Error {
        let version = self.version;
        let api = ApiKey::try_from(self.api_key).ok();
        let address = self.closer.address();
        // A silent broker or a half-open path: worth a line, unlike a broker closing an idle
        // connection.
        tracing::warn!(
            broker = %address,
            api = ?api,
            timeout = ?self.timeout,
            "no answer in time; closing the connection"
        );
        self.closer
            .close(&format!("request {} timed out", self.correlation));
        Error::Timeout(format!(
            "{api:?} v{version} to {address} after {:?}",
            self.timeout
        ))
    }

    /// Tells the observers that asked how the request went.
    fn observe(&self, result: std::result::Result<(), &Error>) {
        if let Some(started) = self.started {
            let line = &self.closer.closed;
            line.observers.emit(&Event::Request {
                broker: line.broker(),
                api_key: self.api_key,
                api_version: self.version,
                latency: started.elapsed(),
                outcome: match result {
                    Ok(()) => RequestOutcome::Answered,
                    Err(e) => RequestOutcome::Failed(e),
                },
            });
        }
    }

    /// The answer's body, once the reader has routed it here and its shape checks out for
    /// this API and version.
    fn checked(
        &self,
        answer: std::result::Result<Result<Bytes>, oneshot::error::RecvError>,
    ) -> Result<Bytes> {
        let body = match answer {
            Ok(answer) => answer?,
            Err(_) => {
                return Err(Error::Closed(format!(
                    "connection to {}",
                    self.closer.address()
                )));
            }
        };
        super::shape_check::check_response(self.api_key, self.version, &body)
            .map_err(|e| self.malformed(&e))?;
        Ok(body)
    }

    /// An answer that is not what this API and version answer.
    fn malformed(&self, e: &dyn std::fmt::Display) -> Error {
        let version = self.version;
        let api = ApiKey::try_from(self.api_key).ok();
        let address = self.closer.address();
        Error::protocol(format_args!(
            "{api:?} v{version} response from {address}: {e}"
        ))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the table cannot leave it half-updated (single inserts/removes).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fail_all(pending: &PendingTable, address: &str, why: &str) {
    let drained: Vec<Pending> = lock(pending).drain().map(|(_, p)| p).collect();
    for p in drained {
        let _ = p.tx.send(Err(Error::io(
            address,
            std::io::Error::new(std::io::ErrorKind::ConnectionAborted, why.to_owned()),
        )));
    }
}

async fn write_frames<W: AsyncWrite + Unpin>(
    writer: W,
    mut frames: mpsc::UnboundedReceiver<Outgoing>,
    closed: Arc<Lifeline>,
    pending: PendingTable,
    address: String,
) {
    let mut writer = BufWriter::with_capacity(64 * 1024, writer);
    let outcome: std::io::Result<()> = async {
        while let Some(item) = frames.recv().await {
            let mut next = Some(item);
            // Coalesce whatever else is already queued into the same flush.
            while let Some(item) = next.take() {
                match item {
                    Outgoing::Frame(frame) => writer.write_all(&frame).await?,
                    // Small pieces gather in the buffer; a large one goes to the socket as it is.
                    Outgoing::Pieces(pieces) => {
                        for piece in pieces {
                            writer.write_all(&piece).await?;
                        }
                    }
                    Outgoing::Around(head, middle, end) => {
                        writer.write_all(&head).await?;
                        writer.write_all(&middle).await?;
                        writer.write_all(end).await?;
                    }
                    Outgoing::Exclusive(mut only) => {
                        writer.flush().await?;
                        while let Some(frame) = only.recv().await {
                            writer.write_all(&frame).await?;
                            writer.flush().await?;
                        }
                    }
                }
                next = frames.try_recv().ok();
            }
            writer.flush().await?;
        }
        writer.shutdown().await
    }
    .await;
    let why = match outcome {
        Ok(()) => "connection closed".to_owned(),
        Err(e) => format!("write failed: {e}"),
    };
    closed.mark_closed(&why);
    fail_all(&pending, &address, &why);
}

async fn read_frames<R: AsyncRead + Unpin>(
    reader: R,
    pending: PendingTable,
    closed: Arc<Lifeline>,
    address: String,
    max_response_size: usize,
) {
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, reader);
    let why = loop {
        let length = match reader.read_i32().await {
            Ok(n) => n,
            Err(e) => break format!("read failed: {e}"),
        };
        let Ok(length) = usize::try_from(length) else {
            break format!("negative frame length {length}");
        };
        if !(4..=max_response_size).contains(&length) {
            break format!("frame of {length} bytes (limit {max_response_size})");
        }
        // Read into uninitialised capacity: zero-filling megabytes of fetch response first
        // cost a measurable share of a consumer's CPU.
        let mut frame = BytesMut::with_capacity(length);
        let mut limited = (&mut reader).take(length as u64);
        let mut failure = None;
        while frame.len() < length {
            match limited.read_buf(&mut frame).await {
                Ok(0) => {
                    failure = Some(format!(
                        "connection closed mid-frame ({} of {length} bytes)",
                        frame.len()
                    ));
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    failure = Some(format!("read failed: {e}"));
                    break;
                }
            }
        }
        if let Some(why) = failure {
            break why;
        }
        let mut frame = frame.freeze();
        let correlation = frame.get_i32();
        let Some(slot) = lock(&pending).remove(&correlation) else {
            break format!("response for unknown correlation id {correlation}");
        };
        let body = if slot.flexible_header {
            skip_tagged_fields(frame)
        } else {
            Ok(frame)
        };
        let _ = slot.tx.send(body);
    };
    closed.mark_closed(&why);
    tracing::debug!(broker = %address, reason = %why, "connection closed");
    fail_all(&pending, &address, &why);
}

fn skip_tagged_fields(mut frame: Bytes) -> Result<Bytes> {
    let count = read_unsigned_varint(&mut frame)?;
    for _ in 0..count {
        let _tag = read_unsigned_varint(&mut frame)?;
        let size = read_unsigned_varint(&mut frame)? as usize;
        if frame.remaining() < size {
            return Err(Error::protocol("truncated tagged field in response header"));
        }
        frame.advance(size);
    }
    Ok(frame)
}

fn read_unsigned_varint(buf: &mut Bytes) -> Result<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return Err(Error::protocol("truncated varint"));
        }
        let b = buf.get_u8();
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(Error::protocol("varint longer than 5 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_header_fields_are_skipped_and_bounded() {
        let frame = Bytes::from_static(&[1, 7, 2, 0xaa, 0xbb, 9]);
        assert_eq!(
            skip_tagged_fields(frame).ok(),
            Some(Bytes::from_static(&[9]))
        );
        let truncated = Bytes::from_static(&[1, 7, 50, 0xaa]);
        assert!(skip_tagged_fields(truncated).is_err());
        let endless = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(skip_tagged_fields(endless).is_err());
    }

    #[tokio::test]
    async fn an_oversized_frame_closes_the_connection_without_allocating_it() {
        let (client, mut server) = tokio::io::duplex(1024);
        let options = ConnectionOptions {
            max_response_size: 1024,
            connect_timeout: Duration::from_secs(5),
            ..ConnectionOptions::default()
        };
        let server_task = tokio::spawn(async move {
            // Read the ApiVersions request, answer with a frame claiming 2 GiB.
            let mut len = [0u8; 4];
            server.read_exact(&mut len).await.ok();
            let mut req = vec![0u8; i32::from_be_bytes(len) as usize];
            server.read_exact(&mut req).await.ok();
            server.write_all(&i32::MAX.to_be_bytes()).await.ok();
            server
        });
        let outcome = Connection::over(client, "test", &options).await;
        assert!(matches!(outcome, Err(Error::Io { .. })), "{outcome:?}");
        drop(server_task.await);
    }
}
