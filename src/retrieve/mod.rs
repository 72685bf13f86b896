//! The recall pipeline (scope → candidates → vectors → rank → evidence) and the timeline.
//!
//! Invariants:
//! - the tenant from the grant and every scope filter are applied before any vector work:
//!   the vector stage only ever sees in-scope, visible candidates;
//! - by default the answer is the exact in-scope top k under the ranking function: every
//!   candidate is scored (rayon-parallel). Filtered HNSW is approximate (hnsw_rs may miss a
//!   true neighbour, so no bound on its list proves the top k); it runs only when the operator
//!   opts in with `approximate`, and the response then says `path: "hnsw"`;
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
use crate::rank::{Breakdown, Prior, RankConfig, Signals};
use crate::telemetry;

/// How recall chooses between exact scoring and HNSW.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallConfig {
    /// Allow filtered HNSW for large scopes (off by default: answers are then approximate).
    pub approximate: bool,
    /// With `approximate`, at or below this many candidates, score exactly anyway.
    pub exact_max_candidates: usize,
    /// HNSW is used only when candidates are at least this share of all vectors.
    pub hnsw_min_fraction: f64,
    /// HNSW depth as a multiple of k (with `approximate`).
    pub hnsw_oversample: usize,
    /// A newer event on the same subject makes an older one stale only when their summary
    /// embeddings have at least this cosine (0, the default: any same-subject event). Raising
    /// it keeps unrelated older events of a subject (the train booking next to a newer hotel
    /// booking) but lets through updates phrased very differently from what they replace.
    pub stale_min_similarity: f32,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            approximate: false,
            exact_max_candidates: 20_000,
            hnsw_min_fraction: 0.3,
            hnsw_oversample: 4,
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
    /// Filtered HNSW search (approximate; only with `approximate` recall enabled).
    Hnsw,
    /// HNSW returned too short a list; every candidate scored.
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

/// Whether the view shows `entry` to `grant`, whose tenant has number `tenant` in the table.
fn visible_entry(entry: &Entry, grant: &TenantGrant, tenant: u32, vis: &Visibility) -> bool {
    let status_ok = match view_status(entry, vis) {
        Some(EventStatus::Active) => true,
        Some(EventStatus::Superseded) => vis.include_superseded,
        Some(EventStatus::PendingReview) | None => false,
    };
    status_ok && entry.tenant == tenant && grant.can_see_within_tenant(&entry.event)
}

/// Candidates per rayon task when checking visibility (below one task, no fan-out).
const VISIBLE_CHUNK: usize = 4096;

/// Keeps the candidates the grant may see; returns their entries, in `ids` order. Broad
/// scopes are checked on both cores: each check reads an entry at a random place in memory.
/// The tenant is compared as the table's tenant number (an integer in the entry), not as
/// a string behind another pointer.
fn visible(shared: &Shared, grant: &TenantGrant, ids: &[u32], vis: &Visibility) -> Vec<Arc<Entry>> {
    let table = shared.table.read();
    let Some(tenant) = table.tenant_number(grant.tenant()) else {
        return Vec::new();
    };
    let keep = |id: &u32| {
        table
            .get(*id)
            .filter(|e| visible_entry(e, grant, tenant, vis))
            .cloned()
    };
    if ids.len() <= VISIBLE_CHUNK {
        ids.iter().filter_map(keep).collect()
    } else {
        ids.par_iter()
            .with_min_len(VISIBLE_CHUNK)
            .filter_map(keep)
            .collect()
    }
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

/// Scope-first recall with a precomputed query vector, ranked with `config.rank`.
pub fn recall(
    shared: &Shared,
    config: &EngineConfig,
    grant: &TenantGrant,
    req: &RecallRequest,
    query: &[f32],
) -> Result<RecallResponse, Problem> {
    recall_ranked(shared, config, &config.rank, grant, req, query)
}

/// Like [`recall`] with another ranking configuration (ablations, diagnostics).
pub fn recall_ranked(
    shared: &Shared,
    config: &EngineConfig,
    rank: &RankConfig,
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
        rank,
        query,
        text: &req.query,
        filter: &filter,
        now_ms: now.unix_millis(),
    };
    let scoped = std::time::Instant::now();
    telemetry::recall_stage("scope", scoped - started);
    let (ranked, path) = choose_and_rank(&ctx, &config.recall, &entries, req.limit)?;
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
    /// The unit query vector.
    query: &'a [f32],
    /// The query text (BM25 and actor names).
    text: &'a str,
    /// The scope, for the lexical search.
    filter: &'a ScopeFilter,
    now_ms: i64,
}

/// One ranked candidate: internal id, total score and the signals behind it.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    doc: u32,
    score: f32,
    signals: Signals,
}

