//! The answer: ranked hits presented as the grant sees them, with score breakdowns, stale
//! marks and the evidence block.

use std::sync::Arc;

use serde::Serialize;

use super::evidence;
use super::plan::{Plan, VectorPath};
use super::score::{RankCtx, Ranked};
use crate::auth::TenantGrant;
use crate::model::StoredEvent;
use crate::rank::Breakdown;
use crate::read::{Table, Visibility, Visible};

/// One ranked hit.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// The event (shared with the snapshot it was read from when presented unchanged).
    #[schema(value_type = StoredEvent)]
    pub event: Arc<StoredEvent>,
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
    /// Whether every visible in-scope event was scored, so `results` are exactly the
    /// in-scope top k (`exact` and `hnsw_fallback_exact`); `false` on an approximate path.
    pub exact: bool,
}

/// The hits: each ranked event read from the snapshot's table and presented as the grant
/// sees it ([`Visible`], the entry-level twin of the heads' [`Access`] that chose them).
pub(super) fn respond(
    ctx: &RankCtx<'_>,
    grant: &TenantGrant,
    vis: &Visibility,
    plan: &Plan,
    ranked: Vec<Ranked>,
) -> RecallResponse {
    let stale = &plan.stale;
    let table: &Table = &ctx.snap.table;
    let seen = Visible::new(grant, table, ctx.snap.keyed, vis.now);
    let results: Vec<Hit> = ranked
        .into_iter()
        .filter_map(|r| table.get(r.doc).map(|e| (e, r)))
        .filter(|(e, _)| seen.sees(&e.event))
        .map(|(e, r)| Hit {
            event: seen.present_shared(&e.event),
            score: r.score,
            score_breakdown: ctx.rank.explain(&r.signals, &e.prior(), ctx.now_ms),
            stale: stale.contains_key(&e.doc),
            stale_by: stale.get(&e.doc).cloned(),
        })
        .collect();
    let events: Vec<&StoredEvent> = results.iter().map(|h| &*h.event).collect();
    RecallResponse {
        evidence: evidence::render(&events),
        stats: RecallStats {
            candidates: plan.heads.len(),
            path: plan.path,
            exact: plan.path.is_exact(),
        },
        results,
    }
}
