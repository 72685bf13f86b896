//! The per-tenant HNSW graphs of graph recall, as recall reads them: one hnsw_rs graph
//! ([`HnswIndex`]) per tenant large enough for one, each over that tenant's vectors only,
//! so a query scoped to its tenant walks no other tenant's points.
//!
//! Invariants:
//! - every vector with an internal id below [`TenantGraphs::upto`] whose tenant has a graph
//!   is in that graph (ids at or above it may be too: graphs grow in place, and a reader of
//!   an older set sees their newer points, which its own tail then repeats);
//! - a graph holds only its tenant's vectors, keyed by internal id; it never forgets one, so
//!   a hit is a candidate only after its head passed the scope, the grant and the view;
//! - [`TenantGraphs::count`] is the tenant's number of vectors below `upto`, whether or not
//!   it has a graph;
//! - the set is replaced whole (an atomic swap) and its graphs only ever gain points;
//!   compaction, which purges vectors, drops every graph.

use std::collections::HashMap;
use std::sync::Arc;

use crate::index::vector::HnswIndex;

/// The graphs of the tenants that have one, and every tenant's vector count.
#[derive(Debug, Default)]
pub struct TenantGraphs {
    /// See the module invariants.
    upto: u32,
    /// Vectors per tenant number among ids below `upto`.
    counts: HashMap<u32, u32>,
    /// The graph of each tenant that has one, by tenant number.
    graphs: HashMap<u32, Arc<HnswIndex>>,
}

impl TenantGraphs {
    /// A set covering the ids below `upto`, from its counts and graphs.
    pub fn new(upto: u32, counts: HashMap<u32, u32>, graphs: HashMap<u32, Arc<HnswIndex>>) -> Self {
        TenantGraphs {
            upto,
            counts,
            graphs,
        }
    }

    /// Ids below this are covered (see the module invariants).
    pub fn upto(&self) -> u32 {
        self.upto
    }

    /// The graph of `tenant`, if it has one.
    pub fn graph(&self, tenant: u32) -> Option<&Arc<HnswIndex>> {
        self.graphs.get(&tenant)
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

    /// Points held by all graphs.
    pub fn points(&self) -> usize {
        self.graphs.values().map(|g| g.len()).sum()
    }
}
