//! The tenant-graph candidate source (approximate ranking, exact scope): the nearest points
//! of the query in its tenant's own HNSW graph ([`crate::read::TenantGraphs`]) that pass
//! the scope, the grant and the view, every id the graphs do not cover yet and, when BM25
//! ranks, the scope's best word matches, each checked on its head like any candidate.
//!
//! Two walks of the graph's read-only copy: a scope that is most of its tenant (at least
//! `graph_min_share`) is searched plainly, `width / share` wide, and the hits checked (the
//! width is `graph_ef` in a graph of [`GRAPH_FULL_WIDTH_POINTS`] or more, proportionally
//! less in a smaller one, down to [`GRAPH_MIN_WIDTH_PERCENT`] of it); a
//! narrower one (down to [`GRAPH_WITHIN_MIN_SHARE`]) is walked within the scope's points
//! ([`FrozenGraph::search_within_nodes`]: distances for in-scope points only, out-of-scope
//! neighbours as bridges), [`GRAPH_WITHIN_WIDTH_PERCENT`] of `graph_ef` wide. Which points
//! are in scope the graph's own keys tell ([`GraphKeys::select`]: the nodes under the
//! filter's narrowest list, each checked on its other fields), so the scope is never listed
//! from the index: at 1M events that listing and its sort were a third of a walk's recall.

use super::config::RecallConfig;
use super::cost;
use super::lexical::Bm25;
use super::partition::{broad_count, PARTITION_LEXICAL_DEPTH};
use super::scope::{InScope, SearchError};
use crate::index::vector::calibrate::GraphTuning;
use crate::index::vector::FrozenGraph;
use crate::read::{Access, GraphKeys, Head, HeadFilter, Snapshot, Table, View, Visibility};

/// The widest plain search, as a multiple of `graph_ef` (a share of at least
/// [`super::GRAPH_MIN_SHARE`] by default never needs more).
const GRAPH_MAX_WIDEN: usize = 4;

/// The narrowest share of its tenant a scope may be to be walked within its graph: on the
/// 100,000-event grid tenant a scope of 10% found the exact top 10 (recall@10 1.000), one of
/// 1% only 0.85 (its points are too sparse for two hops to connect them). Narrower scopes
/// are scored exactly or read from the partition lists.
pub const GRAPH_WITHIN_MIN_SHARE: f64 = 0.05;

/// In-scope neighbours a walk within the scope takes per expanded point, its own and its
/// out-of-scope neighbours' ([`FrozenGraph::search_within`]). On a scope of 10% of a tenant
/// of 160,000 real-model embeddings, at width 96, 16 found recall@10 0.925, 32 0.971 and 64
/// 0.999 (1.5 ms); on the clustered grid tenant of 100,000, 64 found 0.990 at width 64 and
/// 1.000 at 160 (see the benchmarks doc).
pub const GRAPH_FANOUT: usize = 64;

/// A walk within a scope is this share of `graph_ef` wide (in percent): 96 at the default
/// 160, which with [`GRAPH_FANOUT`] reached recall@10 0.999 on real-model embeddings where
/// width 160 cost half as much again for 1.000.
pub const GRAPH_WITHIN_WIDTH_PERCENT: usize = 60;

/// A graph of this many points or more is searched `graph_ef` wide; a smaller one
/// proportionally less wide, down to [`GRAPH_MIN_WIDTH_PERCENT`] of it
/// ([`graph_width`]). Recall at a given width falls as a graph grows: on real-model
/// embeddings, width 64 found recall@10 0.997 in a tenant of 16,000 and 0.987 in one of
/// 48,000, where 154 (this rule's width) finds about 0.997 (0.996 at 128, 0.997 at 160);
/// on the clustered grid tenant of 10,000 every width from 48 up found 1.000.
pub const GRAPH_FULL_WIDTH_POINTS: usize = 50_000;

/// The narrowest plain search of a small graph, in percent of `graph_ef` (64 at the
/// default 160), at or below 40% of [`GRAPH_FULL_WIDTH_POINTS`] points.
pub const GRAPH_MIN_WIDTH_PERCENT: usize = 40;

/// The width of a plain search of a whole tenant whose graph holds `points`: `graph_ef`
/// scaled by the graph's size ([`GRAPH_FULL_WIDTH_POINTS`]), never below
/// [`GRAPH_MIN_WIDTH_PERCENT`] of it, nor below `k`.
pub(super) fn graph_width(graph_ef: usize, points: usize, k: usize) -> usize {
    let full = GRAPH_FULL_WIDTH_POINTS as f64;
    let scale = (points as f64 / full).clamp(GRAPH_MIN_WIDTH_PERCENT as f64 / 100.0, 1.0);
    ((graph_ef as f64 * scale).ceil() as usize).max(k)
}

