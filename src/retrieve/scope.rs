//! Scope first: a tenant and scope filter become the in-scope internal ids (committed ones
//! from the snapshot's tantivy searcher, fresh ones matched in memory), and those the grant
//! and the view may see become heads.
//!
//! Invariant: nothing outside the grant's tenant and the filter reaches a later stage; every
//! id below the snapshot's watermark comes from the index, every id at or above it from
//! the table, with the same predicate.

use std::sync::OnceLock;

use rayon::prelude::*;

use super::request::Scope;
use crate::error::{ErrorCode, Problem};
use crate::index::scope::{matches, ScopeFilter};
use crate::model::Timestamp;
use crate::read::{Access, Head, HeadFilter, Snapshot, Table, View, Visibility};

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

pub(super) fn index_error(e: impl std::fmt::Display) -> Problem {
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
pub(super) fn committed(
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
pub(super) const HEAD_CHECK_CHUNK: usize = 4096;

/// A recall's in-scope ids ([`candidates`]), listed once on first use and shared by the
/// steps that need them: counting a scope term statistics cannot bound, reading a narrow
/// scope by id, the exact path.
pub(super) struct InScope<'a> {
    pub(super) snap: &'a Snapshot<'a>,
    pub(super) filter: &'a ScopeFilter,
    pub(super) ids: OnceLock<Vec<u32>>,
}

impl<'a> InScope<'a> {
    pub(super) fn new(snap: &'a Snapshot<'a>, filter: &'a ScopeFilter) -> Self {
        InScope {
            snap,
            filter,
            ids: OnceLock::new(),
        }
    }

    pub(super) fn ids(&self) -> Result<&[u32], Problem> {
        if let Some(ids) = self.ids.get() {
            return Ok(ids);
        }
        let ids = candidates(self.snap, self.filter)?;
        Ok(self.ids.get_or_init(|| ids))
    }
}

/// Candidates per rayon task when checking visibility (below one task, no fan-out).
pub(super) const VISIBLE_CHUNK: usize = 4096;

/// The heads of the candidates `access` may see, in `ids` order. Heads are read from one
/// dense array, on both cores for broad scopes.
pub(super) fn visible(
    snap: &Snapshot<'_>,
    access: &Access,
    ids: &[u32],
    vis: &Visibility,
) -> Vec<Head> {
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
