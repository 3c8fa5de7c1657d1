//! OAUTHBEARER tokens from an OIDC token endpoint with the client-credentials grant
//! (`sasl.oauthbearer.method=oidc`), as librdkafka gets them: a `POST` of
//! `grant_type=client_credentials` (and the scope) with HTTP Basic authentication of the client
//! id and secret; the answer's `access_token` is a JWT whose `exp` claim is its expiry and
//! whose `sub` claim is the principal.
//!
//! The invariant: nothing the endpoint sends can make the client panic or allocate without
//! bound. Answers larger than [`MAX_ANSWER`] are refused while being read, and a missing,
//! mistyped or undecodable field is an error naming it. The JWT's signature is not checked: the
//! broker checks it; the client reads only what it needs to schedule the refresh.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;

use crate::client::security::{OAuthToken, Secret};
use crate::client::token::TokenProvider;

/// The most bytes read from a token endpoint's answer: a token is kilobytes.
pub(crate) const MAX_ANSWER: usize = 1024 * 1024;

/// How long one request to the token endpoint may take (librdkafka's timeout).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// The client-credentials settings, by librdkafka's property names.
#[derive(Clone)]
pub struct OidcConfig {
    /// `sasl.oauthbearer.token.endpoint.url`.
    pub token_endpoint_url: String,
    /// `sasl.oauthbearer.client.id`.
    pub client_id: String,
    /// `sasl.oauthbearer.client.secret`.
    pub client_secret: Secret,
    /// `sasl.oauthbearer.scope`, sent as `scope` when set.
    pub scope: Option<String>,
    /// `sasl.oauthbearer.extensions`, parsed (see [`parse_extensions`]).
    pub extensions: Vec<(String, String)>,
}

impl std::fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcConfig")
            .field("token_endpoint_url", &self.token_endpoint_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("scope", &self.scope)
            .field("extensions", &self.extensions)
            .finish()
    }
}

/// `sasl.oauthbearer.extensions` as librdkafka reads it: `key=value` pairs separated by
/// commas, empty entries skipped, each split at its first `=`.
///
/// # Errors
///
/// An entry without `=`, naming the property.
pub fn parse_extensions(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            entry
                .split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| {
                    format!(
                        "`sasl.oauthbearer.extensions`: expected key=value pairs separated by \
                         commas, got `{entry}`"
                    )
                })
        })
        .collect()
}

/// The body of the token request: `grant_type=client_credentials`, and the scope.
fn request_body(scope: Option<&str>) -> String {
    let mut body = "grant_type=client_credentials".to_owned();
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        body.push_str("&scope=");
        for byte in scope.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                body.push(char::from(byte));
            } else {
                let _ = write!(body, "%{byte:02X}");
            }
        }
    }
    body
}

/// `Basic base64(id:secret)`, as librdkafka sends it (the id and secret as they are).
fn basic_authorization(client_id: &str, client_secret: &str) -> String {
    let pair = format!("{client_id}:{client_secret}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// What a token endpoint's answer gives: the JWT, its `exp` (seconds since the epoch) and
/// its `sub`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) token: String,
    pub(crate) expires_at: u64,
    pub(crate) subject: String,
}

/// Reads a token endpoint's JSON answer (librdkafka's messages).
pub(crate) fn parse_answer(body: &[u8]) -> Result<Answer, String> {
    if body.len() > MAX_ANSWER {
        return Err(format!("the answer is larger than {MAX_ANSWER} bytes"));
    }
    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let field = json
        .get("access_token")
        .ok_or("Expected JSON response with \"access_token\" field")?;
    let token = field.as_str().ok_or("Expected token as a string value")?;
    let claims = jwt_claims(token).map_err(|e| format!("Failed to decode JWT payload: {e}"))?;
    let claims: serde_json::Value =
        serde_json::from_slice(&claims).map_err(|_| "Failed to parse JSON JWT payload")?;
    let exp = claims
        .get("exp")
        .ok_or("Expected JSON JWT response with \"exp\" field")?;
    let expires_at = exp
        .as_f64()
        .filter(|e| *e > 0.0 && e.is_finite() && *e < 1e15)
        .ok_or("Expected JSON JWT response with valid \"exp\" field")?;
    let sub = claims
        .get("sub")
        .ok_or("Expected JSON JWT response with \"sub\" field")?;
    let subject = sub
        .as_str()
        .ok_or("Expected JSON JWT response with valid \"sub\" field")?;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "positive, finite and below 1e15, checked above; a fraction of a second is dropped"
    )]
    let expires_at = expires_at as u64;
    Ok(Answer {
        token: token.to_owned(),
        expires_at,
        subject: subject.to_owned(),
    })
}

