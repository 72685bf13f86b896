//! The planner: which candidate source answers a recall, chosen in one place.
//!
//! A request that asks for `exact` skips 1 to 3. Sources, in this order:
//! 1. the scope's tenant's own HNSW graph (on by default; built in the background once the
//!    tenant holds `graph_min_vectors`), when the tenant has one, heads can decide the
//!    filter, the index counts more than `exact_max_candidates` in scope, the scope is at
//!    least `graph_min_share` of the tenant, the cost model expects the search to cost less
//!    than scoring every candidate and than the partition probe of 2 (which is then taken
//!    instead), and at least k candidates remain after stale suppression (approximate
//!    ranking, exact scope: `path: "graph"`);
//! 2. the partition lists nearest the query (on by default; built in the background once
//!    the store holds `partition_min_vectors`), when a partition is built, heads can decide
//!    the filter, the index counts more than `exact_max_candidates` in scope (by term
//!    statistics, without listing a broad scope), the cost model ([`super::cost`]) expects
//!    the probe to cost less than scoring every candidate, and at least k candidates remain
//!    after stale suppression (approximate ranking, exact scope: `path: "partition"`);
//! 3. filtered HNSW over the visible in-scope candidates, when approximate recall is on, the
//!    scope is broad and a large enough share of all vectors, and HNSW returns a full list
//!    (approximate: `path: "hnsw"`; a short list falls back to scoring all:
//!    `hnsw_fallback_exact`);
//! 4. every visible in-scope candidate (exact: `path: "exact"`), the default.
//!
//! Invariant: whatever the source, every candidate passed the scope filter, the grant and
//! the view on its head in the recall's one snapshot; only the ranking of 1 to 3 is
//! approximate, and the response says which path answered.

use std::collections::HashMap;

use serde::Serialize;

use super::config::RecallConfig;
use super::graph::{graph_pick, graph_scope, GraphPick};
use super::lexical::Bm25;
use super::partition::partition_scope;
use super::scope::{InScope, SearchError};
use super::stale::apply_staleness;
use crate::index::vector::IdSet;
use crate::rank::RankConfig;
use crate::read::{Access, Head, Snapshot, Visibility};

/// Which vector path answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VectorPath {
    /// Every candidate scored.
    Exact,
    /// Filtered HNSW search (approximate; only with `approximate` recall enabled).
    Hnsw,
    /// HNSW returned too short a list; every candidate scored.
    HnswFallbackExact,
    /// The members of the vector partitions nearest the query (approximate; only with
    /// `partitioned` recall enabled).
    Partition,
    /// The nearest points in the tenant's own HNSW graph (approximate; only with tenant
    /// graphs enabled).
    Graph,
}

impl VectorPath {
    /// Whether the path scores every visible in-scope candidate, so the answer is the exact
    /// in-scope top k.
    pub fn is_exact(self) -> bool {
        matches!(self, VectorPath::Exact | VectorPath::HnswFallbackExact)
    }

    /// The snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            VectorPath::Exact => "exact",
            VectorPath::Hnsw => "hnsw",
            VectorPath::HnswFallbackExact => "hnsw_fallback_exact",
            VectorPath::Partition => "partition",
            VectorPath::Graph => "graph",
        }
    }
}

/// `(id, (low, high))`: code bounds of candidates, by id, that a partition probe read from
/// its lists' own copies of the codes; ranking reads the others from the store.
pub(super) type KnownBounds = Vec<(u32, (f32, f32))>;

/// What the planner needs of a recall.
pub(super) struct Planning<'a> {
    pub(super) snap: &'a Snapshot<'a>,
    pub(super) config: &'a RecallConfig,
    pub(super) rank: &'a RankConfig,
    /// The grant in head units; `None` when its tenant never held an event.
    pub(super) access: Option<&'a Access>,
    pub(super) in_scope: &'a InScope<'a>,
    pub(super) bm25: &'a Bm25<'a>,
    pub(super) vis: &'a Visibility,
    /// The unit query vector.
    pub(super) query: &'a [f32],
    /// Results asked for.
    pub(super) k: usize,
    /// Keep stale events (marked) instead of dropping them.
    pub(super) keep_stale: bool,
    /// The caller asked for the exact path (`exact: true`): no approximate source.
    pub(super) force_exact: bool,
}

