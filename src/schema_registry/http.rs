//! [`HttpRegistryClient`]: the Confluent Schema Registry REST API over reqwest.
//!
//! TLS runs on rustls with the pure-Rust graviola crypto provider and the platform's trust
//! store, so the crate builds with no C compiler.

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::{Method, StatusCode};
use serde::Deserialize;

use super::{RegisteredSchema, RegistryClient, SchemaType};
use crate::error::KafkaError;

/// How long a request may take when nobody says otherwise.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most bytes read from one registry answer; a schema is text of kilobytes, so a larger
/// body is a broken or hostile server, not a schema.
const MAX_BODY: usize = 16 * 1024 * 1024;

const MEDIA_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// The registry's error code for a subject it does not have.
const SUBJECT_NOT_FOUND: i64 = 40401;
/// The registry's error code for a version it does not have.
const VERSION_NOT_FOUND: i64 = 40402;

/// Credentials sent with every request.
#[derive(Clone, Default)]
pub(crate) enum Credentials {
    #[default]
    None,
    Basic {
        user: String,
        password: String,
    },
    Bearer(String),
}

/// What the shipped client is built from; kept so the settings builders can rebuild it.
#[derive(Clone)]
pub(crate) struct HttpSettings {
    pub(crate) base_url: String,
    pub(crate) credentials: Credentials,
    pub(crate) timeout: Duration,
}

impl HttpSettings {
    pub(crate) fn new(base_url: &str) -> Self {
        let base_url = base_url.trim_end_matches('/').to_owned();
        Self {
            base_url,
            credentials: Credentials::None,
            timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// The base URL with any `user:password@` taken out, for documents and logs.
    #[cfg_attr(not(feature = "asyncapi"), allow(dead_code))]
    pub(crate) fn public_url(&self) -> String {
        let url = &self.base_url;
        let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
            return url.clone();
        };
        let host_end = url[scheme_end..]
            .find('/')
            .map_or(url.len(), |i| scheme_end + i);
        match url[scheme_end..host_end].rfind('@') {
            Some(at) => format!("{}{}", &url[..scheme_end], &url[scheme_end + at + 1..]),
            None => url.clone(),
        }
    }
}

/// The registry client the crate ships, speaking the Confluent Schema Registry REST API.
///
/// Built by [`SchemaRegistry::new`](super::SchemaRegistry::new) and configured through the
/// registry's `basic_auth`, `bearer_token` and `request_timeout`; it has no public
/// constructor. Endpoints used: `GET /schemas/ids/{id}`, `GET /subjects/{s}/versions/latest`,
/// `POST /subjects/{s}/versions`, `POST /subjects/{s}` and
/// `POST /compatibility/subjects/{s}/versions?verbose=true` (where a registry lacks that one,
/// as Karapace does, `.../versions/latest?verbose=true`, which those registries judge against
/// every version the level names).
pub struct HttpRegistryClient {
    settings: HttpSettings,
    http: Result<reqwest::Client, Arc<str>>,
    /// Set once the registry answered the level-wide compatibility check with a 404 that is not
    /// its own error (no such endpoint): later checks go to `versions/latest` directly.
    compatibility_latest: AtomicBool,
}

impl fmt::Debug for HttpRegistryClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRegistryClient")
            .field("url", &self.settings.public_url())
            .field("request_timeout", &self.settings.timeout)
            .finish_non_exhaustive()
    }
}

/// A rustls configuration on the process's crypto provider (graviola where it runs) that
/// trusts what the platform trusts.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(crate::client::crypto_provider());
    let verifier = rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
        .map_err(|e| format!("the platform trust store could not be loaded: {e}"))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(config)
}

#[derive(Deserialize)]
struct SchemaBody {
    schema: String,
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
}

#[derive(Deserialize)]
struct VersionBody {
    id: u32,
    schema: String,
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
}

#[derive(Deserialize)]
struct IdBody {
    id: u32,
}

#[derive(Deserialize)]
struct Verdict {
    is_compatible: bool,
    #[serde(default)]
    messages: Vec<String>,
}

#[derive(Deserialize)]
struct Refusal {
    #[serde(default)]
    error_code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
}

/// A registry answer read in full.
struct Answer {
    status: StatusCode,
    body: Vec<u8>,
}

