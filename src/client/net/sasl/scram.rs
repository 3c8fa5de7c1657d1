//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), client side, without channel binding.
//!
//! Three steps: our first message (user name and a fresh nonce), the server's first (its nonce,
//! the salt and the iteration count) answered with our proof, then the server's signature,
//! which we check: a server that does not know the password cannot produce it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Brokers use 4096 (Kafka's minimum); a larger count only costs us CPU, so one from a
/// broker beyond this is refused rather than computed.
const MAX_ITERATIONS: u32 = 1_000_000;

/// The hash a SCRAM mechanism is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => keyed::<Hmac<Sha256>>(key, data),
            Hash::Sha512 => keyed::<Hmac<Sha512>>(key, data),
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi()` of RFC 5802: PBKDF2 with this HMAC, one block.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Hash::Sha256 => hi::<Hmac<Sha256>>(password, salt, iterations),
            Hash::Sha512 => hi::<Hmac<Sha512>>(password, salt, iterations),
        }
    }
}

fn keyed<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length.
    let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hi<M: Mac + hmac::digest::KeyInit + Clone>(
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let Ok(base) = <M as hmac::digest::KeyInit>::new_from_slice(password) else {
        unreachable!("HMAC accepts any key length")
    };
    let mut first = base.clone();
    first.update(salt);
    first.update(&1u32.to_be_bytes());
    let mut u = first.finalize().into_bytes().to_vec();
    let mut result = u.clone();
    for _ in 1..iterations {
        let mut next = base.clone();
        next.update(&u);
        u = next.finalize().into_bytes().to_vec();
        for (r, b) in result.iter_mut().zip(&u) {
            *r ^= b;
        }
    }
    result
}

/// `saslname` of RFC 5802: `=` and `,` escaped.
fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The attribute `key` of a SCRAM message (`k=v` pairs separated by commas).
fn attribute(message: &str, key: char) -> Option<&str> {
    message.split(',').find_map(|field| {
        let mut chars = field.chars();
        (chars.next() == Some(key) && chars.next() == Some('=')).then(|| &field[2..])
    })
}

/// One SCRAM exchange, from our first message to the server's signature.
pub(super) struct Scram {
    hash: Hash,
    password: String,
    client_first_bare: String,
    nonce: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl Scram {
    /// Starts an exchange for `username` with a nonce of our own (random unless a test gives one).
    pub(super) fn new(hash: Hash, username: &str, password: &str, nonce: String) -> Self {
        Scram {
            hash,
            password: password.to_owned(),
            client_first_bare: format!("n={},r={nonce}", escape_name(username)),
            nonce,
            expected_server_signature: None,
        }
    }

    /// A fresh random nonce (printable, no comma).
    pub(super) fn random_nonce() -> Result<String, String> {
        let mut bytes = [0u8; 24];
        getrandom::getrandom(&mut bytes).map_err(|e| format!("no randomness for a nonce: {e}"))?;
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Our first message (no channel binding, no authorisation identity).
    pub(super) fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Answers the server's first message with our proof.
    pub(super) fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "the server's first SCRAM message is not UTF-8".to_owned())?;
        if let Some(error) = attribute(server_first, 'e') {
            return Err(format!("the server refused: {error}"));
        }
        let nonce = attribute(server_first, 'r').ok_or("the server sent no nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server's nonce does not extend ours".to_owned());
        }
        let salt = attribute(server_first, 's')
            .and_then(|s| B64.decode(s).ok())
            .ok_or("the server sent no valid salt")?;
        let iterations: u32 = attribute(server_first, 'i')
            .and_then(|i| i.parse().ok())
            .filter(|i| (1..=MAX_ITERATIONS).contains(i))
            .ok_or("the server sent no valid iteration count")?;
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let h = self.hash;
        let salted = h.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.digest(&client_key);
        let signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(h.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server's final message: its signature must be the one only the holder of
    /// our password's verifier can compute.
    pub(super) fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let server_final = std::str::from_utf8(server_final)
            .map_err(|_| "the server's final SCRAM message is not UTF-8".to_owned())?;
        if let Some(error) = attribute(server_final, 'e') {
            return Err(format!("the server refused: {error}"));
        }
        let signature = attribute(server_final, 'v')
            .and_then(|v| B64.decode(v).ok())
            .ok_or("the server sent no signature")?;
        match &self.expected_server_signature {
            Some(expected) if *expected == signature => Ok(()),
            _ => Err("the server's signature is wrong: it does not know the password".to_owned()),
        }
    }
}

/// The SCRAM half of the fuzz target `sasl`: byte 0 bit 1 picks SHA-512; the rest is the
/// server-first message, then (after the first NUL byte, if any) the server-final message.
#[cfg(fuzzing)]
impl crate::fuzzing::Entry for crate::fuzzing::SaslScram {
    fn run(data: &[u8]) {
        /// Iteration counts above this are skipped: their cost is the bound of
        /// `MAX_ITERATIONS` by design (a unit test holds it), and would only slow the fuzzer.
        const FUZZ_ITERATIONS: u32 = 4096;
        let [selector, rest @ ..] = data else {
            return;
        };
        let hash = if selector & 2 == 0 {
            Hash::Sha256
        } else {
            Hash::Sha512
        };
        let (first, last) = match rest.iter().position(|&b| b == 0) {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest, &[][..]),
        };
        let iterations = std::str::from_utf8(first)
            .ok()
            .and_then(|m| attribute(m, 'i'))
            .and_then(|i| i.parse::<u32>().ok());
        if iterations.is_some_and(|i| i > FUZZ_ITERATIONS) {
            return;
        }
        let mut scram = Scram::new(hash, "user", "pencil", "rOprNGfwEbeRWgbNEkqO".to_owned());
        if scram.client_final(first).is_ok() {
            let _ = scram.verify_server_final(last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7677, section 3.
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

    #[test]
    fn rfc_7677_exchange() {
        let mut scram = Scram::new(
            Hash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".to_owned(),
        );
        assert_eq!(scram.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let client_final = scram.client_final(SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(
            scram
                .verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .is_err()
        );
        assert!(scram.verify_server_final(b"e=invalid-proof").is_err());
    }

    #[test]
    fn a_server_nonce_not_extending_ours_is_refused() {
        let mut scram = Scram::new(Hash::Sha512, "user", "pencil", "abc".to_owned());
        assert!(
            scram
                .client_final(b"r=xyz123,s=QSXCR+Q6sek8bf92,i=4096")
                .is_err()
        );
        assert!(
            scram
                .client_final(b"r=abc,s=QSXCR+Q6sek8bf92,i=4096")
                .is_err()
        );
        assert!(
            scram
                .client_final(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=0")
                .is_err()
        );
        assert!(
            scram
                .client_final(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=99999999")
                .is_err()
        );
        assert!(
            scram
                .client_final(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4096")
                .is_ok()
        );
    }

    #[test]
    fn names_are_escaped() {
        let scram = Scram::new(Hash::Sha256, "a=b,c", "p", "n".to_owned());
        assert_eq!(scram.client_first(), b"n,,n=a=3Db=2Cc,r=n");
    }
}
