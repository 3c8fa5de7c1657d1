//! RSA private keys put in the order graviola signs correctly with: the larger prime first.
//!
//! graviola 0.4.4 computes the CRT step `(m1 - m2) mod p` as if `m2 < p`. With a key whose first
//! prime is the smaller one (`p < q`: about half of the keys Java's keytool makes; OpenSSL makes
//! `p > q`), every signature whose `m2` is at least `p` comes out wrong; graviola's own check of
//! the result catches it, and the handshake fails with `signing failed: BadSignature`. That is
//! the failure seen once in CI: `scripts/kafka` makes the client's key with keytool. Measured on
//! 40 keys from Java's `KeyPairGenerator` (23 of them `p < q`): 10 failed signatures in 1 489;
//! on the same keys with their primes swapped, none.
//!
//! The invariant: an RSA key handed to rustls has `p > q`. A key that is not RSA, has more than
//! two primes, or is already in order passes unchanged; a reordered key is the same key (the
//! same modulus and exponents, its CRT values recomputed for the new order).

use rsa::RsaPrivateKey;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use rsa::traits::{PrivateKeyParts, PublicKeyParts};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// `key`, with its primes swapped when it is an RSA key whose first prime is the smaller.
pub(super) fn larger_prime_first(
    key: PrivateKeyDer<'static>,
) -> std::result::Result<PrivateKeyDer<'static>, String> {
    let parsed = match &key {
        PrivateKeyDer::Pkcs1(der) => RsaPrivateKey::from_pkcs1_der(der.secret_pkcs1_der()).ok(),
        PrivateKeyDer::Pkcs8(der) => RsaPrivateKey::from_pkcs8_der(der.secret_pkcs8_der()).ok(),
        // SEC1 (EC) keys, and whatever comes later: not RSA.
        _ => None,
    };
    let Some(rsa) = parsed else {
        return Ok(key);
    };
    let [p, q] = rsa.primes() else {
        return Ok(key);
    };
    if p > q {
        return Ok(key);
    }
    let reordered = RsaPrivateKey::from_components(
        rsa.n().clone(),
        rsa.e().clone(),
        rsa.d().clone(),
        vec![q.clone(), p.clone()],
    )
    .map_err(|e| format!("the RSA key does not hold together ({e})"))?;
    let der = reordered
        .to_pkcs8_der()
        .map_err(|e| format!("the RSA key could not be re-encoded ({e})"))?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        der.as_bytes().to_vec(),
    )))
}

#[cfg(test)]
mod tests {
    use rustls::SignatureScheme;
    use rustls::pki_types::pem::PemObject;

    use super::*;

    /// An RSA-2048 key whose first prime is the smaller (made with `openssl genpkey`, its primes
    /// then swapped). graviola 0.4.4 fails its PKCS#1 signature of the 4-byte message 17 (and 33
    /// and 49): PKCS#1 v1.5 signatures are deterministic, so this reproduces CI's failure every
    /// time.
    const BACKWARDS: &str = "-----BEGIN PRIVATE KEY-----\n\
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQC3GQuyWX00h0CK\n\
+uwu8yDDGeBJYI8HdGkHtdP3AqO/YEWBen4lrz4y0H4NojOAjoyMGNOgyPBLNL7s\n\
baVzVnN9+VF/6mK42asyt5Afk0RdrTkyPci4SAaM9plLbfj99oWnwwpqKtXachZz\n\
JbftkM66TxPpV4zeKm0SwCRHR7lr4dExj5W5YgEDUIfRdNxuJPcYxGnumZcaP6sJ\n\
+lqLP9sf2UYQwcdnXJvUwQQVwYNUeo58ggCjmg4cWKBrhUR7BgnGci0udn9PCNYR\n\
1fqKo9w3FOcIGU+D/B4XAqPnl1IqIrdA+wNbeFXLtTgz8LCMSgwBF5htWy6sPYi1\n\
76hHkKJTAgMBAAECggEABnGktj2tCOS7skh7eHmJDSTDfoGd9wqzSZiuIZLftXQL\n\
bi+j8eqVe09YKF2th1g8/Q9An3eC8XqlP4fqW0FPJj9YjXJv0AalHk9UjK/vp4ZZ\n\
rXl8L3Qlet+Q7JUtvq5m7M0R+EOSrDH4tUu+CeffRrJSxpMUu5rtpMvLWxDcpz3H\n\
cGKZ+QjKPlZgqyWIJ2DF1uX0WXvXseWnf2SXbC1UStLwzmc3dx0Q7gzPp8zZm/Jf\n\
vL27+fRAJ9me69/BVBBh+ho5tSw8gIdGfUCGvCyREIhJdiv07VIJ5BVax/z55DYC\n\
2fsF+bFY9v0Dq8ypGzkoKDWnlITnpjZu1D2wzvmsQQKBgQC9EeY/5GUusL/92leJ\n\
9nvENYuiKAXR28Q4kMOHFmDxNRXni8QMYg0EuFhqFomfmQ1/9k7xU+NskKqMgzya\n\
pBYRKc5SSaRw3JQyQsItPd/I3YUBon46Q17HZIfaLXctAZk6da+bBSCEsVWpsWLG\n\
Gfvt7sGTxX9cRtTxkgX79ja1QQKBgQD36e//IhjQ3ZEmEiyMzZNro+yrM9ODydkG\n\
JC93MYbmytPWPYK2RFmhTyj7KCxbSqlN4xoQEUGGEHMckLFOIDkqOfJm63x2lRwD\n\
CS3i3YUP17gvtbHTPNhAUasjs9N2xW7l9W3uOTpGmtjoREB0a7o8VNcfqaLdbTlq\n\
K3U9B/0OkwKBgFdFqt11JItfxM99eIjTQJ/6A2EvTjhnU/S0RbzWRJsyYNEHf9Aj\n\
dlTmbtFRY+dKc6PMYvYcPc8AG+lOLqxG73SusnDjU0dRWgq1LAJMHD8QmXN+uPtV\n\
26r4KYk5EVix8zO73PoWbMMzRBJXMfu1RMe4PJxkPnyuqV50g9Sg+vHBAoGAQsU0\n\
CWAylNaICFvuucGIif4tePLNbfpIRFosmoqxTamlIleQw+xmw4ZhgDuSrsfOD5cx\n\
5s/u+N+nUTM7PdJ58wCGY+farsl8MOkg/bAx7VFpXxgtm7oQeEpGsKf3NU75jl/q\n\
yrWJF4kPEIeJYJG/KA6lnfZ/UengA9NOkTB8nJcCgYAeAze/4MHL/+csUIEDMbbh\n\
/1Pb+IICnl3CQlmW9eH0ct2Gxx2I5NK95780lfM8GXlriWwp6KWgcoLsrNlgZfRX\n\
ea1oBlIB0nGPyp2E+NUoDCbryXDi6Xfzdj6fEvM0WzjBmyXznubYMmebGNukmFki\n\
Adh6HT3CblXKCFCPNXVqSQ==\n\
-----END PRIVATE KEY-----\n";

