//! The smallest HTTP/1.1 exchange the credential sources need: one request per connection
//! (`Connection: close`), the answer read to its end within a size limit and a deadline.
//!
//! IMDS is plain HTTP on a link-local address; STS is HTTPS, which needs the `ssl` feature
//! (the client's own rustls set-up, the system's CAs). A hostile or broken server costs at
//! most [`MAX_RESPONSE`] bytes and the deadline: it never panics the caller and never makes it
//! wait longer.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest answer read, head and body: credentials are a few kilobytes.
pub(crate) const MAX_RESPONSE: usize = 64 * 1024;

/// An answer: its status and body.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

/// Where a URL points.
struct Target<'a> {
    tls: bool,
    #[cfg_attr(not(feature = "ssl"), allow(dead_code))]
    host: &'a str,
    /// `host:port`, for dialing.
    authority: String,
    /// `/path?query`.
    path: &'a str,
}

fn target(url: &str) -> Result<Target<'_>, String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(format!("`{url}` is not an http:// or https:// URL"));
    };
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("`{url}` has no usable host"));
    }
    let default_port = if tls { 443 } else { 80 };
    let has_port = match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    };
    let host = if has_port {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    } else {
        authority
    };
    let dial = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:{default_port}")
    };
    Ok(Target {
        tls,
        host: host.trim_start_matches('[').trim_end_matches(']'),
        authority: dial,
        path,
    })
}

/// Sends `method url` with `headers` and `body`, and reads the answer, all within `deadline`.
pub(crate) async fn exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    deadline: Duration,
) -> Result<Response, String> {
    let target = target(url)?;
    let mut request = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
        target.path,
        target
            .authority
            .strip_suffix(if target.tls { ":443" } else { ":80" })
            .unwrap_or(&target.authority),
        body.len()
    );
    for (name, value) in headers {
        if name.contains(['\r', '\n']) || value.contains(['\r', '\n']) {
            return Err(format!("header `{name}` holds a line break"));
        }
        request.push_str(name);
        request.push_str(": ");
        request.push_str(value);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    let work = async {
        let stream = TcpStream::connect(&target.authority)
            .await
            .map_err(|e| format!("connecting to {}: {e}", target.authority))?;
        if target.tls {
            return over_tls(&target, stream, &bytes).await;
        }
        talk(stream, &bytes).await
    };
    let raw = tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| format!("no answer from {url} within {deadline:?}"))??;
    parse(&raw).map_err(|e| format!("the answer of {url}: {e}"))
}

#[cfg(feature = "ssl")]
async fn over_tls(target: &Target<'_>, stream: TcpStream, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let connector = crate::client::TlsConnector::new(&crate::client::TlsConfig::default())
        .map_err(|e| e.to_string())?;
    let address = format!("{}:0", target.host);
    let stream = connector
        .connect(&address, stream)
        .await
        .map_err(|e| e.to_string())?;
    talk(stream, bytes).await
}

#[cfg(not(feature = "ssl"))]
async fn over_tls(target: &Target<'_>, _: TcpStream, _: &[u8]) -> Result<Vec<u8>, String> {
    Err(format!(
        "https://{} needs the `ssl` feature of ruststream-kafka",
        target.authority
    ))
}

async fn talk<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    stream.write_all(request).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let limit = u64::try_from(MAX_RESPONSE + 1).unwrap_or(u64::MAX);
    (&mut stream)
        .take(limit)
        .read_to_end(&mut raw)
        .await
        .map_err(|e| e.to_string())?;
    if raw.len() > MAX_RESPONSE {
        return Err(format!("an answer over {MAX_RESPONSE} bytes"));
    }
    Ok(raw)
}

fn parse(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of the HTTP head")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "an HTTP head that is not UTF-8")?;
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(format!("not an HTTP/1 status line: `{status_line}`"));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("no status in `{status_line}`"))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header `{line}`"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("bad Content-Length `{value}`"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    let body = if chunked {
        dechunk(body)?
    } else if let Some(length) = length {
        body.get(..length)
            .ok_or_else(|| format!("a body of {} bytes, {length} announced", body.len()))?
            .to_vec()
    } else {
        body.to_vec()
    };
    Ok(Response { status, body })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk without its size line")?;
        let size_text = std::str::from_utf8(&rest[..line_end]).map_err(|_| "a bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("chunk size `{size_text}`"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).ok_or("a chunk cut short")?;
        out.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("a chunk cut short")?;
    }
}

/// The fuzz target `sasl` (odd selector, bit 1 set): an HTTP answer as the credential sources
/// read it, its body as IMDS's JSON and STS's XML.
#[cfg(fuzzing)]
impl crate::fuzzing::Entry for crate::fuzzing::AwsHttp {
    fn run(data: &[u8]) {
        if let Ok(answer) = parse(data) {
            let _ = super::json::parse_flat_object(&answer.body);
            if let Ok(text) = std::str::from_utf8(&answer.body) {
                let _ = super::sources::xml_text(text, "SessionToken");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msk_iam_http_answers_are_read_or_refused_without_panics() {
        let ok = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi").expect("valid");
        assert_eq!((ok.status, ok.body.as_slice()), (200, &b"hi"[..]));
        let chunked = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n1;x\r\n!\r\n0\r\n\r\n")
            .expect("valid");
        assert_eq!(chunked.body, b"hi!");
        for bad in [
            &b"HTTP/1.1 200 OK\r\n"[..],
            b"SSH-2.0\r\n\r\n",
            b"HTTP/1.1 abc\r\n\r\n",
            b"HTTP/1.1 200\r\nContent-Length: 5\r\n\r\nhi",
            b"HTTP/1.1 200\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nx",
            b"HTTP/1.1 200\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(target("ftp://x").is_err());
        let t = target("http://[::1]:8080/latest?x").expect("valid");
        assert_eq!(
            (t.host, t.authority.as_str(), t.path),
            ("::1", "[::1]:8080", "/latest?x")
        );
        let t = target("https://sts.amazonaws.com").expect("valid");
        assert_eq!(
            (t.host, t.authority.as_str(), t.path),
            ("sts.amazonaws.com", "sts.amazonaws.com:443", "/")
        );
    }
}
