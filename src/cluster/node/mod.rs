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
//!   catches up from the shard's stream when it opens, embedding nothing; engines open on
//!   their own thread, one at a time, while the coordination thread keeps renewing every
//!   lease (a long replay never lets the node's other leases lapse); an engine whose lease
//!   was lost while it opened is closed, never served;
//! - the node's view of the cluster (who is live at which URL, who holds which shard) is
//!   refreshed every coordination round and is advisory: it only says where to forward;
//! - each shard has a standby, the first live node after its owner in id order: an engine
//!   that follows the shard's stream every round and appends nothing (its write lease is
//!   revoked, and no request is ever routed to it); the standby that takes the shard over is
//!   promoted (it applies the tail it had not seen, audits what the trail lacks, and its
//!   lease makes it writable), so a failover replays only that tail.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::{Mutex, RwLock};

mod pinning;

pub use pinning::{PinError, PinReport};

use super::catalog::Catalog;
use super::lease::{ClusterView, Lease, LeaseError, Leases};
use super::pins::{Pin, PinState};
use super::shards::{shard_of, stream_name};
use crate::cpu::CpuPool;
use crate::embed::Embedder;
use crate::engine::{Engine, EngineConfig};
use crate::store::nats::{NatsConnection, WriteLease};
use crate::store::LogLocation;

/// How a node is set up.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id (ASCII letters, digits, `-` and `_`).
    pub node_id: String,
    /// Where the other nodes reach this one (`http://host:port`), announced with it.
    pub advertise_url: String,
    /// The cluster's name: its lease bucket and the prefix of its streams (ASCII letters,
    /// digits, `-` and `_`).
    pub cluster: String,
    /// How many shards the cluster has (the same on every node).
    pub shards: u32,
    /// How long a lease or an announcement lasts without renewal.
    pub lease_ttl: Duration,
    /// Copies each stream and the lease bucket keep.
    pub replicas: usize,
    /// Whether this node stands by for shards other nodes own (a standby costs what the
    /// shard costs its owner; without one, whoever takes a shard over replays all of it).
    pub standbys: bool,
    /// The engine settings of every shard; its `data_dir` is the node's, each shard's engine
    /// gets a directory below it, its `log` and `audit_log` are replaced by the shard's
    /// streams, and its `audit_secret` should be the same on every node (the server derives
    /// it from the shared admin key). The shards share one CPU pool of `cpu_threads`.
    pub engine: EngineConfig,
}

/// A shard this node holds the lease of; its engine is `None` while it opens.
struct Held {
    lease: Lease,
    /// What the shard's log checks before every append.
    writable: WriteLease,
    engine: Option<Engine>,
    /// Handed here by an operator's move: never shed to even out the shares.
    moved_here: bool,
}

/// A standby of a shard another node owns: an engine following the shard's stream.
struct Follower {
    engine: Engine,
    /// The log sequence after the last record it applied.
    next: std::sync::atomic::AtomicU64,
    /// Revoked while it follows; extended by the lease when it is promoted.
    writable: WriteLease,
}

/// Work for the opener thread.
enum Job {
    /// Serve the shard of this lease (promoting its standby, if any).
    Serve(Lease),
    /// Open a standby of this shard.
    Stand(u32),
    /// Drop a tenant pinned elsewhere from the log of the shard it left.
    Purge(Pin),
}

/// Where a tenant's requests are served.
#[derive(Clone)]
pub enum Route {
    /// Here, by this engine.
    Local(Engine),
    /// Here, once the shard's engine has caught up.
    Opening,
    /// By another node.
    Remote {
        /// The node holding the shard.
        node: String,
        /// Where it is reached.
        url: String,
    },
    /// Nowhere now: nobody holds the shard (it is between owners).
    Unowned,
    /// Nowhere now: the tenant is being copied to a shard of its own, here.
    Moving,
}

/// One held shard, for status reports.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldShard {
    /// The shard.
    pub shard: u32,
    /// The epoch of this node's lease.
    pub epoch: u64,
    /// Whether its engine has caught up and serves.
    pub serving: bool,
}

