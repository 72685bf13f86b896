//! The recall pipeline (scope → candidates → vectors → rank → evidence) and the timeline.
//!
//! Invariants:
//! - the tenant from the grant and every scope filter are applied before any vector work:
//!   the vector stage only ever sees in-scope, visible candidates;
//! - the answer is the exact in-scope top k under the ranking function whatever path runs:
//!   the exact path scores every candidate; the HNSW path stops only when a bound proves no
//!   unretrieved candidate can outrank its k-th hit, and otherwise deepens or falls back;
//! - every returned event is checked once more against the grant's tenant.

pub mod evidence;
mod request;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

pub use request::{Cursor, RecallRequest, Scope, TimelineQuery};

use crate::auth::TenantGrant;
use crate::engine::{EngineConfig, Entry, Shared, Table};
use crate::error::{ErrorCode, Problem};
use crate::index::scope::{matches, ScopeFilter};
use crate::index::vector::{dot, exact_scores, top_k, IdSet, VectorStore};
use crate::model::{EventStatus, StoredEvent, Timestamp};
use crate::rank::{Breakdown, RankConfig};
use crate::telemetry;

/// How recall chooses between exact scoring and HNSW.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallConfig {
    /// At or below this many candidates, score exactly.
    pub exact_max_candidates: usize,
    /// HNSW is used only when candidates are at least this share of all vectors.
    pub hnsw_min_fraction: f64,
    /// Initial HNSW depth as a multiple of k.
    pub hnsw_oversample: usize,
    /// Deepening rounds before falling back to exact scoring.
    pub hnsw_max_rounds: usize,
    /// A newer event on the same subject makes an older one stale only when their summary
    /// embeddings have at least this cosine (0, the default: any same-subject event). Raising
    /// it keeps unrelated older events of a subject (the train booking next to a newer hotel
    /// booking) but lets through updates phrased very differently from what they replace.
    pub stale_min_similarity: f32,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            exact_max_candidates: 20_000,
            hnsw_min_fraction: 0.3,
            hnsw_oversample: 4,
            hnsw_max_rounds: 3,
            stale_min_similarity: 0.0,
        }
    }
}

/// Which vector path answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VectorPath {
    /// Every candidate scored.
    Exact,
    /// Filtered HNSW search with a proven bound.
    Hnsw,
    /// HNSW could not prove its answer; every candidate scored.
    HnswFallbackExact,
}

impl VectorPath {
    /// The snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            VectorPath::Exact => "exact",
            VectorPath::Hnsw => "hnsw",
            VectorPath::HnswFallbackExact => "hnsw_fallback_exact",
        }
    }
}

/// One ranked hit.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// The event.
    pub event: StoredEvent,
    /// Total score.
    pub score: f32,
    /// Why it scored that.
    pub score_breakdown: Breakdown,
    /// Whether a newer active event on the same subject exists (only with `includeStale`).
    pub stale: bool,
    /// The newer event, when stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_by: Option<String>,
}

/// The recall answer.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecallResponse {
    /// Hits, best first.
    pub results: Vec<Hit>,
    /// Evidence blocks for the hits, in rank order.
    pub evidence: String,
    /// How the answer was computed.
    pub stats: RecallStats,
}

/// Explains the retrieval path.
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecallStats {
    /// Visible in-scope candidates.
    pub candidates: usize,
    /// Vector path taken.
    pub path: VectorPath,
}

/// A page of the timeline.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimelinePage {
    /// Events ordered by `occurredAt` (then `eventId`).
    pub events: Vec<StoredEvent>,
    /// Cursor for the next page, if any.
    pub next_cursor: Option<String>,
}

/// Builds the tantivy filter for a tenant and scope.
pub fn scope_filter(tenant: &str, scope: &Scope) -> ScopeFilter {
    ScopeFilter {
        tenant: tenant.to_string(),
        actor_ids: scope.actor_ids.clone(),
        project_ids: scope.project_ids.clone(),
        event_types: scope.event_types.clone(),
        resource_refs: scope.resource_refs.clone(),
        occurred_after_ms: scope.occurred_after.map(Timestamp::unix_millis),
        occurred_before_ms: scope.occurred_before.map(Timestamp::unix_millis),
    }
}

