//! API keys replicated in a NATS KV bucket (cluster mode's key store) on a real 3-node
//! cluster: a key made on one node works on another, a revocation on one reaches the
//! others, a node that opens later sees both, and no plaintext key reaches the servers.

use std::time::{Duration, Instant};

use episodic::auth::{roles, AuthError, KeyStore, Limits, Revocation};
use episodic::store::nats::NatsConnection;

use crate::common::ADMIN;
use crate::nats_cluster::{shared, unique_stream};

fn node_store(bucket: &str) -> KeyStore {
    // Each store has its own connection, as each node would.
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    KeyStore::open_replicated(&conn, bucket, 3, ADMIN).expect("open the replicated key store")
}

fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_node_reads_a_key_it_has_not_learnt_through_from_the_bucket() {
    let bucket = unique_stream("KEYSREAD");
    let (first, second) = (node_store(&bucket), node_store(&bucket));
    let made = first
        .create(
            "acme",
            vec![roles::READER.to_string()],
            Limits::unlimited(),
            None,
        )
        .expect("create");
    // The record is in the bucket before `create` returns: read through, it works at once
    // on the other node, whether or not that node's watch has delivered it yet.
    if second.may_learn(&made.key) {
        assert!(second.learn(&made.key), "the bucket holds the new key");
    }
    assert!(second
        .authenticate(&made.key)
        .is_ok_and(|p| p.tenant() == Some("acme")));
    let unknown = "epi_k0000000000000000_nosuchkeyatallnosuchkeyatall";
    assert!(second.may_learn(unknown));
    assert!(!second.learn(unknown), "nothing to learn for an unknown id");
    assert!(second.authenticate(unknown).is_err());
    assert!(!second.may_learn(ADMIN), "the admin key is not a record");
}

#[test]
fn a_key_works_on_every_node_until_any_node_revokes_it() {
    let bucket = unique_stream("KEYS");
    let (first, second) = (node_store(&bucket), node_store(&bucket));
    let made = first
        .create(
            "acme",
            vec![roles::READER.to_string()],
            Limits::unlimited(),
            None,
        )
        .expect("create");
    eventually("the new key works on the other node", || {
        second
            .authenticate(&made.key)
            .is_ok_and(|p| p.tenant() == Some("acme"))
    });
    assert!(
        second.authenticate(ADMIN).is_ok(),
        "the shared admin key works everywhere"
    );
    assert!(matches!(
        second.revoke(&made.record.key_id).expect("revoke"),
        Revocation::Revoked
    ));
    assert_eq!(
        second.authenticate(&made.key).unwrap_err(),
        AuthError::Unauthenticated,
        "refused at once on the node that revoked it"
    );
    eventually("the revocation reaches the first node", || {
        first.authenticate(&made.key).is_err()
    });
    let later = node_store(&bucket);
    assert!(
        later.authenticate(&made.key).is_err(),
        "a node opened later loads the revocation"
    );
    assert_eq!(later.list().len(), 1, "{:?}", later.list());

    // The secret is everything after `epi_<keyId>_` (it may hold `_` itself).
    let secret = made.key.splitn(3, '_').nth(2).expect("secret part");
    for node in 1..=3 {
        for file in shared().store_files(node) {
            let bytes = std::fs::read(&file).unwrap_or_default();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a plaintext key reached {}",
                file.display()
            );
        }
    }
}
