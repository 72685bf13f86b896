//! The API key store: hashed key records persisted in `<data-dir>/keys.json`, or, in
//! cluster mode, replicated in a NATS KV bucket shared by every node ([`super::replicated`]).
//!
//! Key format: `epi_<keyId>_<secret>`. Invariants: plaintext keys exist only in the response
//! that creates them (and, for a generated admin key, once in `admin.key`, mode 0600); lookups
//! go by key id and compare SHA-256 digests in constant time; the file is replaced atomically;
//! an `EPISODIC_ADMIN_KEY` weaker than the rule of [`super::strength`] refuses to open the
//! store; there is always a usable admin key: the generated `admin` record cannot be revoked
//! unless `EPISODIC_ADMIN_KEY` provides another (it can be rotated instead, which replaces its
//! secret in one atomic write), and the environment key (`admin-env`) has no record to revoke.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use parking_lot::RwLock;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::replicated::Replica;
use super::strength::{self, WeakKey};
use super::{roles, AuthError, Limits, Principal};
use crate::fsutil;
use crate::model::PrivacyClass;
use crate::model::Timestamp;
use crate::store::nats::NatsConnection;

const ADMIN_KEY_ID: &str = "admin";
const ENV_ADMIN_KEY_ID: &str = "admin-env";

/// Failures of the key store.
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    /// The key file could not be read or written.
    #[error("key store i/o failed on {path}: {source}")]
    Io {
        /// File involved.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The key file is not valid JSON of the expected shape.
    #[error("key store {path} is corrupt: {reason}")]
    Corrupt {
        /// File involved.
        path: String,
        /// Why.
        reason: String,
    },
    /// The replicated key bucket (cluster mode) could not be read or written.
    #[error("replicated key store: {reason}")]
    Replica {
        /// What went wrong.
        reason: String,
    },
    /// `EPISODIC_ADMIN_KEY` is weaker than the rule.
    #[error(
        "EPISODIC_ADMIN_KEY is too weak: {reason}; the rule: {}",
        strength::RULE
    )]
    WeakAdminKey {
        /// What failed (never the key).
        #[source]
        reason: WeakKey,
    },
    /// `EPISODIC_METRICS_TOKEN` is weaker than the admin key's rule.
    #[error(
        "EPISODIC_METRICS_TOKEN is too weak: {reason}; the rule: {}",
        strength::RULE
    )]
    WeakMetricsToken {
        /// What failed (never the token).
        #[source]
        reason: WeakKey,
    },
}

/// What [`KeyStore::revoke`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// The key is revoked (now or before).
    Revoked,
    /// No such key.
    NotFound,
    /// Refused: the key is the last usable admin key.
    LastAdmin,
    /// Refused: the environment admin key has no record; it changes with its variable.
    EnvironmentKey,
}

/// One stored key (never the plaintext).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyRecord {
    /// Public id.
    pub key_id: String,
    /// Bound tenant; `None` for admin keys.
    pub tenant_id: Option<String>,
    /// Granted roles.
    pub roles: Vec<String>,
    /// Hex SHA-256 of the full key.
    pub sha256: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Revocation time, if revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// Only these actors' events (`None`: every actor of the tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_ids: Option<Vec<String>>,
    /// Most restricted privacy class the key may read (default `internal`).
    #[serde(default = "default_privacy")]
    pub max_privacy_class: PrivacyClass,
    /// The admin's note of what the key is for (at most [`MAX_LABEL_CHARS`] characters);
    /// records made before labels existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The `sourceTrust` a write with this key gets when it names none (records made before
    /// this existed have none: such writes are `agent_inferred`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_source_trust: Option<crate::model::SourceTrust>,
}

/// Longest key label, in characters.
pub const MAX_LABEL_CHARS: usize = 128;

fn default_privacy() -> PrivacyClass {
    PrivacyClass::Internal
}

/// A freshly created key: the plaintext is shown once.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// The plaintext key.
    pub key: String,
    /// Its record.
    pub record: KeyRecord,
}

