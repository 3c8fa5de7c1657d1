//! AWS identity for the `AWS_MSK_IAM` SASL mechanism, in pure Rust: `SigV4` signing
//! ([`sigv4`]), and credentials found the way the AWS SDKs find them ([`AwsCredentialChain`]:
//! the environment, the shared profile files, web identity through STS, then EC2's instance
//! metadata service).
//!
//! Invariant: a credential is never used past its expiry. The chain keeps the last one it found
//! and looks again once fewer than its refresh margin remains, so a connection's
//! (re-)authentication always signs with credentials that outlive the signature. All I/O
//! (files, HTTP) is asynchronous or runs on tokio's blocking pool, never on a runtime worker.

mod http;
pub(crate) mod json;
mod profile;
pub(crate) mod sigv4;
mod sources;
pub(crate) mod time;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use crate::client::security::Secret;

pub use sources::AwsCredentialChain;

/// A set of AWS credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// The access key id (`AKIA...`, `ASIA...` for temporary credentials).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: Secret,
    /// The session token of temporary credentials.
    pub session_token: Option<Secret>,
    /// When temporary credentials expire; `None` for long-lived keys.
    pub expires: Option<SystemTime>,
}

impl AwsCredentials {
    /// Long-lived credentials: a key pair without a session token or an expiry.
    #[must_use]
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        AwsCredentials {
            access_key_id: access_key_id.into(),
            secret_access_key: Secret::new(secret_access_key),
            session_token: None,
            expires: None,
        }
    }

    /// Whether at least `margin` of validity remains at `now`.
    fn fresh_for(&self, margin: Duration, now: SystemTime) -> bool {
        self.expires
            .is_none_or(|expires| expires.duration_since(now).is_ok_and(|left| left > margin))
    }
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &self.secret_access_key)
            .field("session_token", &self.session_token)
            .field("expires", &self.expires)
            .finish()
    }
}

/// What [`AwsCredentialsProvider::credentials`] returns.
pub type AwsCredentialsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AwsCredentials, String>> + Send + 'a>>;

/// Where `AWS_MSK_IAM` gets its credentials; asked at every authentication and
/// re-authentication, so a provider hands out credentials valid for at least the next
/// minutes. An `Err` fails the authentication with its text.
pub trait AwsCredentialsProvider: Send + Sync {
    /// Credentials to sign with now.
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe: the connection being set up may be dropped while
    /// it waits.
    fn credentials(&self) -> AwsCredentialsFuture<'_>;

    /// The region to sign for when the broker's host name does not tell (`AWS_REGION`).
    fn region(&self) -> Option<String> {
        None
    }
}

/// Fixed credentials sign every authentication (franz-go's `Auth`).
impl AwsCredentialsProvider for AwsCredentials {
    fn credentials(&self) -> AwsCredentialsFuture<'_> {
        let credentials = self.clone();
        Box::pin(async move { Ok(credentials) })
    }
}

/// The variables the chain reads: a snapshot of the process environment, or given.
#[derive(Clone, Default)]
pub(crate) struct Environment(HashMap<String, String>);

/// Every variable the chain may read.
const VARIABLES: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "HOME",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_ENDPOINT_URL_STS",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_DISABLED",
];

impl Environment {
    fn process() -> Self {
        Environment(
            VARIABLES
                .iter()
                .filter_map(|name| Some(((*name).to_owned(), std::env::var(name).ok()?)))
                .collect(),
        )
    }

    /// A variable's value; an empty one counts as unset, as the SDKs read them.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names only: the values hold secrets.
        let mut names: Vec<&String> = self.0.keys().collect();
        names.sort();
        f.debug_list().entries(names).finish()
    }
}

/// The region of an MSK broker's host name (`b-1.name.xxxxxx.c2.kafka.<region>.amazonaws.com`,
/// and the other AWS partitions' suffixes), as aws-msk-iam-auth and franz-go read it.
#[must_use]
pub(crate) fn region_from_host(host: &str) -> Option<String> {
    const SUFFIXES: &[&str] = &[
        ".amazonaws.com",
        ".amazonaws.com.cn",
        ".c2s.ic.gov",
        ".sc2s.sgov.gov",
    ];
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    SUFFIXES.iter().find_map(|suffix| {
        let service_region = host.strip_suffix(suffix)?;
        let (_, region) = service_region.rsplit_once('.')?;
        let valid = !region.is_empty()
            && region
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        valid.then(|| region.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msk_iam_region_comes_from_the_broker_host() {
        assert_eq!(
            region_from_host("b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            region_from_host("b-2.x.kafka.cn-north-1.amazonaws.com.cn").as_deref(),
            Some("cn-north-1")
        );
        assert_eq!(region_from_host("127.0.0.1"), None);
        assert_eq!(region_from_host("amazonaws.com"), None);
    }

    #[test]
    fn msk_iam_credentials_never_print_their_secrets() {
        let mut credentials = AwsCredentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI");
        credentials.session_token = Some(Secret::new("token-value"));
        let text = format!("{credentials:?}");
        assert!(text.contains("AKIDEXAMPLE"), "{text}");
        assert!(
            !text.contains("wJalr") && !text.contains("token-value"),
            "{text}"
        );
    }
}
