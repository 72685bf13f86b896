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
//!   compaction, which purges vectors, drops every graph;
//! - each copy has its [`GraphKeys`], made from the table's heads of its points when the
//!   copy was taken.

use std::collections::HashMap;
use std::sync::Arc;

use super::head::{Head, HeadFilter, NONE};
use super::table::Table;
use crate::index::vector::calibrate::GraphTuning;
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
    /// The scope keys of each copy, by tenant number.
    keys: HashMap<u32, Arc<GraphKeys>>,
    /// The widths each graph was measured to need, by tenant number.
    tunings: HashMap<u32, GraphTuning>,
}

impl TenantGraphs {
    /// A set covering the ids below `upto`, from its counts, graphs and their copies
    /// (one per graph, taken after the graph received every id below `upto`), the copies'
    /// keys and the widths measured on them.
    pub fn new(
        upto: u32,
        counts: HashMap<u32, u32>,
        graphs: HashMap<u32, Arc<HnswIndex>>,
        frozen: HashMap<u32, Arc<FrozenGraph>>,
        (keys, tunings): (HashMap<u32, Arc<GraphKeys>>, HashMap<u32, GraphTuning>),
    ) -> Self {
        TenantGraphs {
            upto,
            counts,
            graphs,
            frozen,
            keys,
            tunings,
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

    /// The scope keys of `tenant`'s copy, if it has one.
    pub fn keys(&self, tenant: u32) -> Option<&Arc<GraphKeys>> {
        self.keys.get(&tenant)
    }

    /// The widths `tenant`'s graph was measured to need, if it was measured.
    pub fn tuning(&self, tenant: u32) -> Option<&GraphTuning> {
        self.tunings.get(&tenant)
    }

    /// Graphs whose widths were measured, and how many of those no width sufficed for.
    pub fn measured(&self) -> (usize, usize) {
        let unsearched = self.tunings.values().filter(|t| t.plain.is_none()).count();
        (self.tunings.len(), unsearched)
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

/// Each point's scope fields in its graph copy's node order (what a [`HeadFilter`] reads of
/// a head), and the nodes under each actor, project and event type: a walk within a scope
/// asks them which points it may take, so the scope is never listed from the index.
///
/// Invariant: node `i`'s fields are those of the head of the copy's `ids()[i]` when the
/// keys were made. An event's scope fields never change after it is written, and a
/// deleted event's head has no tenant, so a scope's nodes are its events in the copy that
/// were live then; whether a point found is still live, granted and visible is checked on
/// its head afterwards.
#[derive(Debug, Default)]
pub struct GraphKeys {
    tenants: Vec<u32>,
    actors: Vec<u32>,
    projects: Vec<u32>,
    kinds: Vec<u32>,
    occurred_ms: Vec<i64>,
    by_actor: HashMap<u32, Vec<u32>>,
    by_project: HashMap<u32, Vec<u32>>,
    by_kind: HashMap<u32, Vec<u32>>,
}

impl GraphKeys {
    /// The keys of the points `ids` (a copy's ids in node order), from `table`'s heads.
    pub fn of(ids: &[u32], table: &Table) -> Self {
        let mut keys = GraphKeys::default();
        for (node, &doc) in ids.iter().enumerate() {
            let h = table.head(doc);
            let node = node as u32;
            keys.tenants.push(h.tenant);
            keys.actors.push(h.actor);
            keys.projects.push(h.project);
            keys.kinds.push(h.kind);
            keys.occurred_ms.push(h.occurred_ms);
            if h.tenant != NONE {
                keys.by_actor.entry(h.actor).or_default().push(node);
                keys.by_project.entry(h.project).or_default().push(node);
                keys.by_kind.entry(h.kind).or_default().push(node);
            }
        }
        keys
    }

    /// Points keyed.
    pub fn len(&self) -> usize {
        self.tenants.len()
    }

    /// True when no point is keyed.
    pub fn is_empty(&self) -> bool {
        self.tenants.is_empty()
    }

    /// The nodes whose events `filter` matches, one bit per node: the nodes under the
    /// filter's list (actors, projects or event types) that holds the fewest, each checked
    /// on its other fields; every node checked when the filter has no list.
    pub fn select(&self, filter: &HeadFilter) -> NodeSet {
        let mut bits = vec![0u64; self.len().div_ceil(64)];
        // The filter's own test, on a head that holds node `i`'s keys (the fields it reads).
        let matches = |i: usize| {
            filter.matches(&Head {
                tenant: self.tenants[i],
                actor: self.actors[i],
                project: self.projects[i],
                kind: self.kinds[i],
                occurred_ms: self.occurred_ms[i],
                ..Head::gone(0)
            })
        };
        let mut set = |i: usize| {
            if matches(i) {
                bits[i / 64] |= 1 << (i % 64);
            }
        };
        let lists = [
            (&filter.actors, &self.by_actor),
            (&filter.projects, &self.by_project),
            (&filter.kinds, &self.by_kind),
        ];
        let posted = |values: &[u32], by: &HashMap<u32, Vec<u32>>| -> usize {
            values.iter().map(|v| by.get(v).map_or(0, Vec::len)).sum()
        };
        let narrowest = lists
            .iter()
            .filter_map(|(list, by)| list.as_deref().map(|l| (l, *by)))
            .min_by_key(|(values, by)| posted(values, by));
        match narrowest {
            Some((values, by)) => {
                for nodes in values.iter().filter_map(|v| by.get(v)) {
                    nodes.iter().for_each(|&n| set(n as usize));
                }
            }
            None => (0..self.len()).for_each(set),
        }
        NodeSet(bits)
    }
}

/// Nodes of a graph copy, one bit each ([`GraphKeys::select`]).
#[derive(Debug)]
pub struct NodeSet(Vec<u64>);

impl NodeSet {
    /// Whether `node` is in the set.
    pub fn contains(&self, node: u32) -> bool {
        self.0
            .get(node as usize / 64)
            .is_some_and(|w| w & (1 << (node % 64)) != 0)
    }

    /// Nodes in the set.
    pub fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
}
