//! The recall pipeline (scope → candidates → vectors → rank → evidence) and the timeline.
//!
//! Invariants:
//! - the tenant from the grant and every scope filter are applied before any vector work:
//!   the vector stage only ever sees in-scope, visible candidates;
//! - by default the answer is the exact in-scope top k under the ranking function: every
//!   candidate is scored (rayon-parallel), large sets first from proven bounds on their 8-bit
//!   vector codes, then from full vectors for every candidate those bounds cannot rule out,
//!   with the same code and the same result as scoring all of them in full;
//! - visibility and ranking inputs are read from the table's dense heads; entries are read
//!   only for the returned hits, which are checked again against the grant and the view;
//! - partitioned recall is approximate: with `partitioned` on, a broad scope (more than
//!   `exact_max_candidates` in the index; a scope at or under it is always exact) whose
//!   filter heads can decide is answered from the members of the partition lists nearest the
//!   query (or, for a scope narrower than those members, from its ids in the index that lie
//!   in one of those lists), plus every id the partition does not cover and, when BM25
//!   ranks, the scope's best BM25 matches; each is checked against scope, grant and view on
//!   its head like any candidate,
//!   so only ranking, never scope, is approximate; fewer than k after stale suppression
//!   falls back to the exact path; the response then says `path: "partition"`; the probed
//!   members' code bounds are read from the lists' own copies of the codes, which equal the
//!   store's, so the ranking of a candidate set does not depend on where its bounds came from;
//! - filtered HNSW is approximate (hnsw_rs may miss a true neighbour, so no bound on its list
//!   proves the top k); it runs only when the operator opts in with `approximate`, and the
//!   response then says `path: "hnsw"`;
//! - episode context and episode best are read from the scored set alone, so nothing out of
//!   scope or invisible lends an event relevance; the actors a query names are its tenant's
//!   own ([`QueryRead`]), so a name in another tenant is an ordinary word;
//! - every returned event is checked once more against the grant's tenant.

pub mod evidence;
mod request;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use serde::Serialize;

use crate::read::words::ActorNames;
pub use crate::read::words::QueryWords;
pub use request::{Cursor, RecallRequest, Scope, TimelineQuery};

use crate::auth::TenantGrant;
use crate::error::{ErrorCode, Problem};
use crate::index::scope::{best_hits, matches, ScopeFilter};
use crate::index::vector::{
    block_bounds, code_bounds, dot, exact_scores, top_k, IdSet, Partition, QueryCode, VectorStore,
};
use crate::model::{EventStatus, StoredEvent, Timestamp};
use crate::rank::dates::{named_dates, on_any};
use crate::rank::{Breakdown, Prior, RankConfig, Signals};
use crate::read::{
    Access, Entry, Head, HeadFilter, Partitioned, Snapshot, Table, View, Visibility, Visible, NONE,
    NO_SOURCE,
};
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
    /// Answer broad scopes from the vector partitions nearest the query (off by default:
    /// answers are then approximate). Independent of `approximate`, and tried first.
    pub partitioned: bool,
    /// With `partitioned`, the share of partition lists probed (at least one; more while
    /// fewer than k in-scope events were found).
    pub partition_probe_share: f64,
    /// With `partitioned`, a probe stops taking further lists once those it took hold this
    /// many of the tenant's members (fewer than the probe share then): a probe of a tenant
    /// of a million events costs what one of 260,000 does.
    pub partition_probe_max_members: usize,
    /// With `partitioned`, partitions are built once the store holds this many vectors
    /// (below, exact scoring is fast enough).
    pub partition_min_vectors: usize,
    /// From this many candidates on, scores are first bounded from the vectors' 8-bit codes
    /// and only the candidates that could rank are scored from their full vectors (the
    /// answer is the same; `usize::MAX` turns the bounding off). From an eighth of it when
    /// a partition probe has read most candidates' bounds already.
    pub code_min_candidates: usize,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            approximate: false,
            exact_max_candidates: 20_000,
            hnsw_min_fraction: 0.3,
            hnsw_oversample: 4,
            stale_min_similarity: 0.0,
            partitioned: false,
            partition_probe_share: 1.0 / 16.0,
            partition_probe_max_members: PARTITION_PROBE_MAX_MEMBERS,
            partition_min_vectors: 50_000,
            code_min_candidates: CODE_MIN_CANDIDATES,
        }
    }
}