impl Answer {
    fn parse<T: for<'de> Deserialize<'de>>(&self, path: &str) -> Result<T, KafkaError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            KafkaError::registry_text(format!(
                "the registry's answer to {path} is unreadable: {e}"
            ))
        })
    }

    /// The registry's own error code, when the body is one of its errors.
    fn error_code(&self) -> Option<i64> {
        serde_json::from_slice::<Refusal>(&self.body)
            .ok()
            .and_then(|d| d.error_code)
    }

    /// The registry's refusal as an error naming the request.
    fn refused(&self, path: &str) -> KafkaError {
        let detail = serde_json::from_slice::<Refusal>(&self.body).ok();
        let code = detail.as_ref().and_then(|d| d.error_code);
        let message = detail
            .and_then(|d| d.message)
            .unwrap_or_else(|| String::from_utf8_lossy(&self.body).into_owned());
        match code {
            Some(code) => KafkaError::registry_text(format!(
                "{path} answered {} (error {code}): {message}",
                self.status
            )),
            None => {
                KafkaError::registry_text(format!("{path} answered {}: {message}", self.status))
            }
        }
    }
}

impl HttpRegistryClient {
    pub(crate) fn new(settings: HttpSettings) -> Self {
        let http = tls_config()
            .and_then(|tls| {
                reqwest::Client::builder()
                    .use_preconfigured_tls(tls)
                    .build()
                    .map_err(|e| e.to_string())
            })
            .map_err(Arc::from);
        Self {
            settings,
            http,
            compatibility_latest: AtomicBool::new(false),
        }
    }