/// The decoded payload (second part) of a JWT: exactly three dot-separated parts.
fn jwt_claims(token: &str) -> Result<Vec<u8>, &'static str> {
    let mut parts = token.split('.');
    let (Some(_header), Some(payload), Some(_signature)) =
        (parts.next(), parts.next(), parts.next())
    else {
        return Err("The token is invalid with less than 2 delimiters");
    };
    if parts.next().is_some() {
        return Err("The token is invalid with more than 2 delimiters");
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| "Failed to decode base64 payload")
}

/// A rustls configuration on the process's crypto provider that trusts what the platform
/// trusts: token endpoints are public HTTPS services.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    let provider = std::sync::Arc::new(crate::client::crypto_provider());
    let verifier = rustls_platform_verifier::Verifier::new(std::sync::Arc::clone(&provider))
        .map_err(|e| format!("the platform trust store could not be loaded: {e}"))?;
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(verifier))
        .with_no_client_auth())
}

/// One request to the endpoint and its answer, read up to [`MAX_ANSWER`] bytes.
async fn fetch(http: &reqwest::Client, config: &OidcConfig) -> Result<OAuthToken, String> {
    let url = &config.token_endpoint_url;
    let failed = |what: String| format!("Failed to retrieve OIDC token from \"{url}\": {what}");
    let mut response = http
        .post(url)
        .header("Accept", "application/json")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header(
            "Authorization",
            basic_authorization(&config.client_id, config.client_secret.expose()),
        )
        .body(request_body(config.scope.as_deref()))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.to_string()))? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(failed(format!(
                "the answer is larger than {MAX_ANSWER} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        // The endpoint's own words help (`invalid_client`), bounded and printable.
        let text: String = String::from_utf8_lossy(&body)
            .chars()
            .filter(|c| !c.is_control())
            .take(300)
            .collect();
        return Err(failed(format!("HTTP status {status}: {text}")));
    }
    let answer = parse_answer(&body).map_err(failed)?;
    Ok(OAuthToken {
        value: Secret::new(answer.token),
        expires: UNIX_EPOCH + Duration::from_secs(answer.expires_at),
        principal: answer.subject,
        extensions: config.extensions.clone(),
    })
}

/// A [`TokenProvider`] getting its tokens from `config`'s endpoint.
///
/// # Errors
///
/// The HTTP client cannot be built (no usable trust store).
pub fn oidc_provider(config: OidcConfig) -> Result<TokenProvider, String> {
    let tls = tls_config()?;
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .map_err(|e| e.to_string())?;
    let config = std::sync::Arc::new(config);
    Ok(TokenProvider::new(move || {
        let http = http.clone();
        let config = std::sync::Arc::clone(&config);
        async move { fetch(&http, &config).await }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
    }

    fn jwt(claims: &str) -> String {
        format!("{}.{}.c2ln", b64(r#"{"alg":"RS256"}"#), b64(claims))
    }

    #[test]
    fn a_good_answer_gives_token_expiry_and_subject() {
        let token = jwt(r#"{"sub":"svc","exp":1900000000,"iat":1}"#);
        let body = format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":60}}"#);
        let answer = parse_answer(body.as_bytes()).unwrap();
        assert_eq!(answer.token, token);
        assert_eq!(answer.expires_at, 1_900_000_000);
        assert_eq!(answer.subject, "svc");
    }

    #[test]
    fn hostile_answers_are_errors() {
        let cases: &[(String, &str)] = &[
            ("not json".to_owned(), "not JSON"),
            ("{}".to_owned(), "\"access_token\" field"),
            (r#"{"access_token":7}"#.to_owned(), "string value"),
            (r#"{"access_token":"a.b"}"#.to_owned(), "less than 2"),
            (r#"{"access_token":"a.b.c.d"}"#.to_owned(), "more than 2"),
            (r#"{"access_token":"a.!!.c"}"#.to_owned(), "base64"),
            (
                format!(r#"{{"access_token":"a.{}.c"}}"#, b64("[1")),
                "Failed to parse JSON JWT payload",
            ),
            (
                format!(r#"{{"access_token":"{}"}}"#, jwt(r#"{"sub":"s"}"#)),
                "\"exp\" field",
            ),
            (
                format!(r#"{{"access_token":"{}"}}"#, jwt(r#"{"sub":"s","exp":-5}"#)),
                "valid \"exp\"",
            ),
            (
                format!(
                    r#"{{"access_token":"{}"}}"#,
                    jwt(r#"{"sub":"s","exp":"x"}"#)
                ),
                "valid \"exp\"",
            ),
            (
                format!(
                    r#"{{"access_token":"{}"}}"#,
                    jwt(r#"{"sub":"s","exp":1e300}"#)
                ),
                "valid \"exp\"",
            ),
            (
                format!(r#"{{"access_token":"{}"}}"#, jwt(r#"{"exp":5}"#)),
                "\"sub\" field",
            ),
            (
                format!(r#"{{"access_token":"{}"}}"#, jwt(r#"{"exp":5,"sub":[]}"#)),
                "valid \"sub\"",
            ),
        ];
        for (body, expected) in cases {
            let error = parse_answer(body.as_bytes()).unwrap_err();
            assert!(error.contains(expected), "{body}: {error}");
        }
        let huge = vec![b' '; MAX_ANSWER + 1];
        assert!(parse_answer(&huge).unwrap_err().contains("larger than"));
        // deep nesting is refused by serde_json's recursion limit, not a stack overflow
        let deep = "[".repeat(100_000);
        assert!(parse_answer(deep.as_bytes()).is_err());
    }

    /// A local HTTP server answering every request with `status` and `body`.
    async fn answering(status: &'static str, body: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut request = vec![0; 8192];
                    let _ = socket.read(&mut request).await;
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(&body).await;
                });
            }
        });
        format!("http://{address}/token")
    }

    async fn first_token(url: String) -> Result<OAuthToken, String> {
        let provider = oidc_provider(OidcConfig {
            token_endpoint_url: url,
            client_id: "c".to_owned(),
            client_secret: Secret::new("s"),
            scope: None,
            extensions: vec![("tenant".to_owned(), "t".to_owned())],
        })?;
        provider.token().await
    }

    #[tokio::test]
    async fn the_endpoints_answers_are_read_within_bounds() {
        let token = jwt(r#"{"sub":"svc","exp":4000000000}"#);
        let good = format!(r#"{{"access_token":"{token}"}}"#).into_bytes();
        let answer = first_token(answering("200 OK", good).await).await.unwrap();
        assert_eq!(answer.value.expose(), token);
        assert_eq!(answer.principal, "svc");
        assert_eq!(
            answer.expires,
            UNIX_EPOCH + Duration::from_secs(4_000_000_000)
        );
        assert_eq!(
            answer.extensions,
            vec![("tenant".to_owned(), "t".to_owned())]
        );

        let huge = vec![b' '; MAX_ANSWER + 4096];
        let error = first_token(answering("200 OK", huge).await)
            .await
            .unwrap_err();
        assert!(error.contains("larger than"), "{error}");

        let refusal = format!(
            r#"{{"error":"invalid_client","pad":"{}"}}"#,
            "x".repeat(5000)
        );
        let error = first_token(answering("401 Unauthorized", refusal.into_bytes()).await)
            .await
            .unwrap_err();
        assert!(
            error.contains("HTTP status 401 Unauthorized") && error.contains("invalid_client"),
            "{error}"
        );
        assert!(
            error.len() < 600,
            "the endpoint's words are bounded: {}",
            error.len()
        );

        let error = first_token("http://127.0.0.1:1/token".to_owned())
            .await
            .unwrap_err();
        assert!(
            error.starts_with("Failed to retrieve OIDC token from"),
            "{error}"
        );
    }

    #[test]
    fn the_request_is_librdkafkas() {
        assert_eq!(request_body(None), "grant_type=client_credentials");
        assert_eq!(request_body(Some("")), "grant_type=client_credentials");
        assert_eq!(
            request_body(Some("kafka read&write")),
            "grant_type=client_credentials&scope=kafka%20read%26write"
        );
        assert_eq!(
            basic_authorization("id", "s:cret"),
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("id:s:cret")
            )
        );
    }

    #[test]
    fn extensions_are_comma_separated_pairs() {
        assert_eq!(
            parse_extensions("a=1, b=x=y,,").unwrap(),
            vec![
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x=y".to_owned())
            ]
        );
        assert!(parse_extensions("").unwrap().is_empty());
        assert!(
            parse_extensions("a=1,b")
                .unwrap_err()
                .contains("sasl.oauthbearer.extensions")
        );
    }
}