impl RecallConfig {
    /// Turns partitioned recall on, reading `probe_share` of the lists, which must lie in
    /// (0, 1].
    pub fn partition(&mut self, probe_share: f64) -> anyhow::Result<()> {
        anyhow::ensure!(
            probe_share > 0.0 && probe_share <= 1.0,
            "--partition-probe-share must lie in (0, 1]"
        );
        self.partitioned = true;
        self.partition_probe_share = probe_share;
        Ok(())
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
    /// The members of the vector partitions nearest the query (approximate; only with
    /// `partitioned` recall enabled).
    Partition,
}

impl VectorPath {
    /// The snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            VectorPath::Exact => "exact",
            VectorPath::Hnsw => "hnsw",
            VectorPath::HnswFallbackExact => "hnsw_fallback_exact",
            VectorPath::Partition => "partition",
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
    /// Visible in-scope candidates scored (on the `partition` path, those among the probed
    /// lists' members and the events the partitions do not cover yet).
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
pub fn candidates(snap: &Snapshot<'_>, filter: &ScopeFilter) -> Result<Vec<u32>, Problem> {
    let table: &Table = &snap.table;
    if !table.may_match(filter) {
        return Ok(Vec::new());
    }
    let heads = table.head_filter(filter);
    let mut ids = committed(snap, filter, heads.as_ref())?;
    for entry in table.live_from(snap.watermark) {
        if matches(filter, &entry.scope_doc()) {
            ids.push(entry.doc);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// The committed ids in scope: the index's answer to the whole filter or, when `heads`
/// decide it and it has a narrowest list ([`crate::index::scope::ScopeIndex::narrowest`]),
/// that list's ids whose heads match (a deleted event's never does).
fn committed(
    snap: &Snapshot<'_>,
    filter: &ScopeFilter,
    heads: Option<&HeadFilter>,
) -> Result<Vec<u32>, Problem> {
    let narrowed = heads.and_then(|h| Some((h, snap.scope.narrowest(filter)?)));
    let Some((heads, narrowest)) = narrowed else {
        return snap.scope.search(filter).map_err(index_error);
    };
    let ids = snap
        .scope
        .search_narrowest(&narrowest)
        .map_err(index_error)?;
    // Each check is a scattered read of a head: on both cores for a long list.
    let table: &Table = &snap.table;
    Ok(ids
        .par_chunks(HEAD_CHECK_CHUNK)
        .flat_map_iter(|chunk| {
            chunk
                .iter()
                .copied()
                .filter(|&d| heads.matches(&table.head(d)))
        })
        .collect())
}

/// Ids whose heads one task checks ([`committed`]).
const HEAD_CHECK_CHUNK: usize = 4096;

/// A recall's in-scope ids ([`candidates`]), listed once on first use and shared by the
/// steps that need them: counting a scope term statistics cannot bound, reading a narrow
/// scope by id, the exact path.
struct InScope<'a> {
    snap: &'a Snapshot<'a>,
    filter: &'a ScopeFilter,
    ids: OnceLock<Vec<u32>>,
}

impl<'a> InScope<'a> {
    fn new(snap: &'a Snapshot<'a>, filter: &'a ScopeFilter) -> Self {
        InScope {
            snap,
            filter,
            ids: OnceLock::new(),
        }
    }

    fn ids(&self) -> Result<&[u32], Problem> {
        if let Some(ids) = self.ids.get() {
            return Ok(ids);
        }
        let ids = candidates(self.snap, self.filter)?;
        Ok(self.ids.get_or_init(|| ids))
    }
}

/// Candidates per rayon task when checking visibility (below one task, no fan-out).
const VISIBLE_CHUNK: usize = 4096;

/// The heads of the candidates `access` may see, in `ids` order. Heads are read from one
/// dense array, on both cores for broad scopes.
fn visible(snap: &Snapshot<'_>, access: &Access, ids: &[u32], vis: &Visibility) -> Vec<Head> {
    let table: &Table = &snap.table;
    let view = View::new(vis);
    let keep = |id: &u32| Some(table.head(*id)).filter(|h| access.shows(table, &view, h));
    if ids.len() <= VISIBLE_CHUNK {
        ids.iter().filter_map(keep).collect()
    } else {
        ids.par_iter()
            .with_min_len(VISIBLE_CHUNK)
            .filter_map(keep)
            .collect()
    }
}

/// What decides staleness besides the subject.
struct StaleCtx<'a> {
    vectors: &'a VectorStore,
    min_similarity: f32,
}

impl StaleCtx<'_> {
    /// Whether `newer` is about the same thing as `older` (summary embeddings close enough).
    fn similar(&self, older: u32, newer: u32) -> bool {
        if self.min_similarity <= 0.0 {
            return true;
        }
        self.vectors
            .with_vector(older, |a| self.vectors.with_vector(newer, |b| dot(a, b)))
            .flatten()
            .is_some_and(|cos| cos >= self.min_similarity)
    }
}

/// The newest event that the grant may see, is active in the view, occurred later and is
/// about the same thing: on the same subject (same actor), or stated by the subject itself
/// on the same topic.
fn stale_by(
    table: &Table,
    ctx: &StaleCtx<'_>,
    h: &Head,
    access: &Access,
    view: &View,
) -> Option<u32> {
    if h.subject == NONE && h.topic == NONE {
        return None;
    }
    table
        .subject_docs(h.subject)
        .iter()
        .chain(table.voice_docs(h.topic))
        .filter(|d| **d != h.doc)
        .map(|d| table.head(*d))
        .filter(|o| o.occurred_ms > h.occurred_ms && access.allows(o))
        .filter(|o| access.status(table, view, o) == Some(EventStatus::Active))
        .filter(|o| o.subject == h.subject || table.same_topic(h.doc, o.doc))
        .filter(|o| ctx.similar(h.doc, o.doc))
        .max_by_key(|o| (o.occurred_ms, o.doc))
        .map(|o| o.doc)
}

/// Heads per rayon task when looking for newer events (below one task, no fan-out).
const STALE_CHUNK: usize = 1024;

/// Splits stale events out (dropped, or kept and marked with the newer event's id when
/// `keep`).
fn apply_staleness(
    snap: &Snapshot<'_>,
    config: &RecallConfig,
    access: &Access,
    heads: Vec<Head>,
    vis: &Visibility,
    keep: bool,
) -> (Vec<Head>, HashMap<u32, String>) {
    let vectors = &snap.vectors;
    let ctx = StaleCtx {
        vectors,
        min_similarity: config.stale_min_similarity,
    };
    let table: &Table = &snap.table;
    let view = View::new(vis);
    let newer = |h: &Head| stale_by(table, &ctx, h, access, &view);
    // Each head's subject lists are scattered reads: broad sets look on both cores.
    let newer: Vec<Option<u32>> = if heads.len() <= STALE_CHUNK {
        heads.iter().map(newer).collect()
    } else {
        heads
            .par_iter()
            .with_min_len(STALE_CHUNK)
            .map(newer)
            .collect()
    };
    let mut marks = HashMap::new();
    let mut out = Vec::with_capacity(heads.len());
    for (h, newer) in heads.into_iter().zip(newer) {
        match newer {
            Some(by) if keep => {
                if let Some(newer) = table.get(by) {
                    marks.insert(h.doc, newer.event.event_id.clone());
                }
                out.push(h);
            }
            Some(_) => {}
            None => out.push(h),
        }
    }
    (out, marks)
}

/// Scope-first recall of one snapshot with a precomputed query vector, ranked with `rank`;
/// `read` is the query's words as the caller read them to embed it ([`QueryRead`]).
pub fn recall(
    snap: &Snapshot<'_>,
    config: &RecallConfig,
    rank: &RankConfig,
    grant: &TenantGrant,
    req: &RecallRequest,
    read: &QueryRead,
    query: &[f32],
) -> Result<RecallResponse, Problem> {
    let started = std::time::Instant::now();
    let rank = &rank.for_query(&req.query);
    let filter = scope_filter(grant.tenant(), &req.scope);
    let now = Timestamp::now();
    let vis = Visibility {
        include_superseded: req.include_superseded,
        as_of: req.as_of,
        now,
    };
    let access = Access::new(&snap.table, grant);
    let bm25 = Bm25 {
        snap,
        filter: &filter,
        text: &read.words.lexical,
        hits: OnceLock::new(),
    };
    let in_scope = InScope::new(snap, &filter);
    let scoped = |partitioned: bool| -> Result<_, Problem> {
        // A tenant that never held an event: nothing to score, on the exact path.
        let Some(access) = &access else {
            return Ok((!partitioned).then(Scoped::default));
        };
        let (heads, known) = if partitioned {
            let lexical = (rank.lexical_share > 0.0).then_some(&bm25);
            match partition_scope(
                snap,
                config,
                access,
                &in_scope,
                (query, lexical),
                &vis,
                req.limit,
            )? {
                Some(found) => found,
                None => return Ok(None),
            }
        } else {
            (visible(snap, access, in_scope.ids()?, &vis), Vec::new())
        };
        let keep = req.include_stale;
        let (heads, stale) = apply_staleness(snap, config, access, heads, &vis, keep);
        // Too few after stale suppression: only the exact path can tell whether k exist.
        let enough = !partitioned || heads.len() >= req.limit;
        Ok(enough.then_some(Scoped {
            heads,
            stale,
            known,
        }))
    };
    let (
        partitioned,
        Scoped {
            heads,
            stale,
            known,
        },
    ) = match scoped(true)? {
        Some(found) => (true, found),
        None => (false, scoped(false)?.unwrap_or_default()),
    };
    let ctx = RankCtx {
        snap,
        rank,
        query,
        text: &req.query,
        read,
        bm25: &bm25,
        known: &known,
        now_ms: now.unix_millis(),
        code_min_candidates: config.code_min_candidates,
    };
    let scoped = std::time::Instant::now();
    telemetry::recall_stage("scope", scoped - started);
    let (ranked, path) = if partitioned {
        (rank_set(&ctx, &heads, req.limit)?, VectorPath::Partition)
    } else {
        choose_and_rank(&ctx, config, &heads, req.limit)?
    };
    let scored = std::time::Instant::now();
    telemetry::recall_stage("vector", scored - scoped);
    telemetry::recall_path(path.as_str());
    let response = respond(&ctx, grant, &vis, heads.len(), &stale, ranked, path);
    telemetry::recall_stage("evidence", scored.elapsed());
    Ok(response)
}

/// The in-scope visible candidates of a recall.
#[derive(Default)]
struct Scoped {
    /// Heads, by id.
    heads: Vec<Head>,
    /// Stale events kept, with the id of the newer event.
    stale: HashMap<u32, String>,
    /// Code bounds the candidate path has read already (see [`KnownBounds`]).
    known: KnownBounds,
}

/// `(id, (low, high))`: code bounds of candidates, by id, that a partition probe read from
/// its lists' own copies of the codes; ranking reads the others from the store.
type KnownBounds = Vec<(u32, (f32, f32))>;

/// Default [`RecallConfig::partition_probe_max_members`]: about what two cores read in 2 ms
/// here (each member costs about 200 ns of CPU from the list to the ranking).
pub const PARTITION_PROBE_MAX_MEMBERS: usize = 16_384;

/// BM25 matches added to a partitioned candidate set, per result asked for.
const PARTITION_LEXICAL_DEPTH: usize = 4;

/// A scope of at most this share (1/n) of the tenant members the probed lists hold is read
/// by its ids (each looked up in the partition) rather than by the lists' members: listing
/// an id from the index and reading its head from the table costs about four times reading
/// a member's head from its list, which holds a copy in member order.
const PARTITION_BY_ID_DIVISOR: usize = 4;

/// The visible in-scope heads among the members of the partition lists nearest `query`
/// (the nearest `partition_probe_share` of them, fewer past the member budget: see
/// [`probe_count`]), among the ids the partition does not
/// cover, and, when `lexical` is given (BM25 has a share of the ranking), among the scope's
/// [`PARTITION_LEXICAL_DEPTH`]·k best BM25 matches, in id order. A scope that is a large
/// part of its tenant is read from the probed lists' members, more lists while fewer than
/// `k` were found; a narrower one from the index's ids, those in a probed list kept.
/// `None` (the caller takes the exact path) unless partitioned recall is on, a partition
/// is built, heads can decide the filter and the index counts more than
/// `exact_max_candidates` events in scope, or when a narrow scope's probed lists hold
/// fewer than `k` of its events.
fn partition_scope(
    snap: &Snapshot<'_>,
    cfg: &RecallConfig,
    access: &Access,
    in_scope: &InScope<'_>,
    (query, lexical): (&[f32], Option<&Bm25<'_>>),
    vis: &Visibility,
    k: usize,
) -> Result<Option<(Vec<Head>, KnownBounds)>, Problem> {
    if !cfg.partitioned || k == 0 {
        return Ok(None);
    }
    let Some(partitioned) = snap.partition.clone() else {
        return Ok(None);
    };
    let partition = &partitioned.index;
    let Some(scope) = snap.table.head_filter(in_scope.filter) else {
        return Ok(None);
    };
    let Some(count) = broad_count(snap, in_scope, cfg.exact_max_candidates)? else {
        return Ok(None);
    };
    let order = partition.order(query);
    if order.is_empty() {
        return Ok(None);
    }
    let (probes, probed_members) = probe_count(partition, &order, scope.tenant, cfg);
    let view = View::new(vis);
    let keep = |t: &Table, h: &Head| scope.matches(h) && access.shows(t, &view, h);
    let probe = Probe {
        partitioned: &partitioned,
        order: &order,
        probes,
    };
    let (mut heads, bounds) = if count.saturating_mul(PARTITION_BY_ID_DIVISOR) <= probed_members {
        let heads = probe_by_id(snap, in_scope.ids()?, &probe, keep);
        if heads.len() < k {
            return Ok(None);
        }
        (heads, Vec::new())
    } else {
        let code = QueryCode::new(query);
        probe_lists(snap, &probe, (scope.tenant, k), code.as_ref(), keep)
    };
    if let Some(bm25) = lexical {
        // Events the query names by their words, wherever their vectors lie.
        let hits = bm25.best(k.saturating_mul(PARTITION_LEXICAL_DEPTH))?;
        let table: &Table = &snap.table;
        heads.extend(
            hits.iter()
                .map(|(d, _)| table.head(*d))
                .filter(|h| keep(table, h)),
        );
    }
    Ok(Some(by_id(&heads, &bounds)))
}

/// How many of the lists in `order` a probe reads, and how many of `tenant`'s members they
/// hold: the nearest `partition_probe_share` of the lists (at least one), or fewer once the
/// nearest hold `partition_probe_max_members` of the tenant's members, so that a probe's
/// cost stops growing with its tenant.
fn probe_count(
    partition: &Partition,
    order: &[u32],
    tenant: u32,
    cfg: &RecallConfig,
) -> (usize, usize) {
    let share = (order.len() as f64 * cfg.partition_probe_share)
        .ceil()
        .max(1.0) as usize;
    let mut members = 0;
    for (read, &list) in order.iter().take(share).enumerate() {
        if read > 0 && members >= cfg.partition_probe_max_members {
            return (read, members);
        }
        members += partition.members(list, tenant).len();
    }
    (share.min(order.len()), members)
}

/// `heads` in id order without repeats, and the bounds of those among the first
/// `bounds.len()` (`bounds[i]` bounds `heads[i]`), by id. Sorts 8-byte keys rather than
/// 72-byte heads.
fn by_id(heads: &[Head], bounds: &[(f32, f32)]) -> (Vec<Head>, KnownBounds) {
    let mut keys: Vec<u64> = heads
        .iter()
        .enumerate()
        .map(|(i, h)| (u64::from(h.doc) << 32) | i as u64)
        .collect();
    // A probe hands its lists' members over as ascending runs, which a merging sort only
    // merges (`sort_unstable` would partition them all over again).
    keys.sort();
    // The first of a repeated id has the lowest position: the one with bounds, if any.
    keys.dedup_by_key(|key| *key >> 32);
    let position = |key: &u64| (key & u64::from(u32::MAX)) as usize;
    let known = keys
        .iter()
        .filter_map(|key| bounds.get(position(key)).map(|b| ((key >> 32) as u32, *b)))
        .collect();
    (keys.iter().map(|key| heads[position(key)]).collect(), known)
}

/// How many events are in scope (an upper bound, when term statistics tell that more
/// than `exact_max` do, which spares counting a broad scope's postings); `None` when at
/// most `exact_max` do. A filter with a narrowest clause is counted by listing its ids,
/// which the exact path or the read by id then reuses; any other by the index alone.
fn broad_count(
    snap: &Snapshot<'_>,
    in_scope: &InScope<'_>,
    exact_max: usize,
) -> Result<Option<usize>, Problem> {
    let filter = in_scope.filter;
    let count = match snap.scope.count_bounds(filter) {
        Some((_, upper)) if upper <= exact_max => return Ok(None),
        Some((lower, upper)) if lower > exact_max => return Ok(Some(upper)),
        _ if filter.narrows_twice() => in_scope.ids()?.len(),
        _ => snap.scope.count(filter).map_err(index_error)?,
    };
    Ok((count > exact_max).then_some(count))
}

/// The partition lists a recall reads: the first `probes` of `order`.
struct Probe<'a> {
    partitioned: &'a Partitioned,
    order: &'a [u32],
    probes: usize,
}

/// The kept heads among the scope's ids (from the index) that lie in a probed list or in
/// none (written after the build).
fn probe_by_id(
    snap: &Snapshot<'_>,
    ids: &[u32],
    probe: &Probe<'_>,
    keep: impl Fn(&Table, &Head) -> bool,
) -> Vec<Head> {
    let mut probed = vec![false; probe.order.len()];
    for &list in probe.order.iter().take(probe.probes) {
        probed[list as usize] = true;
    }
    let in_probed = |d: &&u32| {
        probe
            .partitioned
            .index
            .list_of(**d)
            .is_none_or(|l| probed[l as usize])
    };
    let table: &Table = &snap.table;
    ids.iter()
        .filter(in_probed)
        .map(|&d| table.head(d))
        .filter(|h| keep(table, h))
        .collect()
}

/// Heads and the code bounds of the first `bounds.len()` of them (see [`probe_lists`]).
type Probed = (Vec<Head>, Vec<(f32, f32)>);

/// The kept heads among `tenant`'s members of the probed lists (more lists, in order,
/// while fewer than `k` were kept), then among the ids the partition does not cover; with
/// `code`, also the kept members' code bounds, read from the lists' own codes (`bounds[i]`
/// bounds `heads[i]`; the uncovered ids come last and have none). The probed lists are read
/// on both cores.
fn probe_lists(
    snap: &Snapshot<'_>,
    probe: &Probe<'_>,
    (tenant, k): (u32, usize),
    code: Option<&QueryCode>,
    keep: impl Fn(&Table, &Head) -> bool + Sync,
) -> Probed {
    let table: &Table = &snap.table;
    let read = |list: &u32| -> Probed {
        let Some(m) = probe.partitioned.index.coded_members(*list, tenant) else {
            return Default::default();
        };
        // Copied first, then checked: a loop of loads alone keeps more of them in flight.
        let mut heads = probe.partitioned.heads(table, *list, m.rows.clone());
        let mut rows = Vec::with_capacity(heads.len());
        let mut row = m.rows.start as u32;
        heads.retain(|h| {
            let kept = keep(table, h);
            if kept {
                rows.push(row);
            }
            row += 1;
            kept
        });
        let bounds = code.map_or_else(Vec::new, |c| block_bounds(c, m.codes, &rows));
        (heads, bounds)
    };
    let first = probe.probes.min(probe.order.len());
    let parts: Vec<Probed> = probe.order[..first].par_iter().map(read).collect();
    // One copy into place (a pairwise reduce would copy each head once per level).
    let mut heads = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    let mut bounds = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
    for (h, b) in parts {
        heads.extend(h);
        bounds.extend(b);
    }
    for list in &probe.order[first..] {
        if heads.len() >= k {
            break;
        }
        let (h, b) = read(list);
        heads.extend(h);
        bounds.extend(b);
    }
    let uncovered = (probe.partitioned.index.upto()..table.next_doc()).map(|d| table.head(d));
    heads.extend(uncovered.filter(|h| keep(table, h)));
    (heads, bounds)
}

/// The BM25 matches of a recall's query text in its scope, searched once on first use and
/// shared by the candidate paths that add the best of them and by the ranking that scores
/// every candidate by them.
struct Bm25<'a> {
    snap: &'a Snapshot<'a>,
    filter: &'a ScopeFilter,
    text: &'a str,
    hits: OnceLock<Vec<(u32, f32)>>,
}

impl Bm25<'_> {
    /// Every committed match, `(doc, score)` in no particular order.
    fn all(&self) -> Result<&[(u32, f32)], Problem> {
        if let Some(hits) = self.hits.get() {
            return Ok(hits);
        }
        let hits = self
            .snap
            .scope
            .lexical_all(self.filter, self.text)
            .map_err(index_error)?;
        Ok(self.hits.get_or_init(|| hits))
    }