fn choose_and_rank(
    ctx: &RankCtx<'_>,
    cfg: &RecallConfig,
    entries: &[Arc<Entry>],
    k: usize,
) -> Result<(Vec<Ranked>, VectorPath), Problem> {
    debug_assert!(
        entries.windows(2).all(|w| w[0].doc < w[1].doc),
        "entries sorted by id"
    );
    let n = entries.len();
    let total = ctx.shared.hnsw.load().len().max(1);
    let use_hnsw = cfg.approximate
        && n > cfg.exact_max_candidates
        && (n as f64 / total as f64) >= cfg.hnsw_min_fraction;
    let (set, path) = match (use_hnsw && k > 0).then(|| hnsw_set(ctx, cfg, entries, k)) {
        None => (None, VectorPath::Exact),
        Some(found) => match found? {
            Some(set) => (Some(set), VectorPath::Hnsw),
            None => (None, VectorPath::HnswFallbackExact),
        },
    };
    let set = set.unwrap_or_else(|| entries.iter().collect());
    Ok((rank_set(ctx, &set, k)?, path))
}

/// Candidates per rayon task when gathering ids and priors.
const GATHER_CHUNK: usize = 4096;

/// Scores `set` (cosine via the vector store, BM25 via the scope index, actor names, episode
/// context, priors) in parallel and returns its top k.
fn rank_set(ctx: &RankCtx<'_>, set: &[&Arc<Entry>], k: usize) -> Result<Vec<Ranked>, Problem> {
    // One pass over the entries (each a cache miss at broad scopes) gathers what scoring
    // needs; the passes below run over these compact arrays.
    let (ids, priors): (Vec<u32>, Vec<Prior>) = set
        .par_iter()
        .with_min_len(GATHER_CHUNK)
        .map(|e| (e.doc, e.prior()))
        .unzip();
    let cosines = exact_scores(&ctx.shared.vectors.load(), ctx.query, &ids);
    let bm25 = lexical_scores(ctx, set)?;
    let best_bm25 = bm25.iter().copied().fold(0.0f32, f32::max);
    let lexical: Vec<f32> = bm25
        .iter()
        .map(|b| if best_bm25 > 0.0 { b / best_bm25 } else { 0.0 })
        .collect();
    let matched: Vec<f32> = cosines
        .par_iter()
        .zip(lexical.par_iter())
        .map(|(c, l)| ctx.rank.matched(*c, *l))
        .collect();
    let context = episode_context(ctx.rank, set, &matched);
    let actors = ActorNames::new(ctx.text);
    let signals: Vec<Signals> = (0..set.len())
        .into_par_iter()
        .map(|i| Signals {
            cosine: cosines[i],
            bm25: bm25[i],
            lexical: lexical[i],
            context: context[i],
            actor: ctx.rank.actor_boost > 0.0 && actors.names(&set[i].event.actor_id),
        })
        .collect();
    let totals: Vec<f32> = priors
        .par_iter()
        .zip(signals.par_iter())
        .map(|(prior, sig)| ctx.rank.score(sig, prior, ctx.now_ms))
        .collect();
    let positions: Vec<u32> = (0..set.len() as u32).collect();
    Ok(top_k(&positions, &totals, k)
        .into_iter()
        .map(|(i, score)| Ranked {
            doc: ids[i as usize],
            score,
            signals: signals[i as usize],
        })
        .collect())
}

/// BM25 of each event of `set` for the query text, restricted to the scope (0 for events not
/// matching any term and for events newer than the last scope-index refresh).
fn lexical_scores(ctx: &RankCtx<'_>, set: &[&Arc<Entry>]) -> Result<Vec<f32>, Problem> {
    let mut out = vec![0.0; set.len()];
    if ctx.rank.lexical_share <= 0.0 || set.is_empty() {
        return Ok(out);
    }
    let hits = ctx
        .shared
        .scope
        .lexical_all(ctx.filter, ctx.text)
        .map_err(index_error)?;
    let by_doc: HashMap<u32, f32> = hits.into_iter().collect();
    for (slot, e) in out.iter_mut().zip(set) {
        if let Some(score) = by_doc.get(&e.doc) {
            *slot = *score;
        }
    }
    Ok(out)
}

