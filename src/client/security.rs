//! How a client secures its connections: TLS (with the `ssl` feature) and SASL.
//!
//! These are the typed forms of librdkafka's `security.protocol`, `ssl.*` and `sasl.*`
//! properties. Secrets (passwords, keys, tokens) are kept in [`Secret`], whose `Debug` never
//! shows them.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use super::aws::AwsCredentialsProvider;

/// `security.protocol`: whether connections use TLS, SASL, both or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// Neither.
    #[default]
    Plaintext,
    /// TLS only.
    Ssl,
    /// SASL only.
    SaslPlaintext,
    /// SASL inside TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Reads librdkafka's names, in any case.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "plaintext" => Some(Self::Plaintext),
            "ssl" => Some(Self::Ssl),
            "sasl_plaintext" => Some(Self::SaslPlaintext),
            "sasl_ssl" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    /// Whether the bytes travel inside TLS.
    #[must_use]
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether the connection authenticates with SASL.
    #[must_use]
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// A value that must not appear in logs: `Debug` prints `[redacted]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where trusted CA certificates come from (`ssl.ca.location`, `ssl.ca.pem`).
#[derive(Clone, PartialEq, Eq, Default)]
pub enum CaSource {
    /// `probe`, or nothing set: the system's CA bundle, found in the usual Linux places.
    #[default]
    System,
    /// A PEM file, or a directory whose PEM files are all read.
    Location(PathBuf),
    /// PEM text (`ssl.ca.pem`).
    Pem(String),
}

impl fmt::Debug for CaSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaSource::System => f.write_str("System"),
            CaSource::Location(path) => f.debug_tuple("Location").field(path).finish(),
            // librdkafka counts `ssl.ca.pem` among the sensitive properties.
            CaSource::Pem(_) => f.write_str("Pem([redacted])"),
        }
    }
}

/// A PEM object given as a file or as text.
#[derive(Clone, PartialEq, Eq)]
pub enum Pem {
    /// A file holding it.
    File(PathBuf),
    /// The PEM text itself.
    Text(Secret),
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(path) => f.debug_tuple("File").field(path).finish(),
            Pem::Text(_) => f.write_str("Text([redacted])"),
        }
    }
}

/// TLS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The CA certificates the broker's chain must lead to.
    pub ca: CaSource,
    /// `ssl.certificate.location` / `ssl.certificate.pem`: the client's chain, for mutual TLS.
    pub certificate: Option<Pem>,
    /// `ssl.key.location` / `ssl.key.pem`: its private key (PKCS#8, PKCS#1 or SEC1 PEM).
    pub key: Option<Pem>,
    /// `ssl.key.password`: the password of an encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`).
    pub key_password: Option<Secret>,
    /// `ssl.endpoint.identification.algorithm`: `https` (true) checks that the certificate
    /// names the host dialled; `none` (false) skips that check but still verifies the chain.
    pub verify_hostname: bool,
    /// `enable.ssl.certificate.verification`: false accepts any certificate (testing only).
    pub verify_certificate: bool,
    /// `ssl.crl.location`: a PEM file of certificate revocation lists. When set, the broker's
    /// certificate must be covered by an unexpired CRL of its issuer and must not be on it, as
    /// librdkafka checks it (the broker's own certificate, not the CAs above it). Certificates
    /// in the same file are trusted as CAs too, as librdkafka reads the file.
    pub crl: Option<PathBuf>,
    /// `ssl.keystore.location` and `ssl.keystore.password`: the client's private key and
    /// certificate chain as a PKCS#12 keystore, for mutual TLS. As in librdkafka, it takes the
    /// place of `ssl.certificate.*` and `ssl.key.*` when both are set.
    pub keystore: Option<Keystore>,
    /// `ssl.cipher.suites`: the cipher suites to offer, by OpenSSL or IANA name, separated by
    /// `:`. As in OpenSSL, names of TLS 1.2 suites narrow the TLS 1.2 suites only; TLS 1.3 names
    /// narrow TLS 1.3 too. OpenSSL's keywords and operators (`HIGH`, `!aNULL`) are refused at
    /// the start: name the suites.
    pub cipher_suites: Option<String>,
    /// `ssl.curves.list`: the key exchange groups to offer, in order (`X25519`, `P-256` or
    /// `prime256v1`, `P-384` or `secp384r1`, `X25519MLKEM768`).
    pub curves: Option<String>,
}

/// A PKCS#12 keystore file and its password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keystore {
    /// The file (`ssl.keystore.location`).
    pub path: PathBuf,
    /// Its password (`ssl.keystore.password`).
    pub password: Secret,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            ca: CaSource::System,
            certificate: None,
            key: None,
            key_password: None,
            verify_hostname: true,
            verify_certificate: true,
            crl: None,
            keystore: None,
            cipher_suites: None,
            curves: None,
        }
    }
}

