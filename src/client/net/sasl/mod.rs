//! SASL authentication of a connection: `SaslHandshake` names the mechanism, then
//! `SaslAuthenticate`
//! carries its messages (KIP-152 framing, the only one Kafka 4 speaks).
//!
//! The same exchange runs again on a live connection to re-authenticate (KIP-368) before the
//! session lifetime the broker announced runs out; see `Connection`.

mod msk_iam;
mod oauthbearer;
mod plain;
mod scram;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Request, StrBytes, VersionRange};

pub use oauthbearer::unsecured_jwt_provider;
#[cfg(fuzzing)]
pub(crate) use oauthbearer::unsecured_token_now;

use super::versions::ApiVersions;
use crate::client::error::{Error, Result};
use crate::client::outlined::Outlined;
use crate::client::security::{SaslConfig, SaslMechanism};

static REAUTHENTICATIONS: AtomicU64 = AtomicU64::new(0);

/// How many times connections of this process re-authenticated (KIP-368) so far.
#[must_use]
pub fn reauthentications() -> u64 {
    REAUTHENTICATIONS.load(Ordering::Relaxed)
}

pub(super) fn count_reauthentication() {
    REAUTHENTICATIONS.fetch_add(1, Ordering::Relaxed);
}

/// What an authentication needs of its connection: the broker's address and a request's round
/// trip. The connection implements it; the exchange here does not know the connection.
pub(super) trait Exchange: Sync {
    /// The broker's address.
    fn address(&self) -> &str;

    /// Sends `request` and waits for its answer.
    fn call<R: Request + Sync>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> impl Future<Output = Result<R::Response>> + Send;
}

fn refused(link: &impl Exchange, reason: impl Into<String>) -> Error {
    Error::Authentication {
        broker: link.address().to_owned(),
        reason: reason.into(),
    }
}

/// Turns a `SaslAuthenticate` answer with an error code into the failure it describes.
fn check(link: &impl Exchange, response: &SaslAuthenticateResponse) -> Result<()> {
    if response.error_code == 0 {
        return Ok(());
    }
    let message = response
        .error_message
        .as_ref()
        .map_or("no message", |m| m.as_str());
    Err(refused(
        link,
        format!("error code {}: {message}", response.error_code),
    ))
}

async fn step(
    link: &impl Exchange,
    version: i16,
    timeout: Duration,
    bytes: Vec<u8>,
) -> Result<SaslAuthenticateResponse> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    link.call(&request, version, timeout).await
}

