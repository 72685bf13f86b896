//! The per-tenant HNSW graphs of graph recall, as recall reads them: one hnsw_rs graph
//! ([`HnswIndex`]) per tenant large enough for one, each over that tenant's vectors only,
//! so a query scoped to its tenant walks no other tenant's points. Recall searches each
//! graph's read-only copy ([`FrozenGraph`]), taken when the set was made; the live graph
//! is what the next update extends.
//!
//! Invariants:
//! - a tenant's copy holds exactly its vectors with an internal id below
//!   [`TenantGraphs::upto`] (the live graph may hold more: graphs grow in place);
//! - a graph holds only its tenant's vectors, keyed by internal id; it never forgets one, so
//!   a hit is a candidate only after its head passed the scope, the grant and the view;
//! - [`TenantGraphs::count`] is the tenant's number of vectors below `upto`, whether or not
//!   it has a graph;
//! - the set is replaced whole (an atomic swap) and its graphs only ever gain points;
//!   compaction, which purges vectors, drops every graph.

use std::collections::HashMap;
use std::sync::Arc;

use crate::index::vector::{FrozenGraph, HnswIndex};

/// The graphs of the tenants that have one, and every tenant's vector count.
#[derive(Debug, Default)]
pub struct TenantGraphs {
    /// See the module invariants.
    upto: u32,
    /// Vectors per tenant number among ids below `upto`.
    counts: HashMap<u32, u32>,
    /// The graph of each tenant that has one, by tenant number.
    graphs: HashMap<u32, Arc<HnswIndex>>,
    /// The copy recall searches of each graph, by tenant number.
    frozen: HashMap<u32, Arc<FrozenGraph>>,
}

impl TenantGraphs {
    /// A set covering the ids below `upto`, from its counts, graphs and their copies
    /// (one per graph, taken after the graph received every id below `upto`).
    pub fn new(
        upto: u32,
        counts: HashMap<u32, u32>,
        graphs: HashMap<u32, Arc<HnswIndex>>,
        frozen: HashMap<u32, Arc<FrozenGraph>>,
    ) -> Self {
        TenantGraphs {
            upto,
            counts,
            graphs,
            frozen,
        }
    }

    /// Ids below this are covered (see the module invariants).
    pub fn upto(&self) -> u32 {
        self.upto
    }

    /// The searchable copy of `tenant`'s graph, if it has one.
    pub fn graph(&self, tenant: u32) -> Option<&Arc<FrozenGraph>> {
        self.frozen.get(&tenant)
    }

    /// The vectors of `tenant` among ids below [`Self::upto`].
    pub fn count(&self, tenant: u32) -> usize {
        self.counts.get(&tenant).copied().unwrap_or(0) as usize
    }

    /// Every tenant's count (to carry them into the next set).
    pub fn counts(&self) -> &HashMap<u32, u32> {
        &self.counts
    }

    /// Every graph, by tenant number (to carry them into the next set).
    pub fn graphs(&self) -> &HashMap<u32, Arc<HnswIndex>> {
        &self.graphs
    }

    /// Every graph's copy, by tenant number (to carry them into the next set).
    pub fn frozen(&self) -> &HashMap<u32, Arc<FrozenGraph>> {
        &self.frozen
    }

    /// Points held by all graphs.
    pub fn points(&self) -> usize {
        self.graphs.values().map(|g| g.len()).sum()
    }
}
