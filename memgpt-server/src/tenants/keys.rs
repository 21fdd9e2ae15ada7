//! API key secrets: 256 random bits, shown once, stored as their SHA-256.

use std::fmt;

use sha2::{Digest, Sha256};

/// What every memgpt API key starts with.
pub const KEY_PREFIX: &str = "mgk_";

/// A freshly generated API key: give [`ApiKeySecret::expose`] to its owner once, store
/// [`ApiKeySecret::hash`]. `Debug` does not print it.
pub struct ApiKeySecret(String);

impl ApiKeySecret {
    /// A new random key (`mgk_` and 64 hex digits), or `None` if the operating system has no
    /// randomness to give.
    pub fn generate() -> Option<Self> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        Some(Self(format!("{KEY_PREFIX}{}", hex(&bytes))))
    }

    /// The key itself.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What is stored: the key's SHA-256, in hex.
    pub fn hash(&self) -> String {
        hash_key(&self.0)
    }

    /// The first characters, enough to recognise the key in a listing.
    pub fn prefix(&self) -> String {
        self.0.chars().take(KEY_PREFIX.len() + 8).collect()
    }
}

impl fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKeySecret({}…)", self.prefix())
    }
}

/// The SHA-256 of a presented key, in hex: what [`TenantStore::authenticate`](super::TenantStore::authenticate)
/// looks up. (A fast hash is right here: the keys are random 256-bit strings, not passwords.)
pub fn hash_key(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_prefixed_and_hashed() {
        let a = ApiKeySecret::generate().unwrap();
        let b = ApiKeySecret::generate().unwrap();
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with("mgk_"));
        assert_eq!(a.expose().len(), 4 + 64);
        assert_eq!(a.hash(), hash_key(a.expose()));
        assert_eq!(a.hash().len(), 64);
        assert!(a.expose().starts_with(&a.prefix()));
        assert!(!format!("{a:?}").contains(a.expose()));
        // A known vector: SHA-256("abc").
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