/// Authenticates the connection behind `link` with `config`; the answer is the session
/// lifetime the broker gave (`None`: no re-authentication needed).
#[inline(never)]
pub(super) fn authenticate<'a>(
    link: &'a impl Exchange,
    config: &'a SaslConfig,
    versions: &'a ApiVersions,
    timeout: Duration,
) -> Outlined<'a, Result<Option<Duration>>> {
    Box::pin(async move {
        let mechanism = config.mechanism;
        let handshake_version = versions
            .pick(ApiKey::SaslHandshake, VersionRange { min: 1, max: 1 })
            .map_err(|_| refused(link, "the broker does not speak SaslHandshake v1"))?;
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(mechanism.name()));
        let answer = link.call(&handshake, handshake_version, timeout).await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(StrBytes::as_str).collect();
            return Err(refused(
                link,
                format!(
                    "the listener does not enable SASL mechanism {} (it offers {})",
                    mechanism.name(),
                    offered.join(", ")
                ),
            ));
        }
        let version = versions
            .pick(ApiKey::SaslAuthenticate, VersionRange { min: 0, max: 2 })
            .map_err(|_| refused(link, "the broker does not speak SaslAuthenticate"))?;
        let last = match mechanism {
            SaslMechanism::Plain => {
                let message = plain::message(config.username.expose(), config.password.expose());
                let answer = step(link, version, timeout, message).await?;
                check(link, &answer)?;
                answer
            }
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                let hash = if mechanism == SaslMechanism::ScramSha256 {
                    scram::Hash::Sha256
                } else {
                    scram::Hash::Sha512
                };
                let nonce = scram::Scram::random_nonce().map_err(|e| refused(link, e))?;
                let mut exchange = scram::Scram::new(
                    hash,
                    config.username.expose(),
                    config.password.expose(),
                    nonce,
                );
                let first = step(link, version, timeout, exchange.client_first()).await?;
                check(link, &first)?;
                let proof = exchange
                    .client_final(&first.auth_bytes)
                    .map_err(|e| refused(link, e))?;
                let last = step(link, version, timeout, proof).await?;
                check(link, &last)?;
                exchange
                    .verify_server_final(&last.auth_bytes)
                    .map_err(|e| refused(link, e))?;
                last
            }
            SaslMechanism::OAuthBearer => {
                let provider = config
                    .token_provider
                    .as_ref()
                    .ok_or_else(|| refused(link, "OAUTHBEARER needs a token provider"))?;
                let token = provider
                    .token()
                    .await
                    .map_err(|e| refused(link, format!("no OAUTHBEARER token: {e}")))?;
                let answer = step(link, version, timeout, oauthbearer::message(&token)).await?;
                check(link, &answer)?;
                if !answer.auth_bytes.is_empty() {
                    // The server's refusal, as JSON; it ends the exchange once acknowledged.
                    let detail = String::from_utf8_lossy(&answer.auth_bytes).into_owned();
                    let ack = step(link, version, timeout, oauthbearer::ERROR_ACK.to_vec()).await;
                    let extra = match ack {
                        Ok(a) => a
                            .error_message
                            .map(|m| format!(": {}", m.as_str()))
                            .unwrap_or_default(),
                        Err(_) => String::new(),
                    };
                    return Err(refused(link, format!("token refused {detail}{extra}")));
                }
                answer
            }
            SaslMechanism::AwsMskIam => aws_msk_iam(link, config, version, timeout).await?,
        };
        tracing::debug!(broker = %link.address(), mechanism = mechanism.name(), "authenticated");
        let lifetime = u64::try_from(last.session_lifetime_ms).unwrap_or(0);
        Ok((lifetime > 0).then(|| Duration::from_millis(lifetime)))
    })
}

/// The host of `host:port` or `[v6]:port`.
fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    address.rsplit_once(':').map_or(address, |(host, _)| host)
}

/// `AWS_MSK_IAM`: credentials from the provider, the region from the configuration, the
/// broker's host name or the provider, one signed message, the broker's JSON answer.
async fn aws_msk_iam(
    link: &impl Exchange,
    config: &SaslConfig,
    version: i16,
    timeout: Duration,
) -> Result<SaslAuthenticateResponse> {
    let provider = config
        .aws_credentials
        .as_ref()
        .ok_or_else(|| refused(link, "AWS_MSK_IAM needs an AWS credentials provider"))?;
    let host = host_of(link.address());
    let region = config
        .aws_region
        .clone()
        .or_else(|| crate::client::aws::region_from_host(host))
        .or_else(|| provider.region())
        .ok_or_else(|| {
            refused(
                link,
                format!(
                    "AWS_MSK_IAM: the broker host {host} does not name an AWS region and none \
                     is configured (set AWS_REGION)"
                ),
            )
        })?;
    let credentials = provider
        .credentials()
        .await
        .map_err(|e| refused(link, format!("AWS_MSK_IAM: {e}")))?;
    let message = msk_iam::message(&credentials, host, &region, std::time::SystemTime::now());
    let answer = step(link, version, timeout, message).await?;
    check(link, &answer).map_err(|e| match e {
        Error::Authentication { broker, reason } => Error::Authentication {
            broker,
            reason: format!(
                "AWS_MSK_IAM refused access key {} in {region}: {reason}",
                credentials.access_key_id
            ),
        },
        other => other,
    })?;
    let request_id = msk_iam::read_answer(&answer.auth_bytes).map_err(|e| refused(link, e))?;
    tracing::debug!(broker = %link.address(), %request_id, "AWS_MSK_IAM accepted");
    Ok(answer)
}
