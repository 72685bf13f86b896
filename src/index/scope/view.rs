//! Searching one commit: a [`ScopeView`] holds one searcher, so a read that searches
//! through it sees the same documents in every search.

use super::*;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::DocSet;

/// One commit of a [`ScopeIndex`], as one searcher sees it: a read that searches through
/// one view (a recall, a timeline page) sees the same documents in every search.
pub struct ScopeView<'a> {
    pub(super) index: &'a ScopeIndex,
    pub(super) searcher: Searcher,
    /// Clauses sized on this view, with their sizes: a recall sizes a clause (when it
    /// judges whether its scope is small, then when it picks the narrowest) more than once.
    pub(super) sized: Mutex<Vec<(usize, Narrowest)>>,
}

impl ScopeView<'_> {
    /// Internal ids of committed docs matching the filter, sorted ascending,
    /// unique.
    pub fn search(&self, filter: &ScopeFilter) -> Result<Vec<u32>, ScopeIndexError> {
        let query = self.index.filter_query(filter);
        let searcher = &self.searcher;
        let collector = DocIdsCollector {
            columns: &self.index.columns,
        };
        searcher
            .search(&*query, &collector)
            .map_err(|e| self.index.err(e))
    }

    /// Number of committed docs matching the filter (nothing materialised).
    pub fn count(&self, filter: &ScopeFilter) -> Result<usize, ScopeIndexError> {
        let query = self.index.filter_query(filter);
        self.searcher
            .search(&*query, &Count)
            .map_err(|e| self.index.err(e))
    }

    /// Bounds on [`ScopeView::count`] read from term statistics alone (no posting list is
    /// read), for a filter of the tenant and at most two of its actor, project and
    /// event-type lists (each event has at most one of each, and one pair of each two, so
    /// the terms' document frequencies add up; two lists are read from their pair terms,
    /// up to [`MAX_PAIR_TERMS`] of them); `None` for any other filter. The upper bound also
    /// counts deleted documents not yet merged away; the lower one subtracts every deleted
    /// document of the index.
    pub fn count_bounds(&self, filter: &ScopeFilter) -> Option<(usize, usize)> {
        if !only_lists(filter) {
            return None;
        }
        let searcher = &self.searcher;
        let upper = match self.counted_clause(filter)? {
            None => {
                let tenant = Term::from_field_text(self.index.fields.tenant, &filter.tenant);
                searcher.doc_freq(&tenant).ok()? as usize
            }
            Some(clause) => self.sized(clause)?.0,
        };
        let deleted: usize = searcher
            .segment_readers()
            .iter()
            .map(|s| s.num_deleted_docs() as usize)
            .sum();
        Some((upper.saturating_sub(deleted), upper))
    }

    /// An upper bound on the committed ids of a filter of three lists, by term statistics
    /// alone: the fewest ids any two of its lists share (every id in scope carries the pair
    /// terms of each two of its lists; deleted ids are counted too). `None` for any other
    /// filter (see [`ScopeView::count_bounds`] for those), or when every pair of its lists
    /// makes more than [`MAX_PAIR_TERMS`] terms.
    pub fn three_lists_upper(&self, filter: &ScopeFilter) -> Option<usize> {
        let lists = self.index.lists(filter);
        if !only_lists(filter) || lists.iter().filter(|(_, v)| !v.is_empty()).count() != 3 {
            return None;
        }
        pairs(filter)
            .into_iter()
            .filter_map(|(tag, first, second)| self.pair_list(tag, &filter.tenant, first, second))
            .filter_map(|pair| self.sized(pair))
            .map(|(size, _)| size)
            .min()
    }

    /// `clause` sized on this view ([`Narrowest::sized`]), from the view's memo when sized
    /// before.
    fn sized(&self, clause: Narrowest) -> Option<(usize, Narrowest)> {
        if let Some(known) = self.sized.lock().iter().find(|(_, n)| *n == clause) {
            return Some(known.clone());
        }
        let sized = clause.sized(&self.searcher)?;
        self.sized.lock().push(sized.clone());
        Some(sized)
    }

    /// The terms whose documents are exactly those of `filter`'s lists (its tenant's alone
    /// when it lists nothing: `Some(None)`): one list's terms, or the pair terms of two
    /// lists; `None` for three lists, or two with more than [`MAX_PAIR_TERMS`] pairs.
    fn counted_clause(&self, filter: &ScopeFilter) -> Option<Option<Narrowest>> {
        let tenant = &filter.tenant;
        let lists = self.index.lists(filter);
        let mut listed = lists.iter().filter(|(_, values)| !values.is_empty());
        match (listed.next(), listed.next(), listed.next()) {
            (None, _, _) => Some(None),
            (Some(&(field, values)), None, _) => Some(Some(Narrowest::list(field, tenant, values))),
            // The one pair of the two lists.
            (Some(_), Some(_), None) => pairs(filter)
                .into_iter()
                .find_map(|(tag, first, second)| self.pair_list(tag, tenant, first, second))
                .map(Some),
            _ => None,
        }
    }

    /// The pair terms `tag` of every value of `first` with every value of `second`; `None`
    /// when either lists nothing or they make more than [`MAX_PAIR_TERMS`] pairs.
    fn pair_list(
        &self,
        tag: char,
        tenant: &str,
        first: &[String],
        second: &[String],
    ) -> Option<Narrowest> {
        if first.is_empty() || second.is_empty() || first.len() * second.len() > MAX_PAIR_TERMS {
            return None;
        }
        let combined: Vec<String> = first
            .iter()
            .flat_map(|a| second.iter().map(move |b| pair(tag, a, b)))
            .collect();
        Some(Narrowest::list(self.index.fields.pair, tenant, &combined))
    }

    /// The clause of `filter` that the fewest documents carry (by term statistics): one of
    /// its actor, project and event-type lists, or the pairs of two of them (an actor and a
    /// type, an actor and a project, a type and a project, each event indexed under its
    /// own), when the filter narrows by something else as well (another list or a time
    /// range) and lists no resources; `None` otherwise. Its events, all of the filter's
    /// tenant, include the filter's; listing them ([`ScopeView::search_narrowest`]) and
    /// checking each on its head spares intersecting the lists' postings, which in a large
    /// tenant costs a seek in each list per event of the narrowest.
    pub fn narrowest(&self, filter: &ScopeFilter) -> Option<Narrowest> {
        if !filter.narrows_twice() {
            return None;
        }
        let tenant = &filter.tenant;
        let pairs: Vec<(&[String], &[String], Narrowest)> = pairs(filter)
            .into_iter()
            .filter_map(|(tag, first, second)| {
                let pair = self.pair_list(tag, tenant, first, second)?;
                Some((first, second, pair))
            })
            .collect();
        // A pair's events are among each of its two lists': a list in a pair read here is
        // never narrower than that pair, and is not sized.
        let in_a_pair = |values: &[String]| {
            pairs
                .iter()
                .any(|(a, b, _)| std::ptr::eq(*a, values) || std::ptr::eq(*b, values))
        };
        let lists = self.index.lists(filter);
        let singles: Vec<Narrowest> = lists
            .iter()
            .filter(|(_, values)| !values.is_empty() && !in_a_pair(values))
            .map(|&(field, values)| Narrowest::list(field, tenant, values))
            .collect();
        let options = pairs.into_iter().map(|(_, _, p)| p).chain(singles);
        let mut sized: Vec<(usize, Narrowest)> = options
            .map(|n| self.sized(n.clone()).unwrap_or((usize::MAX, n)))
            .collect();
        // Stable: of clauses of one size, the first listed (pairs first).
        sized.sort_by_key(|(size, _)| *size);
        let mut sized = sized.into_iter();
        let (size, mut first) = sized.next()?;
        if let Some((next, second)) = sized.next() {
            let both_sized = !first.infos.is_empty() && !second.infos.is_empty();
            if both_sized && next <= size.saturating_mul(INTERSECT_MAX_RATIO) {
                first.and = Some(Box::new(second));
            }
        }
        Some(first)
    }

    /// Internal ids of committed docs carrying any term of `narrowest` (and any of its
    /// second clause's, when it has one), sorted ascending, unique. A clause sized on this
    /// view reads its postings from the term infos it kept.
    pub fn search_narrowest(&self, narrowest: &Narrowest) -> Result<Vec<u32>, ScopeIndexError> {
        let readers = self.searcher.segment_readers();
        let sized_here = |clause: &Narrowest| {
            clause.infos.len() == readers.len()
                && readers
                    .iter()
                    .zip(&clause.infos)
                    .all(|(r, (id, _))| r.segment_id() == *id)
        };
        if !sized_here(narrowest) || !narrowest.and.as_deref().is_none_or(sized_here) {
            let any = |clause: &Narrowest| {
                let terms = clause
                    .terms
                    .iter()
                    .map(|t| Term::from_field_text(clause.field, t))
                    .collect();
                any_of(terms, IndexRecordOption::Basic)
            };
            let mut clauses = vec![(Occur::Must, any(narrowest))];
            clauses.extend(narrowest.and.as_deref().map(|a| (Occur::Must, any(a))));
            let collector = DocIdsCollector {
                columns: &self.index.columns,
            };
            return self
                .searcher
                .search(&BooleanQuery::new(clauses), &collector)
                .map_err(|e| self.index.err(e));
        }
        let err = |e: tantivy::TantivyError| self.index.err(e);
        let mut ids = Vec::new();
        let mut values = Vec::new();
        for (i, segment) in readers.iter().enumerate() {
            let mut docs = segment_docs(segment, narrowest, i).map_err(err)?;
            if let Some(and) = narrowest.and.as_deref() {
                if !docs.is_empty() {
                    let others = segment_docs(segment, and, i).map_err(err)?;
                    docs = intersect(&docs, &others);
                }
            }
            docs.retain(|&d| !segment.is_deleted(d));
            if docs.is_empty() {
                continue;
            }
            let column = self.index.columns.get(segment).map_err(err)?;
            extend_internal_ids(&column, &docs, &mut values, &mut ids);
        }
        // Each segment's ids come in ascending runs, which a merging sort only merges.
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// BM25 lexical search of `query` restricted to `filter` (a required,
    /// non-scoring clause); the top `k` `(doc, score)` pairs, best first (ties by id).
    ///
    /// The query is tokenised with the text field's analyzer and never parsed
    /// as a query language, so punctuation and operators cannot fail. A query
    /// without any token, or `k == 0`, returns an empty list.
    pub fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
    ) -> Result<Vec<(u32, f32)>, ScopeIndexError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        Ok(best_hits(self.lexical_all(filter, query)?, k))
    }

    /// Documents in `filter` matching any term of `query`, scored by BM25 alone; `None` when
    /// the query has no term.
    pub(super) fn text_in_scope(
        &self,
        filter: &ScopeFilter,
        query: &str,
    ) -> Result<Option<BooleanQuery>, ScopeIndexError> {
        let terms = self.index.text_terms(query)?;
        if terms.is_empty() {
            return Ok(None);
        }
        let text_query = any_of(terms, IndexRecordOption::WithFreqs);
        let scope: Box<dyn Query> =
            Box::new(ConstScoreQuery::new(self.index.filter_query(filter), 0.0));
        Ok(Some(BooleanQuery::new(vec![
            (Occur::Must, scope),
            (Occur::Must, text_query),
        ])))
    }

    /// BM25 score of every committed document matching `filter` and any term of `query`, as
    /// `(internal id, score)` in no particular order (recall scores each candidate by it).
    pub fn lexical_all(
        &self,
        filter: &ScopeFilter,
        query: &str,
    ) -> Result<Vec<(u32, f32)>, ScopeIndexError> {
        let Some(query) = self.text_in_scope(filter, query)? else {
            return Ok(Vec::new());
        };
        let collector = ScoredIdsCollector {
            columns: &self.index.columns,
        };
        self.searcher
            .search(&query, &collector)
            .map_err(|e| self.index.err(e))
    }
}