/// The planner's choice: the candidates and the path that found them.
#[derive(Debug)]
pub(super) struct Plan {
    /// Which path answers.
    pub(super) path: VectorPath,
    /// The visible in-scope candidates after stale suppression, by id (their number is the
    /// response's `candidates`).
    pub(super) heads: Vec<Head>,
    /// The subset of `heads` filtered HNSW chose (path `hnsw`); `None`: all are ranked.
    pub(super) subset: Option<Vec<Head>>,
    /// Stale events kept, with the id of the newer event.
    pub(super) stale: HashMap<u32, String>,
    /// Code bounds the candidate path has read already (see [`KnownBounds`]).
    pub(super) known: KnownBounds,
}

impl Plan {
    /// The candidates to rank.
    pub(super) fn set(&self) -> &[Head] {
        self.subset.as_deref().unwrap_or(&self.heads)
    }
}

/// Chooses the candidate source and gathers its candidates (see the module docs).
pub(super) fn plan(p: &Planning<'_>) -> Result<Plan, SearchError> {
    let exact = |heads, stale| Plan {
        path: VectorPath::Exact,
        heads,
        subset: None,
        stale,
        known: Vec::new(),
    };
    // A tenant that never held an event: nothing to score, on the exact path.
    let Some(access) = p.access else {
        return Ok(exact(Vec::new(), HashMap::new()));
    };
    if !p.force_exact {
        // The graph's expected cost is known before either source reads a vector: the
        // partition lists answer only if they are expected to cost less still.
        let graph = graph_pick(p.snap, p.config, p.in_scope, p.k)?;
        if let Some(plan) = partitioned(p, access, graph.as_ref().map(|g| g.cost_ns))? {
            return Ok(plan);
        }
        if let Some(pick) = graph {
            if let Some(plan) = graphed(p, access, &pick)? {
                return Ok(plan);
            }
        }
    }
    let heads = p.in_scope.visible(access, p.vis)?;
    let (heads, stale) = apply_staleness(p.snap, p.config, access, heads, p.vis, p.keep_stale);
    let mut plan = exact(heads, stale);
    if !p.force_exact && broad_for_hnsw(p, plan.heads.len()) {
        match hnsw_set(p, &plan.heads)? {
            Some(set) => (plan.subset, plan.path) = (Some(set), VectorPath::Hnsw),
            None => plan.path = VectorPath::HnswFallbackExact,
        }
    }
    Ok(plan)
}

/// The tenant graph source's candidates, or `None` when it does not apply or, after stale
/// suppression, holds fewer than k.
fn graphed(
    p: &Planning<'_>,
    access: &Access,
    pick: &GraphPick<'_>,
) -> Result<Option<Plan>, SearchError> {
    let lexical = (p.rank.lexical_share > 0.0).then_some(p.bm25);
    let found = graph_scope(p.snap, pick, access, (p.query, lexical), p.vis, p.k)?;
    Ok(found.and_then(|heads| approximate(p, access, VectorPath::Graph, heads, Vec::new())))
}

/// An approximate source's plan from its candidates: stale suppression applied, or `None`
/// when fewer than k remain.
fn approximate(
    p: &Planning<'_>,
    access: &Access,
    path: VectorPath,
    heads: Vec<Head>,
    known: KnownBounds,
) -> Option<Plan> {
    let (heads, stale) = apply_staleness(p.snap, p.config, access, heads, p.vis, p.keep_stale);
    (heads.len() >= p.k).then_some(Plan {
        path,
        heads,
        subset: None,
        stale,
        known,
    })
}

/// The partition source's candidates, or `None` when it does not apply, is not expected to
/// cost less than `ceiling_ns` (another source's estimate), or, after stale suppression,
/// holds fewer than k (only the exact path can then tell whether k exist).
fn partitioned(
    p: &Planning<'_>,
    access: &Access,
    ceiling_ns: Option<u64>,
) -> Result<Option<Plan>, SearchError> {
    let lexical = (p.rank.lexical_share > 0.0).then_some(p.bm25);
    let found = partition_scope(
        p.snap,
        (p.config, ceiling_ns),
        access,
        p.in_scope,
        (p.query, lexical),
        p.vis,
        p.k,
    )?;
    Ok(
        found
            .and_then(|(heads, known)| approximate(p, access, VectorPath::Partition, heads, known)),
    )
}

/// Whether `n` visible candidates call for filtered HNSW: approximate recall on, more than
/// `exact_max_candidates`, at least `hnsw_min_fraction` of all vectors, and k > 0.
fn broad_for_hnsw(p: &Planning<'_>, n: usize) -> bool {
    let cfg = p.config;
    let total = p.snap.hnsw.len().max(1);
    cfg.approximate
        && n > cfg.exact_max_candidates
        && (n as f64 / total as f64) >= cfg.hnsw_min_fraction
        && p.k > 0
}

