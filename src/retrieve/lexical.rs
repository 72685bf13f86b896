//! BM25 in scope: the query's word matches, searched once per recall on the snapshot's
//! searcher and shared by the candidate paths and the scoring.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::scope::{index_error, SearchError};
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

    /// Every committed match, `(doc, score)` in no particular order.
    pub(super) fn all(&self) -> Result<&[(u32, f32)], SearchError> {
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
    pub(super) fn best(&self, k: usize) -> Result<Vec<(u32, f32)>, SearchError> {
        Ok(best_hits(self.all()?.to_vec(), k))
    }
}

/// BM25 of each event of `set` for the query text, restricted to the scope (0 for events not
/// matching any term and for events newer than the last scope-index refresh).
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