impl ScopeView<'_> {
    /// BM25 of documents not committed yet (the fresh tail, `(internal id, summary)`, each
    /// already in the caller's scope) for `query`, as `(internal id, score)` for those
    /// matching a term. Each is scored as tantivy scores a committed one (per query term,
    /// its [`Bm25Weight`] at the document's quantized length and term frequency, summed), with
    /// the statistics of the committed documents plus these: a fresh event ranks as it will
    /// once committed, instead of lexically unmatched until the next refresh.
    pub fn lexical_fresh(
        &self,
        query: &str,
        docs: &[(u32, &str)],
    ) -> Result<Vec<(u32, f32)>, ScopeIndexError> {
        let terms = self.index.text_terms(query)?;
        if terms.is_empty() || docs.is_empty() {
            return Ok(Vec::new());
        }
        let words: Vec<String> = terms
            .iter()
            .filter_map(|t| t.value().as_str().map(str::to_string))
            .collect();
        let mut analyzer = self
            .index
            .index
            .tokenizer_for_field(self.index.fields.text)
            .map_err(|e| self.index.err(e))?;
        // Per document: its length in tokens and each query word's frequency.
        let counted: Vec<(u32, u32, Vec<u32>)> = docs
            .iter()
            .map(|&(doc, text)| {
                let mut tf = vec![0u32; words.len()];
                let mut len = 0u32;
                analyzer.token_stream(text).process(&mut |token| {
                    len += 1;
                    if let Some(i) = words.iter().position(|w| *w == token.text) {
                        tf[i] += 1;
                    }
                });
                (doc, len, tf)
            })
            .collect();
        let stats = WithFresh {
            searcher: &self.searcher,
            docs: counted.len() as u64,
            tokens: counted.iter().map(|(_, len, _)| u64::from(*len)).sum(),
            terms: &terms,
            doc_freq: (0..words.len())
                .map(|i| counted.iter().filter(|(_, _, tf)| tf[i] > 0).count() as u64)
                .collect(),
        };
        let weights = terms
            .iter()
            .map(|t| Bm25Weight::for_terms(&stats, std::slice::from_ref(t)))
            .collect::<tantivy::Result<Vec<_>>>()
            .map_err(|e| self.index.err(e))?;
        Ok(counted
            .into_iter()
            .filter(|(_, _, tf)| tf.iter().any(|f| *f > 0))
            .map(|(doc, len, tf)| {
                let norm = FieldNormReader::fieldnorm_to_id(len);
                let score = weights
                    .iter()
                    .zip(&tf)
                    .filter(|(_, f)| **f > 0)
                    .map(|(w, f)| w.score(norm, *f))
                    .sum();
                (doc, score)
            })
            .collect())
    }
}

