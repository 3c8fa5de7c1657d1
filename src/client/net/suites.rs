//! `ssl.cipher.suites` and `ssl.curves.list`: the cipher suites and key exchange groups a client
//! offers, narrowed from what its crypto provider has.
//!
//! librdkafka hands both strings to OpenSSL (`SSL_CTX_set_cipher_list`,
//! `SSL_CTX_set1_curves_list`). Here they are mapped by name, as the invariant: a name the
//! provider has is offered, in the provider's order of preference; a name OpenSSL knows but
//! the provider lacks is left out with a warning, as OpenSSL skips names it cannot use; an
//! OpenSSL keyword or operator (`HIGH`, `!aNULL`, `ECDHE+AESGCM`, ...) or an unknown name stops
//! the start naming the property, since evaluating OpenSSL's cipher language is not done here;
//! and a list that leaves nothing to offer stops it too, as it stops librdkafka's.
//!
//! As in OpenSSL, `ssl.cipher.suites` narrows the TLS 1.2 suites; TLS 1.3 suites stay offered
//! unless the list names some TLS 1.3 suites, which then narrow those too.

use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::{CipherSuite, NamedGroup};

use crate::client::error::{Error, Result};

fn refused(property: &str, reason: impl std::fmt::Display) -> Error {
    Error::Tls {
        broker: String::new(),
        reason: format!("`{property}`: {reason}"),
    }
}

/// The names in an OpenSSL list: separated by `:`, `,` or spaces.
fn names(list: &str) -> impl Iterator<Item = &str> {
    list.split([':', ',', ' '])
        .map(str::trim)
        .filter(|n| !n.is_empty())
}

