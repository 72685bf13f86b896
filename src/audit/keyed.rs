//! Keyed hashes: content and query hashes that confirm nothing to whoever reads the trail.
//!
//! A plain `sha256(summary)` lets anyone holding the audit trail confirm a guessed text, and
//! it outlives erasure and compaction. Every hash the trail keeps is instead an HMAC-SHA256
//! under a per-tenant key, derived from one secret of the data directory
//! (`audit/hash.key`, 32 random bytes, mode 0600, created on first start and never
//! logged or exported). The same derivation gives each API key of a tenant an opaque tag
//! (see [`Keyed::key_tag`]).
//!
//! In cluster mode every node derives the secret from the cluster's shared admin key and
//! name instead ([`Keyed::derived`]), in memory only, so a shard's hashes stay the same
//! whichever node owns it.
//!
//! Invariants: the secret never leaves its file (or, derived, the process); hashes of the same text under two tenants
//! differ, so a trail exported from one tenant confirms nothing about another; the hash of
//! a text is stable across restarts (the secret is read, not regenerated, when present).

use std::path::Path;

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Length of the data directory's secret.
const SECRET_LEN: usize = 32;

/// The data directory's hashing secret.
#[derive(Clone)]
pub struct Keyed {
    secret: [u8; SECRET_LEN],
}

impl std::fmt::Debug for Keyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keyed(..)")
    }
}

/// Why the secret could not be read or created.
#[derive(Debug, thiserror::Error)]
#[error("hash key {path}: {reason}")]
pub struct KeyedError {
    path: String,
    reason: String,
}

impl Keyed {
    /// Reads the secret at `path`, or creates it (mode 0600) when the file does not exist.
    pub fn open_or_create(path: &Path) -> Result<Keyed, KeyedError> {
        let err = |reason: String| KeyedError {
            path: path.display().to_string(),
            reason,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let bytes = hex::decode(text.trim()).map_err(|e| err(e.to_string()))?;
                let secret: [u8; SECRET_LEN] = bytes
                    .try_into()
                    .map_err(|_| err(format!("must hold {SECRET_LEN} hex-encoded bytes")))?;
                Ok(Keyed { secret })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut secret = [0u8; SECRET_LEN];
                rand::rngs::OsRng.fill_bytes(&mut secret);
                let text = format!("{}\n", hex::encode(secret));
                crate::fsutil::create_new(path, text.as_bytes(), 0o600)
                    .map_err(|e| err(e.to_string()))?;
                Ok(Keyed { secret })
            }
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// A secret derived from `shared` (a cluster's admin key) and `context` (its name), for
    /// nodes that must all hash alike; it lives in memory only.
    pub fn derived(shared: &str, context: &str) -> Keyed {
        Keyed {
            secret: Self::mac(
                shared.as_bytes(),
                &[b"episodic audit hashes v1", context.as_bytes()],
            ),
        }
    }

    /// A fixed secret, for tests and offline tools that keep no trail.
    pub fn fixed(seed: u8) -> Keyed {
        Keyed {
            secret: [seed; SECRET_LEN],
        }
    }

    fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        // HMAC accepts keys of any length; this cannot fail.
        let mut mac = HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!());
        for p in parts {
            mac.update(&(p.len() as u64).to_le_bytes());
            mac.update(p);
        }
        mac.finalize().into_bytes().into()
    }

    fn tenant_key(&self, tenant: &str) -> [u8; 32] {
        Self::mac(&self.secret, &[b"tenant", tenant.as_bytes()])
    }

    /// The keyed hash of a text in `tenant`'s trail (hex, prefixed `hmac:`).
    pub fn content_hash(&self, tenant: &str, text: &str) -> String {
        let h = Self::mac(&self.tenant_key(tenant), &[b"content", text.as_bytes()]);
        format!("hmac:{}", hex::encode(h))
    }

    /// A 16-hex-digit tag of one API key within its tenant: opaque, stable, and different
    /// for every key and tenant.
    pub fn key_tag(&self, tenant: &str, key_id: &str) -> String {
        let h = Self::mac(&self.tenant_key(tenant), &[b"key", key_id.as_bytes()]);
        hex::encode(&h[..8])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_keyed_per_tenant_and_stable() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("hash.key");
        let a = Keyed::open_or_create(&path).expect("create");
        let again = Keyed::open_or_create(&path).expect("read");
        let h = a.content_hash("acme", "the customer asked for email");
        assert_eq!(
            h,
            again.content_hash("acme", "the customer asked for email")
        );
        assert_ne!(h, a.content_hash("globex", "the customer asked for email"));
        assert_ne!(h, a.content_hash("acme", "the customer asked for post"));
        let plain = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
            "the customer asked for email".as_bytes(),
        ));
        assert!(!h.contains(&plain), "not the plain hash");
        let other = Keyed::open_or_create(&dir.path().join("other.key")).expect("other");
        assert_ne!(
            h,
            other.content_hash("acme", "the customer asked for email")
        );
        assert_eq!(a.key_tag("acme", "k1").len(), 16);
        assert_ne!(a.key_tag("acme", "k1"), a.key_tag("acme", "k2"));
        assert_ne!(a.key_tag("acme", "k1"), a.key_tag("globex", "k1"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(&path, "zz").expect("corrupt");
        assert!(Keyed::open_or_create(&path).is_err());
    }
}
