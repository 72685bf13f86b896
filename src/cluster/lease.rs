//! Shard leases in a replicated NATS KV bucket: a key per shard whose value names its owner,
//! and a key per live node (its announcement).
//!
//! Invariants:
//! - taking a lease is an atomic create (it fails if any node holds the key), renewing it
//!   is an update expecting the revision the holder last wrote, and releasing it a delete
//!   expecting that revision: two nodes can never both believe a take or a renewal
//!   succeeded;
//! - a lease not renewed within the bucket's TTL disappears (the bucket's `max_age`), so a
//!   dead owner's shard can be taken by another node once the TTL has passed;
//! - a lease's epoch is the bucket revision its take was written at: strictly greater for
//!   every later take of any shard;
//! - reads of who holds a shard ([`Leases::holder`]) are advisory: decisions are made only by
//!   the compare-and-set writes above.

use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures_util::StreamExt;

use crate::store::nats::NatsConnection;

/// Why a lease operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another node holds the shard's lease.
    #[error("shard {shard} is held by {node}")]
    Held {
        /// The shard.
        shard: u32,
        /// Its holder, as far as could be read.
        node: String,
    },
    /// The lease expired or was taken by another node since this holder last wrote it.
    #[error("the lease of shard {shard} was lost")]
    Lost {
        /// The shard.
        shard: u32,
    },
    /// The coordination bucket could not be reached or refused the request.
    #[error("lease bucket {bucket}: {reason}")]
    Bucket {
        /// The bucket.
        bucket: String,
        /// What went wrong.
        reason: String,
    },
}

/// A lease this node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The shard.
    pub shard: u32,
    /// This node.
    pub node: String,
    /// The revision the take was written at (see the module's invariants).
    pub epoch: u64,
    /// The revision of the last write of this lease.
    revision: u64,
    /// When it was last written; it is safe to act as the owner until `renewed_at + ttl`
    /// minus the clock drift allowed for.
    pub renewed_at: Instant,
}

/// What a node announces about itself.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Announcement {
    node: String,
    url: String,
    /// When it was made, in Unix milliseconds by the announcing node's clock.
    #[serde(default)]
    at_ms: u64,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Who is live and who holds what, read from the bucket at one moment (advisory).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// Live nodes and the URL each is reached at.
    pub nodes: std::collections::BTreeMap<String, String>,
    /// The live nodes that announced themselves within the last half TTL (a node that
    /// died is still live until its announcement expires, but no longer fresh).
    pub fresh: std::collections::BTreeSet<String>,
    /// Held shards: the holder and the revision of the lease's last write.
    pub shards: std::collections::BTreeMap<u32, (String, u64)>,
    /// Shards being handed to a named node (only that node may take them meanwhile).
    pub handoffs: std::collections::BTreeMap<u32, String>,
}

impl ClusterView {
    /// The URL of the node holding `shard`, if it is held by a live node.
    pub fn owner_url(&self, shard: u32) -> Option<(&str, &str)> {
        let (owner, _) = self.shards.get(&shard)?;
        let url = self.nodes.get(owner)?;
        Some((owner.as_str(), url.as_str()))
    }
}

/// The leases of one cluster's shards.
pub struct Leases {
    conn: NatsConnection,
    store: kv::Store,
    bucket: String,
    ttl: Duration,
}

fn key(shard: u32) -> String {
    format!("shard.{shard}")
}

