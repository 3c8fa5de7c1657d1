//! The crypto provider TLS runs on, chosen once per process: graviola (pure Rust with assembly
//! for recent CPUs, fast) where the CPU has what it needs, else the `RustCrypto` provider (pure
//! Rust, portable, slower), so that TLS works on every CPU the crate builds for.
//!
//! The invariant: graviola is never handed to rustls on a CPU without its features (it panics at
//! its first use there). `RUSTSTREAM_KAFKA_TLS_PROVIDER` (`graviola` or `rustcrypto`) overrides
//! the choice, which is how the tests run TLS on the fallback; `graviola` is still refused on a
//! CPU that cannot run it, and an unknown value is logged and ignored.

use std::sync::OnceLock;

use rustls::crypto::CryptoProvider;

/// The environment variable that picks the provider.
pub const TLS_PROVIDER_VARIABLE: &str = "RUSTSTREAM_KAFKA_TLS_PROVIDER";

/// Which crypto provider the process's TLS runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsProvider {
    /// `rustls-graviola`: needs AES-NI, PCLMULQDQ, BMI1, BMI2, ADX, AVX and AVX2 on `x86_64`,
    /// and AES, PMULL, SHA-2 and NEON on `aarch64`.
    Graviola,
    /// `rustls-rustcrypto`: the `RustCrypto` crates, for any CPU.
    RustCrypto,
}

/// The provider this process uses (chosen at the first call, and logged then).
#[must_use]
pub fn tls_provider() -> TlsProvider {
    static CHOSEN: OnceLock<TlsProvider> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let asked = std::env::var(TLS_PROVIDER_VARIABLE).ok();
        let chosen = choose(asked.as_deref(), graviola_runs_here());
        match chosen {
            TlsProvider::Graviola => tracing::debug!("TLS runs on the graviola crypto provider"),
            TlsProvider::RustCrypto => tracing::info!(
                asked = asked.as_deref().unwrap_or(""),
                "TLS runs on RustCrypto's crypto provider (graviola needs CPU features this \
                 machine lacks, or {TLS_PROVIDER_VARIABLE} asked for it)"
            ),
        }
        chosen
    })
}

/// The choice for what `asked` says, on a CPU where graviola runs or not.
fn choose(asked: Option<&str>, graviola_runs: bool) -> TlsProvider {
    let automatic = if graviola_runs {
        TlsProvider::Graviola
    } else {
        TlsProvider::RustCrypto
    };
    match asked.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => automatic,
        Some("rustcrypto") => TlsProvider::RustCrypto,
        Some("graviola") if graviola_runs => TlsProvider::Graviola,
        Some("graviola") => {
            tracing::warn!(
                "{TLS_PROVIDER_VARIABLE}=graviola, but this CPU lacks what graviola needs: \
                 RustCrypto's provider is used"
            );
            TlsProvider::RustCrypto
        }
        Some(other) => {
            tracing::warn!(
                "{TLS_PROVIDER_VARIABLE}={other} is neither `graviola` nor `rustcrypto`: ignored"
            );
            automatic
        }
    }
}

/// A fresh provider of the process's choice, for rustls configurations.
#[must_use]
pub fn crypto_provider() -> CryptoProvider {
    match tls_provider() {
        TlsProvider::Graviola => rustls_graviola::default_provider(),
        TlsProvider::RustCrypto => rustls_rustcrypto::provider(),
    }
}

/// Whether this CPU has every feature graviola checks for (and BMI2, which its SHA-512 uses).
fn graviola_runs_here() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("adx")
            && std::arch::is_x86_feature_detected!("avx")
            && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("neon")
            && std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
            && std::arch::is_aarch64_feature_detected!("sha2")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graviola_only_where_it_runs_and_the_variable_overrides() {
        assert_eq!(choose(None, true), TlsProvider::Graviola);
        assert_eq!(choose(None, false), TlsProvider::RustCrypto);
        assert_eq!(choose(Some("rustcrypto"), true), TlsProvider::RustCrypto);
        assert_eq!(choose(Some("RustCrypto"), true), TlsProvider::RustCrypto);
        assert_eq!(choose(Some("graviola"), true), TlsProvider::Graviola);
        assert_eq!(choose(Some("graviola"), false), TlsProvider::RustCrypto);
        assert_eq!(choose(Some("openssl"), true), TlsProvider::Graviola);
        assert_eq!(choose(Some(""), false), TlsProvider::RustCrypto);
    }

    #[test]
    fn both_providers_have_suites_groups_and_verifiers() {
        for provider in [
            rustls_rustcrypto::provider(),
            rustls_graviola::default_provider(),
        ] {
            assert!(!provider.cipher_suites.is_empty());
            assert!(!provider.kx_groups.is_empty());
            assert!(!provider.signature_verification_algorithms.all.is_empty());
        }
    }
}
