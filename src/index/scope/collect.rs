//! Collectors that read engine-assigned internal ids (the `doc` fast field) instead of
//! tantivy's segment-local ids, with the per-segment columns cached.

use super::*;

/// Internal id of a segment-local doc, if present and in `u32` range.
pub(super) fn internal_id(column: &Column<u64>, doc: DocId) -> Option<u32> {
    column.first(doc).and_then(|v| u32::try_from(v).ok())
}

/// Appends to `ids` the internal ids of the segment-local `docs` (those present and in
/// `u32` range), read from `column` in one batch through `scratch`.
pub(super) fn extend_internal_ids(
    column: &Column<u64>,
    docs: &[DocId],
    scratch: &mut Vec<Option<u64>>,
    ids: &mut Vec<u32>,
) {
    scratch.clear();
    scratch.resize(docs.len(), None);
    column.first_vals(docs, scratch);
    ids.extend(
        scratch
            .iter()
            .filter_map(|v| v.and_then(|v| u32::try_from(v).ok())),
    );
}

/// The `doc` fast-field column of each segment, opened once per segment rather than once
/// per query: opening it decodes the column's block metadata (about two thousand blocks per
/// million docs), which was a good share of a narrow query's time. A segment's values never
/// change (deletes are a separate bitset), so a cached column stays right.
#[derive(Default)]
pub(super) struct IdColumns {
    by_segment: Mutex<HashMap<SegmentId, Column<u64>>>,
}

impl IdColumns {
    /// The column of `segment`, from the cache or opened and cached.
    pub(super) fn get(&self, segment: &SegmentReader) -> tantivy::Result<Column<u64>> {
        let id = segment.segment_id();
        if let Some(column) = self.by_segment.lock().get(&id) {
            return Ok(column.clone());
        }
        let column = segment.fast_fields().u64(DOC_FIELD)?;
        self.by_segment.lock().insert(id, column.clone());
        Ok(column)
    }

    /// Drops the columns of segments `searcher` no longer has, once merges have left the
    /// cache more than twice its segment count.
    pub(super) fn prune(&self, searcher: &Searcher) {
        let readers = searcher.segment_readers();
        let mut cache = self.by_segment.lock();
        if cache.len() > 2 * readers.len() {
            let live: Vec<SegmentId> = readers.iter().map(SegmentReader::segment_id).collect();
            cache.retain(|id, _| live.contains(id));
        }
    }
}

/// Collects `(internal id, BM25 score)` of every matching doc, in no particular order.
pub(super) struct ScoredIdsCollector<'a> {
    pub(super) columns: &'a IdColumns,
}

/// Per-segment half of [`ScoredIdsCollector`].
pub(super) struct SegmentScoredIds {
    column: Column<u64>,
    hits: Vec<(u32, f32)>,
}

impl Collector for ScoredIdsCollector<'_> {
    type Fruit = Vec<(u32, f32)>;
    type Child = SegmentScoredIds;

    fn for_segment(
        &self,
        _ordinal: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<SegmentScoredIds> {
        Ok(SegmentScoredIds {
            column: self.columns.get(segment)?,
            hits: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(u32, f32)>>) -> tantivy::Result<Vec<(u32, f32)>> {
        Ok(fruits.into_iter().flatten().collect())
    }
}

impl SegmentCollector for SegmentScoredIds {
    type Fruit = Vec<(u32, f32)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        if let Some(id) = internal_id(&self.column, doc) {
            self.hits.push((id, score));
        }
    }

    fn harvest(self) -> Vec<(u32, f32)> {
        self.hits
    }
}

/// Collects the internal ids (from the `doc` fast field) of matching docs,
/// sorted ascending and unique.
pub(super) struct DocIdsCollector<'a> {
    pub(super) columns: &'a IdColumns,
}

/// Per-segment half of [`DocIdsCollector`].
pub(super) struct SegmentDocIds {
    column: Column<u64>,
    ids: Vec<u32>,
    scratch: Vec<Option<u64>>,
}

impl Collector for DocIdsCollector<'_> {
    type Fruit = Vec<u32>;
    type Child = SegmentDocIds;

    fn for_segment(
        &self,
        _ordinal: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<SegmentDocIds> {
        let column = self.columns.get(segment)?;
        Ok(SegmentDocIds {
            column,
            ids: Vec::new(),
            scratch: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, fruits: Vec<Vec<u32>>) -> tantivy::Result<Vec<u32>> {
        let mut all: Vec<u32> = fruits.into_iter().flatten().collect();
        // Each segment lists its ids in ascending runs (its documents were added, or its
        // merged segments joined, in id order), which a merging sort only merges, where
        // `sort_unstable` would partition them all over again.
        all.sort();
        all.dedup();
        Ok(all)
    }
}

impl SegmentCollector for SegmentDocIds {
    type Fruit = Vec<u32>;

    fn collect(&mut self, doc: DocId, _score: Score) {
        if let Some(id) = internal_id(&self.column, doc) {
            self.ids.push(id);
        }
    }

    fn collect_block(&mut self, docs: &[DocId]) {
        extend_internal_ids(&self.column, docs, &mut self.scratch, &mut self.ids);
    }

    fn harvest(self) -> Vec<u32> {
        self.ids
    }
}
