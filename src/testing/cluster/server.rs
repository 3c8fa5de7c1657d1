//! One connection to one embedded broker: frames in, requests decoded, answered in order.
//!
//! Like a real broker, a connection's requests are handled one at a time and answered in the
//! order they came; a long-polling `Fetch` or a `JoinGroup` holds its connection until answered.
//! A frame that cannot be read or decoded closes the connection, as Kafka does.

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{Listener, Shared};

/// The largest request frame accepted (`socket.request.max.bytes`).
const MAX_REQUEST: usize = 104_857_600;

/// What a handler knows about the request it answers.
pub(crate) struct Cx<'a> {
    pub(crate) cluster: &'a Arc<Shared>,
    /// The node this connection reached.
    pub(crate) node: i32,
    /// The request's API version.
    pub(crate) version: i16,
    pub(crate) listener: Listener,
    pub(crate) client_id: Option<&'a str>,
}

/// Why a connection ends.
#[derive(Debug)]
pub(crate) enum Close {
    Io(std::io::Error),
    Malformed(String),
    /// A fault armed by the test closes it.
    Fault,
}

impl std::fmt::Display for Close {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Close::Io(e) => write!(f, "i/o: {e}"),
            Close::Malformed(why) => write!(f, "malformed: {why}"),
            Close::Fault => f.write_str("closed by an injected fault"),
        }
    }
}

impl From<std::io::Error> for Close {
    fn from(e: std::io::Error) -> Self {
        Close::Io(e)
    }
}

/// Serves `stream` until the client hangs up or sends something unreadable.
pub(crate) async fn serve<S>(shared: Arc<Shared>, node: i32, listener: Listener, stream: S)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut dropped = shared.faults.watch(node);
    let serving = async {
        loop {
            let length = match reader.read_i32().await {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let length = usize::try_from(length)
                .ok()
                .filter(|n| (8..=MAX_REQUEST).contains(n))
                .ok_or_else(|| Close::Malformed(format!("request frame of {length} bytes")))?;
            let mut frame = BytesMut::zeroed(length);
            reader.read_exact(&mut frame).await?;
            let Some(answer) = answer(&shared, node, listener, frame.freeze()).await? else {
                continue;
            };
            writer.write_all(&answer).await?;
            writer.flush().await?;
        }
    };
    // `drop_connections` closes the connection wherever it is, a long poll included.
    let outcome: Result<(), Close> = tokio::select! {
        outcome = serving => outcome,
        () = closed_by_fault(dropped.as_mut()) => Err(Close::Fault),
    };
    if let Err(why) = outcome {
        tracing::debug!(node, %why, "embedded broker closed a connection");
    }
}

/// Resolves when a fault closes the connections of the node `dropped` follows.
async fn closed_by_fault(dropped: Option<&mut tokio::sync::watch::Receiver<u64>>) {
    if let Some(rx) = dropped
        && rx.changed().await.is_ok()
    {
        return;
    }
    // Without a node to follow, or with the cluster gone, nothing closes it this way.
    std::future::pending::<()>().await;
}

/// Decodes one request frame and builds its response frame; `None` when the request gets no
/// answer (a Produce with `acks=0`).
async fn answer(
    shared: &Arc<Shared>,
    node: i32,
    listener: Listener,
    mut frame: Bytes,
) -> Result<Option<Bytes>, Close> {
    let (key, version) = {
        let mut peek = frame.clone();
        (peek.get_i16(), peek.get_i16())
    };
    let api = ApiKey::try_from(key).map_err(|()| Close::Malformed(format!("API key {key}")))?;
    let level = shared.options.transaction_version;
    if api != ApiKey::ApiVersions && !super::versions::supported(api, version, level) {
        return Err(Close::Malformed(format!(
            "{api:?} v{version} not supported"
        )));
    }
    // ApiVersions is decoded with the v0 header whatever version it asks for, so that a
    // client asking too high can still be told what we speak.
    let header_version = if super::versions::supported(api, version, level) {
        api.request_header_version(version)
    } else {
        1
    };
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| Close::Malformed(format!("request header: {e}")))?;
    let client_id = header.client_id.as_ref().map(|s| s.as_str().to_owned());
    let cx = Cx {
        cluster: shared,
        node,
        version,
        listener,
        client_id: client_id.as_deref(),
    };
    let planned = shared.faults.next(api);
    if planned.close {
        return Err(Close::Fault);
    }
    if let Some(delay) = planned.delay {
        tokio::time::sleep(delay).await;
    }
    let body = if let Some(code) = planned.fail {
        if api == ApiKey::ApiVersions {
            let (response, version) = super::versions::answer(&cx);
            encode(&Cx { version, ..cx }, &response.with_error_code(code))?
        } else {
            crate::testing::faults::error_response(&cx, api, frame, code)?
        }
    } else if api == ApiKey::ApiVersions {
        let (response, version) = super::versions::answer(&cx);
        encode(&Cx { version, ..cx }, &response)?
    } else {
        let body = super::dispatch::dispatch(&cx, api, frame).await?;
        shared.after_change();
        body
    };
    let Some(body) = body else {
        return Ok(None);
    };
    let response_header_version = if api == ApiKey::ApiVersions {
        0
    } else {
        api.response_header_version(version)
    };
    let mut out = BytesMut::with_capacity(body.len() + 9);
    out.put_i32(0);
    out.put_i32(header.correlation_id);
    if response_header_version >= 1 {
        // No tagged fields in the response header.
        out.put_u8(0);
    }
    out.extend_from_slice(&body);
    let length = i32::try_from(out.len() - 4)
        .map_err(|_| Close::Malformed("response too large".to_owned()))?;
    out[..4].copy_from_slice(&length.to_be_bytes());
    Ok(Some(out.freeze()))
}

/// Decodes a request body at the connection's version.
pub(crate) fn decode<T: Decodable>(cx: &Cx<'_>, mut body: Bytes) -> Result<T, Close> {
    T::decode(&mut body, cx.version).map_err(|e| Close::Malformed(format!("request body: {e}")))
}

/// Encodes a response body at the connection's version.
pub(crate) fn encode<T: Encodable>(cx: &Cx<'_>, response: &T) -> Result<Option<Bytes>, Close> {
    let mut out = BytesMut::new();
    response
        .encode(&mut out, cx.version)
        .map_err(|e| Close::Malformed(format!("encoding a response: {e}")))?;
    Ok(Some(out.freeze()))
}
