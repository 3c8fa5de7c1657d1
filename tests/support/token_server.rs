//! A test identity provider: an OIDC token endpoint (client-credentials grant) on a local port,
//! in the test process, issuing RS256 JWTs that the `OIDC` listener of `scripts/kafka`
//! accepts.
//!
//! The broker checks signatures against a JWKS file `scripts/kafka up` wrote next to the
//! signing key (a file, because the broker reads it when it starts, before any test runs); the
//! server signs with that key (`KAFKA_OIDC_SIGNING_KEY_PEM`) and sets the `aud`, `iss` and
//! `kid` the broker expects (`KAFKA_OIDC_AUDIENCE`, `KAFKA_OIDC_ISSUER`, `KAFKA_OIDC_KID`).
//! Without those variables the server cannot start and the test fails.
#![allow(dead_code, unreachable_pub, clippy::missing_panics_doc)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rsa::pkcs8::DecodePrivateKey as _;
use sha2::Digest as _;

/// The DER `DigestInfo` header of a SHA-256 digest (RFC 8017, 9.2 note 1).
const SHA256_DIGEST_INFO: [u8; 19] = [
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05,
    0x00, 0x04, 0x20,
];

/// The environment variable `name`, which `scripts/kafka env` prints.
fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: start Kafka with scripts/kafka up and export scripts/kafka env")
    })
}

/// The OIDC listener's address.
pub fn oidc_url() -> String {
    env("KAFKA_OIDC_URL")
}

/// Signs JWTs as the identity provider the broker trusts.
#[derive(Clone)]
pub struct Signer {
    key: Arc<rsa::RsaPrivateKey>,
    kid: String,
    audience: String,
    issuer: String,
}

impl Signer {
    /// The signer of `scripts/kafka env`'s key and claims.
    pub fn from_env() -> Self {
        let path = env("KAFKA_OIDC_SIGNING_KEY_PEM");
        let pem = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let key =
            rsa::RsaPrivateKey::from_pkcs8_pem(&pem).unwrap_or_else(|e| panic!("{path}: {e}"));
        Signer {
            key: Arc::new(key),
            kid: env("KAFKA_OIDC_KID"),
            audience: env("KAFKA_OIDC_AUDIENCE"),
            issuer: env("KAFKA_OIDC_ISSUER"),
        }
    }

    /// An RS256 JWT for `subject`, valid for `lifetime` from now; its expiry in seconds.
    pub fn token(&self, subject: &str, lifetime: Duration) -> (String, u64) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after the epoch")
            .as_secs();
        let exp = now + lifetime.as_secs();
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": self.kid});
        let claims = serde_json::json!({
            "sub": subject, "aud": self.audience, "iss": self.issuer,
            "iat": now, "exp": exp, "scope": "kafka",
        });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        // PKCS#1 v1.5 over SHA-256: the DigestInfo prefix of SHA-256, then the digest.
        let mut digest_info = SHA256_DIGEST_INFO.to_vec();
        digest_info.extend_from_slice(&sha2::Sha256::digest(input.as_bytes()));
        let signature = self
            .key
            .sign(rsa::Pkcs1v15Sign::new_unprefixed(), &digest_info)
            .expect("RSA signing");
        (
            format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)),
            exp,
        )
    }
}

struct Shared {
    signer: Signer,
    client_id: String,
    client_secret: String,
    lifetime: Duration,
    issued: AtomicU32,
    refused: AtomicU32,
    bodies: Mutex<Vec<String>>,
}

/// The running token endpoint; it lives until the test's runtime ends.
pub struct TokenServer {
    url: String,
    shared: Arc<Shared>,
}

impl TokenServer {
    /// Starts an endpoint that accepts `client_id`/`client_secret` (HTTP Basic) and issues
    /// tokens for `lifetime`, whose subject is the client id.
    pub async fn start(client_id: &str, client_secret: &str, lifetime: Duration) -> Self {
        let shared = Arc::new(Shared {
            signer: Signer::from_env(),
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            lifetime,
            issued: AtomicU32::new(0),
            refused: AtomicU32::new(0),
            bodies: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/oauth2/token", axum::routing::post(issue))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the token endpoint");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TokenServer {
            url: format!("http://{address}/oauth2/token"),
            shared,
        }
    }

    /// `sasl.oauthbearer.token.endpoint.url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many tokens it issued.
    pub fn issued(&self) -> u32 {
        self.shared.issued.load(Ordering::SeqCst)
    }

    /// How many requests it refused (bad credentials or grant).
    pub fn refused(&self) -> u32 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// The request bodies it received.
    pub fn bodies(&self) -> Vec<String> {
        self.shared.bodies.lock().expect("lock").clone()
    }
}

async fn issue(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let body = String::from_utf8_lossy(&body).into_owned();
    shared.bodies.lock().expect("lock").push(body.clone());
    let expected = format!(
        "Basic {}",
        STANDARD.encode(format!("{}:{}", shared.client_id, shared.client_secret))
    );
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        == Some(expected.as_str());
    let grant = body
        .split('&')
        .any(|pair| pair == "grant_type=client_credentials");
    if !authorized || !grant {
        shared.refused.fetch_add(1, Ordering::SeqCst);
        let error = if authorized {
            "unsupported_grant_type"
        } else {
            "invalid_client"
        };
        return (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::json!({"error": error}).to_string(),
        )
            .into_response();
    }
    let (token, _) = shared.signer.token(&shared.client_id, shared.lifetime);
    shared.issued.fetch_add(1, Ordering::SeqCst);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": shared.lifetime.as_secs(),
        })
        .to_string(),
    )
        .into_response()
}
