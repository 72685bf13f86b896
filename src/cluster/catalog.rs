//! Which generation of each shard's stream is current: a replicated KV bucket without
//! expiry (`<cluster>_SHARDS`), one key per rotated shard. A shard without a key is in its
//! first generation.
//!
//! The same bucket records the write policy in force (`policy`, its JSON): the first node
//! to start records its own, and a node with another policy refuses to start.
//!
//! Invariants: a generation record only moves forward, by one, by compare-and-set against
//! the generation the rotating owner read (a create when the shard had none), so two
//! rotations of one shard can never both commit; the record is written only after the new
//! generation holds every kept record, and the old stream is deleted only after the record
//! names the new one ([`crate::store::nats`]).

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::kv;
use futures_util::StreamExt;

use super::lease::LeaseError;
use super::shards::stream_name;
use crate::store::nats::{Generations, NatsConnection};

/// The generation records of one cluster's shards.
#[derive(Clone)]
pub struct Catalog {
    pub(super) conn: NatsConnection,
    pub(super) store: kv::Store,
    pub(super) bucket: String,
    pub(super) cluster: String,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("bucket", &self.bucket)
            .finish()
    }
}

fn key(shard: u32) -> String {
    format!("gen.{shard}")
}

/// The generation in a stream name (`EPISODIC_7_G3` → 3).
fn generation_of(stream: &str) -> Option<u64> {
    stream.rsplit_once("_G")?.1.parse().ok()
}

impl Catalog {
    /// Opens (creating when missing) the catalog of `cluster`, with `replicas` copies.
    pub fn open(conn: &NatsConnection, cluster: &str, replicas: usize) -> Result<Self, LeaseError> {
        let bucket = format!("{cluster}_SHARDS");
        let store = conn
            .key_value(&bucket, replicas, Duration::ZERO)
            .map_err(|e| LeaseError::Bucket {
                bucket: bucket.clone(),
                reason: e.to_string(),
            })?;
        Ok(Catalog {
            conn: conn.clone(),
            store,
            bucket,
            cluster: cluster.to_string(),
        })
    }

    pub(super) fn failed(&self, reason: impl std::fmt::Display) -> LeaseError {
        LeaseError::Bucket {
            bucket: self.bucket.clone(),
            reason: reason.to_string(),
        }
    }

    /// The current generation of `shard` and the revision of its record (`None`: first
    /// generation, no record).
    pub fn generation(&self, shard: u32) -> Result<(u64, Option<u64>), LeaseError> {
        let store = self.store.clone();
        let entry = self
            .conn
            .run(&self.bucket, async move { store.entry(key(shard)).await })
            .map_err(|e| self.failed(e))?
            .map_err(|e| self.failed(e))?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => {
                let generation = std::str::from_utf8(&e.value)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| self.failed(format!("shard {shard}: unreadable generation")))?;
                Ok((generation, Some(e.revision)))
            }
            _ => Ok((1, None)),
        }
    }

    /// The current stream of `shard`.
    pub fn stream(&self, shard: u32) -> Result<String, LeaseError> {
        Ok(stream_name(&self.cluster, shard, self.generation(shard)?.0))
    }

    /// Every shard's generation beyond the first.
    pub fn all(&self) -> Result<HashMap<u32, u64>, LeaseError> {
        Ok(self
            .entries("gen.")?
            .into_iter()
            .filter_map(|(name, value, _)| {
                let shard = name.strip_prefix("gen.")?.parse().ok()?;
                let generation = std::str::from_utf8(&value).ok()?.parse().ok()?;
                Some((shard, generation))
            })
            .collect())
    }

    /// Every present record whose key starts with `prefix`: key, value and revision.
    pub(super) fn entries(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>, u64)>, LeaseError> {
        let store = self.store.clone();
        let prefix = prefix.to_string();
        self.conn
            .run(&self.bucket, async move {
                let mut keys = store.keys().await.map_err(|e| e.to_string())?;
                let mut names = Vec::new();
                while let Some(k) = keys.next().await {
                    let k = k.map_err(|e| e.to_string())?;
                    if k.starts_with(&prefix) {
                        names.push(k);
                    }
                }
                let mut out = Vec::new();
                for name in names {
                    if let Some(e) = store.entry(&name).await.map_err(|e| e.to_string())? {
                        if e.operation == kv::Operation::Put {
                            out.push((name, e.value.to_vec(), e.revision));
                        }
                    }
                }
                Ok::<_, String>(out)
            })
            .map_err(|e| self.failed(e))?
            .map_err(|e| self.failed(e))
    }

    /// Records `policy` (its JSON) as the cluster's write policy if none is recorded yet;
    /// otherwise checks that it is the recorded one. Every node runs under the same policy,
    /// so a shard's decisions do not depend on which node owns it.
    pub fn agree_on_policy(&self, policy: &[u8], version: &str) -> Result<(), PolicyMismatch> {
        let store = self.store.clone();
        let value = policy.to_vec();
        let created = self
            .conn
            .run(&self.bucket, async move {
                match store.create("policy", value.into()).await {
                    Ok(_) => Ok(None),
                    Err(_) => store
                        .get("policy")
                        .await
                        .map(|v| v.map(|b| b.to_vec()))
                        .map_err(|e| e.to_string()),
                }
            })
            .map_err(|e| PolicyMismatch::Unreadable(e.to_string()))?
            .map_err(PolicyMismatch::Unreadable)?;
        match created {
            None => Ok(()),
            Some(recorded) if recorded == policy => Ok(()),
            Some(recorded) => {
                let theirs = serde_json::from_slice::<serde_json::Value>(&recorded)
                    .ok()
                    .and_then(|v| {
                        v.get("version")
                            .and_then(|v| v.as_str())
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| "?".into());
                Err(PolicyMismatch::Differs {
                    ours: version.to_string(),
                    theirs,
                })
            }
        }
    }

    /// The rotation handle of `shard`'s log.
    pub fn rotation(&self, shard: u32) -> ShardGenerations {
        ShardGenerations {
            catalog: self.clone(),
            shard,
        }
    }
}

