//! The tenant-graph candidate source (approximate ranking, exact scope): the nearest points
//! of the query in its tenant's own HNSW graph ([`crate::read::TenantGraphs`]) that pass
//! the scope, the grant and the view, every id the graphs do not cover yet and, when BM25
//! ranks, the scope's best word matches, each checked on its head like any candidate.

use super::config::RecallConfig;
use super::cost;
use super::lexical::Bm25;
use super::partition::{broad_count, PARTITION_LEXICAL_DEPTH};
use super::scope::{InScope, SearchError};
use crate::index::vector::FrozenGraph;
use crate::read::{Access, Head, HeadFilter, Snapshot, Table, View, Visibility};

/// The widest plain search, as a multiple of `graph_ef` (a share of at least
/// [`super::GRAPH_MIN_SHARE`] by default never needs more).
const GRAPH_MAX_WIDEN: usize = 4;

/// A tenant graph search the planner may take: its tenant's graph applies to the scope,
/// and the search is expected to cost `cost_ns` of CPU, less than scoring every candidate.
pub(super) struct GraphPick<'s> {
    graph: &'s FrozenGraph,
    scope: HeadFilter,
    ef: usize,
    /// The plain search's width: `ef / share`, at most [`GRAPH_MAX_WIDEN`] times `ef`.
    width: usize,
    /// The expected CPU of the search ([`cost::graph_ns`]).
    pub(super) cost_ns: u64,
}

/// The tenant graph search a recall could take, or `None` unless graph recall is on, the
/// scope's tenant has a graph, heads can decide the filter, the index counts more than
/// `exact_max_candidates` in scope, the scope is at least `graph_min_share` of its tenant
/// and the search is expected to cost less than scoring every candidate ([`cost`]).
pub(super) fn graph_pick<'s>(
    snap: &'s Snapshot<'_>,
    cfg: &RecallConfig,
    in_scope: &InScope<'_>,
    k: usize,
) -> Result<Option<GraphPick<'s>>, SearchError> {
    if !cfg.graphs || k == 0 {
        return Ok(None);
    }
    let Some(scope) = snap.table.head_filter(in_scope.filter) else {
        return Ok(None);
    };
    let Some(graph) = snap.graphs.graph(scope.tenant) else {
        return Ok(None);
    };
    let Some(count) = broad_count(snap, in_scope, cfg.exact_max_candidates)? else {
        return Ok(None);
    };
    let share = count as f64 / snap.graphs.count(scope.tenant).max(1) as f64;
    let ef = cfg.graph_ef.max(k);
    let cost_ns = cost::graph_ns(ef, share);
    if share < cfg.graph_min_share || cost_ns >= cost::exact_ns(count) {
        return Ok(None);
    }
    let width = ((ef as f64 / share).ceil() as usize).clamp(ef, ef * GRAPH_MAX_WIDEN);
    Ok(Some(GraphPick {
        graph,
        scope,
        ef,
        width,
        cost_ns,
    }))
}

/// The visible in-scope heads `pick`'s graph finds nearest `query`, plus those written after
/// the graphs' last update and, with `lexical`, the scope's best BM25 matches, in id order
/// without repeats; `None` when the graph found fewer than `k` (the caller then takes the
/// exact path).
///
/// The search walks the graph's read-only copy, plainly, `graph_ef / share` wide so that
/// about `graph_ef` of what it finds are in scope, whose hits are then checked on their
/// heads: a filtered walk would not stop before `graph_ef` points passed, so under a narrow
/// scope it reads most of the graph. Only when fewer than `k` of them pass (most of the
/// tenant deleted, or a scope the estimate overrated) does a filtered walk of width
/// `graph_ef` follow.
pub(super) fn graph_scope(
    snap: &Snapshot<'_>,
    pick: &GraphPick<'_>,
    access: &Access,
    (query, lexical): (&[f32], Option<&Bm25<'_>>),
    vis: &Visibility,
    k: usize,
) -> Result<Option<Vec<Head>>, SearchError> {
    let table: &Table = &snap.table;
    let view = View::new(vis);
    let scope = &pick.scope;
    let keep = |h: &Head| scope.matches(h) && access.shows(table, &view, h);
    let mut heads: Vec<Head> = pick
        .graph
        .search(query, pick.width, pick.width)
        .iter()
        .map(|(d, _)| table.head(*d))
        .filter(|h| keep(h))
        .collect();
    if heads.len() < k {
        heads = pick
            .graph
            .search_where(query, pick.ef, pick.ef, |d| keep(&table.head(d)))
            .iter()
            .map(|(d, _)| table.head(*d))
            .collect();
    }
    if heads.len() < k {
        return Ok(None);
    }
    let tail = (snap.graphs.upto()..table.next_doc()).map(|d| table.head(d));
    heads.extend(tail.filter(|h| keep(h)));
    if let Some(bm25) = lexical {
        // Events the query names by their words, wherever their vectors lie.
        let best = bm25.best(k.saturating_mul(PARTITION_LEXICAL_DEPTH))?;
        heads.extend(best.iter().map(|(d, _)| table.head(*d)).filter(|h| keep(h)));
    }
    heads.sort_unstable_by_key(|h| h.doc);
    heads.dedup_by_key(|h| h.doc);
    Ok(Some(heads))
}