fn index_error(e: impl std::fmt::Display) -> Problem {
    Problem::new(
        ErrorCode::Internal,
        format!("scope index search failed: {e}"),
    )
}

/// In-scope internal ids: committed ones from tantivy plus fresh ones matched in memory.
pub fn candidates(shared: &Shared, filter: &ScopeFilter) -> Result<Vec<u32>, Problem> {
    let watermark = shared.watermark.load(Ordering::Acquire);
    let mut ids = shared.scope.search(filter).map_err(index_error)?;
    let table = shared.table.read();
    for entry in table.live_from(watermark) {
        if matches(filter, &entry.scope_doc()) {
            ids.push(entry.doc);
        }
    }
    drop(table);
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// Which events a query may see.
#[derive(Debug, Clone, Copy)]
pub struct Visibility {
    /// Also return superseded events.
    pub include_superseded: bool,
    /// Memory as it stood at this `recordedAt` time (deletions still win).
    pub as_of: Option<Timestamp>,
    /// The read time (expiry is always judged now).
    pub now: Timestamp,
}

/// An event's status as the view sees it, or `None` when invisible (expired, pending review,
/// or recorded after `as_of`).
fn view_status(e: &Entry, vis: &Visibility) -> Option<EventStatus> {
    if e.is_expired(vis.now) || vis.as_of.is_some_and(|t| e.event.recorded_at > t) {
        return None;
    }
    match e.event.status {
        EventStatus::Active => Some(EventStatus::Active),
        EventStatus::PendingReview => None,
        EventStatus::Superseded => match (vis.as_of, e.event.superseded_at) {
            (Some(t), Some(at)) if at > t => Some(EventStatus::Active),
            _ => Some(EventStatus::Superseded),
        },
    }
}

fn visible_entry(entry: &Entry, grant: &TenantGrant, vis: &Visibility) -> bool {
    let status_ok = match view_status(entry, vis) {
        Some(EventStatus::Active) => true,
        Some(EventStatus::Superseded) => vis.include_superseded,
        Some(EventStatus::PendingReview) | None => false,
    };
    status_ok && grant.can_see(&entry.event)
}

/// Keeps the candidates the grant may see; returns their entries.
fn visible(shared: &Shared, grant: &TenantGrant, ids: &[u32], vis: &Visibility) -> Vec<Arc<Entry>> {
    let table = shared.table.read();
    ids.iter()
        .filter_map(|id| table.get(*id))
        .filter(|e| visible_entry(e, grant, vis))
        .cloned()
        .collect()
}

/// The newest event on the same subject that is active in the view and occurred later.
/// What decides staleness besides the subject.
struct StaleCtx<'a> {
    vectors: &'a VectorStore,
    min_similarity: f32,
}

impl StaleCtx<'_> {
    /// Whether `newer` is about the same thing as `older` (summary embeddings close enough).
    fn similar(&self, older: &Entry, newer: &Entry) -> bool {
        if self.min_similarity <= 0.0 {
            return true;
        }
        self.vectors
            .with_vector(older.doc, |a| {
                self.vectors.with_vector(newer.doc, |b| dot(a, b))
            })
            .flatten()
            .is_some_and(|cos| cos >= self.min_similarity)
    }
}

fn stale_by(
    table: &Table,
    ctx: &StaleCtx<'_>,
    entry: &Entry,
    grant: &TenantGrant,
    vis: &Visibility,
) -> Option<String> {
    table
        .same_subject(entry)
        .iter()
        .filter(|d| **d != entry.doc)
        .filter_map(|d| table.get(*d))
        .filter(|o| o.occurred_ms > entry.occurred_ms && grant.can_see(&o.event))
        .filter(|o| view_status(o, vis) == Some(EventStatus::Active))
        .filter(|o| ctx.similar(entry, o))
        .max_by_key(|o| (o.occurred_ms, o.doc))
        .map(|o| o.event.event_id.clone())
}

/// Splits stale events out (dropped, or kept and marked when `keep`).
fn apply_staleness(
    shared: &Shared,
    config: &RecallConfig,
    grant: &TenantGrant,
    entries: Vec<Arc<Entry>>,
    vis: &Visibility,
    keep: bool,
) -> (Vec<Arc<Entry>>, HashMap<u32, String>) {
    let vectors = shared.vectors.load();
    let ctx = StaleCtx {
        vectors: &vectors,
        min_similarity: config.stale_min_similarity,
    };
    let table = shared.table.read();
    let mut marks = HashMap::new();
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        match stale_by(&table, &ctx, &e, grant, vis) {
            Some(by) if keep => {
                marks.insert(e.doc, by);
                out.push(e);
            }
            Some(_) => {}
            None => out.push(e),
        }
    }
    (out, marks)
}

