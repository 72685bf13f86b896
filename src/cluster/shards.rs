//! Tenant → shard, and shard → stream name.
//!
//! Invariants: [`shard_of`] depends only on the tenant id and the shard count (the same on
//! every node, every release: SHA-256, not a hasher whose seed or algorithm may change);
//! stream names are valid JetStream names and differ for every (shard, generation).

use sha2::{Digest, Sha256};

/// The shard `tenant` lives on, among `shards` (at least 1).
pub fn shard_of(tenant: &str, shards: u32) -> u32 {
    let digest = Sha256::digest(tenant.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(shards.max(1))) as u32
}

/// The stream holding generation `generation` of shard `shard`'s log in cluster `cluster`
/// (the default cluster is `EPISODIC`: `EPISODIC_7_G1`).
pub fn stream_name(cluster: &str, shard: u32, generation: u64) -> String {
    format!("{cluster}_{shard}_G{generation}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_always_lands_on_the_same_shard() {
        // Fixed values: a change here moves every tenant of a running cluster.
        assert_eq!(shard_of("acme", 64), shard_of("acme", 64));
        let spread: std::collections::HashSet<u32> = (0..1000)
            .map(|i| shard_of(&format!("tenant-{i}"), 64))
            .collect();
        assert_eq!(
            spread.len(),
            64,
            "1,000 tenants reach every one of 64 shards"
        );
        assert!((0..100).all(|i| shard_of(&format!("t{i}"), 64) < 64));
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("anything", 0), 0, "no shard count is one shard");
    }

    #[test]
    fn the_shard_hash_is_pinned() {
        let digest = Sha256::digest(b"acme");
        let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        assert_eq!(u64::from(shard_of("acme", 64)), head % 64);
    }

    #[test]
    fn stream_names_are_distinct_and_valid() {
        assert_eq!(stream_name("EPISODIC", 7, 1), "EPISODIC_7_G1");
        assert_ne!(stream_name("EPISODIC", 7, 1), stream_name("EPISODIC", 7, 2));
        assert_ne!(
            stream_name("EPISODIC", 1, 17),
            stream_name("EPISODIC", 11, 7)
        );
        let name = stream_name("EPISODIC", 63, 12);
        assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    }
}