struct Inner {
    config: NodeConfig,
    conn: NatsConnection,
    leases: Leases,
    catalog: Catalog,
    embedder: Arc<dyn Embedder>,
    cpu: CpuPool,
    /// The embedding coalescer the node's shards share.
    coalescer: crate::embed::Coalescer,
    held: RwLock<HashMap<u32, Held>>,
    /// Held while a lease is renewed and while a lease leaves `held` to be released: a
    /// renewal then either lands before the removal (and the release uses its revision) or
    /// sees the shard gone. Without it, a renewal racing a hand-off moved the revision on
    /// under the release, which failed, so the shard stayed held until its lease lapsed.
    lease_turn: Mutex<()>,
    view: RwLock<ClusterView>,
    /// The last holder other than this node each shard was seen with (to tell a failover
    /// from a first take).
    seen_holders: Mutex<HashMap<u32, String>>,
    first_round: AtomicBool,
    stop: AtomicBool,
    opener: Mutex<Option<mpsc::Sender<Job>>>,
    /// Standbys of shards other nodes own, and those being opened.
    followers: RwLock<HashMap<u32, Follower>>,
    standing: Mutex<std::collections::HashSet<u32>>,
    /// When this node first saw each formerly held shard free, while it let the shard's
    /// standby take it first.
    deferred: Mutex<HashMap<u32, Instant>>,
    /// Shards taken over by promoting a standby (for tests and status).
    promotions: std::sync::atomic::AtomicU64,
    /// Active pins: tenant → its shard of its own (read from the catalog every round).
    pins: RwLock<HashMap<String, u32>>,
    /// Every pin record, as last read.
    pin_records: RwLock<Vec<Pin>>,
    /// Tenants this node is copying to a shard of their own now.
    moving: Mutex<std::collections::HashSet<String>>,
    /// Moves whose activation this node could not confirm: (pin, copier's revision).
    unsettled: Mutex<HashMap<String, (Pin, u64)>>,
    /// Tenants whose purge from their former shard is queued or running here.
    purging: Mutex<std::collections::HashSet<String>>,
    /// Runs the engines' async shutdowns from the coordination thread.
    runtime: NodeRuntime,
}

