//! `AWS_MSK_IAM` on the embedded cluster's TCP listeners: a verifying peer for the client's
//! signer, standing in for Amazon MSK.
//!
//! Invariant: once an [`MskIamAuthority`] is installed, a TCP connection is served nothing
//! but `ApiVersions`, `SaslHandshake` and `SaslAuthenticate` until it has authenticated, and
//! nothing once its session lifetime has run out without a re-authentication (KIP-368), as
//! Kafka's brokers do. A signature is accepted only when recomputed here, from the fields
//! received and the secret the authority holds, to the same value: this code shares no
//! canonicalisation or key derivation with the client's signer. In-memory pipes stay
//! unauthenticated (the client's memory dial sends no SASL).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use sha2::{Digest, Sha256};

use super::server::{Close, Cx, decode, encode};
use crate::client::aws::json::{field, parse_flat_object};
use crate::client::aws::time::{amz_date, parse_iso8601};

/// `t` in the ISO 8601 form (`2026-12-05T08:00:00Z`) that IMDS and STS give credentials'
/// expiry in, for doubles of them.
#[must_use]
pub fn iso8601(t: SystemTime) -> String {
    // The client writes only SigV4's basic form; this one is the same fields, separated.
    let basic = amz_date(t);
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &basic[0..4],
        &basic[4..6],
        &basic[6..8],
        &basic[9..11],
        &basic[11..13],
        &basic[13..15]
    )
}

/// Reads `SigV4`'s `YYYYMMDDTHHMMSSZ` (a signed request's `x-amz-date`), through the client's
/// ISO 8601 reader: the same fields, separated.
fn parse_amz_date(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if !text.is_ascii() || b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &text[0..4],
        &text[4..6],
        &text[6..8],
        &text[9..11],
        &text[11..13],
        &text[13..15]
    );
    parse_iso8601(&iso)
}

const MECHANISM: &str = "AWS_MSK_IAM";
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// The clock difference a signature may show (AWS's five minutes).
const SKEW: Duration = Duration::from_mins(5);

/// An identity the authority accepts.
#[derive(Clone)]
struct Key {
    access_key_id: String,
    secret: String,
    session_token: Option<String>,
    expires: Option<SystemTime>,
}

/// What the embedded cluster's TCP listeners accept under `AWS_MSK_IAM`: the region it signs
/// for, the key pairs (with their session tokens and expiries) and the session lifetime it
/// hands out.
pub struct MskIamAuthority {
    region: String,
    session_lifetime: Option<Duration>,
    keys: Mutex<Vec<Key>>,
    accepted: AtomicU64,
    refused: AtomicU64,
}

impl std::fmt::Debug for MskIamAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MskIamAuthority")
            .field("region", &self.region)
            .field("session_lifetime", &self.session_lifetime)
            .finish_non_exhaustive()
    }
}