    /// The `k` best matches, best first.
    fn best(&self, k: usize) -> Result<Vec<(u32, f32)>, Problem> {
        Ok(best_hits(self.all()?.to_vec(), k))
    }
}

/// What every scoring path needs.
struct RankCtx<'a> {
    snap: &'a Snapshot<'a>,
    rank: &'a RankConfig,
    /// The unit query vector.
    query: &'a [f32],
    /// The query text (named dates).
    text: &'a str,
    /// The actors it names.
    read: &'a QueryRead,
    /// The query's BM25 matches in scope.
    bm25: &'a Bm25<'a>,
    /// Code bounds the candidate path read already.
    known: &'a [(u32, (f32, f32))],
    now_ms: i64,
    /// See [`RecallConfig::code_min_candidates`].
    code_min_candidates: usize,
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
    heads: &[Head],
    k: usize,
) -> Result<(Vec<Ranked>, VectorPath), Problem> {
    debug_assert!(
        heads.windows(2).all(|w| w[0].doc < w[1].doc),
        "candidates sorted by id"
    );
    let n = heads.len();
    let total = ctx.snap.hnsw.len().max(1);
    let use_hnsw = cfg.approximate
        && n > cfg.exact_max_candidates
        && (n as f64 / total as f64) >= cfg.hnsw_min_fraction;
    let (set, path) = match (use_hnsw && k > 0).then(|| hnsw_set(ctx, cfg, heads, k)) {
        None => (None, VectorPath::Exact),
        Some(found) => match found? {
            Some(set) => (Some(set), VectorPath::Hnsw),
            None => (None, VectorPath::HnswFallbackExact),
        },
    };
    let set = set.as_deref().unwrap_or(heads);
    Ok((rank_set(ctx, set, k)?, path))
}

