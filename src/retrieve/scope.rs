//! Scope first: a tenant and scope filter become the in-scope internal ids (committed ones
//! from the snapshot's tantivy searcher, fresh ones matched in memory), and those the grant
//! and the view may see become heads.
//!
//! Invariant: nothing outside the grant's tenant and the filter reaches a later stage. A
//! tenant of at most [`SMALL_TENANT_IDS`] event ids, under a filter heads decide, is listed
//! from the table alone, every id checked on its head; otherwise every id below the
//! snapshot's watermark comes from the index, every id at or above it from the table, with
//! the same predicate. Both listings give the same ids.

use std::sync::OnceLock;

use rayon::prelude::*;

use crate::index::scope::{matches, ScopeFilter};
use crate::model::metadata::MetaFilter;
use crate::model::request::Scope;
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
        // Validated when the request was parsed: no error is left to report.
        metadata: MetaFilter::parse("scope.metadata", &scope.metadata, &mut Vec::new()),
    }
}

/// The scope index failed a search (a recall or timeline answers 500 `internal`).
#[derive(Debug, thiserror::Error)]
#[error("scope index search failed: {0}")]
pub struct SearchError(String);

pub(super) fn index_error(e: impl std::fmt::Display) -> SearchError {
    SearchError(e.to_string())
}

/// In-scope internal ids: a small tenant's from the table's list of its ids, checked on
/// their heads ([`SMALL_TENANT_IDS`]); any other's, committed ones from tantivy plus fresh
/// ones matched in memory.
pub fn candidates(snap: &Snapshot<'_>, filter: &ScopeFilter) -> Result<Vec<u32>, SearchError> {
    let table: &Table = &snap.table;
    if !table.may_match(filter) {
        return Ok(Vec::new());
    }
    let heads = table.head_filter(filter);
    if let Some(small) = small_tenant(table, filter, heads.as_ref()) {
        return Ok(small.map(|(d, _)| d).collect());
    }
    indexed(snap, filter, heads.as_ref())
}

