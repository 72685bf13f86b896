//! Stale suppression: an event is stale when a newer event the grant may see, active in
//! the view, is about the same subject (or stated by the subject itself on its topic).
//!
//! Invariant: only events the grant may see can make another stale, so staleness reveals
//! nothing outside the grant.

use std::collections::HashMap;

use rayon::prelude::*;

use super::config::RecallConfig;
use crate::index::vector::{dot, VectorStore};
use crate::model::EventStatus;
use crate::read::{Access, Head, Snapshot, Table, View, Visibility, NONE};

/// What decides staleness besides the subject.
pub(super) struct StaleCtx<'a> {
    pub(super) vectors: &'a VectorStore,
    pub(super) min_similarity: f32,
}

impl StaleCtx<'_> {
    /// Whether `newer` is about the same thing as `older` (summary embeddings close enough).
    pub(super) fn similar(&self, older: u32, newer: u32) -> bool {
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
pub(super) fn stale_by(
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
        .filter_map(|d| table.head_at(*d))
        .filter(|o| o.occurred_ms > h.occurred_ms && access.allows(o))
        .filter(|o| access.status(table, view, o) == Some(EventStatus::Active))
        .filter(|o| o.subject == h.subject || table.same_topic(h.doc, o.doc))
        .filter(|o| ctx.similar(h.doc, o.doc))
        .max_by_key(|o| (o.occurred_ms, o.doc))
        .map(|o| o.doc)
}

/// Heads per rayon task when looking for newer events (below one task, no fan-out).
pub(super) const STALE_CHUNK: usize = 1024;

/// Splits stale events out (dropped, or kept and marked with the newer event's id when
/// `keep`).
pub(super) fn apply_staleness(
    snap: &Snapshot<'_>,
    config: &RecallConfig,
    access: &Access,
    mut heads: Vec<Head>,
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
    // The heads stay where they are (moving each costs more than finding it stale): kept
    // and marked, or the stale ones removed in place.
    let mut marks = HashMap::new();
    if keep {
        for (h, by) in heads.iter().zip(&newer) {
            if let Some(newer) = by.and_then(|by| table.get(by)) {
                marks.insert(h.doc, newer.event.event_id.clone());
            }
        }
    } else {
        let mut stale = newer.iter().map(Option::is_some);
        heads.retain(|_| !stale.next().unwrap_or(false));
    }
    (heads, marks)
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{ev, limited, stale_world, whole, World};
    use super::super::scope::visible;
    use super::*;
    use crate::auth::TenantGrant;
    use crate::model::Timestamp;
    use crate::read::SubjectRule;

    fn stale_of(w: &World, grant: &TenantGrant, keep: bool) -> (Vec<u32>, HashMap<u32, String>) {
        let snap = w.snapshot();
        let vis = Visibility {
            include_superseded: false,
            as_of: None,
            now: Timestamp::now(),
        };
        let access = Access::new(&snap.table, grant).expect("tenant known");
        let heads = visible(&snap, &access, &[0, 1, 2][..w.len()], &vis);
        let config = RecallConfig::default();
        let (heads, marks) = apply_staleness(&snap, &config, &access, heads, &vis, keep);
        (heads.iter().map(|h| h.doc).collect(), marks)
    }

    #[test]
    fn a_newer_event_on_the_same_subject_makes_the_older_stale() {
        let w = stale_world();
        let (kept, marks) = stale_of(&w, &whole(), false);
        assert_eq!(kept, vec![1, 2], "the older of ann's is dropped");
        assert!(marks.is_empty());
        let (kept, marks) = stale_of(&w, &whole(), true);
        assert_eq!(kept, vec![0, 1, 2]);
        assert_eq!(marks.get(&0).map(String::as_str), Some("new"));
    }

    #[test]
    fn only_an_event_the_grant_may_see_makes_another_stale() {
        // Bob's own request about himself outdates ann's older note on the same topic.
        let mut w = World::new(SubjectRule::default());
        for (id, actor, at) in [
            ("note", "ann", "2026-06-01T00:00:00Z"),
            ("own", "bob", "2026-06-02T00:00:00Z"),
        ] {
            let mut e = ev(id, actor, "s1", at, "the invoice format");
            e.resource_refs = vec!["invoice".into(), "bob".into()];
            w.add(e, [1.0, 0.0, 0.0, 0.0]);
        }
        w.commit();
        let (kept, marks) = stale_of(&w, &whole(), true);
        assert_eq!(
            (kept, marks.get(&0).map(String::as_str)),
            (vec![0, 1], Some("own"))
        );
        let (kept, marks) = stale_of(&w, &limited(&["ann"]), true);
        assert_eq!(kept, vec![0], "bob's event is outside the grant");
        assert!(marks.is_empty(), "so ann's note stays current");
    }
}