/// Candidates per rayon task when gathering ids and priors.
const GATHER_CHUNK: usize = 4096;

/// The code bounds of `ids` (ascending): from `known` (ascending) where it has them, the
/// others from the store.
fn bounds_of(
    vectors: &VectorStore,
    code: &QueryCode,
    ids: &[u32],
    known: &[(u32, (f32, f32))],
) -> Vec<(f32, f32)> {
    if known.is_empty() {
        return code_bounds(vectors, code, ids);
    }
    let mut out = vec![(f32::NEG_INFINITY, f32::NEG_INFINITY); ids.len()];
    let mut missing = (Vec::new(), Vec::new());
    let mut next = known.iter().peekable();
    for (i, &d) in ids.iter().enumerate() {
        while next.next_if(|(k, _)| *k < d).is_some() {}
        match next.next_if(|(k, _)| *k == d) {
            Some(&(_, b)) => out[i] = b,
            None => {
                missing.0.push(i);
                missing.1.push(d);
            }
        }
    }
    let read = code_bounds(vectors, code, &missing.1);
    for (i, b) in missing.0.into_iter().zip(read) {
        out[i] = b;
    }
    out
}

/// Scores `set` (cosine via the vector store, BM25 via the scope index, actor names, episode
/// context, priors) in parallel and returns its top k. Large sets are first bounded from the
/// 8-bit codes ([`code_bounds`]); only the candidates that could still rank (with their
/// episode neighbours and their episodes' [`episode_contenders`]) are then scored from their
/// full vectors. Either way the result is
/// the exact top k: the same scores, computed by the same code, in the same order.
fn rank_set(ctx: &RankCtx<'_>, set: &[Head], k: usize) -> Result<Vec<Ranked>, Problem> {
    if set.is_empty() {
        return Ok(Vec::new());
    }
    let (ids, priors): (Vec<u32>, Vec<Prior>) = set.iter().map(|h| (h.doc, h.prior())).unzip();
    let bm25 = lexical_scores(ctx, set)?;
    let best_bm25 = bm25.iter().copied().fold(0.0f32, f32::max);
    let lexical: Vec<f32> = bm25
        .iter()
        .map(|b| if best_bm25 > 0.0 { b / best_bm25 } else { 0.0 })
        .collect();
    let episodes = Episodes::new(ctx.rank, set);
    let actor = named_actors(ctx, set);
    let date = on_named_dates(ctx, &priors);
    let inputs = Inputs {
        ids: &ids,
        priors: &priors,
        bm25: &bm25,
        lexical: &lexical,
        actor: &actor,
        date: &date,
        episodes: &episodes,
    };
    let vectors = &ctx.snap.vectors;
    let (pool, cosines) = match bounded_code(ctx, vectors, set.len()) {
        Some(code) => {
            let bounds = bounds_of(vectors, &code, &ids, ctx.known);
            let floors = inputs.episode_bests(ctx.rank, |j| bounds[j].0);
            let pool = survivors(ctx, &inputs, &bounds, &floors, k);
            let cosines = rescore(ctx, vectors, &inputs, (&bounds, &floors), &pool);
            (pool, cosines)
        }
        None => (
            (0..set.len() as u32).collect(),
            exact_scores(vectors, ctx.query, &ids),
        ),
    };
    let bests = if cosines.is_empty() {
        Vec::new()
    } else {
        inputs.episode_bests(ctx.rank, |j| cosines[j])
    };
    // Small pools stay on this thread: waking the pool costs more than they do.
    let signals: Vec<Signals> = pool
        .par_iter()
        .with_min_len(GATHER_CHUNK)
        .map(|&i| inputs.signals(ctx.rank, i as usize, &cosines, &bests))
        .collect();
    let totals: Vec<f32> = pool
        .par_iter()
        .zip(signals.par_iter())
        .with_min_len(GATHER_CHUNK)
        .map(|(&i, sig)| ctx.rank.score(sig, &priors[i as usize], ctx.now_ms))
        .collect();
    let slot: HashMap<u32, usize> = pool.iter().enumerate().map(|(s, &i)| (i, s)).collect();
    Ok(top_k(&pool, &totals, k)
        .into_iter()
        .map(|(i, score)| Ranked {
            doc: ids[i as usize],
            score,
            signals: signals[slot[&i]],
        })
        .collect())
}

