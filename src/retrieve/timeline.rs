//! The timeline: one page of the grant's tenant in `occurredAt` order, read from one
//! snapshot, with a cursor for the next, and on request which of the page's events are
//! stale (the newer event that makes each so, decided as recall decides it).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::config::RecallConfig;
use super::scope::{candidates, scope_filter, visible, SearchError};
use super::stale::{stale_by, StaleCtx};
use crate::auth::TenantGrant;
use crate::model::request::{Cursor, TimelineQuery};
use crate::model::{StoredEvent, Timestamp};
use crate::read::{Access, Entry, Snapshot, Table, View, Visibility, Visible};

/// A page of the timeline.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimelinePage {
    /// Events ordered by `occurredAt` (then `eventId`).
    pub events: Vec<StoredEvent>,
    /// Cursor for the next page, if any.
    pub next_cursor: Option<String>,
    /// With `markStale`: each stale event of the page, by id, with the id of the newer event
    /// the key may see that makes it stale (omitted when the page has none, or when not
    /// asked for).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub stale_by: BTreeMap<String, String>,
}

/// One timeline page of the grant's tenant, read from one snapshot (`config` decides
/// staleness, when the query asks for stale marks).
pub fn timeline(
    snap: &Snapshot<'_>,
    config: &RecallConfig,
    grant: &TenantGrant,
    q: &TimelineQuery,
) -> Result<TimelinePage, SearchError> {
    let filter = scope_filter(grant.tenant(), &q.scope);
    let ids = candidates(snap, &filter)?;
    let vis = Visibility {
        include_superseded: q.include_superseded,
        as_of: q.as_of,
        now: Timestamp::now(),
    };
    let table: &Table = &snap.table;
    let access = Access::new(table, grant);
    let heads = access
        .as_ref()
        .map_or_else(Vec::new, |a| visible(snap, a, &ids, &vis));
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
    let page = &page[..page.len().min(q.limit)];
    // Staleness is looked up for the page's events only, among events the grant may see.
    let mut stale = BTreeMap::new();
    if let (true, Some(access)) = (q.mark_stale, access.as_ref()) {
        let ctx = StaleCtx {
            vectors: &snap.vectors,
            min_similarity: config.stale_min_similarity,
        };
        let view = View::new(&vis);
        for e in page {
            let newer = stale_by(table, &ctx, &table.head(e.doc), access, &view);
            if let Some(newer) = newer.and_then(|d| table.get(d)) {
                stale.insert(e.event.event_id.clone(), newer.event.event_id.clone());
            }
        }
    }
    // Only the page's events are presented (copied, with the grant's view of supersession).
    let seen = Visible::new(grant, table, snap.keyed, vis.now);
    Ok(TimelinePage {
        events: page.iter().map(|e| seen.present(&e.event)).collect(),
        next_cursor,
        stale_by: stale,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{ev, limited, stale_world, whole, World};
    use super::*;
    use crate::read::SubjectRule;
    use crate::retrieve::Scope;

    #[test]
    fn pages_follow_occurred_at_and_the_cursor_without_repeats() {
        let mut w = World::new(SubjectRule::OFF);
        for (i, day) in [5, 1, 4, 2, 3, 6, 7].iter().enumerate() {
            let actor = if i == 5 { "bob" } else { "ann" };
            let at = format!("2026-06-0{day}T00:00:00Z");
            w.add(
                ev(&format!("e{day}"), actor, "s", &at, "x"),
                [1.0, 0.0, 0.0, 0.0],
            );
        }
        w.commit();
        let snap = w.snapshot();
        let grant = limited(&["ann"]);
        let mut q = TimelineQuery {
            scope: Scope::default(),
            limit: 2,
            cursor: None,
            include_superseded: false,
            as_of: None,
            mark_stale: false,
        };
        let mut seen = Vec::new();
        loop {
            let page = timeline(&snap, &RecallConfig::default(), &grant, &q).unwrap();
            assert!(page.stale_by.is_empty(), "not asked for");
            assert!(page.events.len() <= 2);
            seen.extend(page.events.iter().map(|e| e.event_id.clone()));
            let Some(next) = page.next_cursor else { break };
            q.cursor = Some(Cursor::decode(&next).expect("cursor"));
        }
        assert_eq!(
            seen,
            ["e1", "e2", "e3", "e4", "e5", "e7"],
            "bob's e6 is outside the grant"
        );
    }

    #[test]
    fn stale_marks_name_the_newer_event_the_grant_may_see_on_request() {
        let w = stale_world();
        let snap = w.snapshot();
        let mut q = TimelineQuery {
            scope: Scope::default(),
            limit: 50,
            cursor: None,
            include_superseded: false,
            as_of: None,
            mark_stale: true,
        };
        let config = RecallConfig::default();
        let page = timeline(&snap, &config, &whole(), &q).unwrap();
        let ids: Vec<&str> = page.events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(ids, ["old", "new", "bob"], "stale events stay listed");
        assert_eq!(
            page.stale_by,
            BTreeMap::from([("old".to_string(), "new".to_string())])
        );
        let json = serde_json::to_value(&page).unwrap();
        assert_eq!(json["staleBy"]["old"], "new");
        // A page without the older event has nothing to mark; without the flag, no marks.
        q.limit = 1;
        q.cursor = Some(Cursor {
            occurred_ms: page.events[0].occurred_at.unix_millis(),
            event_id: "old".into(),
        });
        let rest = timeline(&snap, &config, &whole(), &q).unwrap();
        assert_eq!(rest.events[0].event_id, "new");
        assert!(rest.stale_by.is_empty());
        q.cursor = None;
        q.mark_stale = false;
        let plain = timeline(&snap, &config, &whole(), &q).unwrap();
        assert!(plain.stale_by.is_empty());
        assert!(serde_json::to_value(&plain)
            .unwrap()
            .get("staleBy")
            .is_none());
    }
}