/// BM25 statistics of the committed documents plus fresh ones ([`ScopeView::lexical_fresh`]).
struct WithFresh<'s> {
    searcher: &'s Searcher,
    docs: u64,
    tokens: u64,
    terms: &'s [Term],
    /// Fresh documents holding each of `terms`.
    doc_freq: Vec<u64>,
}

impl Bm25StatisticsProvider for WithFresh<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        Ok(self.searcher.total_num_tokens(field)? + self.tokens)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(Bm25StatisticsProvider::total_num_docs(self.searcher)? + self.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let fresh = self
            .terms
            .iter()
            .position(|t| t == term)
            .map_or(0, |i| self.doc_freq[i]);
        Ok(self.searcher.doc_freq(term)? + fresh)
    }
}

/// The `k` best of `hits` (`(doc, score)` pairs, as [`ScopeView::lexical_all`] gives them),
/// best first, ties by id.
pub fn best_hits(mut hits: Vec<(u32, f32)>, k: usize) -> Vec<(u32, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let best_first = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if hits.len() > k {
        hits.select_nth_unstable_by(k - 1, best_first);
        hits.truncate(k);
    }
    hits.sort_unstable_by(best_first);
    hits
}

/// True when the time bounds select nothing (`after >= before`).
pub(super) fn is_empty_range(filter: &ScopeFilter) -> bool {
    matches!(
        (filter.occurred_after_ms, filter.occurred_before_ms),
        (Some(after), Some(before)) if after >= before
    )
}