/// Per-candidate inputs to ranking other than the cosine, by position in the scored set.
struct Inputs<'a> {
    ids: &'a [u32],
    priors: &'a [Prior],
    bm25: &'a [f32],
    lexical: &'a [f32],
    actor: &'a [bool],
    date: &'a [bool],
    episodes: &'a Episodes,
}

impl Inputs<'_> {
    /// The best match of each episode ([`Episodes::bests`]) from each position's cosine (an
    /// exact one, or a bound: the best is then the same bound on the best); none when the
    /// episode signal is off.
    fn episode_bests(&self, rank: &RankConfig, cosine: impl Fn(usize) -> f32 + Sync) -> Vec<f32> {
        if rank.episode_weight <= 0.0 {
            return Vec::new();
        }
        self.episodes
            .bests(|j| rank.matched(cosine(j), self.lexical[j]))
    }

    /// The signals of candidate `i`, given the cosines of it and of the events of its
    /// episode and the episodes' bests from them (cosine, context and episode 0 when
    /// `cosines` is empty).
    fn signals(&self, rank: &RankConfig, i: usize, cosines: &[f32], bests: &[f32]) -> Signals {
        let matched = |j: usize| rank.matched(cosines[j], self.lexical[j]);
        let known = !cosines.is_empty();
        Signals {
            cosine: if known { cosines[i] } else { 0.0 },
            bm25: self.bm25[i],
            lexical: self.lexical[i],
            context: if known {
                self.episodes.context_of(i, matched)
            } else {
                0.0
            },
            episode: self.episodes.best_of(i, bests),
            actor: self.actor[i],
            date: self.date[i],
        }
    }
}

