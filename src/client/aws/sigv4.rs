//! AWS Signature Version 4 (`AWS4-HMAC-SHA256`): the canonical request, the string to sign,
//! the derived signing key and the signature, for a request signed in its headers or presigned
//! in its query string.
//!
//! The canonical forms follow AWS's published algorithm exactly and are checked against AWS's
//! own test suite (`tests/data/sigv4/`): every byte of the canonical request and the string to
//! sign must match, since the server recomputes them from what it received and compares only the
//! final HMAC.

use std::fmt::Write as _;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The only algorithm this signer speaks.
pub(crate) const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// SHA-256 of an empty payload, hex: what a GET without a body signs.
pub(crate) const EMPTY_PAYLOAD_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Hex SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length; the error case cannot happen.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// Appends `text` percent-encoded as `SigV4` wants it: RFC 3986's unreserved characters kept,
/// every other byte as `%XX` in upper case (a space is `%20`, never `+`).
pub(crate) fn uri_encode(text: &str, out: &mut String) {
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// The canonical query string of decoded `params`: each name and value encoded, sorted by name
/// then value, joined with `&`.
pub(crate) fn canonical_query(params: &[(String, String)]) -> String {
    let mut encoded: Vec<(String, String)> = params
        .iter()
        .map(|(name, value)| {
            let (mut n, mut v) = (String::new(), String::new());
            uri_encode(name, &mut n);
            uri_encode(value, &mut v);
            (n, v)
        })
        .collect();
    encoded.sort();
    let mut out = String::new();
    for (i, (name, value)) in encoded.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(name);
        out.push('=');
        out.push_str(value);
    }
    out
}

/// Headers in canonical form: names in lower case, values trimmed with inner runs of spaces
/// collapsed, sorted by name, repeated names joined with `,`. Returns the canonical header
/// block (each line ending in `\n`) and the signed-headers list.
fn canonical_headers(headers: &[(String, String)]) -> (String, String) {
    let mut lines: Vec<(String, String)> = Vec::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, existing)) => {
                existing.push(',');
                existing.push_str(&value);
            }
            None => lines.push((name, value)),
        }
    }
    lines.sort();
    let mut block = String::new();
    let mut signed = String::new();
    for (name, value) in &lines {
        block.push_str(name);
        block.push(':');
        block.push_str(value);
        block.push('\n');
        if !signed.is_empty() {
            signed.push(';');
        }
        signed.push_str(name);
    }
    (block, signed)
}

/// An HTTP request as the signer sees it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// `GET`, `POST`...
    pub(crate) method: String,
    /// The canonical URI (already normalized; `/` for the root).
    pub(crate) path: String,
    /// Query parameters, decoded.
    pub(crate) query: Vec<(String, String)>,
    /// Headers to sign (`host` among them).
    pub(crate) headers: Vec<(String, String)>,
    /// Hex SHA-256 of the body.
    pub(crate) payload_hash: String,
}

impl Request {
    /// The canonical request and its signed-headers list.
    pub(crate) fn canonical(&self) -> (String, String) {
        let (block, signed) = canonical_headers(&self.headers);
        let text = format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.method,
            self.path,
            canonical_query(&self.query),
            block,
            signed,
            self.payload_hash
        );
        (text, signed)
    }
}

/// Who signs, where and when.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signer<'a> {
    pub(crate) access_key_id: &'a str,
    pub(crate) secret_access_key: &'a str,
    pub(crate) session_token: Option<&'a str>,
    pub(crate) region: &'a str,
    pub(crate) service: &'a str,
    /// `YYYYMMDDTHHMMSSZ`.
    pub(crate) amz_date: &'a str,
}