/// Should-of-TermQuery group: matches documents with at least one term.
pub(super) fn any_of(terms: Vec<Term>, option: IndexRecordOption) -> Box<dyn Query> {
    let clauses = terms
        .into_iter()
        .map(|t| {
            (
                Occur::Should,
                Box::new(TermQuery::new(t, option)) as Box<dyn Query>,
            )
        })
        .collect();
    Box::new(BooleanQuery::new(clauses))
}

/// Whether `filter` narrows its tenant by actor, project and type lists alone (no
/// resources, metadata or time range), which term statistics can count or bound.
fn only_lists(filter: &ScopeFilter) -> bool {
    filter.resource_refs.is_empty()
        && filter.metadata.is_empty()
        && filter.occurred_after_ms.is_none()
        && filter.occurred_before_ms.is_none()
}

/// A filter's lists two by two, each with the tag of its pair terms.
fn pairs(filter: &ScopeFilter) -> [(char, &[String], &[String]); 3] {
    [
        (ACTOR_TYPE, &filter.actor_ids, &filter.event_types),
        (ACTOR_PROJECT, &filter.actor_ids, &filter.project_ids),
        (TYPE_PROJECT, &filter.event_types, &filter.project_ids),
    ]
}

/// [`ScopeView::narrowest`] intersects its two narrowest clauses when the second holds at
/// most this many times the first's events: reading a posting costs far less than checking
/// an event on its head (a scattered read), so intersecting pays even against a longer
/// second list.
const INTERSECT_MAX_RATIO: usize = 8;

/// The segment-local docs (deleted ones included) of segment `at` of the view `clause` was
/// sized on that carry one of its terms, ascending, read from the term infos it kept.
fn segment_docs(
    segment: &SegmentReader,
    clause: &Narrowest,
    at: usize,
) -> tantivy::Result<Vec<DocId>> {
    let infos = &clause.infos[at].1;
    let mut docs = Vec::new();
    if infos.is_empty() {
        return Ok(docs);
    }
    let inverted = segment.inverted_index(clause.field)?;
    let mut buffer = [0; tantivy::COLLECT_BLOCK_BUFFER_LEN];
    for info in infos {
        let mut postings = inverted.read_postings_from_terminfo(info, IndexRecordOption::Basic)?;
        loop {
            let n = postings.fill_buffer(&mut buffer);
            if n == 0 {
                break;
            }
            docs.extend_from_slice(&buffer[..n]);
        }
    }
    // One term's docs are ascending; several terms' are disjoint runs to merge.
    if infos.len() > 1 {
        docs.sort();
    }
    Ok(docs)
}

/// The docs in both ascending lists, ascending.
fn intersect(a: &[DocId], b: &[DocId]) -> Vec<DocId> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}