/// Below this many candidates every one is scored from its full vector.
pub const CODE_MIN_CANDIDATES: usize = 4096;

/// The coded query when a set of `n` candidates is worth bounding from the 8-bit codes:
/// large enough, a query of the store's dimension, and a ranking whose score never falls
/// when a cosine rises (so bounds on cosines bound the score).
fn bounded_code(ctx: &RankCtx<'_>, vectors: &VectorStore, n: usize) -> Option<QueryCode> {
    let w = ctx.rank.weights;
    let monotone = w.relevance >= 0.0
        && (0.0..=1.0).contains(&ctx.rank.lexical_share)
        && ctx.rank.context_weight >= 0.0
        && ctx.rank.episode_weight >= 0.0;
    // Bounds a probe read in memory order cost far less than those gathered by id.
    let min = if ctx.known.len() * 2 >= n {
        ctx.code_min_candidates / 8
    } else {
        ctx.code_min_candidates
    };
    let wanted = n >= min && monotone && ctx.query.len() == vectors.dim();
    wanted.then(|| QueryCode::new(ctx.query)).flatten()
}

/// Positions of the candidates whose score could reach the k-th best lower bound.
///
/// Every score is bounded from the cosine intervals of the event, of its episode neighbours
/// and of the rest of its episode (the score is non-decreasing in each). Let `T` be the k-th largest lower bound:
/// the k candidates achieving it all score at least `T`, so a candidate whose upper bound is
/// below `T` cannot be in the top k, ties included.
///
/// `floors` are the episodes' best lower matches ([`Inputs::episode_bests`] of the lower
/// bounds; empty when the episode signal is off).
fn survivors(
    ctx: &RankCtx<'_>,
    inputs: &Inputs<'_>,
    bounds: &[(f32, f32)],
    floors: &[f32],
    k: usize,
) -> Vec<u32> {
    let rank = ctx.rank;
    let n = bounds.len();
    // The score is `base + α·cosine⁺ + β·context + γ·episode`, where `base` holds everything
    // that does not depend on a cosine (lexical, actor, date, question, recency, trust,
    // confidence).
    let w = rank.weights.relevance;
    let (alpha, beta) = (w * (1.0 - rank.lexical_share), w * rank.context_weight);
    let gamma = w * rank.episode_weight;
    let matched_low = |j: usize| rank.matched(bounds[j].0, inputs.lexical[j]);
    let matched_high = |j: usize| rank.matched(bounds[j].1, inputs.lexical[j]);
    let ceilings = inputs.episode_bests(rank, |j| bounds[j].1);
    let (low_total, high_total): (Vec<f32>, Vec<f32>) = (0..n)
        .into_par_iter()
        .with_min_len(GATHER_CHUNK)
        .map(|i| {
            let flat = inputs.signals(rank, i, &[], &[]);
            let base = rank.score(&flat, &inputs.priors[i], ctx.now_ms);
            let (lo, hi) = bounds[i];
            let e = inputs.episodes;
            let low = base
                + alpha * lo.max(0.0)
                + beta * e.context_of(i, matched_low)
                + gamma * e.best_of(i, floors);
            let high = base
                + alpha * hi.max(0.0)
                + beta * e.context_of(i, matched_high)
                + gamma * e.best_of(i, &ceilings);
            // Rounding: these sums are not computed in the order `RankConfig::score` uses.
            let slack = 1e-5 * (1.0 + base.abs() + alpha + beta + gamma);
            (low - slack, high + slack)
        })
        .unzip();
    let positions: Vec<u32> = (0..n as u32).collect();
    let best = top_k(&positions, &low_total, k);
    let threshold = match best.last() {
        Some(&(_, t)) if best.len() == k => t,
        _ => return positions,
    };
    positions
        .into_par_iter()
        .with_min_len(GATHER_CHUNK)
        .filter(|&i| high_total[i as usize] >= threshold)
        .collect()
}

/// Cosines from the full vectors for `pool`, its episode neighbours and, with the episode
/// signal on, the members of their episodes that could hold its best match
/// ([`episode_contenders`]); NaN elsewhere: no other position is read.
fn rescore(
    ctx: &RankCtx<'_>,
    vectors: &VectorStore,
    inputs: &Inputs<'_>,
    (bounds, floors): (&[(f32, f32)], &[f32]),
    pool: &[u32],
) -> Vec<f32> {
    let mut needed: Vec<u32> = pool
        .iter()
        .flat_map(|&i| {
            let near = inputs.episodes.neighbours(i as usize);
            std::iter::once(i).chain(near.into_iter().flatten().map(|j| j as u32))
        })
        .collect();
    if ctx.rank.episode_weight > 0.0 {
        needed.extend(episode_contenders(ctx.rank, inputs, (bounds, floors), pool));
    }
    needed.sort_unstable();
    needed.dedup();
    let docs: Vec<u32> = needed.iter().map(|&i| inputs.ids[i as usize]).collect();
    let scores = exact_scores(vectors, ctx.query, &docs);
    let mut cosines = vec![f32::NAN; inputs.ids.len()];
    for (&i, score) in needed.iter().zip(scores) {
        cosines[i as usize] = score;
    }
    cosines
}

/// The members of `pool`'s episodes whose match could be their episode's best: those whose
/// upper match reaches the episode's best lower match (its floor in `floors`). Any other member's match is below
/// that, and the member holding it is a contender whose exact match is at least that, so
/// the best over the contenders alone is the episode's exact best (a member left unscored
/// counts its lexical part alone, lower still). Each episode is read once however many of
/// its events survived, so a long episode costs its length, not its length times theirs.
fn episode_contenders(
    rank: &RankConfig,
    inputs: &Inputs<'_>,
    (bounds, floors): (&[(f32, f32)], &[f32]),
    pool: &[u32],
) -> Vec<u32> {
    let e = inputs.episodes;
    let mut episodes: Vec<usize> = pool
        .iter()
        .filter_map(|&i| e.episode_of(i as usize))
        .collect();
    episodes.sort_unstable();
    episodes.dedup();
    let high = |j: u32| rank.matched(bounds[j as usize].1, inputs.lexical[j as usize]);
    episodes
        .par_iter()
        .flat_map_iter(|&ep| {
            let floor = floors[ep];
            e.members_in(ep)
                .iter()
                .copied()
                .filter(move |&j| high(j) >= floor)
        })
        .collect()
}

