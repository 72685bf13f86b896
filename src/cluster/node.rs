//! A cluster node: it announces itself, holds the leases of a fair share of the shards, and
//! runs one engine per shard it holds, whose event log is that shard's stream.
//!
//! Invariants:
//! - a node serves a shard only while it holds the shard's lease: a lease it failed to
//!   renew before its TTL ran out (lost, or the bucket unreachable) stops the shard's engine
//!   first, and only then is the shard dropped; a write that raced the loss is refused by
//!   the stream's fence, never interleaved;
//! - a node takes a free shard only while it holds fewer than its fair share,
//!   ⌈shards ÷ live nodes⌉, live nodes being those whose announcement has not expired, so
//!   the shards of a node that died are taken by the others once its leases expire;
//! - a shard's engine lives in its own directory under the node's data directory and
//!   catches up from the shard's stream when it opens, embedding nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::RwLock;

use super::lease::{Lease, LeaseError, Leases};
use super::shards::{shard_of, stream_name};
use crate::embed::Embedder;
use crate::engine::{Engine, EngineConfig};
use crate::store::nats::NatsConnection;
use crate::store::LogLocation;

/// How a node is set up.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id (ASCII letters, digits, `-` and `_`).
    pub node_id: String,
    /// The cluster's name: its lease bucket and the prefix of its streams (ASCII letters,
    /// digits, `-` and `_`).
    pub cluster: String,
    /// How many shards the cluster has (the same on every node).
    pub shards: u32,
    /// How long a lease or an announcement lasts without renewal.
    pub lease_ttl: Duration,
    /// Copies each stream and the lease bucket keep.
    pub replicas: usize,
    /// The engine settings of every shard; its `data_dir` is the node's, each shard's engine
    /// gets a directory below it, and its `log` is replaced by the shard's stream.
    pub engine: EngineConfig,
}

struct Owned {
    lease: Lease,
    engine: Engine,
}

struct Inner {
    config: NodeConfig,
    conn: NatsConnection,
    leases: Leases,
    embedder: Arc<dyn Embedder>,
    owned: RwLock<HashMap<u32, Owned>>,
    stop: AtomicBool,
    /// Runs the engines' async shutdowns from the coordination thread.
    runtime: tokio::runtime::Runtime,
}