/// Scope-first recall with a precomputed query vector.
pub fn recall(
    shared: &Shared,
    config: &EngineConfig,
    grant: &TenantGrant,
    req: &RecallRequest,
    query: &[f32],
) -> Result<RecallResponse, Problem> {
    let started = std::time::Instant::now();
    let filter = scope_filter(grant.tenant(), &req.scope);
    let ids = candidates(shared, &filter)?;
    let now = Timestamp::now();
    let vis = Visibility {
        include_superseded: req.include_superseded,
        as_of: req.as_of,
        now,
    };
    let entries = visible(shared, grant, &ids, &vis);
    let (entries, stale) = apply_staleness(
        shared,
        &config.recall,
        grant,
        entries,
        &vis,
        req.include_stale,
    );
    let ctx = RankCtx {
        shared,
        rank: &config.rank,
        query,
        now_ms: now.unix_millis(),
    };
    let scoped = std::time::Instant::now();
    telemetry::recall_stage("scope", scoped - started);
    let (ranked, path) = choose_and_rank(&ctx, &config.recall, &entries, req.limit);
    let scored = std::time::Instant::now();
    telemetry::recall_stage("vector", scored - scoped);
    telemetry::recall_path(path.as_str());
    let response = respond(&ctx, grant, &entries, &stale, ranked, path);
    telemetry::recall_stage("evidence", scored.elapsed());
    Ok(response)
}

/// What every scoring path needs.
struct RankCtx<'a> {
    shared: &'a Shared,
    rank: &'a RankConfig,
    query: &'a [f32],
    now_ms: i64,
}

fn choose_and_rank(
    ctx: &RankCtx<'_>,
    cfg: &RecallConfig,
    entries: &[Arc<Entry>],
    k: usize,
) -> (Vec<(u32, f32)>, VectorPath) {
    debug_assert!(
        entries.windows(2).all(|w| w[0].doc < w[1].doc),
        "entries sorted by id"
    );
    let n = entries.len();
    let total = ctx.shared.hnsw.load().len().max(1);
    let use_hnsw =
        n > cfg.exact_max_candidates && (n as f64 / total as f64) >= cfg.hnsw_min_fraction;
    if !use_hnsw || k == 0 {
        return (exact_rank(ctx, entries, k), VectorPath::Exact);
    }
    match hnsw_rank(ctx, cfg, entries, k) {
        Some(hits) => (hits, VectorPath::Hnsw),
        None => (exact_rank(ctx, entries, k), VectorPath::HnswFallbackExact),
    }
}

/// Scores every candidate (cosine via the vector store, then priors) in parallel.
fn exact_rank(ctx: &RankCtx<'_>, entries: &[Arc<Entry>], k: usize) -> Vec<(u32, f32)> {
    let ids: Vec<u32> = entries.iter().map(|e| e.doc).collect();
    let cosines = exact_scores(&ctx.shared.vectors.load(), ctx.query, &ids);
    let totals: Vec<f32> = entries
        .par_iter()
        .zip(cosines.par_iter())
        .map(|(e, cos)| ctx.rank.score(*cos, &e.prior(), ctx.now_ms))
        .collect();
    top_k(&ids, &totals, k)
}

/// Filtered HNSW with a stopping bound; `None` when it cannot prove the exact top k.
fn hnsw_rank(
    ctx: &RankCtx<'_>,
    cfg: &RecallConfig,
    entries: &[Arc<Entry>],
    k: usize,
) -> Option<Vec<(u32, f32)>> {
    let ids: Vec<u32> = entries.iter().map(|e| e.doc).collect();
    let allow = IdSet::from_sorted(&ids, ctx.shared.vectors.load().len());
    let hnsw = ctx.shared.hnsw.load();
    let mut depth = (k * cfg.hnsw_oversample).max(k + 10);
    for _ in 0..cfg.hnsw_max_rounds {
        if depth >= ids.len() {
            return None;
        }
        let ef = depth.max(64);
        let hits = hnsw.search_filtered(ctx.query, depth, ef, &allow);
        if hits.len() < depth {
            return None;
        }
        if let Some(done) = bounded_top_k(ctx, &hits, entries, k) {
            return Some(done);
        }
        depth *= 4;
    }
    None
}