/// A running node; dropping it stops it as [`Node::stop`] does.
pub struct Node {
    inner: Arc<Inner>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
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
        // Multi-threaded (one worker) so the coordination thread and an operator's hand-off
        // may both wait on it at once.
        let catalog = Catalog::open(conn, &config.cluster, config.replicas)
            .context("opening the shard catalog")?;
        let policy = serde_json::to_vec(&config.engine.policy).context("encoding the policy")?;
        catalog.agree_on_policy(&policy, &config.engine.policy.version)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("episodic-node")
            .enable_all()
            .build()
            .context("starting the node's runtime")?;
        let cpu = match &config.engine.cpu_pool {
            Some(pool) => pool.clone(),
            None => CpuPool::new(config.engine.cpu_threads).context("building the cpu pool")?,
        };
        let coalescer = config.engine.coalescer_for(&embedder)?;
        let (open_tx, open_rx) = mpsc::channel();
        let inner = Arc::new(Inner {
            config,
            conn: conn.clone(),
            leases,
            catalog,
            embedder,
            cpu,
            coalescer,
            held: RwLock::new(HashMap::new()),
            lease_turn: Mutex::new(()),
            view: RwLock::new(ClusterView::default()),
            seen_holders: Mutex::new(HashMap::new()),
            first_round: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            opener: Mutex::new(Some(open_tx)),
            followers: RwLock::new(HashMap::new()),
            standing: Mutex::new(std::collections::HashSet::new()),
            deferred: Mutex::new(HashMap::new()),
            promotions: std::sync::atomic::AtomicU64::new(0),
            pins: RwLock::new(HashMap::new()),
            pin_records: RwLock::new(Vec::new()),
            moving: Mutex::new(std::collections::HashSet::new()),
            purging: Mutex::new(std::collections::HashSet::new()),
            unsettled: Mutex::new(HashMap::new()),
            runtime: NodeRuntime(Some(runtime)),
        });
        if let Err(e) = inner.refresh_pins() {
            tracing::warn!(error = %e, "reading the pinned tenants failed");
        }
        inner.announce()?;
        let worker = Arc::clone(&inner);
        let coordination = std::thread::Builder::new()
            .name("episodic-cluster".into())
            .spawn(move || worker.run())
            .context("starting the node's coordination thread")?;
        let worker = Arc::clone(&inner);
        let opener = std::thread::Builder::new()
            .name("episodic-shard-open".into())
            .spawn(move || worker.open_shards(&open_rx))
            .context("starting the node's shard opener")?;
        Ok(Node {
            inner,
            threads: Mutex::new(vec![coordination, opener]),
        })
    }

    /// This node's settings.
    pub fn config(&self) -> &NodeConfig {
        &self.inner.config
    }

    /// The shard `tenant` lives on: its pinned shard, else its hash's.
    pub fn shard_of(&self, tenant: &str) -> u32 {
        self.inner.shard_of(tenant)
    }

    /// Every shard of the cluster: the hashed ones, then the pinned ones, in order.
    pub fn shard_ids(&self) -> Vec<u32> {
        self.inner.shard_ids()
    }

    /// Every pin, as this node last read the catalog.
    pub fn pins(&self) -> Vec<Pin> {
        self.inner.pin_records.read().clone()
    }

    /// The engine serving `tenant`, if this node holds its shard and has caught up.
    pub fn engine_for(&self, tenant: &str) -> Option<Engine> {
        match self.route(tenant) {
            Route::Local(engine) => Some(engine),
            _ => None,
        }
    }

    /// Where `tenant`'s requests are served, as this node knows now.
    pub fn route(&self, tenant: &str) -> Route {
        if self.inner.moving.lock().contains(tenant) {
            return Route::Moving;
        }
        let shard = self.shard_of(tenant);
        if let Some(held) = self.inner.held.read().get(&shard) {
            return match &held.engine {
                Some(engine) => Route::Local(engine.clone()),
                None => Route::Opening,
            };
        }
        let view = self.inner.view.read();
        match view.owner_url(shard) {
            Some((node, _)) if node == self.inner.config.node_id => Route::Unowned,
            Some((node, url)) => Route::Remote {
                node: node.to_string(),
                url: url.to_string(),
            },
            None => Route::Unowned,
        }
    }

    /// Reads the cluster's view (and its pins) again now (after a forward found the owner
    /// moved).
    pub fn refresh_view(&self) -> Result<(), LeaseError> {
        self.inner.refresh_pins()?;
        self.inner.refresh_view()
    }

    /// The cluster as this node last read it.
    pub fn view(&self) -> ClusterView {
        self.inner.view.read().clone()
    }

    /// The engines this node serves, by shard, in order.
    pub fn engines(&self) -> Vec<(u32, Engine)> {
        let mut engines: Vec<(u32, Engine)> = self
            .inner
            .held
            .read()
            .iter()
            .filter_map(|(shard, h)| h.engine.clone().map(|e| (*shard, e)))
            .collect();
        engines.sort_unstable_by_key(|(shard, _)| *shard);
        engines
    }

    /// The shards this node serves (caught up), in order.
    pub fn owned_shards(&self) -> Vec<u32> {
        self.engines().into_iter().map(|(shard, _)| shard).collect()
    }

    /// The shards this node holds the lease of, serving or still opening.
    pub fn held_shards(&self) -> Vec<HeldShard> {
        let mut held: Vec<HeldShard> = self
            .inner
            .held
            .read()
            .iter()
            .map(|(shard, h)| HeldShard {
                shard: *shard,
                epoch: h.lease.epoch,
                serving: h.engine.is_some(),
            })
            .collect();
        held.sort_unstable_by_key(|h| h.shard);
        held
    }

    /// Ready: the node has taken its share once, and every shard it holds has caught up.
    pub fn ready(&self) -> bool {
        self.inner.first_round.load(Ordering::SeqCst)
            && self.inner.held.read().values().all(|h| h.engine.is_some())
    }

    /// The connection to the cluster.
    pub fn connection(&self) -> &NatsConnection {
        &self.inner.conn
    }

    /// Shards this node stands by for (following their streams), in order.
    pub fn standby_shards(&self) -> Vec<u32> {
        self.standbys()
            .into_iter()
            .map(|(shard, _)| shard)
            .collect()
    }

    /// Each shard this node stands by for, with the last log sequence its standby applied.
    pub fn standbys(&self) -> Vec<(u32, u64)> {
        let mut standbys: Vec<(u32, u64)> = self
            .inner
            .followers
            .read()
            .iter()
            .map(|(shard, f)| (*shard, f.next.load(Ordering::SeqCst).saturating_sub(1)))
            .collect();
        standbys.sort_unstable();
        standbys
    }

    /// How many shards this node took over by promoting its standby.
    pub fn promotions(&self) -> u64 {
        self.inner.promotions.load(Ordering::SeqCst)
    }

    /// The shards' generation records.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// Hands `shard`, which this node holds, to node `to`: marks the hand-off, stops the
    /// shard's engine and releases the lease; `to` takes it on its next round and replays
    /// the stream from its own last state. Fails if this node does not hold the shard.
    pub fn hand_off(&self, shard: u32, to: &str) -> Result<(), LeaseError> {
        if !self.inner.held.read().contains_key(&shard) {
            return Err(LeaseError::Held {
                shard,
                node: self.owner_of_shard(shard)?.unwrap_or_default(),
            });
        }
        self.inner.leases.hand_off(shard, to)?;
        self.inner.give_up(shard);
        Ok(())
    }

    /// Hands `shard` to `to` (as [`Node::hand_off`]) and waits up to `wait` for `to` to
    /// take its lease; whether it did. While it waits, the hand-off mark is renewed every
    /// third of the TTL, so a target slow to take the shard still finds it marked for
    /// itself, and no other node (this one included) takes it meanwhile. The mark lapses
    /// one TTL after the wait ends, so a target that died does not keep the shard free.
    pub fn move_shard(&self, shard: u32, to: &str, wait: Duration) -> Result<bool, LeaseError> {
        let started = Instant::now();
        self.hand_off(shard, to)?;
        let mut marked = Instant::now();
        while started.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(100));
            // One read of the shard's lease, not a refresh of the whole view.
            if self.owner_of_shard(shard).ok().flatten().as_deref() == Some(to) {
                return Ok(true);
            }
            if marked.elapsed() >= self.inner.config.lease_ttl / 3 {
                if let Err(e) = self.inner.leases.hand_off(shard, to) {
                    tracing::warn!(shard, error = %e, "renewing the hand-off mark failed");
                }
                marked = Instant::now();
            }
        }
        Ok(false)
    }

    /// The node holding `shard`'s lease now, as the bucket says (advisory).
    pub fn owner_of_shard(&self, shard: u32) -> Result<Option<String>, LeaseError> {
        Ok(self.inner.leases.holder(shard)?.map(|(node, _)| node))
    }

    /// Stops the node: its engines are shut down, then its leases released, so other nodes
    /// may take its shards at once.
    pub fn stop(&self) {
        self.halt(true);
    }

    /// Stops the node as a crash would look to the others: the engines stop, nothing is
    /// released, and the leases lapse after their TTL (for tests of failover).
    pub fn abandon(&self) {
        self.halt(false);
    }

    fn halt(&self, release: bool) {
        self.inner.stop.store(true, Ordering::SeqCst);
        self.inner.opener.lock().take();
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        if threads.is_empty() {
            return;
        }
        for thread in threads {
            let _ = thread.join();
        }
        let held: Vec<(u32, Held)> = self.inner.held.write().drain().collect();
        for (_, h) in held {
            h.writable.revoke();
            if let Some(engine) = &h.engine {
                self.inner.close(engine);
            }
            if release {
                let _ = self.inner.leases.release(&h.lease);
            }
        }
        let followers: Vec<(u32, Follower)> = self.inner.followers.write().drain().collect();
        for (_, f) in followers {
            self.inner.close(&f.engine);
        }
        crate::telemetry::cluster_shards_held(0);
        if release {
            let _ = self.inner.leases.withdraw(&self.inner.config.node_id);
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.halt(true);
    }
}