/// The widths a tenant's graph is searched at for `k` results.
struct Widths {
    /// A plain search of the whole tenant; `None`: not searched plainly.
    plain: Option<usize>,
    /// A walk within a scope; `None`: not walked within.
    within: Option<usize>,
    /// The filtered walk that follows a search that found fewer than k.
    fallback: usize,
}

impl Widths {
    /// With `calibrated_graphs` and a measured graph, the widths measured on it (none where
    /// no width reached the target); otherwise `graph_ef`, scaled by the graph's size for a
    /// plain search ([`graph_width`]) and by [`GRAPH_WITHIN_WIDTH_PERCENT`] within a scope.
    fn of(snap: &Snapshot<'_>, cfg: &RecallConfig, tenant: u32, k: usize) -> Widths {
        let points = snap.graphs.count(tenant);
        Widths::from(snap.graphs.tuning(tenant), cfg, points, k)
    }

    /// [`Widths::of`] for a graph of `points` measured as `tuning`.
    fn from(tuning: Option<&GraphTuning>, cfg: &RecallConfig, points: usize, k: usize) -> Widths {
        let configured = graph_width(cfg.graph_ef, points, k);
        match tuning.filter(|_| cfg.calibrated_graphs) {
            Some(t) => Widths {
                plain: t.plain.map(|w| w.max(k)),
                within: t.within.map(|w| w.max(k)),
                fallback: t.plain.map_or(configured, |w| w.max(k)),
            },
            None => Widths {
                plain: Some(configured),
                within: Some((cfg.graph_ef * GRAPH_WITHIN_WIDTH_PERCENT / 100).max(k)),
                fallback: configured,
            },
        }
    }
}

/// How a graph is walked for a scope.
enum GraphWalk {
    /// Plainly, this wide, the hits then checked on their heads.
    Plain { width: usize },
    /// Within the scope's points ([`GraphKeys::select`]), this wide.
    Within { width: usize },
}

/// A tenant graph search the planner may take: its tenant's graph applies to the scope,
/// and the search is expected to cost `cost_ns` of CPU, less than scoring every candidate.
pub(super) struct GraphPick<'s> {
    graph: &'s FrozenGraph,
    /// Its points' scope keys (which points a walk within the scope may take).
    keys: &'s GraphKeys,
    scope: HeadFilter,
    ef: usize,
    /// A plain search `ef / share` wide (at most [`GRAPH_MAX_WIDEN`] times `ef`), or one
    /// within the scope's points.
    walk: GraphWalk,
    /// The expected CPU of the search ([`cost::graph_ns`], [`cost::graph_within_ns`]).
    pub(super) cost_ns: u64,
}

/// The tenant graph search a recall could take, or `None` unless graph recall is on, the
/// scope's tenant has a graph, heads can decide the filter, the index counts more than
/// `exact_max_candidates` in scope, the scope is at least [`GRAPH_WITHIN_MIN_SHARE`] of its
/// tenant and the search is expected to cost less than scoring every candidate ([`cost`]).
/// A scope of at least `graph_min_share` is searched plainly, a narrower one within its
/// points.
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
    let (Some(graph), Some(keys)) = (
        snap.graphs.graph(scope.tenant),
        snap.graphs.keys(scope.tenant),
    ) else {
        return Ok(None);
    };
    let Some(count) = broad_count(snap, in_scope, cfg.exact_max_candidates)? else {
        return Ok(None);
    };
    let points = snap.graphs.count(scope.tenant);
    let share = count as f64 / points.max(1) as f64;
    let widths = Widths::of(snap, cfg, scope.tenant, k);
    let (walk, cost_ns, ef) = if share >= cfg.graph_min_share {
        let Some(ef) = widths.plain else {
            return Ok(None);
        };
        let width = ((ef as f64 / share).ceil() as usize).clamp(ef, ef * GRAPH_MAX_WIDEN);
        (GraphWalk::Plain { width }, cost::graph_ns(ef, share), ef)
    } else if share >= GRAPH_WITHIN_MIN_SHARE {
        let Some(width) = widths.within else {
            return Ok(None);
        };
        let cost_ns = cost::graph_within_ns(width, count);
        (GraphWalk::Within { width }, cost_ns, widths.fallback)
    } else {
        return Ok(None);
    };
    if cost_ns >= cost::exact_ns(count) {
        return Ok(None);
    }
    Ok(Some(GraphPick {
        graph,
        keys,
        scope,
        ef,
        walk,
        cost_ns,
    }))
}