/// The SASL mechanisms the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// `PLAIN` (RFC 4616).
    Plain,
    /// `SCRAM-SHA-256` (RFC 5802, 7677).
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
    /// `OAUTHBEARER` (RFC 7628) with tokens from a [`TokenProvider`].
    OAuthBearer,
    /// `AWS_MSK_IAM`, Amazon MSK's IAM access control, with credentials from an
    /// [`AwsCredentialsProvider`](crate::client::AwsCredentialsProvider) (not a librdkafka
    /// mechanism; aws-msk-iam-auth's and franz-go's).
    AwsMskIam,
}

impl SaslMechanism {
    /// librdkafka's name (exact case), or `None` for a mechanism not implemented here.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            "SCRAM-SHA-256" => Some(Self::ScramSha256),
            "SCRAM-SHA-512" => Some(Self::ScramSha512),
            "OAUTHBEARER" => Some(Self::OAuthBearer),
            "AWS_MSK_IAM" => Some(Self::AwsMskIam),
            _ => None,
        }
    }

    /// The name sent in `SaslHandshake`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
            Self::OAuthBearer => "OAUTHBEARER",
            Self::AwsMskIam => "AWS_MSK_IAM",
        }
    }
}

/// An OAUTHBEARER token and what goes with it.
#[derive(Clone)]
pub struct OAuthToken {
    /// The token, sent as `auth=Bearer <token>`.
    pub value: Secret,
    /// When it expires; the [`TokenProvider`] asks for a new one once 80 % of its lifetime has
    /// passed.
    pub expires: SystemTime,
    /// The principal it names (informational: the broker reads the token's own claim).
    pub principal: String,
    /// SASL extensions (`key=value`) sent with the token.
    pub extensions: Vec<(String, String)>,
}

impl fmt::Debug for OAuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthToken")
            .field("principal", &self.principal)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

pub use super::token::TokenProvider;

/// SASL settings.
#[derive(Clone)]
pub struct SaslConfig {
    /// `sasl.mechanism`.
    pub mechanism: SaslMechanism,
    /// `sasl.username` (PLAIN, SCRAM).
    pub username: Secret,
    /// `sasl.password` (PLAIN, SCRAM).
    pub password: Secret,
    /// Where OAUTHBEARER tokens come from.
    pub token_provider: Option<TokenProvider>,
    /// Where `AWS_MSK_IAM` credentials come from.
    pub aws_credentials: Option<Arc<dyn AwsCredentialsProvider>>,
    /// The region `AWS_MSK_IAM` signs for; `None`: the broker's host name tells
    /// (`b-1.<cluster>.kafka.<region>.amazonaws.com`), else the provider (`AWS_REGION`).
    pub aws_region: Option<String>,
}

impl SaslConfig {
    /// PLAIN or SCRAM with a user name and password.
    #[must_use]
    pub fn with_password(
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        SaslConfig {
            mechanism,
            username: Secret::new(username),
            password: Secret::new(password),
            token_provider: None,
            aws_credentials: None,
            aws_region: None,
        }
    }

    /// OAUTHBEARER with tokens from `provider`.
    #[must_use]
    pub fn oauthbearer(provider: TokenProvider) -> Self {
        SaslConfig {
            mechanism: SaslMechanism::OAuthBearer,
            username: Secret::default(),
            password: Secret::default(),
            token_provider: Some(provider),
            aws_credentials: None,
            aws_region: None,
        }
    }

    /// `AWS_MSK_IAM` with credentials from `credentials`: an
    /// [`AwsCredentialChain`](crate::client::AwsCredentialChain) for the AWS SDKs' chain, or
    /// fixed [`AwsCredentials`](crate::client::AwsCredentials).
    #[must_use]
    pub fn aws_msk_iam(credentials: Arc<dyn AwsCredentialsProvider>) -> Self {
        SaslConfig {
            mechanism: SaslMechanism::AwsMskIam,
            username: Secret::default(),
            password: Secret::default(),
            token_provider: None,
            aws_credentials: Some(credentials),
            aws_region: None,
        }
    }
}

impl fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &self.password)
            .field(
                "token_provider",
                &self.token_provider.as_ref().map(|_| "fn"),
            )
            .field(
                "aws_credentials",
                &self.aws_credentials.as_ref().map(|_| "provider"),
            )
            .field("aws_region", &self.aws_region)
            .finish()
    }
}

/// Everything about how connections are secured.
#[derive(Debug, Clone, Default)]
pub struct SecurityConfig {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// TLS settings, used when the protocol says TLS.
    pub tls: TlsConfig,
    /// SASL settings, required when the protocol says SASL.
    pub sasl: Option<SaslConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let sasl = SaslConfig::with_password(SaslMechanism::Plain, "alice", "alice-secret");
        let tls = TlsConfig {
            ca: CaSource::Pem("-----BEGIN CERTIFICATE-----".into()),
            key: Some(Pem::Text(Secret::new("-----BEGIN PRIVATE KEY-----"))),
            key_password: Some(Secret::new("hunter2")),
            ..TlsConfig::default()
        };
        let text = format!("{sasl:?} {tls:?}");
        assert!(!text.contains("alice"), "{text}");
        assert!(!text.contains("BEGIN"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn protocol_names_are_case_insensitive() {
        assert_eq!(
            SecurityProtocol::from_name("SASL_SSL"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(SecurityProtocol::from_name("SASL_TLS"), None);
    }
}
