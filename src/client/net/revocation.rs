//! Certificate revocation lists (`ssl.crl.location`), read as librdkafka reads the file: every
//! CRL in it, and every certificate in it as a trusted CA too (OpenSSL's
//! `SSL_CTX_load_verify_locations` takes both from one file).
//!
//! The invariant the verifier keeps with them (librdkafka's `X509_V_FLAG_CRL_CHECK`): the
//! broker's own certificate must be covered by a CRL of its issuer (none covering it is an
//! error, not a pass), must not be on it, and a CRL past its `nextUpdate` is refused, as OpenSSL
//! refuses it. The CAs above the broker's certificate are not checked against CRLs.

use std::path::Path;

use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};

use crate::client::error::{Error, Result};

/// What `ssl.crl.location` holds.
pub(super) struct Revocations {
    pub crls: Vec<CertificateRevocationListDer<'static>>,
    /// Certificates found beside the CRLs: trusted as CAs.
    pub certificates: Vec<CertificateDer<'static>>,
}

fn refused(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::Tls {
        broker: String::new(),
        reason: format!("`ssl.crl.location` {}: {reason}", path.display()),
    }
}

/// Reads the CRLs (and certificates) of the PEM file at `path`; a file with no CRL in it is an
/// error naming the property, as librdkafka's start fails on it.
pub(super) fn read(path: &Path) -> Result<Revocations> {
    let pem = std::fs::read(path).map_err(|e| refused(path, e))?;
    parse(&pem).map_err(|reason| refused(path, reason))
}

fn parse(pem: &[u8]) -> std::result::Result<Revocations, String> {
    let mut found = Revocations {
        crls: Vec::new(),
        certificates: Vec::new(),
    };
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
        let (kind, der) = section.map_err(|e| format!("unreadable PEM ({e})"))?;
        match kind {
            SectionKind::Crl => found.crls.push(CertificateRevocationListDer::from(der)),
            SectionKind::Certificate => found.certificates.push(CertificateDer::from(der)),
            // Keys and other sections have no meaning here; OpenSSL skips them too.
            _ => {}
        }
    }
    if found.crls.is_empty() {
        return Err("no certificate revocation list (`-----BEGIN X509 CRL-----`) in it".into());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_a_crl_is_refused_naming_the_property() {
        let missing = read(Path::new("/nonexistent/crl.pem"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            missing.contains("`ssl.crl.location` /nonexistent/crl.pem"),
            "{missing}"
        );
        let none = parse(b"just text\n").err().unwrap_or_default();
        assert!(none.contains("no certificate revocation list"), "{none}");
    }

    #[test]
    fn crls_and_certificates_are_told_apart() {
        // Contents are not checked here (the verifier does that): only the sections' kinds.
        let pem = "-----BEGIN X509 CRL-----\nAAEC\n-----END X509 CRL-----\n\
                   -----BEGIN CERTIFICATE-----\nAwQF\n-----END CERTIFICATE-----\n\
                   -----BEGIN X509 CRL-----\nBgcI\n-----END X509 CRL-----\n";
        let found = parse(pem.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found.crls.len(), 2);
        assert_eq!(found.certificates.len(), 1);
        assert_eq!(found.crls[0].as_ref(), &[0, 1, 2]);
    }
}