/// A small tenant's in-scope ids with their heads, in id order, when heads decide `filter`
/// and the tenant holds at most [`SMALL_TENANT_IDS`] ids; `None` otherwise.
fn small_tenant<'t>(
    table: &'t Table,
    filter: &ScopeFilter,
    heads: Option<&'t HeadFilter>,
) -> Option<impl Iterator<Item = (u32, &'t Head)> + use<'t>> {
    let heads = heads?;
    let docs = table.tenant_docs_up_to(&filter.tenant, SMALL_TENANT_IDS)?;
    Some(docs.iter().filter_map(move |&d| {
        let h = table.head_at(d)?;
        heads.matches(h).then_some((d, h))
    }))
}

/// A tenant holding at most this many event ids lists its scope from the table alone when
/// heads decide the filter: a few head reads cost less than a search of every segment of
/// the scope index, whose fixed cost per segment dominates a tiny tenant's recall.
pub const SMALL_TENANT_IDS: usize = 256;

/// Whether a recall of `filter` surely reads at most [`ALONE_MAX_CANDIDATES`] in-scope ids,
/// judged without listing any: the filter can match nothing in the table, or its tenant is
/// small ([`SMALL_TENANT_IDS`]), or term statistics bound its committed ids (a filter of
/// three lists by the pair of them that shares the fewest) and, with every fresh id counted
/// as in scope, the sum stays within the bound. `false` when unsure.
pub fn surely_small(snap: &Snapshot<'_>, filter: &ScopeFilter) -> bool {
    let table: &Table = &snap.table;
    if !table.may_match(filter) || table.tenant_ids(&filter.tenant) <= SMALL_TENANT_IDS {
        return true;
    }
    let fresh = (table.next_doc() as usize).saturating_sub(snap.watermark);
    snap.scope
        .count_bounds(filter)
        .map(|(_, upper)| upper)
        .or_else(|| snap.scope.three_lists_upper(filter))
        .is_some_and(|upper| upper + fresh <= ALONE_MAX_CANDIDATES)
}

/// A scope of at most this many ids has no parallel section to split: every parallel loop
/// such a recall reaches hands a task at least this many (`stale::STALE_CHUNK`, the
/// smallest chunk; the loops without a chunk, over a probe's lists and over the episodes of
/// code-bounded candidates, are reached only with thousands of candidates), so it runs on one
/// thread whichever thread it starts on.
pub const ALONE_MAX_CANDIDATES: usize = super::stale::STALE_CHUNK;

/// [`candidates`] from the scope index and the fresh tail, whatever the tenant's size.
fn indexed(
    snap: &Snapshot<'_>,
    filter: &ScopeFilter,
    heads: Option<&HeadFilter>,
) -> Result<Vec<u32>, SearchError> {
    let mut ids = committed(snap, filter, heads)?;
    ids.extend(fresh_in_scope(snap, filter).map(|e| e.doc));
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// The fresh tail's live entries in scope: those at or above the snapshot's watermark (not
/// committed to the scope index yet), matched in memory with the index's predicate.
pub(super) fn fresh_in_scope<'s>(
    snap: &'s Snapshot<'_>,
    filter: &'s ScopeFilter,
) -> impl Iterator<Item = &'s std::sync::Arc<crate::read::Entry>> + 's {
    snap.table
        .live_from(snap.watermark)
        .filter(move |e| matches(filter, &e.scope_doc()))
}

/// The committed ids in scope: the index's answer to the whole filter or, when `heads`
/// decide it and it has a narrowest list ([`crate::index::scope::ScopeIndex::narrowest`]),
/// that list's ids whose heads match (a deleted event's never does).
pub(super) fn committed(
    snap: &Snapshot<'_>,
    filter: &ScopeFilter,
    heads: Option<&HeadFilter>,
) -> Result<Vec<u32>, SearchError> {
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
                .filter(|&d| table.head_at(d).is_some_and(|h| heads.matches(h)))
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
    /// [`super::partition::broad_count`]'s answer, once asked (the graph and the partition
    /// sources both ask, with the recall's one `exact_max_candidates`).
    pub(super) broad: OnceLock<Option<usize>>,
}

impl<'a> InScope<'a> {
    pub(super) fn new(snap: &'a Snapshot<'a>, filter: &'a ScopeFilter) -> Self {
        InScope {
            snap,
            filter,
            ids: OnceLock::new(),
            broad: OnceLock::new(),
        }
    }

    pub(super) fn ids(&self) -> Result<&[u32], SearchError> {
        if let Some(ids) = self.ids.get() {
            return Ok(ids);
        }
        let ids = candidates(self.snap, self.filter)?;
        Ok(self.ids.get_or_init(|| ids))
    }

    /// [`visible`] of the in-scope ids: the same heads, in the same order. A small tenant's
    /// ids not listed yet are listed and checked in one pass, each head read once.
    pub(super) fn visible(
        &self,
        access: &Access,
        vis: &Visibility,
    ) -> Result<Vec<Head>, SearchError> {
        let table: &Table = &self.snap.table;
        if self.ids.get().is_none() && table.may_match(self.filter) {
            let heads = table.head_filter(self.filter);
            if let Some(small) = small_tenant(table, self.filter, heads.as_ref()) {
                let view = View::new(vis);
                let shown = small.filter(|(_, h)| access.shows(table, &view, h));
                let mut out = Vec::with_capacity(shown.size_hint().1.unwrap_or(0));
                out.extend(shown.map(|(_, h)| *h));
                return Ok(out);
            };
        }
        Ok(visible(self.snap, access, self.ids()?, vis))
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
    let keep = |id: &u32| {
        table
            .head_at(*id)
            .filter(|h| access.shows(table, &view, h))
            .copied()
    };
    if ids.len() <= VISIBLE_CHUNK {
        let mut heads = Vec::with_capacity(ids.len());
        heads.extend(ids.iter().filter_map(keep));
        heads
    } else {
        ids.par_iter()
            .with_min_len(VISIBLE_CHUNK)
            .filter_map(keep)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{ev, head_scopes, limited, whole, World};
    use super::*;
    use crate::auth::TenantGrant;
    use crate::model::PrivacyClass;
    use crate::read::SubjectRule;

    const AT: &str = "2026-06-17T09:20:00Z";

    #[test]
    fn in_scope_ids_come_from_the_index_below_the_watermark_and_from_memory_above_it() {
        let mut w = World::new(SubjectRule::OFF);
        w.add(ev("a", "ann", "s1", AT, "one"), [1.0, 0.0, 0.0, 0.0]);
        let mut other = ev("x", "ann", "s1", AT, "other tenant");
        other.tenant_id = "other".into();
        w.add(other, [1.0, 0.0, 0.0, 0.0]);
        w.commit();
        w.add(ev("b", "bob", "s1", AT, "fresh"), [0.0, 1.0, 0.0, 0.0]);
        let snap = w.snapshot();
        // The index's listing, which a tenant too large for the table's listing takes.
        let indexed = |filter: &ScopeFilter| {
            let heads = snap.table.head_filter(filter);
            indexed(&snap, filter, heads.as_ref()).unwrap()
        };
        let all = indexed(&scope_filter("acme", &Scope::default()));
        assert_eq!(
            all,
            vec![0, 2],
            "committed and fresh, never the other tenant's"
        );
        let bob = Scope {
            actor_ids: vec!["bob".into()],
            ..Scope::default()
        };
        assert_eq!(indexed(&scope_filter("acme", &bob)), vec![2]);
        let none = candidates(&snap, &scope_filter("nobody", &Scope::default())).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn a_small_tenant_listed_from_the_table_gives_the_index_listing() {
        let mut w = World::new(SubjectRule::OFF);
        let days = ["2026-06-10T00:00:00Z", "2026-06-12T00:00:00Z", AT];
        for i in 0..9 {
            let actor = ["ann", "bob", "cy"][i % 3];
            let mut e = ev(&format!("e{i}"), actor, "s1", days[i % 3], "an event");
            e.event_type = ["note", "task_milestone"][i % 2].into();
            e.project_id = Some(["p1", "p2"][i / 5].into());
            w.add(e, [1.0, 0.0, 0.0, 0.0]);
        }
        let mut other = ev("x", "ann", "s1", AT, "other tenant");
        other.tenant_id = "other".into();
        w.add(other, [1.0, 0.0, 0.0, 0.0]);
        w.delete("e4");
        w.commit();
        // Fresh (above the watermark), and one of them deleted before the next commit.
        for i in 9..12 {
            w.add(
                ev(&format!("e{i}"), "bob", "s1", AT, "fresh"),
                [0.0, 1.0, 0.0, 0.0],
            );
        }
        w.delete("e10");
        let snap = w.snapshot();
        let table: &Table = &snap.table;
        assert_eq!(
            table
                .tenant_docs_up_to("acme", SMALL_TENANT_IDS)
                .unwrap()
                .len(),
            12
        );
        assert_eq!(
            table.tenant_docs_up_to("acme", 11),
            None,
            "too many: the index lists"
        );
        assert_eq!(table.tenant_docs_up_to("nobody", SMALL_TENANT_IDS), None);
        let scopes = head_scopes("bob", days[1], AT);
        for scope in &scopes {
            let filter = scope_filter("acme", scope);
            let heads = table.head_filter(&filter);
            let listed = candidates(&snap, &filter).unwrap();
            assert_eq!(
                listed,
                indexed(&snap, &filter, heads.as_ref()).unwrap(),
                "{scope:?}"
            );
            assert!(
                !listed.contains(&4) && !listed.contains(&11),
                "deleted: {listed:?}"
            );
        }
        let all = candidates(&snap, &scope_filter("acme", &Scope::default())).unwrap();
        assert_eq!(all, vec![0, 1, 2, 3, 5, 6, 7, 8, 10, 12]);
    }

    #[test]
    fn visible_heads_are_those_of_the_grant_and_the_view() {
        let mut w = World::new(SubjectRule::OFF);
        w.add(ev("a", "ann", "s1", AT, "ann's"), [1.0, 0.0, 0.0, 0.0]);
        w.add(ev("b", "bob", "s1", AT, "bob's"), [1.0, 0.0, 0.0, 0.0]);
        let mut private = ev("c", "ann", "s1", AT, "ann's private");
        private.privacy_class = PrivacyClass::Private;
        w.add(private, [1.0, 0.0, 0.0, 0.0]);
        let mut expired = ev("d", "ann", "s1", AT, "expired");
        expired.retention.expires_at = Some(Timestamp::parse("2026-06-18T00:00:00Z").unwrap());
        w.add(expired, [1.0, 0.0, 0.0, 0.0]);
        w.commit();
        let snap = w.snapshot();
        let vis = Visibility {
            include_superseded: false,
            as_of: None,
            now: Timestamp::parse("2026-07-01T00:00:00Z").unwrap(),
        };
        let docs = |grant: &TenantGrant| {
            let access = Access::new(&snap.table, grant).expect("tenant known");
            let heads = visible(&snap, &access, &[0, 1, 2, 3], &vis);
            let docs = |heads: Vec<Head>| heads.iter().map(|h| h.doc).collect::<Vec<_>>();
            // The small tenant's one pass over its heads gives the same heads, listed
            // fresh or after the ids were listed.
            let filter = scope_filter("acme", &Scope::default());
            let fresh = InScope::new(&snap, &filter);
            assert_eq!(
                docs(fresh.visible(&access, &vis).unwrap()),
                docs(heads.clone())
            );
            assert!(fresh.ids.get().is_none(), "listed and checked in one pass");
            let listed = InScope::new(&snap, &filter);
            assert_eq!(listed.ids().unwrap(), &[0, 1, 2, 3]);
            assert_eq!(
                docs(listed.visible(&access, &vis).unwrap()),
                docs(heads.clone())
            );
            heads.iter().map(|h| h.doc).collect::<Vec<_>>()
        };
        assert_eq!(
            docs(&whole()),
            vec![0, 1, 2],
            "expiry is judged at read time"
        );
        assert_eq!(
            docs(&limited(&["ann"])),
            vec![0],
            "actor and privacy ceiling"
        );
    }

    #[test]
    fn a_scope_is_surely_small_only_when_counted_within_the_bound_fresh_ids_included() {
        let mut w = World::new(SubjectRule::OFF);
        for i in 0..=ALONE_MAX_CANDIDATES {
            w.add(
                ev(&format!("a{i}"), "ann", "s1", AT, "ann"),
                [1.0, 0.0, 0.0, 0.0],
            );
        }
        for i in 0..10 {
            w.add(
                ev(&format!("b{i}"), "bob", "s1", AT, "bob"),
                [0.0, 1.0, 0.0, 0.0],
            );
        }
        let mut other = ev("x", "ann", "s1", AT, "other tenant");
        other.tenant_id = "other".into();
        w.add(other, [1.0, 0.0, 0.0, 0.0]);
        w.commit();
        let small = |w: &World, tenant: &str, scope: &Scope| {
            surely_small(&w.snapshot(), &scope_filter(tenant, scope))
        };
        let actor = |a: &str| Scope {
            actor_ids: vec![a.into()],
            ..Scope::default()
        };
        assert!(!small(&w, "acme", &Scope::default()));
        assert!(!small(&w, "acme", &actor("ann")), "one above the bound");
        assert!(small(&w, "acme", &actor("bob")));
        assert!(small(&w, "acme", &actor("nobody")), "matches nothing");
        assert!(small(&w, "other", &Scope::default()), "a small tenant");
        assert!(small(&w, "nobody", &Scope::default()), "no such tenant");
        let ranged = Scope {
            occurred_after: Some(Timestamp::parse(AT).unwrap()),
            ..actor("bob")
        };
        assert!(!small(&w, "acme", &ranged), "not counted: unsure");
        let three = |a: &str| Scope {
            event_types: vec!["task_milestone".into()],
            project_ids: vec!["p1".into()],
            ..actor(a)
        };
        assert!(
            small(&w, "acme", &three("bob")),
            "three lists: bob's pairs hold 10"
        );
        assert!(
            !small(&w, "acme", &three("ann")),
            "three lists, each pair above the bound"
        );
        for i in 0..ALONE_MAX_CANDIDATES {
            w.add(
                ev(&format!("f{i}"), "cy", "s1", AT, "fresh"),
                [0.0, 0.0, 1.0, 0.0],
            );
        }
        assert!(
            !small(&w, "acme", &actor("bob")),
            "fresh ids are not counted by the index, so each counts as in scope"
        );
    }
}
