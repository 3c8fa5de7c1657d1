//! PKCS#12 keystores (`ssl.keystore.location`, `ssl.keystore.password`): the client's private
//! key and certificate chain for mutual TLS, read as librdkafka reads them (OpenSSL's
//! `PKCS12_parse`: the key, its certificate, and the CA certificates stored with them).
//!
//! The invariant: what comes out is a key and a chain that starts with the key's own
//! certificate; a keystore without both, or one the password does not open, stops the client's
//! start with the property's name (never the password).

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::client::error::{Error, Result};
use crate::client::security::Keystore;

fn refused(keystore: &Keystore, reason: impl std::fmt::Display) -> Error {
    Error::Tls {
        broker: String::new(),
        reason: format!(
            "`ssl.keystore.location` {}: {reason}",
            keystore.path.display()
        ),
    }
}

/// The chain (the key's certificate first) and the private key of `keystore`.
pub(super) fn read(
    keystore: &Keystore,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let data = std::fs::read(&keystore.path).map_err(|e| refused(keystore, e))?;
    parse(&data, keystore.password.expose()).map_err(|reason| refused(keystore, reason))
}

fn parse(
    data: &[u8],
    password: &str,
) -> std::result::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    use p12_keystore::{KeyStore, Pkcs12ImportPolicy};

    let store =
        KeyStore::from_pkcs12(data, password, Pkcs12ImportPolicy::Strict).map_err(|e| match e {
            p12_keystore::error::Error::MacError(_) => {
                "the keystore's integrity check fails: wrong `ssl.keystore.password`?".to_owned()
            }
            other => format!("not a PKCS#12 keystore this client can read ({other})"),
        })?;
    let (_, chain) = store
        .private_key_chain()
        .ok_or("no private key with its certificate in the keystore")?;
    let certificates: Vec<CertificateDer<'static>> = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    if certificates.is_empty() {
        return Err("the keystore's private key has no certificate".into());
    }
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
    Ok((certificates, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::security::Secret;

    #[test]
    fn an_unreadable_keystore_is_refused_naming_the_property_not_the_password() {
        let keystore = Keystore {
            path: "/nonexistent/client.p12".into(),
            password: Secret::new("hunter2"),
        };
        let e = read(&keystore)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("`ssl.keystore.location` /nonexistent/client.p12"),
            "{e}"
        );
        let garbage = parse(b"not a keystore", "hunter2")
            .err()
            .unwrap_or_default();
        assert!(garbage.contains("not a PKCS#12 keystore"), "{garbage}");
        assert!(!garbage.contains("hunter2"), "{garbage}");
    }
}
