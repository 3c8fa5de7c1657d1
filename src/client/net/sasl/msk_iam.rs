//! `AWS_MSK_IAM`, the SASL mechanism of Amazon MSK's IAM access control (aws-msk-iam-auth):
//! the client sends one JSON object, a `SigV4` presigned `kafka-cluster:Connect` request for the
//! broker's host; the broker answers with a JSON object naming the protocol version and its
//! request id, or refuses with `SASL_AUTHENTICATION_FAILED`.
//!
//! The signature covers the host, the action, the time and the credential scope, and expires
//! after [`EXPIRES_SECS`]; a fresh one is made for every (re-)authentication.

use std::time::SystemTime;

use crate::client::aws::json::{MAX_OBJECT, field, parse_flat_object};
use crate::client::aws::sigv4::{EMPTY_PAYLOAD_SHA256, Request, Signer};
use crate::client::aws::{AwsCredentials, time};
use crate::client::json::push_string;
use crate::client::security::Secret;

/// The protocol version both sides name.
pub(crate) const VERSION: &str = "2020_10_22";
/// The service of the credential scope.
pub(crate) const SERVICE: &str = "kafka-cluster";
/// The action signed.
pub(crate) const ACTION: &str = "kafka-cluster:Connect";
/// How long the presigned request is valid (aws-msk-iam-auth's 15 minutes).
pub(crate) const EXPIRES_SECS: u64 = 900;

/// The authentication message for the broker `host` (no port) in `region`, signed at `now`.
pub(super) fn message(
    credentials: &AwsCredentials,
    host: &str,
    region: &str,
    now: SystemTime,
) -> Vec<u8> {
    let amz_date = time::amz_date(now);
    let signer = Signer {
        access_key_id: &credentials.access_key_id,
        secret_access_key: credentials.secret_access_key.expose(),
        session_token: credentials.session_token.as_ref().map(Secret::expose),
        region,
        service: SERVICE,
        amz_date: &amz_date,
    };
    let mut request = Request {
        method: "GET".to_owned(),
        path: "/".to_owned(),
        query: vec![("Action".to_owned(), ACTION.to_owned())],
        headers: vec![("host".to_owned(), host.to_owned())],
        payload_hash: EMPTY_PAYLOAD_SHA256.to_owned(),
    };
    signer.presign(&mut request, EXPIRES_SECS);
    let user_agent = concat!("ruststream-kafka/", env!("CARGO_PKG_VERSION"));
    let mut members: Vec<(String, &str)> = vec![
        ("version".to_owned(), VERSION),
        ("host".to_owned(), host),
        ("user-agent".to_owned(), user_agent),
    ];
    // The query parameters under their names in lower case, as aws-msk-iam-auth sends them
    // (`action`, `x-amz-algorithm`, ... `x-amz-signature`).
    for (name, value) in &request.query {
        members.push((name.to_ascii_lowercase(), value));
    }
    let mut out = String::from("{");
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_string(&mut out, name);
        out.push(':');
        push_string(&mut out, value);
    }
    out.push('}');
    out.into_bytes()
}

/// Reads the broker's answer to the message: its request id.
pub(super) fn read_answer(bytes: &[u8]) -> Result<String, String> {
    if bytes.is_empty() {
        return Err("the broker's AWS_MSK_IAM answer is empty".to_owned());
    }
    if bytes.len() > MAX_OBJECT {
        return Err(format!(
            "the broker's AWS_MSK_IAM answer is {} bytes (at most {MAX_OBJECT})",
            bytes.len()
        ));
    }
    let members = parse_flat_object(bytes)
        .map_err(|e| format!("the broker's AWS_MSK_IAM answer is not the expected JSON: {e}"))?;
    match field(&members, "version") {
        Some(VERSION) => {}
        other => {
            return Err(format!(
                "the broker's AWS_MSK_IAM answer has version {other:?}, not {VERSION}"
            ));
        }
    }
    field(&members, "request-id")
        .map(str::to_owned)
        .ok_or_else(|| "the broker's AWS_MSK_IAM answer has no request-id".to_owned())
}

/// The fuzz target `sasl` (odd selector, bit 1 set): the broker's answer as the client reads it.
#[cfg(fuzzing)]
impl crate::fuzzing::Entry for crate::fuzzing::SaslMskIam {
    fn run(data: &[u8]) {
        let _ = read_answer(data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msk_iam_message_carries_the_presigned_fields() {
        let mut credentials =
            AwsCredentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
        credentials.session_token = Some(Secret::new("tok/en="));
        let now = time::parse_iso8601("2015-08-30T12:36:00Z").expect("a time");
        let bytes = message(
            &credentials,
            "b-1.demo.kafka.us-east-1.amazonaws.com",
            "us-east-1",
            now,
        );
        let members = parse_flat_object(&bytes).expect("flat JSON");
        let get = |k: &str| field(&members, k).unwrap_or_default().to_owned();
        assert_eq!(get("version"), "2020_10_22");
        assert_eq!(get("host"), "b-1.demo.kafka.us-east-1.amazonaws.com");
        assert!(get("user-agent").starts_with("ruststream-kafka/"));
        assert_eq!(get("action"), "kafka-cluster:Connect");
        assert_eq!(get("x-amz-algorithm"), "AWS4-HMAC-SHA256");
        assert_eq!(
            get("x-amz-credential"),
            "AKIDEXAMPLE/20150830/us-east-1/kafka-cluster/aws4_request"
        );
        assert_eq!(get("x-amz-date"), "20150830T123600Z");
        assert_eq!(get("x-amz-expires"), "900");
        assert_eq!(get("x-amz-security-token"), "tok/en=");
        assert_eq!(get("x-amz-signedheaders"), "host");
        assert_eq!(get("x-amz-signature").len(), 64);
        assert_eq!(members.len(), 11);
        let without = message(&AwsCredentials::new("AKID", "s"), "h", "r", now);
        let members = parse_flat_object(&without).expect("flat JSON");
        assert_eq!(field(&members, "x-amz-security-token"), None);
    }

    #[test]
    fn msk_iam_hostile_answers_are_errors() {
        assert_eq!(
            read_answer(br#"{"version":"2020_10_22","request-id":"r-1"}"#).as_deref(),
            Ok("r-1")
        );
        assert!(read_answer(b"").unwrap_err().contains("empty"));
        assert!(
            read_answer(br#"{"version":"2021","request-id":"r"}"#)
                .unwrap_err()
                .contains("version")
        );
        assert!(
            read_answer(br#"{"version":"2020_10_22"}"#)
                .unwrap_err()
                .contains("request-id")
        );
        assert!(
            read_answer(br#"{"version":["2020_10_22"]}"#)
                .unwrap_err()
                .contains("JSON")
        );
        assert!(read_answer(b"{\"version\":\"2020_10_22\",\"request-id\":\"").is_err());
        let huge = vec![b' '; MAX_OBJECT + 1];
        assert!(read_answer(&huge).unwrap_err().contains("at most"));
    }
}
