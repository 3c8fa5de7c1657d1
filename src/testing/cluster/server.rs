//! One connection to one embedded broker: frames in, requests decoded, answered in order.
//!
//! Like a real broker, a connection's requests are handled one at a time and answered in the
//! order they came; a long-polling `Fetch` or a `JoinGroup` holds its connection until answered.
//! A frame that cannot be read or decoded closes the connection, as Kafka does.
//!
//! No count from the wire is trusted: `kafka-protocol` decodes an array with
//! `Vec::with_capacity(n)`, `n` as the client sent it, so every request body is first walked
//! against Kafka's request schema for its API and version (`check_request`, the walk the
//! client runs on responses). A body that fails it is a malformed frame: what decoding then
//! allocates is proportional to the frame, which is at most [`MAX_REQUEST`] bytes.

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
    let authority = match listener {
        Listener::Tcp => shared.msk_iam.get().cloned(),
        Listener::Memory => None,
    };
    let mut session = super::msk_iam::Session::new(authority);
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
            let Some(answer) =
                answer(&shared, node, listener, frame.freeze(), &mut session).await?
            else {
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

/// A request frame read up to its body: the API, its version, the header, and the body, whose
/// shape has been checked against the request's schema.
struct Framed {
    api: ApiKey,
    version: i16,
    header: RequestHeader,
    body: Bytes,
}

/// Reads the header of `frame` and checks the shape of its body; `level` is the cluster's
/// transaction version (it decides which versions of the transaction APIs it speaks).
fn read_frame(mut frame: Bytes, level: i16) -> Result<Framed, Close> {
    if frame.len() < 4 {
        return Err(Close::Malformed(format!(
            "request frame of {} bytes",
            frame.len()
        )));
    }
    let (key, version) = {
        let mut peek = frame.clone();
        (peek.get_i16(), peek.get_i16())
    };
    let api = ApiKey::try_from(key).map_err(|()| Close::Malformed(format!("API key {key}")))?;
    if api != ApiKey::ApiVersions && !super::versions::supported(api, version, level) {
        return Err(Close::Malformed(format!(
            "{api:?} v{version} not supported"
        )));
    }
    // ApiVersions is decoded with the v0 header whatever version it asks for, so that a
    // client asking too high can still be told what we speak.
    let supported = super::versions::supported(api, version, level);
    let header_version = if supported {
        api.request_header_version(version)
    } else {
        1
    };
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| Close::Malformed(format!("request header: {e}")))?;
    // An ApiVersions of a version we do not speak is answered without reading its body.
    if supported {
        crate::client::check_request(key, version, &frame)
            .map_err(|e| Close::Malformed(format!("request body: {e}")))?;
    }
    Ok(Framed {
        api,
        version,
        header,
        body: frame,
    })
}

/// Decodes one request frame and builds its response frame; `None` when the request gets no
/// answer (a Produce with `acks=0`).
async fn answer(
    shared: &Arc<Shared>,
    node: i32,
    listener: Listener,
    frame: Bytes,
    session: &mut super::msk_iam::Session,
) -> Result<Option<Bytes>, Close> {
    let Framed {
        api,
        version,
        header,
        body: frame,
    } = read_frame(frame, shared.options.transaction_version)?;
    let client_id = header.client_id.as_ref().map(|s| s.as_str().to_owned());
    let cx = Cx {
        cluster: shared,
        node,
        version,
        listener,
        client_id: client_id.as_deref(),
    };
    session.admit(api)?;
    if matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) {
        let body = session.handle(&cx, api, frame)?;
        return Ok(Some(frame_response(
            api,
            version,
            header.correlation_id,
            &body.unwrap_or_default(),
        )?));
    }
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
    Ok(Some(frame_response(
        api,
        version,
        header.correlation_id,
        &body,
    )?))
}

