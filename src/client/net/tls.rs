//! TLS for broker connections: rustls with the graviola crypto provider (pure Rust, no C
//! compiler), configured from [`TlsConfig`].
//!
//! The configuration is built once per client, when it starts, so that a missing CA file or an
//! unusable key fails startup with the property's name instead of every dial later.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::client::error::{Error, Result};
use crate::client::security::{CaSource, Pem, TlsConfig};

/// Where Linux distributions keep the system's CA bundle, most common first.
const SYSTEM_BUNDLES: [&str; 6] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/ssl/certs",
];

fn settings_error(reason: impl Into<String>) -> Error {
    Error::Tls {
        broker: String::new(),
        reason: reason.into(),
    }
}

/// A client's TLS configuration, ready to wrap sockets.
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector").finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// Reads the CA certificates, the client certificate and key of `settings`.
    pub fn new(settings: &TlsConfig) -> Result<Self> {
        let provider = Arc::new(rustls_graviola::default_provider());
        let algorithms = provider.signature_verification_algorithms;
        let inner = if settings.verify_certificate {
            let roots = Arc::new(load_roots(&settings.ca)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| settings_error(format!("`ssl.ca.location`: {e}")))?;
            Some(webpki)
        } else {
            None
        };
        let verifier = Arc::new(Verifier {
            inner,
            check_name: settings.verify_hostname,
            algorithms,
        });
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| settings_error(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&settings.certificate, &settings.key) {
            (Some(certificate), Some(key)) => {
                let chain = load_chain(certificate)?;
                let key = load_key(key, settings.key_password.is_some())?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| settings_error(format!("`ssl.key.location`: {e}")))?
            }
            (None, None) => builder.with_no_client_auth(),
            (Some(_), None) => {
                return Err(settings_error(
                    "`ssl.certificate.location` is set but `ssl.key.location` is not",
                ));
            }
            (None, Some(_)) => {
                return Err(settings_error(
                    "`ssl.key.location` is set but `ssl.certificate.location` is not",
                ));
            }
        };
        Ok(TlsConnector {
            config: Arc::new(config),
        })
    }

    /// Runs the TLS handshake on `stream`, checking the certificate against `address`'s host.
    pub(super) async fn connect(
        &self,
        address: &str,
        stream: TcpStream,
    ) -> Result<TlsStream<TcpStream>> {
        let host = host_of(address);
        let name = ServerName::try_from(host.to_owned()).map_err(|e| Error::Tls {
            broker: address.to_owned(),
            reason: format!("`{host}` is not a valid server name: {e}"),
        })?;
        tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, stream)
            .await
            .map_err(|e| handshake_error(address, host, &e))
    }
}

/// The host of `host:port` or `[v6]:port`.
fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    address.rsplit_once(':').map_or(address, |(host, _)| host)
}

fn handshake_error(address: &str, host: &str, e: &std::io::Error) -> Error {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let reason = match tls {
        Some(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => format!(
            "certificate name mismatch: the broker's certificate does not name `{host}` \
             (`ssl.endpoint.identification.algorithm=none` skips this check)"
        ),
        Some(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        )) => "certificate not trusted: the broker's certificate does not lead to a CA of \
               `ssl.ca.location`/`ssl.ca.pem`"
            .to_owned(),
        Some(rustls::Error::InvalidCertificate(other)) => {
            format!("certificate not accepted: {other:?}")
        }
        Some(rustls::Error::AlertReceived(alert)) => format!(
            "the broker refused the handshake ({alert:?}); does it require a client \
             certificate (`ssl.certificate.location`, `ssl.key.location`)?"
        ),
        Some(other) => format!("handshake failed: {other}"),
        None => format!("handshake failed: {e}"),
    };
    Error::Tls {
        broker: address.to_owned(),
        reason,
    }
}

/// With TLS 1.3 the client finishes its handshake before the broker has checked the client's
/// certificate, so a refusal arrives as an alert on the first read: say so as a TLS failure.
pub(super) fn refused_after_handshake(address: &str, e: Error) -> Error {
    match &e {
        Error::Io { source, .. } if source.to_string().contains("alert") => Error::Tls {
            broker: address.to_owned(),
            reason: format!(
                "the broker refused the TLS session ({source}); does it require a client \
                 certificate (`ssl.certificate.location`, `ssl.key.location`)?"
            ),
        },
        _ => e,
    }
}

fn read(path: &Path, property: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| settings_error(format!("`{property}` {}: {e}", path.display())))
}

fn certificates(pem: &[u8], origin: &str) -> Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| settings_error(format!("{origin}: {e}")))
}

fn load_roots(source: &CaSource) -> Result<RootCertStore> {
    let (found, origin): (Vec<CertificateDer<'static>>, String) = match source {
        CaSource::Pem(text) => (
            certificates(text.as_bytes(), "`ssl.ca.pem`")?,
            "`ssl.ca.pem`".to_owned(),
        ),
        CaSource::Location(path) => (
            read_location(path, "`ssl.ca.location`")?,
            format!("`ssl.ca.location` {}", path.display()),
        ),
        CaSource::System => {
            let path = system_bundle().ok_or_else(|| {
                settings_error(format!(
                    "`ssl.ca.location=probe`: no system CA bundle found (looked at {})",
                    SYSTEM_BUNDLES.join(", ")
                ))
            })?;
            (
                read_location(&path, "`ssl.ca.location=probe`")?,
                format!("the system CA bundle {}", path.display()),
            )
        }
    };
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found);
    if added == 0 {
        return Err(settings_error(format!("no CA certificate in {origin}")));
    }
    Ok(roots)
}