/// For each event of `set`, the mean `matched` of its episode neighbours: the events just
/// before and after it (by `occurredAt`, then id) with the same project and the same source
/// (first `sourceRefs` entry: the conversation, session or document it came from), no more
/// than `episode_gap_ms` away. Only events of `set` count, so nothing out of scope or
/// invisible (deleted, expired, pending review) lends an event relevance.
fn episode_context(rank: &RankConfig, set: &[&Arc<Entry>], matched: &[f32]) -> Vec<f32> {
    let mut context = vec![0.0; set.len()];
    if rank.context_weight <= 0.0 || set.len() < 2 {
        return context;
    }
    let key = |i: usize| {
        let e = set[i];
        (
            &e.event.project_id,
            e.event.source_refs.first(),
            e.occurred_ms,
            e.doc,
        )
    };
    let mut order: Vec<usize> = (0..set.len()).collect();
    order.par_sort_unstable_by(|a, b| key(*a).cmp(&key(*b)));
    let near = |a: usize, b: usize| {
        let ((pa, sa, ta, _), (pb, sb, tb, _)) = (key(a), key(b));
        pa == pb && sa.is_some() && sa == sb && (ta - tb).abs() <= rank.episode_gap_ms
    };
    for (p, &i) in order.iter().enumerate() {
        let before = p.checked_sub(1).map(|q| order[q]).filter(|&j| near(i, j));
        let after = order.get(p + 1).copied().filter(|&j| near(i, j));
        let (sum, n) = before
            .into_iter()
            .chain(after)
            .fold((0.0, 0u8), |(sum, n), j| (sum + matched[j], n + 1));
        if n > 0 {
            context[i] = sum / f32::from(n);
        }
    }
    context
}

/// The words of a query, lower-cased, for recognising actors it names.
struct ActorNames {
    words: Vec<String>,
}

impl ActorNames {
    fn new(query: &str) -> Self {
        let mut words: Vec<String> = words(query).map(str::to_lowercase).collect();
        words.sort_unstable();
        words.dedup();
        ActorNames { words }
    }

    /// Whether every word of `actor_id` occurs in the query (case-insensitive). Allocation
    /// free: it runs once per candidate.
    fn names(&self, actor_id: &str) -> bool {
        let mut any = false;
        for w in words(actor_id) {
            let lower = || w.chars().flat_map(char::to_lowercase);
            if !self.words.iter().any(|q| q.chars().eq(lower())) {
                return false;
            }
            any = true;
        }
        any
    }
}

/// Alphanumeric words.
fn words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// Filtered HNSW's nearest candidates plus the scope's best BM25 matches, or `None` when HNSW
/// returns too few (every candidate is then scored). Approximate: HNSW may miss a true
/// neighbour.
fn hnsw_set<'e>(
    ctx: &RankCtx<'_>,
    cfg: &RecallConfig,
    entries: &'e [Arc<Entry>],
    k: usize,
) -> Result<Option<Vec<&'e Arc<Entry>>>, Problem> {
    let ids: Vec<u32> = entries.iter().map(|e| e.doc).collect();
    let allow = IdSet::from_sorted(&ids, ctx.shared.vectors.load().len());
    let depth = (k * cfg.hnsw_oversample).max(k + 10);
    if depth >= ids.len() {
        return Ok(None);
    }
    let hits = ctx
        .shared
        .hnsw
        .load()
        .search_filtered(ctx.query, depth, depth.max(64), &allow);
    if hits.len() < depth {
        return Ok(None);
    }
    let lexical = if ctx.rank.lexical_share > 0.0 {
        ctx.shared
            .scope
            .lexical(ctx.filter, ctx.text, depth)
            .map_err(index_error)?
    } else {
        Vec::new()
    };
    let mut docs: Vec<u32> = hits.iter().chain(&lexical).map(|(d, _)| *d).collect();
    docs.sort_unstable();
    docs.dedup();
    Ok(Some(
        docs.into_iter()
            .filter_map(|d| entry_of(entries, d))
            .collect(),
    ))
}

/// The entry with internal id `doc` among `entries`, which are sorted by id (candidates are).
fn entry_of(entries: &[Arc<Entry>], doc: u32) -> Option<&Arc<Entry>> {
    entries
        .binary_search_by_key(&doc, |e| e.doc)
        .ok()
        .map(|i| &entries[i])
}

fn respond(
    ctx: &RankCtx<'_>,
    grant: &TenantGrant,
    entries: &[Arc<Entry>],
    stale: &HashMap<u32, String>,
    ranked: Vec<Ranked>,
    path: VectorPath,
) -> RecallResponse {
    let results: Vec<Hit> = ranked
        .into_iter()
        .filter_map(|r| entry_of(entries, r.doc).map(|e| (e, r)))
        .filter(|(e, _)| grant.can_see(&e.event))
        .map(|(e, r)| Hit {
            event: e.event.clone(),
            score: r.score,
            score_breakdown: ctx.rank.explain(&r.signals, &e.prior(), ctx.now_ms),
            stale: stale.contains_key(&e.doc),
            stale_by: stale.get(&e.doc).cloned(),
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

#[cfg(test)]
mod tests {
    use super::ActorNames;

    #[test]
    fn an_actor_is_named_when_all_its_words_occur_in_the_query() {
        let q = ActorNames::new("What did Caroline tell user 42 about the trip?");
        assert!(q.names("Caroline"));
        assert!(q.names("caroline"));
        assert!(q.names("user-42"));
        assert!(!q.names("user-7"));
        assert!(!q.names("Melanie"));
        assert!(!q.names("--"), "an id without words names nobody");
    }
}