/// Thread-safe key store.
#[derive(Debug)]
pub struct KeyStore {
    path: PathBuf,
    records: Arc<RwLock<HashMap<String, KeyRecord>>>,
    /// In cluster mode, the bucket every change is written through to.
    replica: Option<Replica>,
    /// Serializes this node's changes (check, then write).
    gate: parking_lot::Mutex<()>,
    env_admin_digest: Option<[u8; 32]>,
    /// Digest of `EPISODIC_METRICS_TOKEN`: a principal with only the `metrics` role.
    metrics_digest: Option<[u8; 32]>,
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rngs::OsRng.fill_bytes(&mut buf);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

fn key_id_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("epi_")?;
    let (id, secret) = rest.split_once('_')?;
    (!id.is_empty() && !secret.is_empty()).then_some(id)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> KeyStoreError + '_ {
    move |source| KeyStoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl KeyStore {
    /// Opens the store under `data_dir`. With `admin_key` (from `EPISODIC_ADMIN_KEY`) that key
    /// is the admin key; otherwise an admin key is generated on first start and its plaintext
    /// written once to `<data_dir>/admin.key`, whose path is returned.
    pub fn open(
        data_dir: &Path,
        admin_key: Option<&str>,
    ) -> Result<(KeyStore, Option<PathBuf>), KeyStoreError> {
        if let Some(key) = admin_key {
            strength::check_admin_key(key)
                .map_err(|reason| KeyStoreError::WeakAdminKey { reason })?;
        }
        let path = data_dir.join("keys.json");
        let records = load_records(&path)?;
        let store = KeyStore {
            path,
            records: Arc::new(RwLock::new(records)),
            replica: None,
            gate: parking_lot::Mutex::new(()),
            env_admin_digest: admin_key.map(digest),
            metrics_digest: None,
        };
        let written = match admin_key {
            Some(_) => None,
            None => store.ensure_generated_admin(data_dir)?,
        };
        Ok((store, written))
    }

    /// Opens the records under `data_dir` as they are, to add tenant keys to them while no
    /// server runs (`episodic keys create`): no admin key is generated, and none is taken
    /// from the environment, so the store authenticates only the keys it holds.
    pub fn open_records(data_dir: &Path) -> Result<KeyStore, KeyStoreError> {
        let path = data_dir.join("keys.json");
        let records = load_records(&path)?;
        Ok(KeyStore {
            path,
            records: Arc::new(RwLock::new(records)),
            replica: None,
            gate: parking_lot::Mutex::new(()),
            env_admin_digest: None,
            metrics_digest: None,
        })
    }

    /// Opens the store of a cluster node: its records live in the KV bucket `bucket` (created
    /// with `replicas` copies when missing) shared by every node, and each node follows the
    /// others' changes. The admin key is `admin_key` (`EPISODIC_ADMIN_KEY`, the same on every
    /// node); no admin key is generated.
    pub fn open_replicated(
        conn: &NatsConnection,
        bucket: &str,
        replicas: usize,
        admin_key: &str,
    ) -> Result<KeyStore, KeyStoreError> {
        strength::check_admin_key(admin_key)
            .map_err(|reason| KeyStoreError::WeakAdminKey { reason })?;
        let (replica, records) = Replica::open(conn, bucket, replicas)
            .map_err(|reason| KeyStoreError::Replica { reason })?;
        Ok(KeyStore {
            path: PathBuf::from(format!("nats kv {bucket}")),
            records,
            replica: Some(replica),
            gate: parking_lot::Mutex::new(()),
            env_admin_digest: Some(digest(admin_key)),
            metrics_digest: None,
        })
    }

    /// Stores `record` (new or changed), with the gate held: written through to the bucket
    /// in cluster mode, else the whole file replaced atomically; memory follows once it is
    /// durable. The records' lock is not held while the bucket is written: the watch that
    /// applies other nodes' changes takes it on the client's runtime.
    fn write_record(&self, record: KeyRecord) -> Result<(), KeyStoreError> {
        match &self.replica {
            Some(replica) => {
                replica
                    .put(&record)
                    .map_err(|reason| KeyStoreError::Replica { reason })?;
                self.records.write().insert(record.key_id.clone(), record);
            }
            None => {
                let mut records = self.records.write();
                let mut next = records.clone();
                next.insert(record.key_id.clone(), record);
                persist(&self.path, &next)?;
                *records = next;
            }
        }
        Ok(())
    }

    fn ensure_generated_admin(&self, data_dir: &Path) -> Result<Option<PathBuf>, KeyStoreError> {
        if self.records.read().contains_key(ADMIN_KEY_ID) {
            return Ok(None);
        }
        let key = format!("epi_{ADMIN_KEY_ID}_{}", random_token(32));
        let key_path = data_dir.join("admin.key");
        fsutil::create_new(&key_path, format!("{key}\n").as_bytes(), 0o600)
            .map_err(io_err(&key_path))?;
        let record = KeyRecord {
            key_id: ADMIN_KEY_ID.to_string(),
            tenant_id: None,
            roles: vec![roles::ADMIN.to_string()],
            sha256: hex::encode(digest(&key)),
            created_at: Timestamp::now(),
            revoked_at: None,
            actor_ids: None,
            max_privacy_class: PrivacyClass::Sensitive,
            label: None,
            default_source_trust: None,
        };
        self.insert_and_persist(record)?;
        Ok(Some(key_path))
    }

    /// Lets `token` (from `EPISODIC_METRICS_TOKEN`) read `/metrics` and nothing else. It must
    /// pass the admin key's strength rule.
    pub fn set_metrics_token(&mut self, token: &str) -> Result<(), KeyStoreError> {
        strength::check_admin_key(token)
            .map_err(|reason| KeyStoreError::WeakMetricsToken { reason })?;
        self.metrics_digest = Some(digest(token));
        Ok(())
    }

    /// Resolves a bearer key to a principal, or 401.
    pub fn authenticate(&self, key: &str) -> Result<Principal, AuthError> {
        let presented = digest(key);
        if let Some(p) = self.match_record(key, &presented) {
            return Ok(p);
        }
        if let Some(token) = &self.metrics_digest {
            if bool::from(token.ct_eq(&presented)) {
                return Ok(Principal::from_parts(
                    "metrics".to_string(),
                    None,
                    vec![roles::METRICS.to_string()],
                    Limits {
                        actor_ids: Some(Vec::new()),
                        max_privacy_class: crate::model::PrivacyClass::Public,
                    },
                ));
            }
        }
        if let Some(env) = &self.env_admin_digest {
            if bool::from(env.ct_eq(&presented)) {
                return Ok(Principal::from_parts(
                    ENV_ADMIN_KEY_ID.to_string(),
                    None,
                    vec![roles::ADMIN.to_string()],
                    Limits::unlimited(),
                ));
            }
        }
        Err(AuthError::Unauthenticated)
    }

    /// Whether a key [`KeyStore::authenticate`] refused might be a record this node has not
    /// learnt yet: in cluster mode, a well-formed key whose id this node does not know.
    pub fn may_learn(&self, key: &str) -> bool {
        self.replica.is_some()
            && key_id_of(key).is_some_and(|id| !self.records.read().contains_key(id))
    }

    /// Reads the record of `key`'s id from the bucket now and keeps it (cluster mode: a key
    /// made on another node moments ago, before this node's watch delivered it); whether a
    /// record was learnt. Blocking (a NATS round trip): call off async threads, and only for
    /// keys [`KeyStore::may_learn`] allows (a failed authentication is rate-limited per
    /// address, so this read is too).
    pub fn learn(&self, key: &str) -> bool {
        let (Some(replica), Some(id)) = (&self.replica, key_id_of(key)) else {
            return false;
        };
        match replica.get(id) {
            Ok(Some(record)) => {
                // The watch may have delivered it (or a later change) meanwhile: keep that.
                self.records
                    .write()
                    .entry(record.key_id.clone())
                    .or_insert(record);
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "reading a key record through failed");
                false
            }
        }
    }