/// A running node; dropping it stops it as [`Node::stop`] does.
pub struct Node {
    inner: Arc<Inner>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Node {
    /// Connects the node's coordination to the cluster and starts taking its share of the
    /// shards in the background.
    pub fn start(
        conn: &NatsConnection,
        config: NodeConfig,
        embedder: Arc<dyn Embedder>,
    ) -> anyhow::Result<Node> {
        anyhow::ensure!(
            valid_name(&config.node_id),
            "a node id is ASCII letters, digits, - and _"
        );
        anyhow::ensure!(
            valid_name(&config.cluster),
            "a cluster name is ASCII letters, digits, - and _"
        );
        anyhow::ensure!(config.shards >= 1, "a cluster has at least one shard");
        let bucket = format!("{}_LEASES", config.cluster);
        let leases = Leases::open(conn, &bucket, config.replicas, config.lease_ttl)
            .with_context(|| format!("opening the lease bucket {bucket}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the node's runtime")?;
        let inner = Arc::new(Inner {
            config,
            conn: conn.clone(),
            leases,
            embedder,
            owned: RwLock::new(HashMap::new()),
            stop: AtomicBool::new(false),
            runtime,
        });
        inner.announce()?;
        let worker = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("episodic-cluster".into())
            .spawn(move || worker.run())
            .context("starting the node's coordination thread")?;
        Ok(Node {
            inner,
            thread: Some(thread),
        })
    }

    /// The shard `tenant` lives on.
    pub fn shard_of(&self, tenant: &str) -> u32 {
        shard_of(tenant, self.inner.config.shards)
    }

    /// The engine serving `tenant`, if this node holds its shard.
    pub fn engine_for(&self, tenant: &str) -> Option<Engine> {
        let shard = self.shard_of(tenant);
        self.inner
            .owned
            .read()
            .get(&shard)
            .map(|o| o.engine.clone())
    }

    /// The shards this node holds, in order.
    pub fn owned_shards(&self) -> Vec<u32> {
        let mut shards: Vec<u32> = self.inner.owned.read().keys().copied().collect();
        shards.sort_unstable();
        shards
    }

    /// The node holding `shard`'s lease now, as the bucket says (advisory).
    pub fn owner_of_shard(&self, shard: u32) -> Result<Option<String>, LeaseError> {
        Ok(self.inner.leases.holder(shard)?.map(|(node, _)| node))
    }

    /// Stops the node: its engines are shut down, then its leases released, so other nodes
    /// may take its shards at once.
    pub fn stop(mut self) {
        self.halt(true);
    }

    /// Stops the node as a crash would look to the others: the engines stop, nothing is
    /// released, and the leases lapse after their TTL (for tests of failover).
    pub fn abandon(mut self) {
        self.halt(false);
    }

    fn halt(&mut self, release: bool) {
        self.inner.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let owned: Vec<(u32, Owned)> = self.inner.owned.write().drain().collect();
        for (_, o) in owned {
            self.inner.close(&o.engine);
            if release {
                let _ = self.inner.leases.release(&o.lease);
            }
        }
        if release {
            let _ = self.inner.leases.withdraw(&self.inner.config.node_id);
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.halt(true);
        }
    }
}

impl Inner {
    fn announce(&self) -> Result<(), LeaseError> {
        self.leases.announce(&self.config.node_id)
    }

    /// The coordination loop: renew, then take free shards up to the fair share, every
    /// third of the TTL.
    fn run(&self) {
        let tick = self.config.lease_ttl / 3;
        while !self.stop.load(Ordering::SeqCst) {
            if let Err(e) = self.announce() {
                tracing::warn!(error = %e, "announcing the node failed");
            }
            self.renew_all();
            self.take_free();
            let until = Instant::now() + tick;
            while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    fn renew_all(&self) {
        let shards: Vec<u32> = self.owned.read().keys().copied().collect();
        for shard in shards {
            let lease = match self.owned.read().get(&shard) {
                Some(o) => o.lease.clone(),
                None => continue,
            };
            match self.leases.renew(&lease) {
                Ok(renewed) => {
                    if let Some(o) = self.owned.write().get_mut(&shard) {
                        o.lease = renewed;
                    }
                }
                Err(e) => {
                    let expired = lease.renewed_at.elapsed() >= self.config.lease_ttl;
                    if matches!(e, LeaseError::Lost { .. }) || expired {
                        tracing::warn!(shard, error = %e, "lost the lease: stopping the shard");
                        if let Some(o) = self.owned.write().remove(&shard) {
                            self.close(&o.engine);
                        }
                    } else {
                        tracing::warn!(shard, error = %e, "renewing the lease failed; retrying");
                    }
                }
            }
        }
    }

    fn take_free(&self) {
        let live = match self.leases.live_nodes() {
            Ok(n) => n.max(1),
            Err(e) => {
                tracing::warn!(error = %e, "counting live nodes failed");
                return;
            }
        };
        let fair = self.config.shards.div_ceil(live as u32) as usize;
        for shard in 0..self.config.shards {
            if self.stop.load(Ordering::SeqCst) || self.owned.read().len() >= fair {
                return;
            }
            if self.owned.read().contains_key(&shard) {
                continue;
            }
            let lease = match self.leases.acquire(shard, &self.config.node_id) {
                Ok(lease) => lease,
                Err(LeaseError::Held { .. }) => continue,
                Err(e) => {
                    tracing::warn!(shard, error = %e, "taking a lease failed");
                    continue;
                }
            };
            match self.open_shard(shard) {
                Ok(engine) => {
                    tracing::info!(shard, epoch = lease.epoch, "serving the shard");
                    self.owned.write().insert(shard, Owned { lease, engine });
                }
                Err(e) => {
                    tracing::error!(shard, error = %format!("{e:#}"), "opening the shard failed");
                    let _ = self.leases.release(&lease);
                }
            }
        }
    }

    fn open_shard(&self, shard: u32) -> anyhow::Result<Engine> {
        let mut config = self.config.engine.clone();
        config.data_dir = shard_dir(&self.config.engine.data_dir, shard);
        config.log = LogLocation::Stream {
            conn: self.conn.clone(),
            name: stream_name(&self.config.cluster, shard, 1),
            replicas: self.config.replicas,
        };
        Engine::open(config, Arc::clone(&self.embedder))
    }

    fn close(&self, engine: &Engine) {
        self.runtime.block_on(engine.shutdown());
    }
}

/// The directory of `shard`'s engine under a node's data directory.
pub fn shard_dir(data_dir: &std::path::Path, shard: u32) -> PathBuf {
    data_dir.join("shards").join(shard.to_string())
}