    /// Sends one request and reads its answer, within the request timeout.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer, KafkaError> {
        let http = self.http.as_ref().map_err(|e| {
            KafkaError::registry_text(format!("the registry's HTTP client could not start: {e}"))
        })?;
        let url = format!("{}{path}", self.settings.base_url);
        let mut request = http
            .request(method, url)
            .header(reqwest::header::ACCEPT, MEDIA_TYPE);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
                .body(body);
        }
        request = match &self.settings.credentials {
            Credentials::None => request,
            Credentials::Basic { user, password } => request.basic_auth(user, Some(password)),
            Credentials::Bearer(token) => request.bearer_auth(token),
        };
        let exchange = async {
            let mut response = request.send().await.map_err(KafkaError::registry)?;
            let status = response.status();
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(KafkaError::registry)? {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(KafkaError::registry_text(format!(
                        "the registry's answer to {path} is larger than {MAX_BODY} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Answer { status, body })
        };
        tokio::time::timeout(self.settings.timeout, exchange)
            .await
            .map_err(|_| KafkaError::SchemaRegistryTimeout {
                request: path.to_owned(),
                timeout: self.settings.timeout,
            })?
    }

    async fn post_schema(
        &self,
        path: &str,
        schema_type: SchemaType,
        definition: String,
    ) -> Result<Answer, KafkaError> {
        let body = schema_request(schema_type, definition)?;
        self.call(Method::POST, path, Some(body)).await
    }
}

/// The body every schema-carrying request sends. `schemaType` is always named, Avro included:
/// every registry since 5.5 reads it, and services moving from the librdkafka adapter keep the
/// request bodies their registry (or its stand-in) already saw.
fn schema_request(schema_type: SchemaType, definition: String) -> Result<Vec<u8>, KafkaError> {
    let mut body = serde_json::Map::new();
    body.insert("schema".into(), serde_json::Value::String(definition));
    body.insert(
        "schemaType".into(),
        serde_json::Value::String(schema_type.api_name().into()),
    );
    serde_json::to_vec(&body).map_err(KafkaError::registry)
}

/// A subject as one path segment.
fn segment(subject: &str) -> String {
    let mut out = String::with_capacity(subject.len());
    for byte in subject.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

impl RegistryClient for HttpRegistryClient {
    fn schema_by_id(&self, id: u32) -> BoxFuture<'_, Result<Arc<RegisteredSchema>, KafkaError>> {
        Box::pin(async move {
            let path = format!("/schemas/ids/{id}");
            let answer = self.call(Method::GET, &path, None).await?;
            if !answer.status.is_success() {
                return Err(answer.refused(&path));
            }
            let body: SchemaBody = answer.parse(&path)?;
            let kind = SchemaType::from_api(body.schema_type.as_deref());
            Ok(Arc::new(RegisteredSchema::new(id, kind, body.schema)))
        })
    }

    fn latest(
        &self,
        subject: &str,
    ) -> BoxFuture<'_, Result<Option<Arc<RegisteredSchema>>, KafkaError>> {
        let path = format!("/subjects/{}/versions/latest", segment(subject));
        Box::pin(async move {
            let answer = self.call(Method::GET, &path, None).await?;
            if answer.status == StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !answer.status.is_success() {
                return Err(answer.refused(&path));
            }
            let body: VersionBody = answer.parse(&path)?;
            let kind = SchemaType::from_api(body.schema_type.as_deref());
            Ok(Some(Arc::new(RegisteredSchema::new(
                body.id,
                kind,
                body.schema,
            ))))
        })
    }

    fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>> {
        let path = format!("/subjects/{}/versions", segment(subject));
        Box::pin(async move {
            let answer = self.post_schema(&path, schema_type, definition).await?;
            if !answer.status.is_success() {
                return Err(answer.refused(&path));
            }
            Ok(answer.parse::<IdBody>(&path)?.id)
        })
    }

    fn lookup_id(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>> {
        let path = format!("/subjects/{}", segment(subject));
        let subject = subject.to_owned();
        Box::pin(async move {
            let answer = self.post_schema(&path, schema_type, definition).await?;
            if answer.status == StatusCode::NOT_FOUND {
                return Err(KafkaError::InvalidOptions(format!(
                    "subject {subject:?} does not hold this schema (or does not exist); \
                     register the schema under it first, or name the subject that holds it"
                )));
            }
            if !answer.status.is_success() {
                return Err(answer.refused(&path));
            }
            Ok(answer.parse::<IdBody>(&path)?.id)
        })
    }

    fn is_compatible(
        &self,
        subject: &str,
        schema_type: SchemaType,
        definition: String,
    ) -> BoxFuture<'_, Result<Option<bool>, KafkaError>> {
        let versions = format!("/compatibility/subjects/{}/versions", segment(subject));
        let subject = subject.to_owned();
        Box::pin(async move {
            let mut path = if self.compatibility_latest.load(Ordering::Relaxed) {
                format!("{versions}/latest?verbose=true")
            } else {
                format!("{versions}?verbose=true")
            };
            let mut answer = self
                .post_schema(&path, schema_type, definition.clone())
                .await?;
            if answer.status == StatusCode::NOT_FOUND && answer.error_code().is_none() {
                // Not the registry refusing: a registry without the level-wide endpoint.
                self.compatibility_latest.store(true, Ordering::Relaxed);
                path = format!("{versions}/latest?verbose=true");
                answer = self.post_schema(&path, schema_type, definition).await?;
            }
            if answer.status == StatusCode::NOT_FOUND {
                // Subject not found (40401), or no version to compare with (40402: Karapace's
                // answer for a subject it has never seen): nothing to be compatible with.
                return match answer.error_code() {
                    Some(SUBJECT_NOT_FOUND | VERSION_NOT_FOUND) => Ok(None),
                    _ => Err(answer.refused(&path)),
                };
            }
            if !answer.status.is_success() {
                return Err(answer.refused(&path));
            }
            let verdict: Verdict = answer.parse(&path)?;
            if verdict.is_compatible {
                return Ok(Some(true));
            }
            Err(KafkaError::registry_text(format!(
                "this app's schema for subject {subject:?} breaks the subject's compatibility \
                 level; the registry says: {}",
                verdict.messages.join("; ")
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{HttpSettings, segment};

    #[test]
    fn trailing_slashes_go_and_credentials_stay_out_of_the_public_url() {
        let s = HttpSettings::new("https://svc:pw@registry.example:8081/");
        assert_eq!(s.base_url, "https://svc:pw@registry.example:8081");
        assert_eq!(s.public_url(), "https://registry.example:8081");
        let s = HttpSettings::new("http://localhost:8081/sr");
        assert_eq!(s.public_url(), "http://localhost:8081/sr");
    }

    #[test]
    fn subjects_are_escaped_as_one_segment() {
        assert_eq!(segment("orders-value"), "orders-value");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