impl Signer<'_> {
    /// `YYYYMMDD`, the first eight characters of the time.
    fn date(&self) -> &str {
        self.amz_date.get(..8).unwrap_or(self.amz_date)
    }

    /// `date/region/service/aws4_request`.
    pub(crate) fn scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date(),
            self.region,
            self.service
        )
    }

    /// The string to sign for `canonical_request`.
    pub(crate) fn string_to_sign(&self, canonical_request: &str) -> String {
        format!(
            "{ALGORITHM}\n{}\n{}\n{}",
            self.amz_date,
            self.scope(),
            sha256_hex(canonical_request.as_bytes())
        )
    }

    /// The hex signature of `string_to_sign` with the key derived for this date, region and
    /// service.
    pub(crate) fn signature(&self, string_to_sign: &str) -> String {
        let secret = format!("AWS4{}", self.secret_access_key);
        let k_date = hmac(secret.as_bytes(), self.date().as_bytes());
        let k_region = hmac(&k_date, self.region.as_bytes());
        let k_service = hmac(&k_region, self.service.as_bytes());
        let k_signing = hmac(&k_service, b"aws4_request");
        hex(&hmac(&k_signing, string_to_sign.as_bytes()))
    }

    /// Signs `request` in its headers (checked against AWS's vectors; `AWS_MSK_IAM` presigns): adds `X-Amz-Date` (and `X-Amz-Security-Token`), and
    /// returns the `Authorization` header's value.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn sign_headers(&self, request: &mut Request) -> Authorization {
        request
            .headers
            .push(("X-Amz-Date".to_owned(), self.amz_date.to_owned()));
        if let Some(token) = self.session_token {
            request
                .headers
                .push(("X-Amz-Security-Token".to_owned(), token.to_owned()));
        }
        let (canonical, signed_headers) = request.canonical();
        let string_to_sign = self.string_to_sign(&canonical);
        let signature = self.signature(&string_to_sign);
        Authorization {
            canonical,
            string_to_sign,
            header: format!(
                "{ALGORITHM} Credential={}/{}, SignedHeaders={signed_headers}, Signature={signature}",
                self.access_key_id,
                self.scope()
            ),
            signature,
        }
    }

    /// Presigns `request` for `expires_secs`: adds the `X-Amz-*` query parameters, the
    /// signature last, as AWS's query-string signing does. The session token, when there is
    /// one, is among the signed parameters.
    pub(crate) fn presign(&self, request: &mut Request, expires_secs: u64) -> Authorization {
        let (_, signed_headers) = canonical_headers(&request.headers);
        let mut add = |name: &str, value: String| request.query.push((name.to_owned(), value));
        add("X-Amz-Algorithm", ALGORITHM.to_owned());
        add(
            "X-Amz-Credential",
            format!("{}/{}", self.access_key_id, self.scope()),
        );
        add("X-Amz-Date", self.amz_date.to_owned());
        add("X-Amz-Expires", expires_secs.to_string());
        if let Some(token) = self.session_token {
            add("X-Amz-Security-Token", token.to_owned());
        }
        add("X-Amz-SignedHeaders", signed_headers);
        let (canonical, _) = request.canonical();
        let string_to_sign = self.string_to_sign(&canonical);
        let signature = self.signature(&string_to_sign);
        request
            .query
            .push(("X-Amz-Signature".to_owned(), signature.clone()));
        Authorization {
            canonical,
            string_to_sign,
            header: String::new(),
            signature,
        }
    }
}

/// What signing produced, the intermediate forms kept for tests and diagnostics.
#[derive(Debug, Clone)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Authorization {
    pub(crate) canonical: String,
    pub(crate) string_to_sign: String,
    /// The `Authorization` header (empty when presigned).
    pub(crate) header: String,
    pub(crate) signature: String,
}

#[cfg(test)]
mod tests {
    //! AWS's `SigV4` test suite (`tests/data/sigv4/README.md` says where it comes from).

    use super::*;

    struct Case {
        name: &'static str,
        files: fn(&str) -> &'static str,
    }

    macro_rules! case {
        ($name:literal) => {
            Case {
                name: $name,
                files: |file| match file {
                    "context.json" => include_str!(concat!(
                        "../../../tests/data/sigv4/",
                        $name,
                        "/context.json"
                    )),
                    "request.txt" => {
                        include_str!(concat!("../../../tests/data/sigv4/", $name, "/request.txt"))
                    }
                    "header-canonical-request.txt" => include_str!(concat!(
                        "../../../tests/data/sigv4/",
                        $name,
                        "/header-canonical-request.txt"
                    )),
                    "header-string-to-sign.txt" => include_str!(concat!(
                        "../../../tests/data/sigv4/",
                        $name,
                        "/header-string-to-sign.txt"
                    )),
                    "header-signature.txt" => include_str!(concat!(
                        "../../../tests/data/sigv4/",
                        $name,
                        "/header-signature.txt"
                    )),
                    "query-canonical-request.txt" => include_str!(concat!(
                        "../../../tests/data/sigv4/",
                        $name,
                        "/query-canonical-request.txt"
                    )),
                    "query-string-to-sign.txt" => include_str!(concat!(
                        "../../../tests/data/sigv4/",
                        $name,
                        "/query-string-to-sign.txt"
                    )),
                    "query-signature.txt" => include_str!(concat!(
                        "../../../tests/data/sigv4/",
                        $name,
                        "/query-signature.txt"
                    )),
                    other => panic!("no file {other}"),
                },
            }
        };
    }