impl MskIamAuthority {
    /// An authority for clusters in `region`, with no keys yet and no session lifetime.
    #[must_use]
    pub fn new(region: impl Into<String>) -> Self {
        MskIamAuthority {
            region: region.into(),
            session_lifetime: None,
            keys: Mutex::new(Vec::new()),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Sessions last `lifetime` (`SaslAuthenticate` v1's session lifetime): a connection
    /// re-authenticates before it ends or is closed.
    #[must_use]
    pub fn with_session_lifetime(mut self, lifetime: Duration) -> Self {
        self.session_lifetime = Some(lifetime);
        self
    }

    /// Accepts `access_key_id` signed with `secret`; with `session_token`, only signatures
    /// carrying it; with `expires`, only until then (as STS's temporary credentials).
    pub fn add_key(
        &self,
        access_key_id: impl Into<String>,
        secret: impl Into<String>,
        session_token: Option<String>,
        expires: Option<SystemTime>,
    ) {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Key {
                access_key_id: access_key_id.into(),
                secret: secret.into(),
                session_token,
                expires,
            });
    }

    /// How many authentications it accepted so far.
    #[must_use]
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// How many it refused.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn key(&self, access_key_id: &str) -> Option<Key> {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|k| k.access_key_id == access_key_id)
            .cloned()
    }

    /// Checks an authentication message sent to `host` at `now`.
    fn verify(&self, message: &[u8], host: &str, now: SystemTime) -> Result<(), String> {
        let members = parse_flat_object(message).map_err(|e| format!("malformed message: {e}"))?;
        let get = |name: &str| field(&members, name).ok_or_else(|| format!("no `{name}`"));
        let expect = |name: &str, wanted: &str| -> Result<(), String> {
            let value = get(name)?;
            if value == wanted {
                Ok(())
            } else {
                Err(format!("`{name}` is `{value}`, not `{wanted}`"))
            }
        };
        expect("version", "2020_10_22")?;
        expect("host", host)?;
        expect("action", "kafka-cluster:Connect")?;
        expect("x-amz-algorithm", "AWS4-HMAC-SHA256")?;
        expect("x-amz-signedheaders", "host")?;
        let credential = get("x-amz-credential")?;
        let parts: Vec<&str> = credential.split('/').collect();
        let [access_key_id, date, region, service, terminator] = parts[..] else {
            return Err(format!(
                "credential `{credential}` is not key/date/region/service/aws4_request"
            ));
        };
        let amz_date = get("x-amz-date")?;
        if !amz_date.starts_with(date) || date.len() != 8 {
            return Err(format!(
                "credential date {date} is not the date of {amz_date}"
            ));
        }
        if region != self.region || service != "kafka-cluster" || terminator != "aws4_request" {
            return Err(format!(
                "credential scope {date}/{region}/{service}/{terminator} is not this cluster's"
            ));
        }
        let signed_at =
            parse_amz_date(amz_date).ok_or_else(|| format!("x-amz-date `{amz_date}`"))?;
        let expires: u64 = get("x-amz-expires")?
            .parse()
            .ok()
            .filter(|s| (1..=604_800).contains(s))
            .ok_or("x-amz-expires is not 1 to 604800 seconds")?;
        if signed_at > now + SKEW {
            return Err("signed in the future".to_owned());
        }
        if signed_at + Duration::from_secs(expires) < now {
            return Err("signature expired".to_owned());
        }
        let key = self
            .key(access_key_id)
            .ok_or_else(|| format!("unknown access key {access_key_id}"))?;
        if key.expires.is_some_and(|e| e < now) {
            return Err(format!("the security token of {access_key_id} has expired"));
        }
        let token = field(&members, "x-amz-security-token");
        if key.session_token.as_deref() != token {
            return Err("wrong or missing security token".to_owned());
        }
        // The canonical query: the signed parameters under their wire names.
        let mut params: Vec<(&str, &str)> = vec![
            ("Action", get("action")?),
            ("X-Amz-Algorithm", get("x-amz-algorithm")?),
            ("X-Amz-Credential", credential),
            ("X-Amz-Date", amz_date),
            ("X-Amz-Expires", get("x-amz-expires")?),
            ("X-Amz-SignedHeaders", get("x-amz-signedheaders")?),
        ];
        if let Some(token) = token {
            params.push(("X-Amz-Security-Token", token));
        }
        let mut encoded: Vec<String> = params
            .iter()
            .map(|(n, v)| format!("{}={}", percent(n), percent(v)))
            .collect();
        encoded.sort();
        let canonical = format!(
            "GET\n/\n{}\nhost:{host}\n\nhost\n{}",
            encoded.join("&"),
            hex(&Sha256::digest(b""))
        );
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{date}/{region}/{service}/aws4_request\n{}",
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let mut signing_key = format!("AWS4{}", key.secret).into_bytes();
        for part in [date, region, service, "aws4_request"] {
            signing_key = mac(&signing_key, part.as_bytes());
        }
        let wanted = hex(&mac(&signing_key, to_sign.as_bytes()));
        if get("x-amz-signature")? != wanted {
            return Err("the signature does not match".to_owned());
        }
        Ok(())
    }
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        return Vec::new();
    };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Where one TCP connection stands with SASL.
pub(crate) struct Session {
    authority: Option<std::sync::Arc<MskIamAuthority>>,
    handshaken: bool,
    authenticated: Authenticated,
}

/// Whether a connection authenticated, and for how long.
#[derive(Clone, Copy)]
enum Authenticated {
    No,
    ForGood,
    Until(Instant),
}

impl Session {
    pub(crate) fn new(authority: Option<std::sync::Arc<MskIamAuthority>>) -> Self {
        Session {
            authority,
            handshaken: false,
            authenticated: Authenticated::No,
        }
    }

