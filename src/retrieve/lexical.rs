//! BM25 in scope: the query's word matches, searched once per recall on the snapshot's
//! searcher and shared by the candidate paths and the scoring.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use super::scope::{fresh_in_scope, index_error, SearchError};
use super::score::RankCtx;
use crate::index::scope::{best_hits, ScopeFilter};
use crate::read::{Head, Snapshot};

/// The BM25 matches of a recall's query text in its scope, searched once on first use and
/// shared by the candidate paths that add the best of them and by the ranking that scores
/// every candidate by them.
pub(super) struct Bm25<'a> {
    snap: &'a Snapshot<'a>,
    filter: &'a ScopeFilter,
    text: &'a str,
    hits: OnceLock<Vec<(u32, f32)>>,
}

impl<'a> Bm25<'a> {
    /// The matches of `text` in `filter`, searched on first use.
    pub(super) fn new(snap: &'a Snapshot<'a>, filter: &'a ScopeFilter, text: &'a str) -> Self {
        Bm25 {
            snap,
            filter,
            text,
            hits: OnceLock::new(),
        }
    }

    /// Every match in scope, `(doc, score)` in no particular order: committed ones from the
    /// index, and the fresh tail's (at or above the snapshot's watermark, not committed yet)
    /// scored from memory as the index will score them ([`ScopeView::lexical_fresh`]), so a
    /// write ranks lexically the moment it is acknowledged.
    ///
    /// [`ScopeView::lexical_fresh`]: crate::index::scope::ScopeView::lexical_fresh
    pub(super) fn all(&self) -> Result<&[(u32, f32)], SearchError> {
        if let Some(hits) = self.hits.get() {
            return Ok(hits);
        }
        let mut hits = self
            .snap
            .scope
            .lexical_all(self.filter, self.text)
            .map_err(index_error)?;
        let fresh: Vec<(u32, &str)> = fresh_in_scope(self.snap, self.filter)
            .map(|e| (e.doc, e.event.summary.as_str()))
            .collect();
        if !fresh.is_empty() {
            let committed: HashSet<u32> = hits.iter().map(|(d, _)| *d).collect();
            let scored = self
                .snap
                .scope
                .lexical_fresh(self.text, &fresh)
                .map_err(index_error)?;
            hits.extend(scored.into_iter().filter(|(d, _)| !committed.contains(d)));
        }
        Ok(self.hits.get_or_init(|| hits))
    }

    /// The `k` best matches, best first.
    pub(super) fn best(&self, k: usize) -> Result<Vec<(u32, f32)>, SearchError> {
        Ok(best_hits(self.all()?.to_vec(), k))
    }
}

/// BM25 of each event of `set` for the query text, restricted to the scope (0 for events not
/// matching any term; fresh events are scored from memory, see [`Bm25::all`]).
pub(super) fn lexical_scores(ctx: &RankCtx<'_>, set: &[Head]) -> Result<Vec<f32>, SearchError> {
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