/// The visible in-scope heads `pick`'s graph finds nearest `query`, plus those written after
/// the graphs' last update and, with `lexical`, the scope's best BM25 matches, in id order
/// without repeats; `None` when the graph found fewer than `k` (the caller then takes the
/// exact path).
///
/// A broad scope's search walks the graph's read-only copy plainly, `graph_ef / share`
/// wide so that about `graph_ef` of what it finds are in scope, whose hits are then checked
/// on their heads: a filtered walk would not stop before `graph_ef` points passed, so under
/// a narrow scope it reads most of the graph. A narrower scope's walk stays within its
/// points (the graph's keys), whose hits are checked on their heads too (the keys are as
/// of the copy; the grant and view are as of the snapshot).
/// Only when fewer than `k` of them pass (most of the tenant deleted, or a scope the
/// estimate overrated) does a filtered walk of width `graph_ef` follow.
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
    let found = match pick.walk {
        GraphWalk::Plain { width } => pick.graph.search(query, width, width),
        GraphWalk::Within { width } => {
            let nodes = pick.keys.select(scope);
            pick.graph
                .search_within_nodes(query, (width, width, GRAPH_FANOUT), |n| nodes.contains(n))
        }
    };
    let mut heads: Vec<Head> = found
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

#[cfg(test)]
mod tests {
    use super::super::fixture::{ev, head_scopes, World};
    use super::super::scope::{candidates, scope_filter};
    use super::*;
    use crate::read::SubjectRule;

    #[test]
    fn a_graphs_keys_select_the_points_the_index_lists_in_scope() {
        let days = [
            "2026-06-10T00:00:00Z",
            "2026-06-12T00:00:00Z",
            "2026-06-17T09:20:00Z",
        ];
        let mut w = World::new(SubjectRule::OFF);
        for i in 0..30 {
            let actor = ["ann", "bob", "cy"][i % 3];
            let mut e = ev(&format!("e{i}"), actor, "s1", days[i % 3], "an event");
            e.event_type = ["note", "task_milestone"][i % 2].into();
            e.project_id = (i % 5 != 0).then(|| ["p1", "p2"][i % 4 / 2].into());
            w.add(e, [1.0, 0.0, 0.0, 0.0]);
        }
        let mut other = ev("x", "ann", "s1", days[0], "other tenant");
        other.tenant_id = "other".into();
        w.add(other, [1.0, 0.0, 0.0, 0.0]);
        w.delete("e4");
        w.commit();
        let snap = w.snapshot();
        let table: &Table = &snap.table;
        // A graph holds its tenant's points, deleted ones too, in any node order.
        let ids: Vec<u32> = (0..30u32).rev().collect();
        let keys = GraphKeys::of(&ids, table);
        let scopes = head_scopes("ann", days[1], days[2]);
        for scope in &scopes {
            let filter = scope_filter("acme", scope);
            let heads = table.head_filter(&filter).expect("heads decide it");
            let nodes = keys.select(&heads);
            let listed = candidates(&snap, &filter).unwrap();
            let selected: Vec<u32> = (0..ids.len() as u32)
                .filter(|&n| nodes.contains(n))
                .map(|n| ids[n as usize])
                .rev()
                .collect();
            assert_eq!(selected, listed, "{scope:?}");
            assert_eq!(nodes.count(), listed.len());
            assert!(!selected.contains(&4), "a deleted point is never in scope");
        }
    }

    #[test]
    fn a_measured_graph_is_searched_at_its_measured_widths_and_not_where_none_sufficed() {
        let cfg = RecallConfig::default();
        let t = GraphTuning {
            points: 100_000,
            plain: Some(48),
            within: None,
        };
        let w = Widths::from(Some(&t), &cfg, 100_000, 10);
        assert_eq!((w.plain, w.within, w.fallback), (Some(48), None, 48));
        let w = Widths::from(Some(&t), &cfg, 100_000, 100);
        assert_eq!(w.plain, Some(100), "never below k");
        let none = GraphTuning { plain: None, ..t };
        let w = Widths::from(Some(&none), &cfg, 100_000, 10);
        assert_eq!(
            (w.plain, w.within),
            (None, None),
            "no plain search, no walk"
        );
        // Unmeasured, or measurement turned off: the configured widths.
        let w = Widths::from(None, &cfg, 100_000, 10);
        assert_eq!((w.plain, w.within), (Some(160), Some(96)));
        let off = RecallConfig {
            calibrated_graphs: false,
            ..RecallConfig::default()
        };
        let w = Widths::from(Some(&none), &off, 100_000, 10);
        assert_eq!((w.plain, w.within), (Some(160), Some(96)));
    }

    #[test]
    fn a_smaller_graph_is_searched_less_wide_down_to_a_floor() {
        assert_eq!(graph_width(160, 1_000_000, 10), 160, "large: graph_ef");
        assert_eq!(graph_width(160, GRAPH_FULL_WIDTH_POINTS, 10), 160);
        assert_eq!(graph_width(160, 48_000, 10), 154);
        assert_eq!(graph_width(160, 25_000, 10), 80);
        assert_eq!(graph_width(160, 16_000, 10), 64, "the floor");
        assert_eq!(graph_width(160, 8_192, 10), 64);
        assert_eq!(graph_width(160, 8_192, 100), 100, "never below k");
    }
}
