//! The recall pipeline and the timeline, over one [`Snapshot`] of the read model:
//!
//! snapshot → scope ([`scope`]: in-scope ids, visible heads) → candidates ([`plan`]: exact,
//! a tenant's graph, partition lists or filtered HNSW, chosen in one place; [`stale`] suppression) → signals
//! and ranking ([`score`], with [`codes`] bounds, [`episodes`], [`lexical`] BM25) → hits and
//! evidence ([`respond`], [`evidence`]).
//!
//! Invariants:
//! - a recall reads only its snapshot: the table, searcher, watermark and vectors it was
//!   given, never the engine's shared state;
//! - the tenant from the grant and every scope filter are applied before any vector work:
//!   the vector stage only ever sees in-scope candidates the grant may see;
//! - by default the answer is the exact in-scope top k under the ranking function (see
//!   [`codes`] for how large sets are bounded without changing it); a graph, partitioned or
//!   HNSW answer is approximate in ranking only, never in scope, and says so in `stats.path`;
//! - episode context and episode best are read from the scored set alone, so nothing out of
//!   scope or invisible lends an event relevance; the actors a query names are its tenant's
//!   own and within the grant ([`QueryRead`]), so any other name is an ordinary word;
//! - ranking is explainable: every hit carries the breakdown its score was computed from.
//! - recency is measured from the request's `asOf` when it has one, else from the read time,
//!   so an as-of recall ranks as memory stood then, alike however often it is repeated.

mod codes;
mod config;
pub mod cost;
mod episodes;
pub mod evidence;
#[cfg(test)]
mod fixture;
mod graph;
mod lexical;
mod partition;
mod plan;
mod query;
mod respond;
mod scope;
mod score;
mod stale;
mod timeline;

use std::time::Instant;

pub use crate::model::request::{Cursor, RecallRequest, Scope, TimelineQuery};
pub use crate::read::words::QueryWords;
pub use codes::CODE_MIN_CANDIDATES;
pub use config::{
    RecallConfig, GRAPH_EF, GRAPH_MIN_SHARE, GRAPH_MIN_VECTORS, PARTITION_MIN_VECTORS,
};
pub use graph::GRAPH_FANOUT;
pub use partition::{PARTITION_PROBE_MAX_MEMBERS, PARTITION_PROBE_SHARE};
pub use plan::VectorPath;
pub use query::QueryRead;
pub use respond::{Hit, RecallResponse, RecallStats};
pub use scope::{
    candidates, scope_filter, surely_small, SearchError, ALONE_MAX_CANDIDATES, SMALL_TENANT_IDS,
};
pub use timeline::{timeline, TimelinePage};

use crate::auth::TenantGrant;
use crate::model::Timestamp;
use crate::rank::RankConfig;
use crate::read::{Access, Snapshot, Visibility};
use crate::telemetry;
use lexical::Bm25;
use plan::Planning;
use score::RankCtx;

/// What a recall reads and when: the snapshot, the read time (expiry and recency are judged
/// at it) and the query's words and unit vector ([`QueryRead`]: as the caller read them to
/// embed it).
pub struct Reading<'a> {
    /// The one snapshot the recall reads.
    pub snap: &'a Snapshot<'a>,
    /// The read time.
    pub now: Timestamp,
    /// The query's words.
    pub read: &'a QueryRead,
    /// The unit query vector.
    pub query: &'a [f32],
}

/// Scope-first recall of one snapshot, ranked with `rank`.
pub fn recall(
    reading: &Reading<'_>,
    config: &RecallConfig,
    rank: &RankConfig,
    grant: &TenantGrant,
    req: &RecallRequest,
) -> Result<RecallResponse, SearchError> {
    let Reading {
        snap,
        now,
        read,
        query,
    } = *reading;
    let started = Instant::now();
    let rank = &rank.for_query(&req.query);
    let filter = scope_filter(grant.tenant(), &req.scope);
    let vis = Visibility {
        include_superseded: req.include_superseded,
        as_of: req.as_of,
        now,
    };
    let access = Access::new(&snap.table, grant);
    let bm25 = Bm25::new(snap, &filter, &read.words.lexical);
    let in_scope = scope::InScope::new(snap, &filter);
    let plan = plan::plan(&Planning {
        snap,
        config,
        rank,
        access: access.as_ref(),
        in_scope: &in_scope,
        bm25: &bm25,
        vis: &vis,
        query,
        k: req.limit,
        keep_stale: req.include_stale,
        force_exact: req.exact,
    })?;
    let planned = Instant::now();
    telemetry::recall_stage("scope", planned - started);
    let ctx = RankCtx {
        snap,
        rank,
        query,
        text: &req.query,
        read,
        bm25: &bm25,
        known: &plan.known,
        // Recency is measured from the time the answer is read as of: an as-of recall
        // ranks as memory stood then, and two such recalls rank alike whenever they run.
        // Expiry above still reads the current time (an expired event never comes back).
        now_ms: req.as_of.unwrap_or(now).unix_millis(),
        code_min_candidates: config.code_min_candidates,
    };
    let ranked = score::rank_set(&ctx, plan.set(), req.limit)?;
    let scored = Instant::now();
    telemetry::recall_stage("vector", scored - planned);
    telemetry::recall_path(plan.path.as_str());
    let response = respond::respond(&ctx, grant, &vis, &plan, ranked);
    telemetry::recall_stage("evidence", scored.elapsed());
    Ok(response)
}