/// OpenSSL's name and the IANA name of each suite this module knows: the ones the provider has,
/// and a few common ones OpenSSL has and it lacks (left out with a warning when named).
const SUITES: [(&str, &str, CipherSuite); 16] = [
    (
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    // Known to OpenSSL; no provider here has them (CBC modes, static RSA key exchange).
    (
        "ECDHE-RSA-AES128-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384,
    ),
    (
        "AES128-GCM-SHA256",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "AES256-GCM-SHA384",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "DHE-RSA-AES256-GCM-SHA384",
        "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_DHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
];

/// OpenSSL's names of each group (`SSL_CTX_set1_curves_list` takes the NIST and SECG names).
const GROUPS: [(&[&str], NamedGroup); 8] = [
    (&["X25519", "x25519"], NamedGroup::X25519),
    (&["P-256", "prime256v1", "secp256r1"], NamedGroup::secp256r1),
    (&["P-384", "secp384r1"], NamedGroup::secp384r1),
    (&["X25519MLKEM768"], NamedGroup::X25519MLKEM768),
    (&["P-521", "secp521r1"], NamedGroup::secp521r1),
    (&["X448", "x448"], NamedGroup::X448),
    (&["ffdhe2048"], NamedGroup::FFDHE2048),
    (&["ffdhe3072"], NamedGroup::FFDHE3072),
];

/// Narrows `provider`'s cipher suites to `list` (`ssl.cipher.suites`), as the module says.
pub(super) fn choose_suites(provider: &mut CryptoProvider, list: &str) -> Result<()> {
    const PROPERTY: &str = "ssl.cipher.suites";
    let mut wanted: Vec<CipherSuite> = Vec::new();
    let mut lacking: Vec<&str> = Vec::new();
    for name in names(list) {
        let Some(&(_, _, suite)) = SUITES
            .iter()
            .find(|(openssl, iana, _)| name == *openssl || name == *iana)
        else {
            // Suite names have dashes (OpenSSL's) or underscores (IANA's); keywords (`HIGH`,
            // `aNULL`) have neither, and operators lead or join them.
            let keyword = name.starts_with(['!', '+', '-', '@'])
                || name.contains('+')
                || !name.contains(['-', '_']);
            let why = if keyword {
                "an OpenSSL cipher string keyword or operator, which this client does not \
                 evaluate"
            } else {
                "not a cipher suite this client knows"
            };
            return Err(refused(
                PROPERTY,
                format!(
                    "`{name}` is {why}; name the suites, from: {}",
                    offered_suites(provider)
                ),
            ));
        };
        if provider.cipher_suites.iter().any(|s| s.suite() == suite) {
            wanted.push(suite);
        } else {
            lacking.push(name);
        }
    }
    if !lacking.is_empty() {
        tracing::warn!(
            property = PROPERTY,
            suites = %lacking.join(":"),
            "cipher suites left out: this client's TLS (rustls) does not have them"
        );
    }
    if wanted.is_empty() {
        return Err(refused(
            PROPERTY,
            format!(
                "no suite of `{list}` can be offered; name some of: {}",
                offered_suites(provider)
            ),
        ));
    }
    let narrows_tls13 = wanted.iter().any(|s| is_tls13(*s));
    provider.cipher_suites.retain(|s| {
        let suite = s.suite();
        wanted.contains(&suite) || (is_tls13(suite) && !narrows_tls13)
    });
    Ok(())
}

fn is_tls13(suite: CipherSuite) -> bool {
    matches!(
        suite,
        CipherSuite::TLS13_AES_128_GCM_SHA256
            | CipherSuite::TLS13_AES_256_GCM_SHA384
            | CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
    )
}

fn offered_suites(provider: &CryptoProvider) -> String {
    SUITES
        .iter()
        .filter(|(_, _, suite)| provider.cipher_suites.iter().any(|s| s.suite() == *suite))
        .map(|(openssl, ..)| *openssl)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Narrows `provider`'s key exchange groups to `list` (`ssl.curves.list`), in the list's order.
pub(super) fn choose_groups(provider: &mut CryptoProvider, list: &str) -> Result<()> {
    const PROPERTY: &str = "ssl.curves.list";
    let mut chosen: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    let mut lacking: Vec<&str> = Vec::new();
    for name in names(list) {
        let Some(&(_, group)) = GROUPS
            .iter()
            .find(|(spellings, _)| spellings.contains(&name))
        else {
            return Err(refused(
                PROPERTY,
                format!(
                    "`{name}` is not a curve or group this client knows; name some of: {}",
                    offered_groups(provider)
                ),
            ));
        };
        match provider.kx_groups.iter().find(|g| g.name() == group) {
            Some(found) if !chosen.iter().any(|c| c.name() == group) => chosen.push(*found),
            Some(_) => {}
            None => lacking.push(name),
        }
    }
    if !lacking.is_empty() {
        tracing::warn!(
            property = PROPERTY,
            groups = %lacking.join(":"),
            "key exchange groups left out: this client's TLS (rustls) does not have them"
        );
    }
    if chosen.is_empty() {
        return Err(refused(
            PROPERTY,
            format!(
                "no group of `{list}` can be offered; name some of: {}",
                offered_groups(provider)
            ),
        ));
    }
    provider.kx_groups = chosen;
    Ok(())
}

fn offered_groups(provider: &CryptoProvider) -> String {
    GROUPS
        .iter()
        .filter(|(_, group)| provider.kx_groups.iter().any(|g| g.name() == *group))
        .map(|(spellings, _)| spellings[0])
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use rustls::SupportedCipherSuite;

    use super::*;

    fn provider() -> CryptoProvider {
        rustls_graviola::default_provider()
    }

    fn suites(p: &CryptoProvider) -> Vec<CipherSuite> {
        p.cipher_suites
            .iter()
            .map(SupportedCipherSuite::suite)
            .collect()
    }

    #[test]
    fn tls12_names_narrow_tls12_and_keep_tls13_as_openssl_does() {
        let mut p = provider();
        choose_suites(&mut p, "ECDHE-RSA-AES256-GCM-SHA384").unwrap_or_else(|e| panic!("{e}"));
        let chosen = suites(&p);
        assert!(chosen.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384));
        assert!(!chosen.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
        assert!(chosen.contains(&CipherSuite::TLS13_AES_128_GCM_SHA256));
        // IANA names, other separators, a TLS 1.3 name narrowing TLS 1.3 too
        let mut p = provider();
        choose_suites(
            &mut p,
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            suites(&p),
            [
                CipherSuite::TLS13_AES_256_GCM_SHA384,
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            ]
        );
    }

    #[test]
    fn keywords_and_unknown_names_stop_the_start_and_lacking_names_are_left_out() {
        for (list, says) in [
            ("HIGH:!aNULL", "OpenSSL cipher string keyword"),
            ("ECDHE+AESGCM", "OpenSSL cipher string keyword"),
            ("not-a-suite", "not a cipher suite this client knows"),
            (
                "AES128-GCM-SHA256",
                "no suite of `AES128-GCM-SHA256` can be offered",
            ),
        ] {
            let e = choose_suites(&mut provider(), list)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                e.contains("`ssl.cipher.suites`") && e.contains(says),
                "{list}: {e}"
            );
        }
        // One usable name is enough: the CBC suite is left out (with a warning).
        let mut p = provider();
        choose_suites(
            &mut p,
            "ECDHE-RSA-AES128-SHA256:ECDHE-RSA-AES128-GCM-SHA256",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(suites(&p).contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
    }

    #[test]
    fn curves_are_chosen_in_the_lists_order_by_any_openssl_spelling() {
        let mut p = provider();
        choose_groups(&mut p, "secp384r1:prime256v1:P-521").unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<NamedGroup> = p.kx_groups.iter().map(|g| g.name()).collect();
        assert_eq!(names, [NamedGroup::secp384r1, NamedGroup::secp256r1]);
        let e = choose_groups(&mut provider(), "brainpoolP256r1")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("`ssl.curves.list`"), "{e}");
        let e = choose_groups(&mut provider(), "X448")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("no group of `X448` can be offered"), "{e}");
    }
}