fn system_bundle() -> Option<PathBuf> {
    let from_env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    from_env
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
        .find(|p| p.exists())
}

/// The certificates of a PEM file, or of every PEM file of a directory (others skipped).
fn read_location(path: &Path, property: &str) -> Result<Vec<CertificateDer<'static>>> {
    if !path.is_dir() {
        let pem = read(path, property)?;
        return certificates(&pem, &format!("{property} {}", path.display()));
    }
    let entries = std::fs::read_dir(path)
        .map_err(|e| settings_error(format!("{property} {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path();
        if file.is_file()
            && let Ok(pem) = std::fs::read(&file)
            && let Ok(found) = certificates(&pem, "")
        {
            out.extend(found);
        }
    }
    Ok(out)
}

fn load_chain(source: &Pem) -> Result<Vec<CertificateDer<'static>>> {
    let (pem, origin) = match source {
        Pem::File(path) => (
            read(path, "ssl.certificate.location")?,
            format!("`ssl.certificate.location` {}", path.display()),
        ),
        Pem::Text(text) => (
            text.expose().as_bytes().to_vec(),
            "`ssl.certificate.pem`".to_owned(),
        ),
    };
    let chain = certificates(&pem, &origin)?;
    if chain.is_empty() {
        return Err(settings_error(format!("no certificate in {origin}")));
    }
    Ok(chain)
}

fn load_key(source: &Pem, has_password: bool) -> Result<PrivateKeyDer<'static>> {
    let (pem, property) = match source {
        Pem::File(path) => (read(path, "ssl.key.location")?, "ssl.key.location"),
        Pem::Text(text) => (text.expose().as_bytes().to_vec(), "ssl.key.pem"),
    };
    if pem.windows(b"ENCRYPTED".len()).any(|w| w == b"ENCRYPTED") {
        let hint = if has_password {
            " (`ssl.key.password` is set)"
        } else {
            ""
        };
        return Err(settings_error(format!(
            "`{property}`: encrypted private keys are not supported{hint}; give the key \
             unencrypted (e.g. `openssl pkey -in key.pem -out plain.pem`)"
        )));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        settings_error(format!(
            "`{property}`: no PKCS#8, PKCS#1 or SEC1 private key in PEM form ({e})"
        ))
    })
}

/// Checks the broker's chain with webpki, the host name only when asked to.
#[derive(Debug)]
struct Verifier {
    /// `None`: `enable.ssl.certificate.verification=false`, every certificate accepted.
    inner: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(inner) = &self.inner else {
            return Ok(ServerCertVerified::assertion());
        };
        match inner.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            // webpki checks the chain before the name: a name error means the chain is good.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The crypto provider TLS uses (graviola), for callers that build their own rustls configs.
#[must_use]
pub fn crypto_provider() -> CryptoProvider {
    rustls_graviola::default_provider()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::security::Secret;

    fn refusal(settings: &TlsConfig) -> String {
        match TlsConnector::new(settings) {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        }
    }

    #[test]
    fn pem_loading_errors_name_the_property() {
        let missing = TlsConfig {
            ca: CaSource::Location("/nonexistent/ca.pem".into()),
            ..TlsConfig::default()
        };
        assert!(refusal(&missing).contains("`ssl.ca.location`"));
        let empty = TlsConfig {
            ca: CaSource::Pem("not a certificate".into()),
            ..TlsConfig::default()
        };
        assert!(refusal(&empty).contains("no CA certificate in `ssl.ca.pem`"));
        let no_verify = |key: &str| TlsConfig {
            verify_certificate: false,
            certificate: Some(Pem::Text(Secret::new(""))),
            key: Some(Pem::Text(Secret::new(key))),
            ..TlsConfig::default()
        };
        assert!(refusal(&no_verify("")).contains("no certificate in `ssl.certificate.pem`"));
        let only_key = TlsConfig {
            verify_certificate: false,
            key: Some(Pem::Text(Secret::new("x"))),
            ..TlsConfig::default()
        };
        assert!(refusal(&only_key).contains("`ssl.certificate.location` is not"));
        let encrypted =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert!(
            load_key(&Pem::Text(Secret::new(encrypted)), true).is_err_and(|e| e
                .to_string()
                .contains("encrypted private keys are not supported"))
        );
        assert!(
            load_key(&Pem::Text(Secret::new("garbage")), false)
                .is_err_and(|e| e.to_string().contains("`ssl.key.pem`"))
        );
    }

    #[test]
    fn probe_reads_the_system_bundle_where_there_is_one() {
        // Machines without a CA bundle get the error naming `probe` instead.
        match system_bundle() {
            Some(_) => assert!(load_roots(&CaSource::System).is_ok()),
            None => assert!(
                load_roots(&CaSource::System)
                    .is_err_and(|e| e.to_string().contains("ssl.ca.location=probe"))
            ),
        }
    }

    #[test]
    fn hosts_are_taken_from_addresses() {
        assert_eq!(host_of("localhost:9094"), "localhost");
        assert_eq!(host_of("[::1]:9094"), "::1");
        assert_eq!(host_of("127.0.0.1:1"), "127.0.0.1");
    }
}