    /// Refuses `api` when the connection may not use it now.
    pub(crate) fn admit(&self, api: ApiKey) -> Result<(), Close> {
        if self.authority.is_none()
            || matches!(
                api,
                ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
            )
        {
            return Ok(());
        }
        match self.authenticated {
            Authenticated::No => Err(Close::Malformed(format!(
                "{api:?} before SASL authentication"
            ))),
            Authenticated::Until(until) if Instant::now() > until => Err(Close::Malformed(
                format!("{api:?} after the SASL session expired"),
            )),
            Authenticated::ForGood | Authenticated::Until(_) => Ok(()),
        }
    }

    /// Answers `SaslHandshake` and `SaslAuthenticate`.
    pub(crate) fn handle(
        &mut self,
        cx: &Cx<'_>,
        api: ApiKey,
        body: Bytes,
    ) -> Result<Option<Bytes>, Close> {
        let offered = || {
            if self.authority.is_some() {
                vec![StrBytes::from_static_str(MECHANISM)]
            } else {
                Vec::new()
            }
        };
        if api == ApiKey::SaslHandshake {
            let request: SaslHandshakeRequest = decode(cx, body)?;
            let ok = self.authority.is_some() && request.mechanism.as_str() == MECHANISM;
            self.handshaken = ok;
            let response = SaslHandshakeResponse::default()
                .with_error_code(if ok { 0 } else { UNSUPPORTED_SASL_MECHANISM })
                .with_mechanisms(offered());
            return encode(cx, &response);
        }
        let request: SaslAuthenticateRequest = decode(cx, body)?;
        let Some(authority) = self.authority.clone().filter(|_| self.handshaken) else {
            let response = SaslAuthenticateResponse::default()
                .with_error_code(ILLEGAL_SASL_STATE)
                .with_error_message(Some(StrBytes::from_static_str(
                    "SaslAuthenticate before SaslHandshake",
                )));
            return encode(cx, &response);
        };
        self.handshaken = false;
        let request_id = format!("{:016x}", fastrand::u64(..));
        let (host, _) = cx.cluster.advertised(cx.listener, cx.node);
        let response = match authority.verify(&request.auth_bytes, &host, SystemTime::now()) {
            Ok(()) => {
                authority.accepted.fetch_add(1, Ordering::Relaxed);
                self.authenticated = authority
                    .session_lifetime
                    .map_or(Authenticated::ForGood, |l| {
                        Authenticated::Until(Instant::now() + l)
                    });
                let lifetime = authority
                    .session_lifetime
                    .map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX));
                SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(format!(
                        "{{\"version\":\"2020_10_22\",\"request-id\":\"{request_id}\"}}"
                    )))
                    .with_session_lifetime_ms(lifetime)
            }
            Err(reason) => {
                authority.refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%reason, "embedded broker refused AWS_MSK_IAM");
                // MSK's shape, `[request id]: Access denied`, with the reason a test can read.
                SaslAuthenticateResponse::default()
                    .with_error_code(SASL_AUTHENTICATION_FAILED)
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "[{request_id}]: Access denied ({reason})"
                    ))))
            }
        };
        encode(cx, &response)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{iso8601, parse_amz_date};
    use crate::client::aws::time::{amz_date, parse_iso8601};

    #[test]
    fn both_forms_of_a_time_round_trip() {
        let t = parse_iso8601("2015-08-30T12:36:00Z").expect("valid");
        assert_eq!(parse_amz_date("20150830T123600Z"), Some(t));
        assert_eq!(iso8601(t), "2015-08-30T12:36:00Z");
        let leap = parse_iso8601("2024-02-29T23:59:59Z").expect("a leap day");
        assert_eq!(
            iso8601(leap + Duration::from_secs(1)),
            "2024-03-01T00:00:00Z"
        );
        assert_eq!(parse_amz_date(&amz_date(leap)), Some(leap));
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn a_malformed_amz_date_is_refused() {
        for bad in [
            "20150830T123600",
            "2015083XT123600Z",
            "20150830T1236000Z",
            "ééééééééééééééZ",
            "20230229T000000Z",
            "2015-830T123600Z",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }
}