    fn key() -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(BACKWARDS.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn primes(key: &PrivateKeyDer<'static>) -> (rsa::BigUint, rsa::BigUint) {
        let PrivateKeyDer::Pkcs8(der) = key else {
            panic!("PKCS#8 expected");
        };
        let rsa =
            RsaPrivateKey::from_pkcs8_der(der.secret_pkcs8_der()).unwrap_or_else(|e| panic!("{e}"));
        (rsa.primes()[0].clone(), rsa.primes()[1].clone())
    }

    /// Which of the messages 0 to 63 graviola fails to sign with `key` (PKCS#1, SHA-256).
    fn graviola_failures(key: PrivateKeyDer<'static>) -> Vec<u32> {
        let provider = rustls_graviola::default_provider();
        let signing = provider
            .key_provider
            .load_private_key(key)
            .unwrap_or_else(|e| panic!("{e}"));
        let Some(signer) = signing.choose_scheme(&[SignatureScheme::RSA_PKCS1_SHA256]) else {
            panic!("no PKCS#1 signer");
        };
        (0..64u32)
            .filter(|i| signer.sign(&i.to_be_bytes()).is_err())
            .collect()
    }

    #[test]
    fn a_key_whose_first_prime_is_smaller_is_reordered_and_then_signs_with_graviola() {
        let backwards = key();
        let (p, q) = primes(&backwards);
        assert!(p < q);
        assert_eq!(graviola_failures(backwards.clone_key()), [17, 33, 49]);
        let fixed = larger_prime_first(backwards).unwrap_or_else(|e| panic!("{e}"));
        let (p2, q2) = primes(&fixed);
        assert_eq!((&p2, &q2), (&q, &p), "the same primes, larger first");
        assert!(graviola_failures(fixed.clone_key()).is_empty());
        // In order, it stays as it is.
        let again = larger_prime_first(fixed.clone_key()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.secret_der(), fixed.secret_der());
    }

    #[test]
    fn keys_that_are_not_rsa_pass_unchanged() {
        let ec = "-----BEGIN PRIVATE KEY-----\n\
                  MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgevZzL1gdAFr88hb2\n\
                  OF/2NxApJCzGCEDdfSp6VQO30hyhRANCAAQRWz+jn65BtOMvdyHKcvjBeBSDZH2r\n\
                  1RTwjmYSi9R/zpBnuQ4EiMnCqfMPWiZqB4QdbAd0E7oH50VpuZ1P087G\n\
                  -----END PRIVATE KEY-----\n";
        let key = PrivateKeyDer::from_pem_slice(ec.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let same = larger_prime_first(key.clone_key()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(same.secret_der(), key.secret_der());
    }
}
