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
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::client::error::{Error, Result};
use crate::client::security::{CaSource, Pem, Secret, TlsConfig};

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
        let mut provider = crate::client::provider::crypto_provider();
        if let Some(list) = &settings.cipher_suites {
            super::suites::choose_suites(&mut provider, list)?;
        }
        if let Some(list) = &settings.curves {
            super::suites::choose_groups(&mut provider, list)?;
        }
        let provider = Arc::new(provider);
        let algorithms = provider.signature_verification_algorithms;
        let inner = if settings.verify_certificate {
            let mut roots = load_roots(&settings.ca)?;
            let revocations = settings
                .crl
                .as_deref()
                .map(super::revocation::read)
                .transpose()?;
            let builder = match revocations {
                Some(found) => {
                    roots.add_parsable_certificates(found.certificates);
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .with_crls(found.crls)
                        .only_check_end_entity_revocation()
                        .enforce_revocation_expiration()
                }
                None => {
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                }
            };
            let webpki = builder.build().map_err(|e| {
                settings_error(format!("`ssl.ca.location` / `ssl.crl.location`: {e}"))
            })?;
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
        let config = match (&settings.keystore, &settings.certificate, &settings.key) {
            // librdkafka reads the keystore after the PEM files, so it wins over them.
            (Some(keystore), ..) => {
                let (chain, key) = super::keystore::read(keystore)?;
                let key = super::rsa_order::larger_prime_first(key)
                    .map_err(|e| settings_error(format!("`ssl.keystore.location`: {e}")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| settings_error(format!("`ssl.keystore.location`: {e}")))?
            }
            (None, Some(certificate), Some(key)) => {
                let chain = load_chain(certificate)?;
                let key = load_key(key, settings.key_password.as_ref())?;
                let key = super::rsa_order::larger_prime_first(key)
                    .map_err(|e| settings_error(format!("`ssl.key.location`: {e}")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| settings_error(format!("`ssl.key.location`: {e}")))?
            }
            (None, None, None) => builder.with_no_client_auth(),
            (None, Some(_), None) => {
                return Err(settings_error(
                    "`ssl.certificate.location` is set but `ssl.key.location` is not",
                ));
            }
            (None, None, Some(_)) => {
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
    pub(crate) async fn connect(
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
        Some(rustls::Error::InvalidCertificate(CertificateError::Revoked)) => {
            "certificate revoked: the broker's certificate is on a revocation list of \
             `ssl.crl.location`"
                .to_owned()
        }
        Some(rustls::Error::InvalidCertificate(CertificateError::UnknownRevocationStatus)) => {
            "certificate revocation unknown: no revocation list of `ssl.crl.location` is from \
             the issuer of the broker's certificate"
                .to_owned()
        }
        Some(rustls::Error::InvalidCertificate(
            CertificateError::ExpiredRevocationList
            | CertificateError::ExpiredRevocationListContext { .. },
        )) => "certificate revocation unknown: the revocation list of `ssl.crl.location` for \
               the broker's certificate has expired (its next update is past)"
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

fn load_key(source: &Pem, password: Option<&Secret>) -> Result<PrivateKeyDer<'static>> {
    let (pem, property) = match source {
        Pem::File(path) => (read(path, "ssl.key.location")?, "ssl.key.location"),
        Pem::Text(text) => (text.expose().as_bytes().to_vec(), "ssl.key.pem"),
    };
    if contains(&pem, ENCRYPTED_BEGIN.as_bytes()) {
        return decrypt_key(&pem, property, password);
    }
    if contains(&pem, b"Proc-Type: 4,ENCRYPTED") {
        return Err(settings_error(format!(
            "`{property}`: legacy OpenSSL-encrypted keys (`Proc-Type: 4,ENCRYPTED`) are not \
             supported; convert the key to encrypted PKCS#8 (`openssl pkcs8 -topk8 -v2 \
             aes-256-cbc -in key.pem -out key.p8.pem`) or give it unencrypted"
        )));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        settings_error(format!(
            "`{property}`: no PKCS#8, PKCS#1 or SEC1 private key in PEM form ({e})"
        ))
    })
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Decrypts a PKCS#8 `ENCRYPTED PRIVATE KEY` (PBES2: PBKDF2 or scrypt, AES-CBC) with
/// `ssl.key.password`. Errors never include the password nor the key material.
fn decrypt_key(
    pem: &[u8],
    property: &str,
    password: Option<&Secret>,
) -> Result<PrivateKeyDer<'static>> {
    use pkcs8::der::{Decode, Document};
    use pkcs8::{EncryptedPrivateKeyInfo, PrivateKeyInfo};

    let Some(password) = password else {
        return Err(settings_error(format!(
            "`{property}` holds an encrypted private key but `ssl.key.password` is not set"
        )));
    };
    // A key file may carry other blocks (a certificate, comments): take only the key's block.
    let text = std::str::from_utf8(pem)
        .map_err(|_| settings_error(format!("`{property}`: the PEM text is not UTF-8")))?;
    let block = text
        .find(ENCRYPTED_BEGIN)
        .and_then(|start| {
            let end = text[start..].find(ENCRYPTED_END)? + start + ENCRYPTED_END.len();
            Some(&text[start..end])
        })
        .ok_or_else(|| {
            settings_error(format!(
                "`{property}`: the encrypted private key's PEM block has no end line"
            ))
        })?;
    let (_, document) = Document::from_pem(block).map_err(|e| {
        settings_error(format!(
            "`{property}`: unreadable encrypted private key ({e})"
        ))
    })?;
    let info = EncryptedPrivateKeyInfo::from_der(document.as_bytes()).map_err(|e| {
        settings_error(format!(
            "`{property}`: unreadable encrypted private key ({e})"
        ))
    })?;
    let unsupported = |reason: String| {
        settings_error(format!(
            "`{property}`: cannot decrypt the private key with `ssl.key.password`: {reason}"
        ))
    };
    let plain = info
        .decrypt(password.expose().as_bytes())
        .map_err(|e| match e {
            // pkcs5 0.7 reports a bad CBC padding (the usual sign of a wrong password) as
            // `EncryptFailed`, so both mean the same here.
            pkcs8::Error::EncryptedPrivateKey(
                pkcs8::pkcs5::Error::DecryptFailed | pkcs8::pkcs5::Error::EncryptFailed,
            )
            | pkcs8::Error::Asn1(_) => unsupported("wrong password".into()),
            other => unsupported(format!("unsupported encryption ({other})")),
        })?;
    // CBC padding matches by chance for about one wrong password in 256: the plaintext must
    // also parse as a private key.
    PrivateKeyInfo::from_der(plain.as_bytes()).map_err(|_| unsupported("wrong password".into()))?;
    Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            load_key(&Pem::Text(Secret::new("garbage")), None)
                .is_err_and(|e| e.to_string().contains("`ssl.key.pem`"))
        );
    }

    /// A throw-away P-256 key, encrypted by `openssl pkcs8 -topk8 -v2 aes-256-cbc -v2prf
    /// hmacWithSHA256` (PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC), and its self-signed certificate.
    const ENCRYPTED_KEY: &str = "\
-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAiHv4iVnIGhYgICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEKGf57tngSsvPCvpohQZdI0EgZDn
TAD92rUCn2Vu3vFnP/zSwpj1mDsdHNOcjXG3h0zsxzKTyHWZXjgCKYXo9Fe+uaUo
5BwuLYt0S1Idmxm9z+C+T6bpHy/bdhSDdTcc6ocUff+Tq3iKTpgjNRoULIBNwn6c
uBXA5QYqISfqMsFqndxWzZWN1WnBm0nKX1kCGcNgRXrxYXFiFtUoJGoFTswMVXQ=
-----END ENCRYPTED PRIVATE KEY-----
";
    const KEY_PASSWORD: &str = "test-only-password";
    const CERTIFICATE: &str = "\
-----BEGIN CERTIFICATE-----
MIIBfzCCASWgAwIBAgIUIcA60TsNHH2ohN2J6okV2AOOFLgwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJdGhyb3dhd2F5MCAXDTI2MTEzMDAxNTEyMVoYDzIxMjYxMTA2
MDE1MTIxWjAUMRIwEAYDVQQDDAl0aHJvd2F3YXkwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQptDQ1w+8O/3AOpqy1/msm87yE59TrKa/SI3Q2xkOmZvwNdlz0rtVP
FJUthujsllH3ZBpigskX/gkrZNKrZViVo1MwUTAdBgNVHQ4EFgQU7jz8iMn6DwJE
gB924554Lfuol1cwHwYDVR0jBBgwFoAU7jz8iMn6DwJEgB924554Lfuol1cwDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiB+JfNnch+eREwCIvXMSkAT
0JSB1xuxyEh6iZYx9g6nWQIhAKk02WT2NTIkbx4SxVkKaLBAaw3wv8xw1blcNFxe
aryR
-----END CERTIFICATE-----
";

    fn mutual(password: Option<&str>) -> TlsConfig {
        TlsConfig {
            verify_certificate: false,
            certificate: Some(Pem::Text(Secret::new(CERTIFICATE))),
            key: Some(Pem::Text(Secret::new(ENCRYPTED_KEY))),
            key_password: password.map(Secret::new),
            ..TlsConfig::default()
        }
    }

    fn with_password(pem: &str) -> Result<PrivateKeyDer<'static>> {
        load_key(
            &Pem::Text(Secret::new(pem)),
            Some(&Secret::new(KEY_PASSWORD)),
        )
    }

    #[test]
    fn encrypted_pkcs8_keys_open_with_the_right_password() {
        let key = with_password(ENCRYPTED_KEY);
        assert!(matches!(key, Ok(PrivateKeyDer::Pkcs8(_))));
        assert!(TlsConnector::new(&mutual(Some(KEY_PASSWORD))).is_ok());
    }

    #[test]
    fn encrypted_pkcs8_keys_refuse_a_wrong_or_missing_password() {
        for wrong in ["not-the-password", ""] {
            let refused = refusal(&mutual(Some(wrong)));
            assert!(refused.contains("`ssl.key.password`"), "{refused}");
            assert!(refused.contains("wrong password"), "{refused}");
            assert!(!refused.contains(KEY_PASSWORD), "{refused}");
        }
        let missing = refusal(&mutual(None));
        assert!(
            missing.contains("`ssl.key.password` is not set"),
            "{missing}"
        );
        assert!(missing.contains("`ssl.key.pem`"), "{missing}");
        let truncated = ENCRYPTED_KEY.replace(ENCRYPTED_END, "");
        let refused = with_password(&truncated);
        assert!(refused.is_err_and(|e| e.to_string().contains("no end line")));
    }

    #[test]
    fn legacy_openssl_encrypted_keys_are_refused_clearly() {
        let legacy = "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
                      DEK-Info: AES-256-CBC,00000000000000000000000000000000\n\nAAAA\n\
                      -----END EC PRIVATE KEY-----\n";
        let refused = with_password(legacy);
        assert!(refused.is_err_and(|e| e.to_string().contains("openssl pkcs8 -topk8")));
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
