//! OAUTHBEARER (RFC 7628): the client's message, and librdkafka's unsecured JWTs (tokens with
//! `"alg":"none"`, for brokers running Kafka's unsecured validator in development).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;

use crate::client::security::{OAuthToken, Secret, TokenProvider};

/// The initial client response: GS2 header, the token and the extensions, `\x01`-separated.
pub(super) fn message(token: &OAuthToken) -> Vec<u8> {
    let mut out = format!("n,,\x01auth=Bearer {}", token.value.expose());
    for (key, value) in &token.extensions {
        out.push('\x01');
        out.push_str(key);
        out.push('=');
        out.push_str(value);
    }
    out.push_str("\x01\x01");
    out.into_bytes()
}

/// What a server sends when it refuses a token: a JSON error; the client must answer with a
/// lone `\x01` and then gets the failure.
pub(super) const ERROR_ACK: &[u8] = b"\x01";

/// The settings of `sasl.oauthbearer.config` for unsecured tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UnsecuredSpec {
    principal: String,
    principal_claim: String,
    scope_claim: String,
    scopes: Vec<String>,
    life: Duration,
    extensions: Vec<(String, String)>,
}

fn parse_spec(config: &str) -> Result<UnsecuredSpec, String> {
    let mut spec = UnsecuredSpec {
        principal: String::new(),
        principal_claim: "sub".to_owned(),
        scope_claim: "scope".to_owned(),
        scopes: Vec::new(),
        life: Duration::from_hours(1),
        extensions: Vec::new(),
    };
    for pair in config.split_ascii_whitespace() {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!(
                "`sasl.oauthbearer.config`: expected key=value, got `{}`",
                pair.split('=').next().unwrap_or("")
            ));
        };
        match key {
            "principal" => value.clone_into(&mut spec.principal),
            "principalClaimName" => value.clone_into(&mut spec.principal_claim),
            "scopeClaimName" => value.clone_into(&mut spec.scope_claim),
            "scope" => {
                spec.scopes = value
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            "lifeSeconds" => {
                let seconds: u64 =
                    value.parse().ok().filter(|s| *s > 0).ok_or(
                        "`sasl.oauthbearer.config`: lifeSeconds must be a positive number",
                    )?;
                spec.life = Duration::from_secs(seconds);
            }
            _ => match key.strip_prefix("extension_") {
                Some(name) if !name.is_empty() => {
                    spec.extensions.push((name.to_owned(), value.to_owned()));
                }
                _ => {
                    return Err(format!(
                        "`sasl.oauthbearer.config`: unrecognized key `{key}`"
                    ));
                }
            },
        }
    }
    if spec.principal.is_empty() {
        return Err("`sasl.oauthbearer.config`: no principal=<value>".to_owned());
    }
    Ok(spec)
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    crate::client::json::push_string(&mut out, s);
    out
}

fn unsecured_token(spec: &UnsecuredSpec, now: SystemTime) -> OAuthToken {
    let issued = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let expires = issued + spec.life.as_secs();
    let mut claims = format!(
        "{{{}:{},\"iat\":{issued},\"exp\":{expires}",
        json_string(&spec.principal_claim),
        json_string(&spec.principal)
    );
    if !spec.scopes.is_empty() {
        let scopes: Vec<String> = spec.scopes.iter().map(|s| json_string(s)).collect();
        let _ = write!(
            claims,
            ",{}:[{}]",
            json_string(&spec.scope_claim),
            scopes.join(",")
        );
    }
    claims.push('}');
    let jwt = format!(
        "{}.{}.",
        B64URL.encode(br#"{"alg":"none"}"#),
        B64URL.encode(claims.as_bytes())
    );
    OAuthToken {
        value: Secret::new(jwt),
        expires: UNIX_EPOCH + Duration::from_secs(expires),
        principal: spec.principal.clone(),
        extensions: spec.extensions.clone(),
    }
}

/// A [`TokenProvider`] making librdkafka's unsecured JWTs from `sasl.oauthbearer.config`
/// (`principal=<name>` required; `principalClaimName=`, `scopeClaimName=`, `scope=a,b`,
/// `lifeSeconds=` (default 3600) and `extension_<name>=` optional; space-separated).
///
/// Such tokens are unsigned: only for brokers with Kafka's unsecured validator.
pub fn unsecured_jwt_provider(config: &str) -> Result<TokenProvider, String> {
    let spec = parse_spec(config)?;
    Ok(TokenProvider::from_fn(move || {
        Ok(unsecured_token(&spec, SystemTime::now()))
    }))
}

/// The unsecured token `config` gives now, for the fuzz target (which has no runtime).
#[cfg(fuzzing)]
pub(crate) fn unsecured_token_now(config: &str) -> Result<OAuthToken, String> {
    parse_spec(config).map(|spec| unsecured_token(&spec, SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsecured_tokens_carry_the_configured_claims() {
        let spec =
            parse_spec("principal=admin scope=read,write lifeSeconds=60 extension_traceId=123")
                .unwrap();
        let token = unsecured_token(&spec, UNIX_EPOCH + Duration::from_secs(1000));
        let parts: Vec<&str> = token.value.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "");
        assert_eq!(B64URL.decode(parts[0]).unwrap(), br#"{"alg":"none"}"#);
        let claims = String::from_utf8(B64URL.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            r#"{"sub":"admin","iat":1000,"exp":1060,"scope":["read","write"]}"#
        );
        assert_eq!(token.expires, UNIX_EPOCH + Duration::from_secs(1060));
        let message = String::from_utf8(message(&token)).unwrap();
        assert!(message.starts_with("n,,\x01auth=Bearer eyJ"));
        assert!(message.ends_with("\x01traceId=123\x01\x01"));
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(parse_spec("scope=x").is_err());
        assert!(parse_spec("principal=a lifeSeconds=0").is_err());
        assert!(parse_spec("principal=a colour=blue").is_err());
        assert!(parse_spec("principal").is_err());
        assert!(unsecured_jwt_provider("principal=a").is_ok());
    }
}