    const CASES: &[Case] = &[
        case!("get-vanilla"),
        case!("get-vanilla-query-order-key-case"),
        case!("get-vanilla-query-unreserved"),
        case!("get-header-value-trim"),
        case!("get-vanilla-with-session-token"),
    ];

    fn percent_decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ascii");
                out.push(u8::from_str_radix(hex, 16).expect("hex"));
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).expect("utf-8")
    }

    /// The request of `request.txt`: `METHOD path?query HTTP/1.1`, then `Name:value` lines.
    fn request(text: &str) -> Request {
        let mut lines = text.lines();
        let first = lines.next().expect("a request line");
        let mut parts = first.split(' ');
        let method = parts.next().expect("method").to_owned();
        let target = parts.next().expect("target");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let query = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (n, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(n), percent_decode(v))
            })
            .collect();
        let headers = lines
            .take_while(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').expect("a header");
                (n.to_owned(), v.to_owned())
            })
            .collect();
        Request {
            method,
            path: path.to_owned(),
            query,
            headers,
            payload_hash: EMPTY_PAYLOAD_SHA256.to_owned(),
        }
    }

    #[test]
    fn msk_iam_sigv4_matches_the_aws_test_suite() {
        for case in CASES {
            let file = case.files;
            let context: serde_json::Value =
                serde_json::from_str(file("context.json")).expect("context");
            let credentials = &context["credentials"];
            let timestamp = context["timestamp"].as_str().expect("timestamp");
            let amz_date = super::super::time::amz_date(
                super::super::time::parse_iso8601(timestamp).expect("a time"),
            );
            let signer = Signer {
                access_key_id: credentials["access_key_id"].as_str().expect("key"),
                secret_access_key: credentials["secret_access_key"].as_str().expect("secret"),
                session_token: credentials["token"].as_str(),
                region: context["region"].as_str().expect("region"),
                service: context["service"].as_str().expect("service"),
                amz_date: &amz_date,
            };
            let base = request(file("request.txt"));

            let mut headed = base.clone();
            let by_header = signer.sign_headers(&mut headed);
            assert!(
                by_header
                    .header
                    .starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/")
                    && by_header
                        .header
                        .ends_with(&format!("Signature={}", by_header.signature)),
                "{}",
                by_header.header
            );
            assert_eq!(
                by_header.canonical,
                file("header-canonical-request.txt"),
                "{}",
                case.name
            );
            assert_eq!(
                by_header.string_to_sign,
                file("header-string-to-sign.txt"),
                "{}",
                case.name
            );
            assert_eq!(
                by_header.signature,
                file("header-signature.txt").trim(),
                "{}",
                case.name
            );

            let mut presigned = base.clone();
            let expires = context["expiration_in_seconds"].as_u64().expect("expiry");
            let by_query = signer.presign(&mut presigned, expires);
            assert_eq!(
                by_query.canonical,
                file("query-canonical-request.txt"),
                "{}",
                case.name
            );
            assert_eq!(
                by_query.string_to_sign,
                file("query-string-to-sign.txt"),
                "{}",
                case.name
            );
            assert_eq!(
                by_query.signature,
                file("query-signature.txt").trim(),
                "{}",
                case.name
            );
            assert_eq!(
                presigned.query.last(),
                Some(&("X-Amz-Signature".to_owned(), by_query.signature.clone()))
            );
        }
    }

    #[test]
    fn msk_iam_sigv4_encoding_keeps_only_the_unreserved_characters() {
        let mut out = String::new();
        uri_encode("a b+c/é~", &mut out);
        assert_eq!(out, "a%20b%2Bc%2F%C3%A9~");
        assert_eq!(
            canonical_query(&[("b".into(), "2".into()), ("a".into(), "k:C".into())]),
            "a=k%3AC&b=2"
        );
    }
}
