//! Which engine serves a request: the one engine of a single node, or, in cluster mode, the
//! engine of the tenant's shard on this node.
//!
//! Invariants: an engine is handed out only for a tenant whose shard it serves (in cluster
//! mode, only while this node holds the shard's lease and has caught up); a tenant whose
//! shard is served elsewhere, between owners or still catching up gets a retryable 503
//! (`not_ready` with `Retry-After`), never another shard's engine; requests reach this
//! point for another node's shard only when the owner moved while they were being
//! forwarded (`api`'s forwarding sends them to the owner first).

use std::sync::{Arc, OnceLock};

use crate::cluster::node::Route;
use crate::cluster::Node;
use crate::engine::{Engine, EngineConfig};
use crate::error::ErrorCode;
use crate::wire::Problem;

/// Seconds a client is told to wait before retrying a request for a shard between owners.
pub const SHARD_RETRY_AFTER_SECS: u64 = 1;

/// The engines a process serves from, set once they have loaded.
#[derive(Clone)]
pub enum Engines {
    /// One engine for every tenant.
    Single(Arc<OnceLock<Engine>>),
    /// A cluster node's engines, one per shard it holds.
    Cluster(Arc<OnceLock<Arc<Node>>>),
}

fn loading() -> Problem {
    Problem::new(
        ErrorCode::NotReady,
        "the engine is still loading; retry in a few seconds",
    )
}

fn moving(detail: &str) -> Problem {
    Problem::new(ErrorCode::NotReady, detail).with_retry_after(SHARD_RETRY_AFTER_SECS)
}

impl Engines {
    /// A single node's slot, empty until its engine has loaded.
    pub fn single() -> Self {
        Engines::Single(Arc::new(OnceLock::new()))
    }

    /// A single node's slot holding `engine`.
    pub fn of(engine: Engine) -> Self {
        let slot = OnceLock::new();
        let _ = slot.set(engine);
        Engines::Single(Arc::new(slot))
    }

    /// The cluster node, once started.
    pub fn node(&self) -> Option<&Arc<Node>> {
        match self {
            Engines::Single(_) => None,
            Engines::Cluster(node) => node.get(),
        }
    }

    /// The engine serving `tenant` here.
    pub fn for_tenant(&self, tenant: &str) -> Result<Engine, Problem> {
        match self {
            Engines::Single(slot) => slot.get().cloned().ok_or_else(loading),
            Engines::Cluster(node) => {
                let node = node.get().ok_or_else(loading)?;
                match node.route(tenant) {
                    Route::Local(engine) => Ok(engine),
                    Route::Opening => Err(moving("the tenant's shard is catching up on this node")),
                    Route::Remote { .. } | Route::Unowned => Err(moving(
                        "the tenant's shard is moving between nodes; retry shortly",
                    )),
                    Route::Moving => Err(moving(
                        "the tenant is moving to a shard of its own; retry shortly",
                    )),
                }
            }
        }
    }

    /// Every engine served here (a single node's one, or a cluster node's per shard).
    pub fn local(&self) -> Result<Vec<Engine>, Problem> {
        match self {
            Engines::Single(slot) => Ok(vec![slot.get().cloned().ok_or_else(loading)?]),
            Engines::Cluster(node) => {
                let node = node.get().ok_or_else(loading)?;
                Ok(node.engines().into_iter().map(|(_, e)| e).collect())
            }
        }
    }

    /// The engine settings in force (in cluster mode, those every shard opens with).
    pub fn config(&self) -> Result<EngineConfig, Problem> {
        match self {
            Engines::Single(slot) => Ok(slot.get().ok_or_else(loading)?.config().clone()),
            Engines::Cluster(node) => Ok(node.get().ok_or_else(loading)?.config().engine.clone()),
        }
    }

    /// Whether requests can be served: the engine loaded, or the node has taken its share
    /// of the shards and every shard it holds has caught up.
    pub fn ready(&self) -> bool {
        match self {
            Engines::Single(slot) => slot.get().is_some(),
            Engines::Cluster(node) => node.get().is_some_and(|n| n.ready()),
        }
    }
}
