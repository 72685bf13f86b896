//! Key records replicated in a NATS KV bucket (cluster mode): every node's key store holds
//! the same records, so a key created or revoked on one node works, or stops working, on
//! all of them.
//!
//! Invariants: a record is written to the bucket (acknowledged by a quorum) before the node
//! that wrote it answers; each node loads every record when it opens, then applies every
//! later change through a watch of the bucket, so a revocation reaches the other nodes
//! within the watch's delivery time; only hashed records are stored, never a plaintext key.

use std::collections::HashMap;
use std::sync::Arc;

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use parking_lot::RwLock;

use super::keys::KeyRecord;
use crate::store::nats::NatsConnection;

/// Key records by key id, shared with the task that follows the bucket.
pub(super) type Records = Arc<RwLock<HashMap<String, KeyRecord>>>;

/// The bucket a node's key store writes through to.
#[derive(Debug)]
pub(super) struct Replica {
    conn: NatsConnection,
    store: kv::Store,
    bucket: String,
}

impl Replica {
    /// Opens (creating when missing) `bucket` with `replicas` copies, follows its changes,
    /// then reads every record: the records, kept up to date in the background from then on.
    /// (Following first means no change made while the records are read is missed.)
    pub(super) fn open(
        conn: &NatsConnection,
        bucket: &str,
        replicas: usize,
    ) -> Result<(Replica, Records), String> {
        let store = conn
            .key_value(bucket, replicas, std::time::Duration::ZERO)
            .map_err(|e| e.to_string())?;
        let replica = Replica {
            conn: conn.clone(),
            store,
            bucket: bucket.to_string(),
        };
        let follow = replica.store.clone();
        let changes = conn
            .run(bucket, async move { follow.watch_all().await })
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("following {bucket}: {e}"))?;
        let records = Arc::new(RwLock::new(replica.load()?));
        replica.apply(changes, Arc::clone(&records));
        Ok((replica, records))
    }

    fn load(&self) -> Result<HashMap<String, KeyRecord>, String> {
        let store = self.store.clone();
        let values = self
            .conn
            .run(&self.bucket, async move {
                let mut keys = store.keys().await.map_err(|e| e.to_string())?;
                let mut values = Vec::new();
                while let Some(key) = keys.next().await {
                    let key = key.map_err(|e| e.to_string())?;
                    if let Some(value) = store.get(&key).await.map_err(|e| e.to_string())? {
                        values.push(value);
                    }
                }
                Ok::<_, String>(values)
            })
            .map_err(|e| e.to_string())??;
        values
            .iter()
            .map(|v| {
                serde_json::from_slice::<KeyRecord>(v)
                    .map(|r| (r.key_id.clone(), r))
                    .map_err(|e| format!("a key record in {} is not valid: {e}", self.bucket))
            })
            .collect()
    }

    /// The record of `key_id` as the bucket holds it now (blocking).
    pub(super) fn get(&self, key_id: &str) -> Result<Option<KeyRecord>, String> {
        let store = self.store.clone();
        let key = key_id.to_string();
        let value = self
            .conn
            .run(&self.bucket, async move { store.get(key).await })
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("reading {}: {e}", self.bucket))?;
        value
            .map(|v| {
                serde_json::from_slice::<KeyRecord>(&v)
                    .map_err(|e| format!("a key record in {} is not valid: {e}", self.bucket))
            })
            .transpose()
    }

    /// Writes `record` to the bucket; returns once a quorum holds it.
    pub(super) fn put(&self, record: &KeyRecord) -> Result<(), String> {
        let store = self.store.clone();
        let key = record.key_id.clone();
        let value = serde_json::to_vec(record).map_err(|e| e.to_string())?;
        self.conn
            .run(
                &self.bucket,
                async move { store.put(key, value.into()).await },
            )
            .map_err(|e| e.to_string())?
            .map(|_| ())
            .map_err(|e| format!("writing to {}: {e}", self.bucket))
    }

    /// Applies every change in `changes` to `records`, in the background.
    fn apply(&self, mut changes: kv::Watch, records: Records) {
        let bucket = self.bucket.clone();
        self.conn.spawn(async move {
            while let Some(change) = changes.next().await {
                let entry = match change {
                    Ok(entry) => entry,
                    Err(e) => {
                        tracing::warn!(bucket = %bucket, error = %e, "a key change was lost");
                        continue;
                    }
                };
                match entry.operation {
                    kv::Operation::Put => match serde_json::from_slice::<KeyRecord>(&entry.value) {
                        Ok(record) => {
                            records.write().insert(record.key_id.clone(), record);
                        }
                        Err(e) => {
                            tracing::error!(key = %entry.key, error = %e, "invalid key record")
                        }
                    },
                    kv::Operation::Delete | kv::Operation::Purge => {
                        records.write().remove(&entry.key);
                    }
                }
            }
            tracing::error!(bucket = %bucket, "following the key bucket stopped");
        });
    }
}