    fn match_record(&self, key: &str, presented: &[u8; 32]) -> Option<Principal> {
        let id = key_id_of(key)?;
        let records = self.records.read();
        let rec = records.get(id)?;
        let stored = hex::decode(&rec.sha256).ok()?;
        let equal = bool::from(stored.as_slice().ct_eq(presented.as_slice()));
        (equal && rec.revoked_at.is_none()).then(|| {
            let limits = Limits {
                actor_ids: rec.actor_ids.clone(),
                max_privacy_class: rec.max_privacy_class,
            };
            Principal::from_parts(
                rec.key_id.clone(),
                rec.tenant_id.clone(),
                rec.roles.clone(),
                limits,
            )
            .with_default_trust(rec.default_source_trust)
        })
    }

    /// Creates a tenant key with `roles`, `limits` and an optional `label` (checked by the
    /// caller). Blocking file I/O.
    pub fn create(
        &self,
        tenant: &str,
        roles: Vec<String>,
        limits: Limits,
        label: Option<String>,
    ) -> Result<NewKey, KeyStoreError> {
        self.create_trusting(tenant, roles, limits, label, None)
    }

    /// [`KeyStore::create`], with the `sourceTrust` writes by the key get when they name
    /// none (`None`: `agent_inferred`). Blocking file I/O.
    pub fn create_trusting(
        &self,
        tenant: &str,
        roles: Vec<String>,
        limits: Limits,
        label: Option<String>,
        default_source_trust: Option<crate::model::SourceTrust>,
    ) -> Result<NewKey, KeyStoreError> {
        let key_id = hex::encode(&digest(&random_token(16))[..8]);
        let key = format!("epi_{key_id}_{}", random_token(32));
        let record = KeyRecord {
            key_id,
            tenant_id: Some(tenant.to_string()),
            roles,
            sha256: hex::encode(digest(&key)),
            created_at: Timestamp::now(),
            revoked_at: None,
            actor_ids: limits.actor_ids,
            max_privacy_class: limits.max_privacy_class,
            label,
            default_source_trust,
        };
        self.insert_and_persist(record.clone())?;
        Ok(NewKey { key, record })
    }