/// BM25 of each event of `set` for the query text, restricted to the scope (0 for events not
/// matching any term and for events newer than the last scope-index refresh).
fn lexical_scores(ctx: &RankCtx<'_>, set: &[Head]) -> Result<Vec<f32>, Problem> {
    let mut out = vec![0.0; set.len()];
    if ctx.rank.lexical_share <= 0.0 || set.is_empty() {
        return Ok(out);
    }
    let by_doc: HashMap<u32, f32> = ctx.bm25.all()?.iter().copied().collect();
    for (slot, h) in out.iter_mut().zip(set) {
        if let Some(score) = by_doc.get(&h.doc) {
            *slot = *score;
        }
    }
    Ok(out)
}

/// Each event's episode within the scored set: the events chained to it by neighbours just
/// before and after (by `occurredAt`, then id) with the same project and the same source
/// (first `sourceRefs` entry: the conversation, session or document it came from, compared by
/// its 64-bit hash, [`Head::source`]), no more than `episode_gap_ms` apart. An event without
/// a source is an episode of its own. Only events of the set count, so nothing out of scope
/// or invisible (deleted, expired, pending review) lends an event relevance.
struct Episodes {
    /// `[before, after]` position per event, [`NONE`] when absent; empty when both the
    /// context and the episode signal are off.
    near: Vec<[u32; 2]>,
    /// Episode number per position (numbered in `occurredAt` order; empty like `near`).
    episode: Vec<u32>,
    /// Positions of each episode's events: those of episode `e` are
    /// `members[start[e]..start[e + 1]]`.
    members: Vec<u32>,
    start: Vec<u32>,
}

impl Episodes {
    fn new(rank: &RankConfig, set: &[Head]) -> Self {
        let off = Episodes {
            near: Vec::new(),
            episode: Vec::new(),
            members: Vec::new(),
            start: vec![0],
        };
        if (rank.context_weight <= 0.0 && rank.episode_weight <= 0.0) || set.is_empty() {
            return off;
        }
        let key = |i: usize| {
            let h = &set[i];
            (h.project, h.source, h.occurred_ms, h.doc)
        };
        let mut order: Vec<usize> = (0..set.len()).collect();
        order.par_sort_unstable_by_key(|i| key(*i));
        let close = |a: usize, b: usize| {
            let ((pa, sa, ta, _), (pb, sb, tb, _)) = (key(a), key(b));
            pa == pb && sa != NO_SOURCE && sa == sb && (ta - tb).abs() <= rank.episode_gap_ms
        };
        let mut near = vec![[NONE; 2]; set.len()];
        let mut episode = vec![0u32; set.len()];
        let mut start = Vec::new();
        for (p, &i) in order.iter().enumerate() {
            let before = p.checked_sub(1).map(|q| order[q]).filter(|&j| close(i, j));
            let after = order.get(p + 1).copied().filter(|&j| close(i, j));
            near[i] = [before, after].map(|j| j.map_or(NONE, |j| j as u32));
            if before.is_none() {
                start.push(p as u32);
            }
            episode[i] = start.len() as u32 - 1;
        }
        start.push(set.len() as u32);
        Episodes {
            near,
            episode,
            members: order.into_iter().map(|i| i as u32).collect(),
            start,
        }
    }

    /// The episode number of position `i` (none when episodes are off).
    fn episode_of(&self, i: usize) -> Option<usize> {
        self.episode.get(i).map(|&e| e as usize)
    }

    /// The positions of the events of episode `e`.
    fn members_in(&self, e: usize) -> &[u32] {
        &self.members[self.start[e] as usize..self.start[e + 1] as usize]
    }

    /// The best `matched` of each episode, by episode number (empty when episodes are off).
    /// Each episode is read whole: for an episode whose best is used, `matched` must be exact
    /// for every member that could hold the best and no more than exact for the others
    /// ([`episode_contenders`]).
    fn bests(&self, matched: impl Fn(usize) -> f32 + Sync) -> Vec<f32> {
        (0..self.start.len() - 1)
            .into_par_iter()
            .with_min_len(GATHER_CHUNK)
            .map(|e| {
                self.members_in(e)
                    .iter()
                    .map(|&j| matched(j as usize))
                    .fold(0.0f32, f32::max)
            })
            .collect()
    }

    /// The best of `i`'s episode in `bests` (from [`Episodes::bests`]), 0 when off.
    fn best_of(&self, i: usize, bests: &[f32]) -> f32 {
        self.episode_of(i)
            .and_then(|e| bests.get(e))
            .copied()
            .unwrap_or(0.0)
    }

    /// The neighbours of position `i` (before, after).
    fn neighbours(&self, i: usize) -> [Option<usize>; 2] {
        match self.near.get(i) {
            Some(pair) => pair.map(|j| (j != NONE).then_some(j as usize)),
            None => [None, None],
        }
    }

    /// The mean `matched` of the neighbours of `i` (0 without neighbours).
    fn context_of(&self, i: usize, matched: impl Fn(usize) -> f32) -> f32 {
        let (sum, n) = self
            .neighbours(i)
            .into_iter()
            .flatten()
            .fold((0.0, 0u8), |(sum, n), j| (sum + matched(j), n + 1));
        if n > 0 {
            sum / f32::from(n)
        } else {
            0.0
        }
    }
}

