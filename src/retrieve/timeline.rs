//! The timeline: one page of the grant's tenant in `occurredAt` order, read from one
//! snapshot, with a cursor for the next.

use std::sync::Arc;

use serde::Serialize;

use super::scope::{candidates, scope_filter, visible, SearchError};
use crate::auth::TenantGrant;
use crate::model::request::{Cursor, TimelineQuery};
use crate::model::{StoredEvent, Timestamp};
use crate::read::{Access, Entry, Snapshot, Table, Visibility, Visible};

/// A page of the timeline.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimelinePage {
    /// Events ordered by `occurredAt` (then `eventId`).
    pub events: Vec<StoredEvent>,
    /// Cursor for the next page, if any.
    pub next_cursor: Option<String>,
}

/// One timeline page of the grant's tenant, read from one snapshot.
pub fn timeline(
    snap: &Snapshot<'_>,
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
    use super::super::fixture::{ev, limited, World};
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
        };
        let mut seen = Vec::new();
        loop {
            let page = timeline(&snap, &grant, &q).unwrap();
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
}