impl Inner {
    fn announce(&self) -> Result<(), LeaseError> {
        self.leases
            .announce(&self.config.node_id, &self.config.advertise_url)
    }

    /// The shard `tenant` lives on: its pinned shard, else its hash's.
    fn shard_of(&self, tenant: &str) -> u32 {
        match self.pins.read().get(tenant) {
            Some(shard) => *shard,
            None => shard_of(tenant, self.config.shards),
        }
    }

    /// Every shard: the hashed ones, then those of active pins.
    fn shard_ids(&self) -> Vec<u32> {
        let mut pinned: Vec<u32> = self.pins.read().values().copied().collect();
        pinned.sort_unstable();
        (0..self.config.shards).chain(pinned).collect()
    }

    /// How many shards the fair share divides.
    fn shard_count(&self) -> u32 {
        self.config.shards + self.pins.read().len() as u32
    }

    /// Reads the pins again.
    fn refresh_pins(&self) -> Result<(), LeaseError> {
        let records: Vec<Pin> = self.catalog.pins()?.into_iter().map(|(p, _)| p).collect();
        let active = records
            .iter()
            .filter(|p| p.state == PinState::Active)
            .map(|p| (p.tenant.clone(), p.shard))
            .collect();
        *self.pins.write() = active;
        *self.pin_records.write() = records;
        Ok(())
    }

    fn refresh_view(&self) -> Result<(), LeaseError> {
        let view = self.leases.view()?;
        {
            let mut seen = self.seen_holders.lock();
            for (shard, (holder, _)) in &view.shards {
                if holder != &self.config.node_id {
                    seen.insert(*shard, holder.clone());
                }
            }
        }
        *self.view.write() = view;
        Ok(())
    }