/// The entry with internal id `doc` among `entries`, which are sorted by id (candidates are).
fn entry_of(entries: &[Arc<Entry>], doc: u32) -> Option<&Arc<Entry>> {
    entries
        .binary_search_by_key(&doc, |e| e.doc)
        .ok()
        .map(|i| &entries[i])
}

/// The top k of `hits` if no unretrieved candidate can beat the k-th.
fn bounded_top_k(
    ctx: &RankCtx<'_>,
    hits: &[(u32, f32)],
    entries: &[Arc<Entry>],
    k: usize,
) -> Option<Vec<(u32, f32)>> {
    let ids: Vec<u32> = hits.iter().map(|(id, _)| *id).collect();
    let totals: Vec<f32> = hits
        .iter()
        .map(|(id, cos)| {
            entry_of(entries, *id)
                .map_or(f32::MIN, |e| ctx.rank.score(*cos, &e.prior(), ctx.now_ms))
        })
        .collect();
    let best = top_k(&ids, &totals, k);
    let min_cos = hits.iter().map(|(_, c)| *c).fold(f32::MAX, f32::min);
    let bound = ctx.rank.weights.relevance * min_cos.max(0.0) + ctx.rank.max_prior_score();
    let kth = best.last().map_or(f32::MIN, |(_, s)| *s);
    (best.len() == k && kth >= bound).then_some(best)
}

fn respond(
    ctx: &RankCtx<'_>,
    grant: &TenantGrant,
    entries: &[Arc<Entry>],
    stale: &HashMap<u32, String>,
    ranked: Vec<(u32, f32)>,
    path: VectorPath,
) -> RecallResponse {
    let vectors = ctx.shared.vectors.load();
    let results: Vec<Hit> = ranked
        .into_iter()
        .filter_map(|(doc, score)| entry_of(entries, doc).map(|e| (e, score)))
        .filter(|(e, _)| grant.can_see(&e.event))
        .map(|(e, score)| {
            let cos = vectors
                .with_vector(e.doc, |v| dot(v, ctx.query))
                .unwrap_or(0.0);
            Hit {
                event: e.event.clone(),
                score,
                score_breakdown: ctx.rank.explain(cos, &e.prior(), ctx.now_ms),
                stale: stale.contains_key(&e.doc),
                stale_by: stale.get(&e.doc).cloned(),
            }
        })
        .collect();
    let events: Vec<&StoredEvent> = results.iter().map(|h| &h.event).collect();
    RecallResponse {
        evidence: evidence::render(&events),
        stats: RecallStats {
            candidates: entries.len(),
            path,
        },
        results,
    }
}

/// One timeline page of the grant's tenant.
pub fn timeline(
    shared: &Shared,
    grant: &TenantGrant,
    q: &TimelineQuery,
) -> Result<TimelinePage, Problem> {
    let filter = scope_filter(grant.tenant(), &q.scope);
    let ids = candidates(shared, &filter)?;
    let vis = Visibility {
        include_superseded: q.include_superseded,
        as_of: q.as_of,
        now: Timestamp::now(),
    };
    let mut entries = visible(shared, grant, &ids, &vis);
    entries.sort_by(|a, b| {
        (a.occurred_ms, &a.event.event_id).cmp(&(b.occurred_ms, &b.event.event_id))
    });
    let start = match &q.cursor {
        Some(c) => entries.partition_point(|e| {
            (e.occurred_ms, e.event.event_id.as_str()) <= (c.occurred_ms, c.event_id.as_str())
        }),
        None => 0,
    };
    let page: Vec<&Arc<Entry>> = entries[start..].iter().take(q.limit + 1).collect();
    let next_cursor = (page.len() > q.limit).then(|| {
        let last = page[q.limit - 1];
        Cursor {
            occurred_ms: last.occurred_ms,
            event_id: last.event.event_id.clone(),
        }
        .encode()
    });
    Ok(TimelinePage {
        events: page.iter().take(q.limit).map(|e| e.event.clone()).collect(),
        next_cursor,
    })
}