/// Why a node may not run under its write policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyMismatch {
    /// The cluster runs another policy.
    #[error(
        "this node's write policy ({ours}) differs from the cluster's ({theirs}): give every \
         node the same policy file"
    )]
    Differs {
        /// This node's policy version.
        ours: String,
        /// The cluster's.
        theirs: String,
    },
    /// The record could not be read or written.
    #[error("the cluster's policy record: {0}")]
    Unreadable(String),
}

/// Rotation of one shard's log through the catalog.
#[derive(Debug)]
pub struct ShardGenerations {
    catalog: Catalog,
    shard: u32,
}

impl Generations for ShardGenerations {
    fn next_name(&self, current: &str) -> String {
        let generation = generation_of(current).unwrap_or(1);
        stream_name(&self.catalog.cluster, self.shard, generation + 1)
    }

    /// Retries what NATS could not answer (an election, a server down) for up to
    /// [`COMMIT_DEADLINE`]: a write whose answer was lost is found committed when the
    /// record is read again, so the record moves at most once and is never left unknown
    /// while NATS can answer within the deadline.
    fn commit(&self, current: &str, next: &str) -> Result<(), String> {
        let (from, to) = match (generation_of(current), generation_of(next)) {
            (Some(from), Some(to)) if to == from + 1 => (from, to),
            _ => return Err(format!("{current} → {next} is not one generation forward")),
        };
        let deadline = std::time::Instant::now() + COMMIT_DEADLINE;
        let mut last_error = String::new();
        while std::time::Instant::now() < deadline {
            let (now, revision) = match self.catalog.generation(self.shard) {
                Ok(read) => read,
                Err(e) => {
                    last_error = e.to_string();
                    std::thread::sleep(Duration::from_millis(250));
                    continue;
                }
            };
            if now == to {
                return Ok(());
            }
            if now != from {
                return Err(format!(
                    "shard {} is in generation {now}, not {from}",
                    self.shard
                ));
            }
            let store = self.catalog.store.clone();
            let (key, value) = (key(self.shard), to.to_string().into_bytes());
            let written = self.catalog.conn.run(&self.catalog.bucket, async move {
                match revision {
                    None => store
                        .create(key, value.into())
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Some(rev) => store
                        .update(key, value.into(), rev)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                }
            });
            match written {
                Ok(Ok(())) => return Ok(()),
                // Refused or unanswered: the next read tells which.
                Ok(Err(e)) => last_error = e,
                Err(e) => last_error = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!(
            "the generation record of shard {} could not be moved within {} s (outcome unknown): {last_error}",
            self.shard,
            COMMIT_DEADLINE.as_secs()
        ))
    }
}

/// How long a rotation's commit keeps trying while NATS cannot answer.
const COMMIT_DEADLINE: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_are_read_from_stream_names() {
        assert_eq!(generation_of("EPISODIC_7_G1"), Some(1));
        assert_eq!(generation_of("EPI_G_7_G12"), Some(12));
        assert_eq!(generation_of("EPISODIC_7"), None);
    }
}