/// A response frame: length, correlation id, the header's tagged fields where its version has
/// them, the body.
fn frame_response(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &[u8],
) -> Result<Bytes, Close> {
    let response_header_version = if api == ApiKey::ApiVersions {
        0
    } else {
        api.response_header_version(version)
    };
    let mut out = BytesMut::with_capacity(body.len() + 9);
    out.put_i32(0);
    out.put_i32(correlation_id);
    if response_header_version >= 1 {
        // No tagged fields in the response header.
        out.put_u8(0);
    }
    out.extend_from_slice(body);
    let length = i32::try_from(out.len() - 4)
        .map_err(|_| Close::Malformed("response too large".to_owned()))?;
    out[..4].copy_from_slice(&length.to_be_bytes());
    Ok(out.freeze())
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

/// The fuzz target `broker_requests`: a request frame (without its length prefix) read as
/// [`answer`] reads it, then its body decoded as the handler of its API decodes it.
#[cfg(fuzzing)]
impl crate::fuzzing::Entry for crate::fuzzing::BrokerRequests {
    fn run(data: &[u8]) {
        // The newest transaction protocol: every version the cluster can speak.
        let Ok(framed) = read_frame(Bytes::copy_from_slice(data), 2) else {
            return;
        };
        if !super::versions::supported(framed.api, framed.version, 2) {
            return;
        }
        let mut body = framed.body;
        let _ =
            kafka_protocol::messages::RequestKind::decode(framed.api, &mut body, framed.version);
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, Bytes, BytesMut};
    use kafka_protocol::messages::{MetadataRequest, RequestHeader};
    use kafka_protocol::protocol::Encodable;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::{Close, read_frame};
    use crate::testing::cluster::{ClusterOptions, EmbeddedCluster};

    /// A Metadata v12 request frame (header v2) whose body is `body`.
    fn metadata_frame(body: &[u8]) -> Bytes {
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(3)
            .with_request_api_version(12)
            .with_correlation_id(7)
            .encode(&mut frame, 2)
            .expect("encodes");
        frame.put_slice(body);
        frame.freeze()
    }

    #[test]
    fn a_request_array_count_of_i32_max_is_refused_before_decoding() {
        let mut good = BytesMut::new();
        MetadataRequest::default()
            .encode(&mut good, 12)
            .expect("encodes");
        assert!(read_frame(metadata_frame(&good), 2).is_ok());
        // Topics: a count of 2^31 - 2 (varint 0xffffffff07), then the rest of an empty body.
        // Decoding it would ask for 2^31 elements of 40 bytes; the check refuses it first.
        let hostile = [0xff, 0xff, 0xff, 0xff, 0x07, 0, 0, 0];
        match read_frame(metadata_frame(&hostile), 2) {
            Err(Close::Malformed(why)) => {
                assert!(why.contains("MetadataRequest.Topics"), "{why}");
            }
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("accepted"),
        }
        // A frame too short for its API key and version is malformed, not a panic.
        assert!(matches!(
            read_frame(Bytes::from_static(&[0, 3]), 2),
            Err(Close::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn a_hostile_count_closes_the_connection_without_an_answer() {
        // Decoding this body unchecked would reserve 2^31 - 2 topics of 40 bytes (85 GB) and
        // abort the test process; refused, it closes the connection as a malformed frame does.
        let cluster = EmbeddedCluster::new(ClusterOptions::default());
        let node = cluster.shared().node_ids().next().expect("a node");
        let (mut client, server) = tokio::io::duplex(4096);
        let serving = tokio::spawn(super::serve(
            cluster.shared().clone(),
            node,
            super::Listener::Memory,
            server,
        ));
        let frame = metadata_frame(&[0xff, 0xff, 0xff, 0xff, 0x07, 0, 0, 0]);
        let length = i32::try_from(frame.len()).expect("small");
        client
            .write_all(&length.to_be_bytes())
            .await
            .expect("writes");
        client.write_all(&frame).await.expect("writes");
        let mut answer = Vec::new();
        let read = client.read_to_end(&mut answer).await.expect("reads");
        assert_eq!(read, 0, "no answer, the connection closed");
        serving.await.expect("the connection task ends");
    }
}