    /// The coordination loop: announce, renew, read the view, then take free shards up to
    /// the fair share, every third of the TTL.
    fn run(&self) {
        let tick = self.config.lease_ttl / 3;
        while !self.stop.load(Ordering::SeqCst) {
            if let Err(e) = self.announce() {
                tracing::warn!(error = %e, "announcing the node failed");
            }
            self.renew_all();
            if let Err(e) = self.refresh_pins() {
                tracing::warn!(error = %e, "reading the pinned tenants failed");
            }
            self.purge_moved();
            match self.refresh_view() {
                Ok(()) => {
                    self.take_free();
                    self.shed_excess();
                    self.tidy_dirs();
                    self.keep_standbys();
                }
                Err(e) => tracing::warn!(error = %e, "reading the cluster's view failed"),
            }
            self.first_round.store(true, Ordering::SeqCst);
            let until = Instant::now() + tick;
            while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    fn renew_all(&self) {
        let shards: Vec<u32> = self.held.read().keys().copied().collect();
        for shard in shards {
            let turn = self.lease_turn.lock();
            let Some(lease) = self.held.read().get(&shard).map(|h| h.lease.clone()) else {
                continue;
            };
            match self.leases.renew(&lease) {
                Ok(renewed) => {
                    crate::telemetry::lease_renewal("ok");
                    if let Some(h) = self.held.write().get_mut(&shard) {
                        h.writable.extend_to(self.writable_until(&renewed));
                        h.lease = renewed;
                    }
                }
                Err(e) => {
                    let expired = lease.renewed_at.elapsed() >= self.config.lease_ttl;
                    if matches!(e, LeaseError::Lost { .. }) || expired {
                        crate::telemetry::lease_renewal("lost");
                        tracing::warn!(shard, error = %e, "lost the lease: stopping the shard");
                        let gone = self.held.write().remove(&shard);
                        drop(turn);
                        if let Some(h) = gone {
                            h.writable.revoke();
                            if let Some(engine) = h.engine {
                                self.close(&engine);
                            }
                        }
                        crate::telemetry::cluster_shards_held(self.held.read().len());
                    } else {
                        crate::telemetry::lease_renewal("failed");
                        tracing::warn!(shard, error = %e, "renewing the lease failed; retrying");
                    }
                }
            }
        }
    }

    fn take_free(&self) {
        let live = self.view.read().nodes.len().max(1);
        let fair = self.shard_count().div_ceil(live as u32) as usize;
        let me = self.config.node_id.as_str();
        let (handed_here, handed_elsewhere): (Vec<u32>, Vec<u32>) = {
            let view = self.view.read();
            let here = view
                .handoffs
                .iter()
                .filter(|(_, to)| *to == me)
                .map(|(s, _)| *s);
            let elsewhere = view
                .handoffs
                .iter()
                .filter(|(_, to)| *to != me)
                .map(|(s, _)| *s);
            (here.collect(), elsewhere.collect())
        };
        let order = handed_here.iter().copied().chain(
            self.shard_ids()
                .into_iter()
                .filter(|s| !handed_here.contains(s)),
        );
        for shard in order {
            let moved_here = handed_here.contains(&shard);
            if self.stop.load(Ordering::SeqCst) || (!moved_here && self.held.read().len() >= fair) {
                return;
            }
            if handed_elsewhere.contains(&shard)
                || self.held.read().contains_key(&shard)
                || self.view.read().shards.contains_key(&shard)
            {
                self.deferred.lock().remove(&shard);
                continue;
            }
            if !moved_here && self.defers_to_standby(shard) {
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
            let previous = self.seen_holders.lock().remove(&shard);
            if let Some(previous) = previous {
                crate::telemetry::cluster_failover();
                tracing::info!(shard, from = %previous, "taking over the shard");
            }
            self.held.write().insert(
                shard,
                Held {
                    writable: WriteLease::until(self.writable_until(&lease)),
                    lease: lease.clone(),
                    engine: None,
                    moved_here,
                },
            );
            crate::telemetry::cluster_shards_held(self.held.read().len());
            let sent = self
                .opener
                .lock()
                .as_ref()
                .is_some_and(|tx| tx.send(Job::Serve(lease.clone())).is_ok());
            if !sent {
                self.held.write().remove(&shard);
                let _ = self.leases.release(&lease);
                return;
            }
        }
    }

    /// Whether this node leaves the free `shard` to the standby of its last owner for now:
    /// another live node is that standby, and the shard has been free, as this node saw it,
    /// for less than half a TTL.
    fn defers_to_standby(&self, shard: u32) -> bool {
        let Some(previous) = self.seen_holders.lock().get(&shard).cloned() else {
            return false;
        };
        let standby = {
            let view = self.view.read();
            standby_of(&previous, &view).map(str::to_string)
        };
        match standby {
            Some(s) if s != self.config.node_id => {
                let mut deferred = self.deferred.lock();
                let since = *deferred.entry(shard).or_insert_with(Instant::now);
                since.elapsed() < self.config.lease_ttl / 2
            }
            _ => false,
        }
    }

    /// Gives up shards beyond the fair share while other live nodes hold less than theirs
    /// (a node that joined), as many as they lack; shards an operator moved here stay.
    fn shed_excess(&self) {
        let view = self.view.read().clone();
        let me = self.config.node_id.as_str();
        let fair = self.shard_count().div_ceil(view.nodes.len().max(1) as u32) as usize;
        let held = self.held.read().len();
        if held <= fair {
            return;
        }
        // Only to nodes that announce themselves: a node that died stays live until its
        // announcement expires, and would otherwise be given shards it cannot take.
        let lacking: usize = view
            .fresh
            .iter()
            .filter(|n| n.as_str() != me)
            .map(|n| fair.saturating_sub(view.shards.values().filter(|(o, _)| o == n).count()))
            .sum();
        let shed = (held - fair).min(lacking);
        if shed == 0 {
            return;
        }
        let mut candidates: Vec<u32> = self
            .held
            .read()
            .iter()
            .filter(|(_, h)| h.engine.is_some() && !h.moved_here)
            .map(|(s, _)| *s)
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        for shard in candidates.into_iter().take(shed) {
            tracing::info!(shard, fair, "giving the shard up to even out the shares");
            self.give_up(shard);
        }
    }

    /// Keeps the shard directories true to the catalog: a held shard's marker follows its
    /// rotations; the directory of a shard this node does not hold is removed once its
    /// stream is not the shard's current generation any more (a rotation purged what it
    /// copied, so nothing erased outlives the rotation on any node's disk).
    fn tidy_dirs(&self) {
        let root = self.config.engine.data_dir.join("shards");
        let Ok(entries) = std::fs::read_dir(&root) else {
            return;
        };
        let generations = match self.catalog.all() {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(error = %e, "reading the shard catalog failed");
                return;
            }
        };
        for entry in entries.flatten() {
            let Some(shard) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let current = stream_name(
                &self.config.cluster,
                shard,
                generations.get(&shard).copied().unwrap_or(1),
            );
            let marker = entry.path().join(STREAM_MARKER);
            let recorded = std::fs::read_to_string(&marker).unwrap_or_default();
            if recorded.trim() == current {
                continue;
            }
            // A standby being opened has no marker yet, and a standby's copy is in use.
            if self.followers.read().contains_key(&shard) || self.standing.lock().contains(&shard) {
                continue;
            }
            let held = self.held.read().get(&shard).map(|h| h.engine.is_some());
            match held {
                Some(true) => {
                    if let Err(e) = crate::fsutil::write_atomic(&marker, current.as_bytes(), 0o600)
                    {
                        tracing::warn!(shard, error = %e, "recording the shard's stream failed");
                    }
                }
                Some(false) => {}
                None => {
                    tracing::info!(shard, stream = %current, "removing a stale copy of the shard");
                    if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                        tracing::warn!(shard, error = %e, "removing a stale shard directory failed");
                    }
                }
            }
        }
    }

    /// Stops serving `shard` and releases its lease, so another node may take it at once.
    fn give_up(&self, shard: u32) -> bool {
        let held = {
            let _turn = self.lease_turn.lock();
            self.held.write().remove(&shard)
        };
        let Some(held) = held else {
            return false;
        };
        held.writable.revoke();
        if let Some(engine) = &held.engine {
            self.close(engine);
        }
        if let Err(e) = self.leases.release(&held.lease) {
            tracing::warn!(shard, error = %e, "releasing the lease failed; it lapses after its TTL");
        }
        crate::telemetry::cluster_shards_held(self.held.read().len());
        true
    }

    /// The standby of each shard another node owns is the first live node after the owner
    /// in id order (wrapping around). This node opens a standby of each shard it is the
    /// standby of, steps each standby it has along its stream, and closes those it is no
    /// longer the standby of.
    fn keep_standbys(&self) {
        let view = self.view.read().clone();
        let me = self.config.node_id.as_str();
        let wanted: std::collections::HashSet<u32> =
            if view.nodes.len() < 2 || !self.config.standbys {
                Default::default()
            } else {
                view.shards
                    .iter()
                    .filter(|(shard, (owner, _))| {
                        owner != me
                            && !self.held.read().contains_key(shard)
                            && standby_of(owner, &view) == Some(me)
                    })
                    .map(|(shard, _)| *shard)
                    .collect()
            };
        let unwanted: Vec<u32> = self
            .followers
            .read()
            .keys()
            .filter(|s| !wanted.contains(s))
            .copied()
            .collect();
        for shard in unwanted {
            if let Some(f) = self.followers.write().remove(&shard) {
                tracing::info!(shard, "no longer the shard's standby");
                self.close(&f.engine);
            }
        }
        for shard in &wanted {
            let known =
                self.followers.read().contains_key(shard) || !self.standing.lock().insert(*shard);
            if known {
                continue;
            }
            let sent = self
                .opener
                .lock()
                .as_ref()
                .is_some_and(|tx| tx.send(Job::Stand(*shard)).is_ok());
            if !sent {
                self.standing.lock().remove(shard);
            }
        }
        let followers: Vec<(u32, Engine)> = self
            .followers
            .read()
            .iter()
            .map(|(s, f)| (*s, f.engine.clone()))
            .collect();
        for (shard, engine) in followers {
            let followed = self.runtime.block_on(engine.follow());
            if let Ok(next) = &followed {
                if let Some(f) = self.followers.read().get(&shard) {
                    f.next.store(*next, Ordering::SeqCst);
                }
            }
            if let Err(e) = followed {
                // A rotation deleted the stream it followed, or the stream is unreachable:
                // the next round opens a standby afresh.
                tracing::warn!(shard, error = %e, "the standby stopped following");
                if let Some(f) = self.followers.write().remove(&shard) {
                    self.close(&f.engine);
                }
            }
        }
    }

    /// The opener thread: opens each shard handed over, one at a time, and serves it only if
    /// the lease it was opened under is still the one held; opens standbys.
    fn open_shards(&self, jobs: &mpsc::Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            match job {
                Job::Serve(lease) => self.serve_shard(&lease),
                Job::Stand(shard) => self.open_standby(shard),
                Job::Purge(pin) => self.purge(&pin),
            }
        }
    }