/// Filtered HNSW's nearest candidates plus the scope's best BM25 matches, or `None` when HNSW
/// returns too few (every candidate is then scored). Approximate: HNSW may miss a true
/// neighbour.
fn hnsw_set(p: &Planning<'_>, heads: &[Head]) -> Result<Option<Vec<Head>>, SearchError> {
    debug_assert!(
        heads.windows(2).all(|w| w[0].doc < w[1].doc),
        "candidates sorted by id"
    );
    let k = p.k;
    let ids: Vec<u32> = heads.iter().map(|h| h.doc).collect();
    let allow = IdSet::from_sorted(&ids, p.snap.vectors.len());
    let depth = (k * p.config.hnsw_oversample).max(k + 10);
    if depth >= ids.len() {
        return Ok(None);
    }
    let hits = p
        .snap
        .hnsw
        .search_filtered(p.query, depth, depth.max(64), &allow);
    if hits.len() < depth {
        return Ok(None);
    }
    let lexical = if p.rank.lexical_share > 0.0 {
        p.bm25.best(depth)?
    } else {
        Vec::new()
    };
    let mut docs: Vec<u32> = hits.iter().chain(&lexical).map(|(d, _)| *d).collect();
    docs.sort_unstable();
    docs.dedup();
    Ok(Some(
        docs.into_iter()
            .filter_map(|d| heads.binary_search_by_key(&d, |h| h.doc).ok())
            .map(|i| heads[i])
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{ev, whole, World};
    use super::super::scope::scope_filter;
    use super::*;
    use crate::model::Timestamp;
    use crate::read::SubjectRule;
    use crate::retrieve::Scope;

    fn planned(w: &World, tenant: &str, config: &RecallConfig) -> Plan {
        let snap = w.snapshot();
        let grant = crate::auth::TenantGrant::internal(tenant, "test");
        let access = Access::new(&snap.table, &grant);
        let filter = scope_filter(tenant, &Scope::default());
        let in_scope = InScope::new(&snap, &filter);
        let bm25 = Bm25::new(&snap, &filter, "x");
        let vis = Visibility {
            include_superseded: false,
            as_of: None,
            now: Timestamp::now(),
        };
        plan(&Planning {
            snap: &snap,
            config,
            rank: &RankConfig::default(),
            access: access.as_ref(),
            in_scope: &in_scope,
            bm25: &bm25,
            vis: &vis,
            query: &[1.0, 0.0, 0.0, 0.0],
            k: 2,
            keep_stale: false,
            force_exact: false,
        })
        .unwrap()
    }

    fn world() -> World {
        let mut w = World::new(SubjectRule::OFF);
        for i in 0..5 {
            let at = "2026-06-01T00:00:00Z";
            w.add(
                ev(&format!("e{i}"), "ann", "s", at, "x"),
                [1.0, i as f32, 0.0, 0.0],
            );
        }
        w.commit();
        w
    }

    #[test]
    fn the_default_is_exact_over_every_visible_candidate() {
        let w = world();
        let _ = whole();
        let p = planned(&w, "acme", &RecallConfig::default());
        assert_eq!(p.path, VectorPath::Exact);
        assert_eq!(p.heads.len(), 5);
        assert_eq!(p.set().len(), 5, "nothing narrowed");
    }

    #[test]
    fn a_tenant_that_never_held_an_event_is_answered_exactly_and_empty() {
        let w = world();
        let on = RecallConfig {
            partitioned: true,
            approximate: true,
            exact_max_candidates: 0,
            ..RecallConfig::default()
        };
        let p = planned(&w, "nobody", &on);
        assert_eq!((p.path, p.heads.len()), (VectorPath::Exact, 0));
    }

    #[test]
    fn partitioned_recall_without_partitions_built_stays_exact() {
        let w = world();
        let on = RecallConfig {
            partitioned: true,
            exact_max_candidates: 0,
            ..RecallConfig::default()
        };
        assert_eq!(planned(&w, "acme", &on).path, VectorPath::Exact);
    }

    #[test]
    fn approximate_recall_with_a_short_graph_falls_back_to_scoring_all() {
        let w = world();
        let on = RecallConfig {
            approximate: true,
            exact_max_candidates: 0,
            hnsw_min_fraction: 0.0,
            ..RecallConfig::default()
        };
        let p = planned(&w, "acme", &on);
        assert_eq!(
            p.path,
            VectorPath::HnswFallbackExact,
            "the graph holds nothing here"
        );
        assert_eq!(p.set().len(), 5);
    }
}