    /// Every record, sorted by creation time then id.
    pub fn list(&self) -> Vec<KeyRecord> {
        let mut all: Vec<KeyRecord> = self.records.read().values().cloned().collect();
        all.sort_by(|a, b| (a.created_at, &a.key_id).cmp(&(b.created_at, &b.key_id)));
        all
    }

    /// Revokes a key unless it is the last usable admin key. Takes effect for the next
    /// request.
    pub fn revoke(&self, key_id: &str) -> Result<Revocation, KeyStoreError> {
        if key_id == ENV_ADMIN_KEY_ID && self.env_admin_digest.is_some() {
            return Ok(Revocation::EnvironmentKey);
        }
        if key_id == ADMIN_KEY_ID && self.env_admin_digest.is_none() {
            return Ok(Revocation::LastAdmin);
        }
        let _gate = self.gate.lock();
        let Some(rec) = self.records.read().get(key_id).cloned() else {
            return Ok(Revocation::NotFound);
        };
        if rec.revoked_at.is_none() {
            self.write_record(KeyRecord {
                revoked_at: Some(Timestamp::now()),
                ..rec
            })?;
        }
        Ok(Revocation::Revoked)
    }

    /// Replaces the generated admin key's secret (and lifts a revocation): the new key is
    /// returned once, the old one stops working with the same atomic write, and the stale
    /// `admin.key` file is removed. `Ok(None)` when there is no generated admin record (the
    /// admin key then comes from `EPISODIC_ADMIN_KEY`). Blocking file I/O.
    pub fn rotate_admin(&self) -> Result<Option<NewKey>, KeyStoreError> {
        let data_dir = self.path.parent().unwrap_or(Path::new("."));
        let _gate = self.gate.lock();
        let Some(old) = self.records.read().get(ADMIN_KEY_ID).cloned() else {
            return Ok(None);
        };
        let key = format!("epi_{ADMIN_KEY_ID}_{}", random_token(32));
        let record = KeyRecord {
            sha256: hex::encode(digest(&key)),
            created_at: Timestamp::now(),
            revoked_at: None,
            ..old
        };
        self.write_record(record.clone())?;
        let stale = data_dir.join("admin.key");
        match std::fs::remove_file(&stale) {
            Ok(()) => fsutil::sync_dir(data_dir).map_err(io_err(data_dir))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&stale)(e)),
        }
        Ok(Some(NewKey { key, record }))
    }

    fn insert_and_persist(&self, record: KeyRecord) -> Result<(), KeyStoreError> {
        let _gate = self.gate.lock();
        self.write_record(record)
    }
}