/// Filtered HNSW's nearest candidates plus the scope's best BM25 matches, or `None` when HNSW
/// returns too few (every candidate is then scored). Approximate: HNSW may miss a true
/// neighbour.
fn hnsw_set(
    ctx: &RankCtx<'_>,
    cfg: &RecallConfig,
    heads: &[Head],
    k: usize,
) -> Result<Option<Vec<Head>>, Problem> {
    let ids: Vec<u32> = heads.iter().map(|h| h.doc).collect();
    let allow = IdSet::from_sorted(&ids, ctx.snap.vectors.len());
    let depth = (k * cfg.hnsw_oversample).max(k + 10);
    if depth >= ids.len() {
        return Ok(None);
    }
    let hits = ctx
        .snap
        .hnsw
        .search_filtered(ctx.query, depth, depth.max(64), &allow);
    if hits.len() < depth {
        return Ok(None);
    }
    let lexical = if ctx.rank.lexical_share > 0.0 {
        ctx.bm25.best(depth)?
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

/// Whether each candidate occurred on a date the query names (all false without a date
/// boost or a named date).
fn on_named_dates(ctx: &RankCtx<'_>, priors: &[Prior]) -> Vec<bool> {
    let dates = if ctx.rank.date_boost > 0.0 {
        named_dates(ctx.text)
    } else {
        Vec::new()
    };
    if dates.is_empty() {
        return vec![false; priors.len()];
    }
    priors
        .par_iter()
        .with_min_len(GATHER_CHUNK)
        .map(|p| on_any(&dates, p.occurred_ms))
        .collect()
}

/// Whether the query names each candidate's actor ([`QueryRead::named`]).
fn named_actors(ctx: &RankCtx<'_>, set: &[Head]) -> Vec<bool> {
    set.iter()
        .map(|h| ctx.read.named.binary_search(&h.actor).is_ok())
        .collect()
}

/// What a recall reads from its query text once: the tenant's actors it names and the texts
/// BM25 and the embedder take ([`QueryWords`]).
#[derive(Debug, Clone)]
pub struct QueryRead {
    /// Numbers of the tenant's actors the query names, sorted (none without an actor
    /// boost).
    pub named: Vec<u32>,
    /// The lexical and semantic texts.
    pub words: QueryWords,
}

impl QueryRead {
    /// Reads `query` for a recall under `grant` and `rank`. Names count only with an actor
    /// boost: without the actor signal a name stays an ordinary word of the query. Only the
    /// names of actors with an event the grant can see count: any other name is an
    /// ordinary word, exactly like a name no event ever had.
    pub fn new(table: &Table, grant: &TenantGrant, query: &str, rank: &RankConfig) -> Self {
        let mut named = Vec::new();
        let mut ids = Vec::new();
        if rank.actor_boost > 0.0 {
            let names = ActorNames::new(query);
            let ceiling = grant.max_privacy_class();
            let allowed = |actor: &str| grant.allows_actor(actor);
            for (n, id) in table.actors_named(grant.tenant(), &names, ceiling, allowed) {
                named.push(n);
                ids.push(id.to_string());
            }
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        QueryRead {
            named,
            words: QueryWords::new(query, &ids),
        }
    }
}

/// The hits: each ranked event read from the snapshot's table and presented as the grant
/// sees it ([`Visible`], the entry-level twin of the heads' [`Access`] that chose them).
fn respond(
    ctx: &RankCtx<'_>,
    grant: &TenantGrant,
    vis: &Visibility,
    candidates: usize,
    stale: &HashMap<u32, String>,
    ranked: Vec<Ranked>,
    path: VectorPath,
) -> RecallResponse {
    let table: &Table = &ctx.snap.table;
    let seen = Visible::new(grant, table, ctx.snap.keyed, vis.now);
    let results: Vec<Hit> = ranked
        .into_iter()
        .filter_map(|r| table.get(r.doc).map(|e| (e, r)))
        .filter(|(e, _)| seen.sees(&e.event))
        .map(|(e, r)| Hit {
            event: seen.present(&e.event),
            score: r.score,
            score_breakdown: ctx.rank.explain(&r.signals, &e.prior(), ctx.now_ms),
            stale: stale.contains_key(&e.doc),
            stale_by: stale.get(&e.doc).cloned(),
        })
        .collect();
    let events: Vec<&StoredEvent> = results.iter().map(|h| &h.event).collect();
    RecallResponse {
        evidence: evidence::render(&events),
        stats: RecallStats { candidates, path },
        results,
    }
}

/// One timeline page of the grant's tenant, read from one snapshot.
pub fn timeline(
    snap: &Snapshot<'_>,
    grant: &TenantGrant,
    q: &TimelineQuery,
) -> Result<TimelinePage, Problem> {
    let filter = scope_filter(grant.tenant(), &q.scope);
    let ids = candidates(snap, &filter)?;
    let vis = Visibility {
        include_superseded: q.include_superseded,
        as_of: q.as_of,
        now: Timestamp::now(),
    };
    let table: &Table = &snap.table;
    let heads = Access::new(table, grant).map_or_else(Vec::new, |a| visible(snap, &a, &ids, &vis));
    let mut entries: Vec<&Arc<Entry>> = heads.iter().filter_map(|h| table.get(h.doc)).collect();
    entries.sort_by(|a, b| {
        (a.occurred_ms, &a.event.event_id).cmp(&(b.occurred_ms, &b.event.event_id))
    });
    let start = match &q.cursor {
        Some(c) => entries.partition_point(|e| {
            (e.occurred_ms, e.event.event_id.as_str()) <= (c.occurred_ms, c.event_id.as_str())
        }),
        None => 0,
    };
    let page = &entries[start..(start + q.limit + 1).min(entries.len())];
    let next_cursor = (page.len() > q.limit).then(|| {
        let last = page[q.limit - 1];
        Cursor {
            occurred_ms: last.occurred_ms,
            event_id: last.event.event_id.clone(),
        }
        .encode()
    });
    // Only the page's events are presented (copied, with the grant's view of supersession).
    let seen = Visible::new(grant, table, snap.keyed, vis.now);
    Ok(TimelinePage {
        events: page
            .iter()
            .take(q.limit)
            .map(|e| seen.present(&e.event))
            .collect(),
        next_cursor,
    })
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::{probe_count, Partition, RecallConfig, VectorStore};

    #[test]
    fn a_probe_takes_no_list_past_its_member_budget_and_always_one() {
        let (dim, n) = (8, 2_000);
        let mut rng = StdRng::seed_from_u64(7);
        let store = VectorStore::new(dim);
        let unit = |v: Vec<f32>| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        for id in 0..n {
            let v = unit((0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect());
            store.push(id as u32, &v).expect("push");
        }
        let tenants: Vec<u32> = (0..n as u32).map(|i| u32::from(i % 10 == 0)).collect();
        let p = Partition::build(&store, &tenants, 20).expect("built");
        let order = p.order(&unit(vec![1.0; dim]));
        let sizes: Vec<usize> = order.iter().map(|&l| p.members(l, 0).len()).collect();
        let mut cfg = RecallConfig {
            partition_probe_share: 0.5,
            partition_probe_max_members: usize::MAX,
            ..RecallConfig::default()
        };
        let first_ten: usize = sizes[..10].iter().sum();
        assert_eq!(probe_count(&p, &order, 0, &cfg), (10, first_ten));
        cfg.partition_probe_max_members = sizes[0] + 1;
        assert_eq!(
            probe_count(&p, &order, 0, &cfg),
            (2, sizes[0] + sizes[1]),
            "the list that reaches the budget is the last one taken"
        );
        cfg.partition_probe_max_members = 0;
        assert_eq!(
            probe_count(&p, &order, 0, &cfg),
            (1, sizes[0]),
            "one at least"
        );
        cfg.partition_probe_max_members = 1_000;
        let of_small: usize = order[..10].iter().map(|&l| p.members(l, 1).len()).sum();
        assert!(of_small < 1_000);
        assert_eq!(
            probe_count(&p, &order, 1, &cfg),
            (10, of_small),
            "a tenant below the budget reads its share"
        );
    }
}