impl Leases {
    /// Opens (creating when missing) the bucket `bucket` with `replicas` copies, whose
    /// leases last `ttl` unless renewed.
    pub fn open(
        conn: &NatsConnection,
        bucket: &str,
        replicas: usize,
        ttl: Duration,
    ) -> Result<Self, LeaseError> {
        let store = conn
            .key_value(bucket, replicas, ttl)
            .map_err(|e| LeaseError::Bucket {
                bucket: bucket.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Leases {
            conn: conn.clone(),
            store,
            bucket: bucket.to_string(),
            ttl,
        })
    }

    /// How long a lease lasts without renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Runs `fut` on the connection's runtime; a lost connection is a bucket failure.
    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, LeaseError> {
        self.conn.run(&self.bucket, fut).map_err(|e| self.failed(e))
    }

    fn failed(&self, reason: impl std::fmt::Display) -> LeaseError {
        LeaseError::Bucket {
            bucket: self.bucket.clone(),
            reason: reason.to_string(),
        }
    }

    /// Takes the lease of `shard` for `node`, if nobody holds it.
    pub fn acquire(&self, shard: u32, node: &str) -> Result<Lease, LeaseError> {
        let store = self.store.clone();
        let value = node.as_bytes().to_vec();
        let at = Instant::now();
        let created = self.run(async move { store.create(key(shard), value.into()).await })?;
        match created {
            Ok(revision) => Ok(Lease {
                shard,
                node: node.to_string(),
                epoch: revision,
                revision,
                renewed_at: at,
            }),
            // A create that lost a race may come back as another kind than `AlreadyExists`
            // (the server's subject-sequence refusal, 10164, is one the client does not
            // name): whatever the kind, a key someone holds means the shard is held.
            // The winner's write may still be in flight when this create is refused: look a
            // few times before calling the refusal a failure.
            Err(e) => {
                for _ in 0..20 {
                    if let Some((node, _)) = self.holder(shard)? {
                        return Err(LeaseError::Held { shard, node });
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(self.failed(e))
            }
        }
    }

    /// Renews `lease`, failing with [`LeaseError::Lost`] if it expired or changed hands.
    pub fn renew(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        let store = self.store.clone();
        let (shard, revision) = (lease.shard, lease.revision);
        let value = lease.node.as_bytes().to_vec();
        let at = Instant::now();
        let updated =
            self.run(async move { store.update(key(shard), value.into(), revision).await })?;
        match updated {
            Ok(revision) => Ok(Lease {
                revision,
                renewed_at: at,
                ..lease.clone()
            }),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(LeaseError::Lost { shard })
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Gives `lease` up, so another node may take the shard at once.
    pub fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        let store = self.store.clone();
        let (shard, revision) = (lease.shard, lease.revision);
        let deleted = self.run(async move {
            store
                .delete_expect_revision(key(shard), Some(revision))
                .await
        })?;
        match deleted {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == kv::DeleteErrorKind::WrongLastRevision => {
                Err(LeaseError::Lost { shard })
            }
            // As for a create: a refusal the client does not name is a lost lease when the
            // key is no longer this lease's write.
            Err(e) => match self.holder(shard)? {
                Some((_, now)) if now != revision => Err(LeaseError::Lost { shard }),
                None => Err(LeaseError::Lost { shard }),
                Some(_) => Err(self.failed(e)),
            },
        }
    }

    /// Announces `node`, reachable by other nodes at `url`, as live for one TTL (renewed by
    /// announcing again).
    pub fn announce(&self, node: &str, url: &str) -> Result<(), LeaseError> {
        let store = self.store.clone();
        let key = format!("node.{node}");
        let value = serde_json::to_vec(&Announcement {
            node: node.to_string(),
            url: url.to_string(),
            at_ms: unix_ms(),
        })
        .map_err(|e| self.failed(e))?;
        self.run(async move { store.put(key, value.into()).await })?
            .map(|_| ())
            .map_err(|e| self.failed(e))
    }

    /// Every live node and every held shard, as the bucket says now (advisory).
    pub fn view(&self) -> Result<ClusterView, LeaseError> {
        let store = self.store.clone();
        let entries = self
            .run(async move {
                let mut keys = store.keys().await.map_err(|e| e.to_string())?;
                let mut names = Vec::new();
                while let Some(key) = keys.next().await {
                    names.push(key.map_err(|e| e.to_string())?);
                }
                let mut entries = Vec::with_capacity(names.len());
                for name in names {
                    if let Some(entry) = store.entry(&name).await.map_err(|e| e.to_string())? {
                        if entry.operation == kv::Operation::Put {
                            entries.push((name, entry.value, entry.revision));
                        }
                    }
                }
                Ok::<_, String>(entries)
            })?
            .map_err(|e| self.failed(e))?;
        let mut view = ClusterView::default();
        for (name, value, revision) in entries {
            if let Some(node) = name.strip_prefix("node.") {
                if let Ok(a) = serde_json::from_slice::<Announcement>(&value) {
                    let age = unix_ms().saturating_sub(a.at_ms);
                    if u128::from(age) < self.ttl.as_millis() / 2 {
                        view.fresh.insert(node.to_string());
                    }
                    view.nodes.insert(node.to_string(), a.url);
                }
            } else if let Some(shard) = name.strip_prefix("handoff.") {
                if let Ok(shard) = shard.parse::<u32>() {
                    let to = String::from_utf8_lossy(&value).into_owned();
                    view.handoffs.insert(shard, to);
                }
            } else if let Some(shard) = name.strip_prefix("shard.") {
                if let Ok(shard) = shard.parse::<u32>() {
                    let owner = String::from_utf8_lossy(&value).into_owned();
                    view.shards.insert(shard, (owner, revision));
                }
            }
        }
        Ok(view)
    }

    /// Marks `shard` as being handed to `node` for one TTL: no other node takes it meanwhile
    /// (advisory, as every read of the view is; the lease is still taken by create).
    pub fn hand_off(&self, shard: u32, node: &str) -> Result<(), LeaseError> {
        let store = self.store.clone();
        let (key, value) = (format!("handoff.{shard}"), node.as_bytes().to_vec());
        self.run(async move { store.put(key, value.into()).await })?
            .map(|_| ())
            .map_err(|e| self.failed(e))
    }

    /// Withdraws `node`'s announcement (a clean stop).
    pub fn withdraw(&self, node: &str) -> Result<(), LeaseError> {
        let store = self.store.clone();
        let key = format!("node.{node}");
        self.run(async move { store.delete(key).await })?
            .map_err(|e| self.failed(e))
    }

    /// How many nodes are announced now (advisory: an announcement lasts one TTL).
    pub fn live_nodes(&self) -> Result<usize, LeaseError> {
        Ok(self.view()?.nodes.len())
    }

    /// Who holds `shard` now, and the revision of that lease's last write (advisory). Read
    /// from the bucket's leader: a replica's direct answer may lag behind a write it has not
    /// applied yet.
    pub fn holder(&self, shard: u32) -> Result<Option<(String, u64)>, LeaseError> {
        let stream = self.store.stream.clone();
        let subject = format!("{}{}", self.store.prefix, key(shard));
        let last =
            self.run(async move { stream.get_last_raw_message_by_subject(&subject).await })?;
        match last {
            Ok(message) => {
                let removed = message
                    .headers
                    .get("KV-Operation")
                    .is_some_and(|op| op.as_str() != "PUT");
                Ok((!removed).then(|| {
                    let node = String::from_utf8_lossy(&message.payload).into_owned();
                    (node, message.sequence)
                }))
            }
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(self.failed(e)),
        }
    }
}