fn load_records(path: &Path) -> Result<HashMap<String, KeyRecord>, KeyStoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let list: Vec<KeyRecord> =
        serde_json::from_slice(&bytes).map_err(|e| KeyStoreError::Corrupt {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    Ok(list.into_iter().map(|r| (r.key_id.clone(), r)).collect())
}

fn persist(path: &Path, records: &HashMap<String, KeyRecord>) -> Result<(), KeyStoreError> {
    let mut list: Vec<&KeyRecord> = records.values().collect();
    list.sort_by(|a, b| a.key_id.cmp(&b.key_id));
    let bytes = serde_json::to_vec_pretty(&list).map_err(|e| KeyStoreError::Corrupt {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    fsutil::write_atomic(path, &bytes, 0o600).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment admin key that passes the strength rule.
    const ENV_ADMIN: &str = "env-admin-Qm7xV2kP9wL4zR8tN3cY6hB1dF5gJ0sA";

    #[test]
    fn generated_admin_key_is_written_once_and_persists() {
        let dir = tempfile::tempdir().expect("tmp");
        let (store, written) = KeyStore::open(dir.path(), None).expect("open");
        let path = written.expect("admin key written");
        let admin = std::fs::read_to_string(&path)
            .expect("read")
            .trim()
            .to_string();
        assert!(store
            .authenticate(&admin)
            .expect("admin")
            .has_role(roles::ADMIN));
        drop(store);
        let (store, written) = KeyStore::open(dir.path(), None).expect("reopen");
        assert!(written.is_none());
        assert!(store.authenticate(&admin).is_ok());
        let on_disk = std::fs::read_to_string(dir.path().join("keys.json")).expect("keys");
        assert!(!on_disk.contains(&admin));
    }

    #[test]
    fn the_metrics_token_reads_metrics_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tmp");
        let (mut store, _) = KeyStore::open(dir.path(), None).expect("open");
        assert!(store.set_metrics_token("short").is_err());
        let token = "metrics-Qx7Lm2Vb9Pw4Zt8Rk3Nc6Hd1Jy5";
        store.set_metrics_token(token).expect("strong token");
        let p = store.authenticate(token).expect("metrics principal");
        assert!(p.has_role(roles::METRICS));
        assert!(!p.has_role(roles::ADMIN));
        assert!(p.tenant().is_none(), "no tenant: no event route accepts it");
        assert!(p.grant(roles::READER).is_err());
    }

    #[test]
    fn tenant_keys_authenticate_and_revoke() {
        let dir = tempfile::tempdir().expect("tmp");
        let (store, _) = KeyStore::open(dir.path(), Some(ENV_ADMIN)).expect("open");
        assert!(!dir.path().join("admin.key").exists());
        assert!(store
            .authenticate(ENV_ADMIN)
            .expect("env admin")
            .has_role(roles::ADMIN));
        let new = store
            .create(
                "acme",
                vec![roles::READER.into()],
                Limits::unlimited(),
                Some("support bot".into()),
            )
            .expect("create");
        let p = store.authenticate(&new.key).expect("auth");
        assert_eq!(p.tenant(), Some("acme"));
        let mut tampered = new.key.clone();
        tampered.push('x');
        assert!(store.authenticate(&tampered).is_err());
        assert!(store.authenticate("epi_nope_secret").is_err());
        assert_eq!(
            store.revoke(&new.record.key_id).expect("revoke"),
            Revocation::Revoked
        );
        assert!(store.authenticate(&new.key).is_err());
        let (reopened, _) = KeyStore::open(dir.path(), Some(ENV_ADMIN)).expect("reopen");
        assert!(reopened.authenticate(&new.key).is_err());
    }

    #[test]
    fn labels_persist_and_records_without_one_still_load() {
        let dir = tempfile::tempdir().expect("tmp");
        let (store, _) = KeyStore::open(dir.path(), Some(ENV_ADMIN)).expect("open");
        let labelled = store
            .create(
                "acme",
                vec![roles::READER.into()],
                Limits::unlimited(),
                Some("support bot".into()),
            )
            .expect("create");
        let plain = store
            .create(
                "acme",
                vec![roles::READER.into()],
                Limits::unlimited(),
                None,
            )
            .expect("create");
        drop(store);
        let on_disk = std::fs::read_to_string(dir.path().join("keys.json")).expect("keys");
        assert_eq!(on_disk.matches("\"label\"").count(), 1, "{on_disk}");
        let (store, _) = KeyStore::open(dir.path(), Some(ENV_ADMIN)).expect("reopen");
        let label = |id: &str| {
            store
                .list()
                .into_iter()
                .find(|r| r.key_id == id)
                .expect("listed")
                .label
        };
        assert_eq!(
            label(&labelled.record.key_id).as_deref(),
            Some("support bot")
        );
        assert_eq!(label(&plain.record.key_id), None);
        // A record written before labels existed.
        let old = r#"[{"keyId":"0123456789abcdef","tenantId":"acme","roles":["reader"],
            "sha256":"00","createdAt":"2026-01-01T00:00:00Z"}]"#;
        let other = tempfile::tempdir().expect("tmp");
        std::fs::write(other.path().join("keys.json"), old).expect("write");
        let (store, _) = KeyStore::open(other.path(), Some(ENV_ADMIN)).expect("old records load");
        assert_eq!(store.list()[0].label, None);
    }

    #[test]
    fn records_opened_as_they_are_gain_keys_without_an_admin_key() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = KeyStore::open_records(dir.path()).expect("open");
        let new = store
            .create(
                "acme",
                vec![roles::WRITER.into()],
                Limits::unlimited(),
                None,
            )
            .expect("create");
        assert!(!dir.path().join("admin.key").exists(), "no admin key made");
        drop(store);
        let (store, written) = KeyStore::open(dir.path(), Some(ENV_ADMIN)).expect("server");
        assert!(written.is_none());
        let p = store.authenticate(&new.key).expect("the key works");
        assert_eq!(p.tenant(), Some("acme"));
        assert!(store.list().iter().all(|r| r.key_id != "admin"));
    }

    #[test]
    fn a_weak_environment_admin_key_refuses_to_open() {
        let dir = tempfile::tempdir().expect("tmp");
        for weak in ["a", "test-admin-key", &"x".repeat(40)] {
            let err = KeyStore::open(dir.path(), Some(weak)).expect_err(weak);
            let msg = err.to_string();
            assert!(msg.starts_with("EPISODIC_ADMIN_KEY is too weak"), "{msg}");
            assert!(
                msg.contains("at least 32 printable ASCII characters"),
                "{msg}"
            );
            assert!(
                weak.len() < 2 || !msg.contains(weak),
                "never the key: {msg}"
            );
        }
        assert!(!dir.path().join("keys.json").exists());
    }

    #[test]
    fn the_last_admin_key_cannot_be_revoked() {
        let dir = tempfile::tempdir().expect("tmp");
        let (store, written) = KeyStore::open(dir.path(), None).expect("open");
        let admin = std::fs::read_to_string(written.expect("written")).expect("read");
        assert_eq!(
            store.revoke("admin").expect("revoke"),
            Revocation::LastAdmin
        );
        assert_eq!(
            store.revoke("admin-env").expect("revoke"),
            Revocation::NotFound
        );
        drop(store);
        let (store, _) = KeyStore::open(dir.path(), None).expect("reopen");
        assert!(store.authenticate(admin.trim()).is_ok());
        // With an environment key there is a replacement, so the record may go; the
        // environment key itself has no record to revoke.
        let (store, _) = KeyStore::open(dir.path(), Some(ENV_ADMIN)).expect("reopen");
        assert_eq!(
            store.revoke("admin-env").expect("revoke"),
            Revocation::EnvironmentKey
        );
        assert_eq!(store.revoke("admin").expect("revoke"), Revocation::Revoked);
        assert!(store.authenticate(admin.trim()).is_err());
        assert!(store.authenticate(ENV_ADMIN).is_ok());
    }

    #[test]
    fn rotation_replaces_the_admin_secret_atomically() {
        let dir = tempfile::tempdir().expect("tmp");
        let (store, written) = KeyStore::open(dir.path(), None).expect("open");
        let path = written.expect("written");
        let old = std::fs::read_to_string(&path).expect("read");
        let new = store.rotate_admin().expect("rotate").expect("admin record");
        assert!(new.key.starts_with("epi_admin_"));
        assert_eq!(new.record.key_id, "admin");
        assert!(store.authenticate(old.trim()).is_err());
        assert!(store
            .authenticate(&new.key)
            .expect("new key")
            .has_role(roles::ADMIN));
        assert!(!path.exists(), "the stale admin.key is removed");
        drop(store);
        let (store, written) = KeyStore::open(dir.path(), None).expect("reopen");
        assert!(written.is_none());
        assert!(store.authenticate(&new.key).is_ok());
        assert!(store.authenticate(old.trim()).is_err());
        let other = tempfile::tempdir().expect("tmp");
        let (env_only, _) = KeyStore::open(other.path(), Some(ENV_ADMIN)).expect("open");
        assert!(env_only.rotate_admin().expect("rotate").is_none());
    }
}