    fn open_standby(&self, shard: u32) {
        let started = Instant::now();
        let writable = WriteLease::until(Instant::now());
        writable.revoke();
        let opened = self.open_shard(shard, writable.clone(), true);
        self.standing.lock().remove(&shard);
        match opened {
            Ok(engine) => {
                if self.held.read().contains_key(&shard) || self.stop.load(Ordering::SeqCst) {
                    self.close(&engine);
                    return;
                }
                tracing::info!(
                    shard,
                    opened_ms = started.elapsed().as_millis() as u64,
                    "standing by for the shard"
                );
                let next = std::sync::atomic::AtomicU64::new(0);
                self.followers.write().insert(
                    shard,
                    Follower {
                        engine,
                        next,
                        writable,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(shard, error = %format!("{e:#}"), "opening a standby failed");
            }
        }
    }

    /// Serves the shard of `lease`: promotes its standby when this node has one (a replay
    /// of what the standby had not applied yet), else opens it (a replay of the stream).
    fn serve_shard(&self, lease: &Lease) {
        let shard = lease.shard;
        let started = Instant::now();
        let current = |held: &HashMap<u32, Held>| {
            held.get(&shard)
                .is_some_and(|h| h.lease.epoch == lease.epoch)
        };
        if let Some(follower) = self.followers.write().remove(&shard) {
            let promoted = {
                let mut held = self.held.write();
                match held.get_mut(&shard) {
                    Some(h) if h.lease.epoch == lease.epoch => {
                        follower.writable.extend_to(self.writable_until(&h.lease));
                        h.writable = follower.writable.clone();
                        true
                    }
                    _ => false,
                }
            };
            if promoted {
                match self.runtime.block_on(follower.engine.promote()) {
                    Ok(_) => {
                        let mut held = self.held.write();
                        if current(&held) && !self.stop.load(Ordering::SeqCst) {
                            if let Some(h) = held.get_mut(&shard) {
                                h.engine = Some(follower.engine);
                            }
                            drop(held);
                            self.promotions.fetch_add(1, Ordering::SeqCst);
                            tracing::info!(
                                shard,
                                epoch = lease.epoch,
                                opened_ms = started.elapsed().as_millis() as u64,
                                "serving the shard (promoted its standby)"
                            );
                            return;
                        }
                        drop(held);
                        follower.writable.revoke();
                        self.close(&follower.engine);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(shard, error = %e, "promoting the standby failed; opening the shard");
                        // The shard opens under a write lease of its own; the standby's ends.
                        if let Some(h) = self.held.write().get_mut(&shard) {
                            h.writable = WriteLease::until(self.writable_until(&h.lease));
                        }
                        follower.writable.revoke();
                        self.close(&follower.engine);
                    }
                }
            } else {
                self.close(&follower.engine);
            }
        }
        let writable = match self.held.read().get(&shard) {
            Some(h) if h.lease.epoch == lease.epoch => h.writable.clone(),
            _ => return,
        };
        match self.open_shard(shard, writable, false) {
            Ok(engine) => {
                let mut held = self.held.write();
                match held.get_mut(&shard) {
                    Some(h)
                        if h.lease.epoch == lease.epoch && !self.stop.load(Ordering::SeqCst) =>
                    {
                        h.engine = Some(engine);
                        drop(held);
                        tracing::info!(
                            shard,
                            epoch = lease.epoch,
                            opened_ms = started.elapsed().as_millis() as u64,
                            "serving the shard"
                        );
                    }
                    _ => {
                        drop(held);
                        tracing::warn!(shard, "the lease was lost while the shard opened");
                        self.close(&engine);
                    }
                }
            }
            Err(e) => {
                tracing::error!(shard, error = %format!("{e:#}"), "opening the shard failed");
                let gone = {
                    let _turn = self.lease_turn.lock();
                    let mut held = self.held.write();
                    match held.get(&shard) {
                        Some(h) if h.lease.epoch == lease.epoch => held.remove(&shard),
                        _ => None,
                    }
                };
                if let Some(h) = gone {
                    let _ = self.leases.release(&h.lease);
                }
            }
        }
    }

    /// Appends under `lease` stop a tenth of the TTL before it could lapse in the bucket
    /// (the bucket's clock and this node's may drift apart that much).
    fn writable_until(&self, lease: &Lease) -> Instant {
        lease.renewed_at + self.config.lease_ttl.mul_f64(0.9)
    }

    /// Opens `shard`'s engine on its current generation. A directory left from another
    /// generation is removed first (rebuilt from the stream: its indexes may hold what a
    /// rotation purged); one from this generation is caught up from where it stopped.
    fn open_shard(
        &self,
        shard: u32,
        writable: WriteLease,
        follower: bool,
    ) -> anyhow::Result<Engine> {
        let dir = shard_dir(&self.config.engine.data_dir, shard);
        let stream = self.catalog.stream(shard)?;
        let marker = dir.join(STREAM_MARKER);
        if dir.exists() && std::fs::read_to_string(&marker).unwrap_or_default().trim() != stream {
            tracing::info!(shard, stream = %stream, "rebuilding the shard from its stream");
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        let mut config = self.config.engine.clone();
        config.data_dir = dir;
        config.cpu_pool = Some(self.cpu.clone());
        config.coalescer = Some(self.coalescer.clone());
        config.follower = follower;
        config.log = LogLocation::Stream {
            conn: self.conn.clone(),
            name: stream.clone(),
            replicas: self.config.replicas,
            lease: Some(writable.clone()),
            generations: Some(Arc::new(self.catalog.rotation(shard))),
        };
        config.audit_log = LogLocation::Stream {
            conn: self.conn.clone(),
            name: audit_stream_name(&self.config.cluster, shard),
            replicas: self.config.replicas,
            lease: Some(writable),
            generations: None,
        };
        let engine = Engine::open(config, Arc::clone(&self.embedder))?;
        crate::fsutil::write_atomic(&marker, stream.as_bytes(), 0o600)
            .with_context(|| format!("writing {}", marker.display()))?;
        Ok(engine)
    }

    fn close(&self, engine: &Engine) {
        self.runtime.block_on(engine.shutdown());
    }
}

/// The node's own runtime, which may be dropped anywhere: the last handle to a node can go
/// away on an async thread (the server's), where dropping a runtime the usual way panics.
struct NodeRuntime(Option<tokio::runtime::Runtime>);

impl std::ops::Deref for NodeRuntime {
    type Target = tokio::runtime::Runtime;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for NodeRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The standby of a shard `owner` holds: the first live node after it in id order,
/// wrapping around (`None` with no other live node).
fn standby_of<'a>(owner: &str, view: &'a ClusterView) -> Option<&'a str> {
    let others = || view.nodes.keys().filter(|n| n.as_str() != owner);
    others()
        .find(|n| n.as_str() > owner)
        .or_else(|| others().next())
        .map(String::as_str)
}

/// The file in a shard's directory naming the stream (and so the generation) its derived
/// state was built from.
const STREAM_MARKER: &str = "STREAM";

/// The stream holding `shard`'s audit trail (every generation of the shard's log shares it).
pub fn audit_stream_name(cluster: &str, shard: u32) -> String {
    format!("{cluster}_{shard}_AUDIT")
}

/// The directory of `shard`'s engine under a node's data directory.
pub fn shard_dir(data_dir: &std::path::Path, shard: u32) -> PathBuf {
    data_dir.join("shards").join(shard.to_string())
}
