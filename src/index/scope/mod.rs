//! Scope index: the first stage of scope-first retrieval.
//!
//! A tantivy index over the *scope* attributes of every event (tenant, actor,
//! project, event type, resource references, metadata values, occurrence time) plus the event
//! summary text for BM25 lexical retrieval. Retrieval narrows the candidate set
//! here, by exact scope predicates, BEFORE any vector scoring happens.
//!
//! # Invariants
//! - Actor, project, type, resource and metadata terms are indexed qualified by the tenant
//!   ([`qualified`]), so each posting list holds one tenant's events only: a
//!   narrow filter costs what its own tenant holds, not what every tenant sharing
//!   an actor or project name holds (at 1M events the unqualified lists made a
//!   0.1% query walk 50k-doc postings).
//! - Every query built by this module requires the filter's tenant: a term on the
//!   tenant field, or, when the filter lists actors, projects, types or resources,
//!   one of those lists' qualified terms (which only the tenant's events carry; the
//!   tenant's own posting list, all of a large tenant's events, is then not walked).
//!   No search can cross tenants, whatever the rest of the filter says.
//! - Results are engine-assigned internal ids (`doc: u32`, read from the `doc`
//!   fast field), never tantivy's segment-local `DocId`s. [`ScopeView::search`]
//!   returns them sorted ascending and unique.
//! - [`matches`] is the in-memory twin of [`ScopeView::search`]: for every
//!   committed document, `search(f)` contains its id iff `matches(f, doc)`.
//!   The engine uses it for fresh events that are not committed yet.
//! - The payload of every commit is a [`CommitMark`]: the last log sequence number
//!   applied to the index and the audit trail's last durable sequence then (older
//!   indexes hold a bare decimal sequence, still read). [`ScopeIndex::open`] returns
//!   the log sequence so the caller can replay the log from the next one.
//! - A failed commit drops the writer and every operation buffered since the last
//!   successful commit (tantivy loses them, and its writer would index nothing more):
//!   until [`ScopeIndex::reopen_writer`], updates fail loudly rather than vanish, and
//!   [`ScopeIndex::fingerprint`] lets the caller prove the committed ids right.
//! - The index is derived data: it may be deleted at any time and rebuilt from
//!   the log. A corrupt or unreadable index is reported as an error from
//!   [`ScopeIndex::open`] and the caller rebuilds it.
//! - The summary text is indexed but never stored, so merging segments
//!   ([`ScopeIndex::merge_all`]) physically purges deleted events' text.
//!
//! Limitation inherited from tantivy: a single term longer than 65 530 bytes is
//! not indexed, so a scope value of that size (a tenant, or a tenant plus an
//! actor, project, type or resource reference) never matches in `search`
//! although `matches` would accept it.

use std::collections::HashMap;
use std::fmt::Display;
use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

use parking_lot::Mutex;
use tantivy::collector::{Collector, Count, SegmentCollector};
use tantivy::columnar::Column;
use tantivy::directory::MmapDirectory;
use tantivy::index::SegmentId;
use tantivy::query::{
    BooleanQuery, ConstScoreQuery, EmptyQuery, Occur, Query, RangeQuery, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STORED, STRING,
};
use tantivy::tokenizer::TokenStream;
use tantivy::{
    DocId, Index, IndexReader, IndexWriter, ReloadPolicy, Score, Searcher, SegmentOrdinal,
    SegmentReader, TantivyDocument, Term,
};
use tracing::{debug, info};

use crate::model::metadata::MetaFilter;
use crate::model::Metadata;

mod collect;
mod mark;
mod matching;
#[cfg(test)]
mod tests;
mod view;

use collect::{extend_internal_ids, internal_id, DocIdsCollector, IdColumns, ScoredIdsCollector};
use mark::read_payload;
pub use mark::{fingerprint_of, CommitMark, Fingerprint};
pub use matching::matches;
use view::{any_of, is_empty_range};
pub use view::{best_hits, ScopeView};

/// Name of the internal-id field (u64 fast field).
const DOC_FIELD: &str = "doc";
/// Memory budget of the single index writer.
const WRITER_MEMORY_BYTES: usize = 50_000_000;
/// Indexing threads of the writer (the machine is shared; one is enough).
const WRITER_THREADS: usize = 1;
/// Attempts of [`ScopeIndex::merge_all`] while a background merge holds segments.
const MERGE_ATTEMPTS: u32 = 40;
/// Pause between two merge attempts.
const MERGE_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// One event as seen by the scope index.
#[derive(Debug, Clone, Copy)]
pub struct ScopeDoc<'a> {
    /// Stable dense internal id assigned by the engine.
    pub doc: u32,
    /// Tenant owning the event.
    pub tenant: &'a str,
    /// Actor that produced the event.
    pub actor: &'a str,
    /// Optional project of the event.
    pub project: Option<&'a str>,
    /// Event type.
    pub event_type: &'a str,
    /// Resources referenced by the event (any number).
    pub resource_refs: &'a [String],
    /// Occurrence time, unix milliseconds.
    pub occurred_at_ms: i64,
    /// Event summary, indexed for BM25 lexical retrieval (not stored).
    pub text: &'a str,
    /// Metadata: each leaf indexed as one tenant-qualified term (not stored).
    pub metadata: &'a Metadata,
}

/// Scope predicate. Empty lists mean "any"; non-empty lists are any-of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeFilter {
    /// Tenant; always required.
    pub tenant: String,
    /// Any of these actors (empty = any).
    pub actor_ids: Vec<String>,
    /// Any of these projects (empty = any); events without a project never
    /// match a non-empty list.
    pub project_ids: Vec<String>,
    /// Any of these event types (empty = any).
    pub event_types: Vec<String>,
    /// The event references at least one of these resources (empty = any).
    pub resource_refs: Vec<String>,
    /// Inclusive lower bound: `occurred_at_ms >= after`.
    pub occurred_after_ms: Option<i64>,
    /// Exclusive upper bound: `occurred_at_ms < before`.
    pub occurred_before_ms: Option<i64>,
    /// Metadata equality (empty = any): every path holds one of its values.
    pub metadata: MetaFilter,
}

impl ScopeFilter {
    /// Whether the filter lists actors, projects or types and narrows by something else
    /// as well (another of those lists or a time range), and lists no resources: the
    /// filters [`ScopeView::narrowest`] finds a clause of. (Resources and metadata are not
    /// held by heads, which check the narrowest clause's events.)
    pub fn narrows_twice(&self) -> bool {
        let lists = [&self.actor_ids, &self.project_ids, &self.event_types];
        let listed = lists.iter().filter(|l| !l.is_empty()).count();
        let timed = self.occurred_after_ms.is_some() || self.occurred_before_ms.is_some();
        self.resource_refs.is_empty()
            && self.metadata.is_empty()
            && listed > 0
            && listed + usize::from(timed) >= 2
    }
}

/// Errors of the scope index.
#[derive(Debug, thiserror::Error)]
pub enum ScopeIndexError {
    /// Any tantivy or I/O failure, with the index directory.
    #[error("scope index at {path}: {message}")]
    Index {
        /// Index directory.
        path: String,
        /// Underlying error.
        message: String,
    },
}

/// Builds an error for the index at `path`.
fn index_error(path: &str, err: impl Display) -> ScopeIndexError {
    ScopeIndexError::Index {
        path: path.to_string(),
        message: err.to_string(),
    }
}

/// A scope value as indexed: prefixed by its tenant, length first so no tenant/value split
/// can be read two ways.
fn qualified(tenant: &str, value: &str) -> String {
    format!("{}:{tenant}{value}", tenant.len())
}

/// Tags of the pairs of scope values indexed per event ([`pair`]).
const ACTOR_TYPE: char = 'a';
const ACTOR_PROJECT: char = 'p';
const TYPE_PROJECT: char = 't';

/// A pair of an event's scope values, as indexed in the pair field (before [`qualified`]):
/// tagged by which two lists they come from, the first's length before it.
fn pair(tag: char, first: &str, second: &str) -> String {
    format!("{tag}{}:{first}{second}", first.len())
}

/// Pair terms a filter may be read from are tried only up to this many combinations.
const MAX_PAIR_TERMS: usize = 16;

/// The clause of a filter read in place of the whole ([`ScopeView::narrowest`]): any of
/// these terms in this field. Once sized on a view, it keeps each segment's infos of its
/// terms, so listing its ids on that view reads no term from the dictionary again.
#[derive(Debug, Clone)]
pub struct Narrowest {
    field: Field,
    terms: Vec<String>,
    /// The segments of the view it was sized on, each with the infos of the terms it holds;
    /// empty until sized.
    infos: Vec<(SegmentId, Vec<tantivy::postings::TermInfo>)>,
    /// A second clause of the filter whose events the listed ones must also be among
    /// ([`ScopeView::narrowest`] adds it when intersecting the two lists' postings costs
    /// less than checking the first's events on their heads).
    and: Option<Box<Narrowest>>,
}

/// Two clauses are the same clause whatever they were sized on.
impl PartialEq for Narrowest {
    fn eq(&self, other: &Self) -> bool {
        self.field == other.field && self.terms == other.terms && self.and == other.and
    }
}

impl Eq for Narrowest {}

impl Narrowest {
    /// Any of `values` (repeats dropped) of `tenant` in `field`.
    fn list<'v>(field: Field, tenant: &str, values: impl IntoIterator<Item = &'v String>) -> Self {
        let distinct: std::collections::BTreeSet<&String> = values.into_iter().collect();
        Narrowest {
            field,
            terms: distinct.into_iter().map(|v| qualified(tenant, v)).collect(),
            infos: Vec::new(),
            and: None,
        }
    }

    /// How many documents (deleted ones not yet merged away included) carry one of the
    /// terms on `searcher` (each event has at most one value per field, and one pair per
    /// tag, so their frequencies add up), with the clause keeping the term infos it read.
    /// `None` if a segment could not be read.
    fn sized(mut self, searcher: &Searcher) -> Option<(usize, Self)> {
        let terms: Vec<Term> = self
            .terms
            .iter()
            .map(|t| Term::from_field_text(self.field, t))
            .collect();
        let mut size = 0;
        let mut infos = Vec::with_capacity(searcher.segment_readers().len());
        for segment in searcher.segment_readers() {
            let inverted = segment.inverted_index(self.field).ok()?;
            let mut held = Vec::new();
            for term in &terms {
                if let Some(info) = inverted.get_term_info(term).ok()? {
                    size += info.doc_freq as usize;
                    held.push(info);
                }
            }
            infos.push((segment.segment_id(), held));
        }
        self.infos = infos;
        Some((size, self))
    }
}

/// Handles of the schema fields.
#[derive(Debug, Clone, Copy)]
struct Fields {
    doc: Field,
    tenant: Field,
    actor: Field,
    project: Field,
    event_type: Field,
    resource: Field,
    occurred_at: Field,
    text: Field,
    pair: Field,
    meta: Field,
}

/// Builds the schema and returns it with its field handles.
fn build_schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text_options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        doc: b.add_u64_field(DOC_FIELD, INDEXED | FAST | STORED),
        tenant: b.add_text_field("tenant", STRING),
        // Field names differ from the unqualified layout's, so an index built with that
        // layout fails to open against this schema and is rebuilt from the log.
        actor: b.add_text_field("tenant_actor", STRING),
        project: b.add_text_field("tenant_project", STRING),
        event_type: b.add_text_field("tenant_event_type", STRING),
        resource: b.add_text_field("tenant_resource", STRING),
        occurred_at: b.add_i64_field("occurred_at", INDEXED | FAST),
        text: b.add_text_field("text", text_options),
        // An index built before pairs has no such field and is rebuilt from the log.
        pair: b.add_text_field("tenant_pair", STRING),
        // Likewise an index built before metadata.
        meta: b.add_text_field("tenant_meta", STRING),
    };
    (b.build(), fields)
}

/// Writer plus the "has uncommitted operations" flag, guarded together. `writer` is `None`
/// after a failed commit until [`ScopeIndex::reopen_writer`] succeeds: tantivy drops the
/// operations of a failed commit and its indexing threads with them, so that writer is
/// never used again.
struct WriterState {
    writer: Option<IndexWriter>,
    dirty: bool,
}

/// Scope index over one directory. `Send + Sync`; share it through an `Arc`.
pub struct ScopeIndex {
    path: String,
    index: Index,
    reader: IndexReader,
    writer: Mutex<WriterState>,
    fields: Fields,
    columns: IdColumns,
}

impl std::fmt::Debug for ScopeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeIndex")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ScopeIndex {
    /// Opens or creates the index in `dir`. Returns the last log seq recorded
    /// in the latest commit payload (`None` for a new/never-committed index).
    ///
    /// A corrupt or unreadable index (or one with another schema) returns
    /// `Err`; the caller deletes the directory and rebuilds from the log.
    pub fn open(dir: &Path) -> Result<(ScopeIndex, Option<u64>), ScopeIndexError> {
        let path = dir.display().to_string();
        let err = |e: &dyn Display| index_error(&path, e);
        crate::fsutil::create_private_dir_all(dir).map_err(|e| err(&e))?;
        let directory = MmapDirectory::open(dir).map_err(|e| err(&e))?;
        let (schema, fields) = build_schema();
        let index = Index::open_or_create(directory, schema).map_err(|e| err(&e))?;
        // Segment files are read without checksum checks (and tantivy can panic on damaged
        // ones), so verify every footer checksum before any reader touches them.
        let mut damaged: Vec<String> = index
            .validate_checksum()
            .map_err(|e| err(&e))?
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        if !damaged.is_empty() {
            damaged.sort();
            let msg = format!("checksum mismatch in {}", damaged.join(", "));
            return Err(err(&msg));
        }
        let last_seq = read_payload(&index, &path)?.map(|m| m.last_seq);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| err(&e))?;
        let writer = index
            .writer_with_num_threads(WRITER_THREADS, WRITER_MEMORY_BYTES)
            .map_err(|e| err(&e))?;
        debug!(path = %path, ?last_seq, "scope index opened");
        let scope = ScopeIndex {
            path,
            index,
            reader,
            writer: Mutex::new(WriterState {
                writer: Some(writer),
                dirty: false,
            }),
            fields,
            columns: IdColumns::default(),
        };
        Ok((scope, last_seq))
    }

    /// Buffers `doc` for indexing; visible to searches after [`Self::commit`]. A failure
    /// (tantivy's indexing thread died) closes the writer like a failed commit.
    pub fn add(&self, doc: &ScopeDoc<'_>) -> Result<(), ScopeIndexError> {
        let document = self.to_document(doc);
        let mut state = self.writer.lock();
        state.dirty = true;
        let writer = self.live_writer(&mut state)?;
        if let Err(e) = writer.add_document(document) {
            state.writer = None;
            return Err(self.err(e));
        }
        Ok(())
    }

    /// Deletes every document with internal id `doc` (visible after commit).
    ///
    /// Only documents added *before* this call are affected: `delete(d)` then
    /// `add(d)` replaces the document.
    pub fn delete(&self, doc: u32) -> Result<(), ScopeIndexError> {
        let term = Term::from_field_u64(self.fields.doc, u64::from(doc));
        let mut state = self.writer.lock();
        state.dirty = true;
        self.live_writer(&mut state)?.delete_term(term);
        Ok(())
    }

    /// Removes every document (visible after commit); documents added afterwards are kept.
    pub fn clear(&self) -> Result<(), ScopeIndexError> {
        let mut state = self.writer.lock();
        state.dirty = true;
        let writer = self.live_writer(&mut state)?;
        if let Err(e) = writer.delete_all_documents() {
            state.writer = None;
            return Err(self.err(e));
        }
        Ok(())
    }

    /// Commits with payload = `last_seq`, then reloads the reader so searches see it.
    /// Returns when the commit is searchable.
    pub fn commit(&self, last_seq: u64) -> Result<(), ScopeIndexError> {
        self.commit_marked(CommitMark {
            last_seq,
            audit_seq: None,
        })
    }

    /// Commits with `mark` as the payload, then reloads the reader so searches see it.
    ///
    /// On failure the writer is dropped, and with it every operation since the last
    /// successful commit (tantivy loses them anyway, and its writer then silently indexes
    /// nothing more): the caller must [`Self::reopen_writer`] and apply those operations
    /// again. Nothing is committed by a failed call.
    pub fn commit_marked(&self, mark: CommitMark) -> Result<(), ScopeIndexError> {
        let mut state = self.writer.lock();
        let writer = self.live_writer(&mut state)?;
        let committed = writer.prepare_commit().and_then(|mut prepared| {
            prepared.set_payload(&mark.payload());
            prepared.commit()
        });
        if let Err(e) = committed {
            state.writer = None;
            return Err(self.err(e));
        }
        state.dirty = false;
        self.reader.reload().map_err(|e| self.err(e))?;
        debug!(path = %self.path, last_seq = mark.last_seq, "scope index committed");
        Ok(())
    }

    /// Whether the writer is usable (false after a failed commit or update, until reopened).
    pub fn writer_ready(&self) -> bool {
        self.writer.lock().writer.is_some()
    }

    /// Replaces the writer with a new one, dropping whatever the old one buffered (after a
    /// failed commit or update). The index then holds exactly its last successful commit,
    /// and nothing is buffered.
    pub fn reopen_writer(&self) -> Result<(), ScopeIndexError> {
        let mut state = self.writer.lock();
        // Dropping the old writer first releases the directory lock the new one takes.
        state.writer = None;
        let writer = self
            .index
            .writer_with_num_threads(WRITER_THREADS, WRITER_MEMORY_BYTES)
            .map_err(|e| self.err(e))?;
        state.writer = Some(writer);
        state.dirty = false;
        self.reader.reload().map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Drops the writer and its directory lock (at shutdown), discarding anything not
    /// committed. Searches keep working; updates fail until [`Self::reopen_writer`].
    pub fn close_writer(&self) {
        self.writer.lock().writer = None;
    }

    /// The payload of the latest commit (`None` for a never-committed index).
    pub fn commit_mark(&self) -> Result<Option<CommitMark>, ScopeIndexError> {
        read_payload(&self.index, &self.path)
    }

    /// The fingerprint of the committed, non-deleted documents (reads every segment's id
    /// column once).
    pub fn fingerprint(&self) -> Fingerprint {
        let searcher = self.searcher();
        let mut f = Fingerprint::default();
        for segment in searcher.segment_readers() {
            let column = self.columns.get(segment).ok();
            for doc in segment.doc_ids_alive() {
                if let Some(id) = column.as_ref().and_then(|c| internal_id(c, doc)) {
                    f.add(id);
                } else {
                    // A document without a readable id can never match: count it so the
                    // fingerprint disagrees with any table.
                    f.docs += 1;
                }
            }
        }
        f
    }

    /// The writer, or an error naming the failed commit it was dropped after.
    fn live_writer<'s>(
        &self,
        state: &'s mut WriterState,
    ) -> Result<&'s mut IndexWriter, ScopeIndexError> {
        state
            .writer
            .as_mut()
            .ok_or_else(|| self.err("the writer is closed after a failed commit or update"))
    }

    /// True when adds or deletes were buffered since the last commit.
    pub fn has_uncommitted(&self) -> bool {
        self.writer.lock().dirty
    }

    /// A view of the current commit: every search through it reads the same searcher.
    pub fn view(&self) -> ScopeView<'_> {
        ScopeView {
            index: self,
            searcher: self.searcher(),
            sized: Mutex::new(Vec::new()),
        }
    }

    /// The filter's actor, project and event-type lists with their fields.
    fn lists<'f>(&self, filter: &'f ScopeFilter) -> [(Field, &'f [String]); 3] {
        let f = &self.fields;
        [
            (f.actor, &filter.actor_ids),
            (f.project, &filter.project_ids),
            (f.event_type, &filter.event_types),
        ]
    }

    /// The current searcher, with the id-column cache pruned to its segments.
    fn searcher(&self) -> Searcher {
        let searcher = self.reader.searcher();
        self.columns.prune(&searcher);
        searcher
    }

    /// Number of committed, non-deleted documents.
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Merges all committed segments into one (purging deleted documents) and
    /// garbage-collects unused files. Blocking; the commit payload is kept.
    pub fn merge_all(&self) -> Result<(), ScopeIndexError> {
        let mut state = self.writer.lock();
        let writer = self.live_writer(&mut state)?;
        for attempt in 1..=MERGE_ATTEMPTS {
            let metas = self
                .index
                .searchable_segment_metas()
                .map_err(|e| self.err(e))?;
            if metas.len() <= 1 && metas.iter().all(|m| !m.has_deletes()) {
                break;
            }
            let ids: Vec<_> = metas.iter().map(|m| m.id()).collect();
            match writer.merge(&ids).wait() {
                Ok(_) => break,
                // A background merge may hold some of these segments: retry.
                Err(e) if attempt < MERGE_ATTEMPTS => {
                    debug!(path = %self.path, attempt, error = %e, "merge_all retry");
                    std::thread::sleep(MERGE_RETRY_PAUSE);
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        writer
            .garbage_collect_files()
            .wait()
            .map_err(|e| self.err(e))?;
        self.reader.reload().map_err(|e| self.err(e))?;
        info!(path = %self.path, "scope index merged into one segment");
        Ok(())
    }

    /// Wraps an error with this index's path.
    fn err(&self, e: impl Display) -> ScopeIndexError {
        index_error(&self.path, e)
    }

    /// Converts a [`ScopeDoc`] into a tantivy document.
    fn to_document(&self, doc: &ScopeDoc<'_>) -> TantivyDocument {
        let f = &self.fields;
        let mut d = TantivyDocument::default();
        d.add_u64(f.doc, u64::from(doc.doc));
        let tenant = doc.tenant;
        d.add_text(f.tenant, tenant);
        d.add_text(f.actor, qualified(tenant, doc.actor));
        if let Some(project) = doc.project {
            d.add_text(f.project, qualified(tenant, project));
        }
        d.add_text(f.event_type, qualified(tenant, doc.event_type));
        for resource in doc.resource_refs {
            d.add_text(f.resource, qualified(tenant, resource));
        }
        d.add_i64(f.occurred_at, doc.occurred_at_ms);
        d.add_text(f.text, doc.text);
        for term in doc.metadata.terms() {
            d.add_text(f.meta, qualified(tenant, &term));
        }
        let (actor, kind) = (doc.actor, doc.event_type);
        d.add_text(f.pair, qualified(tenant, &pair(ACTOR_TYPE, actor, kind)));
        if let Some(project) = doc.project {
            d.add_text(
                f.pair,
                qualified(tenant, &pair(ACTOR_PROJECT, actor, project)),
            );
            d.add_text(
                f.pair,
                qualified(tenant, &pair(TYPE_PROJECT, kind, project)),
            );
        }
        d
    }

    /// Builds the scope query: each non-empty any-of group and each metadata path (their
    /// terms qualified by the tenant) or, without any, the tenant; AND the time range.
    fn filter_query(&self, filter: &ScopeFilter) -> Box<dyn Query> {
        let f = &self.fields;
        if is_empty_range(filter) {
            return Box::new(EmptyQuery);
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let groups = [
            (f.actor, &filter.actor_ids),
            (f.project, &filter.project_ids),
            (f.event_type, &filter.event_types),
            (f.resource, &filter.resource_refs),
        ];
        for (field, values) in groups {
            if !values.is_empty() {
                let terms = values
                    .iter()
                    .map(|v| Term::from_field_text(field, &qualified(&filter.tenant, v)));
                clauses.push((
                    Occur::Must,
                    any_of(terms.collect(), IndexRecordOption::Basic),
                ));
            }
        }
        for (_, values) in &filter.metadata.clauses {
            let terms = values
                .iter()
                .map(|v| Term::from_field_text(f.meta, &qualified(&filter.tenant, v)));
            clauses.push((
                Occur::Must,
                any_of(terms.collect(), IndexRecordOption::Basic),
            ));
        }
        if clauses.is_empty() {
            let tenant = Term::from_field_text(f.tenant, &filter.tenant);
            clauses.push((
                Occur::Must,
                Box::new(TermQuery::new(tenant, IndexRecordOption::Basic)),
            ));
        }
        if let Some(range) = self.time_range(filter) {
            clauses.push((Occur::Must, range));
        }
        Box::new(BooleanQuery::new(clauses))
    }

    /// Range query on `occurred_at` when at least one bound is present.
    fn time_range(&self, filter: &ScopeFilter) -> Option<Box<dyn Query>> {
        let field = self.fields.occurred_at;
        let term = |v: i64| Term::from_field_i64(field, v);
        let lower = filter
            .occurred_after_ms
            .map_or(Bound::Unbounded, |v| Bound::Included(term(v)));
        let upper = filter
            .occurred_before_ms
            .map_or(Bound::Unbounded, |v| Bound::Excluded(term(v)));
        if matches!((&lower, &upper), (Bound::Unbounded, Bound::Unbounded)) {
            return None;
        }
        Some(Box::new(RangeQuery::new(lower, upper)))
    }

    /// Unique terms of `query` produced by the text field's analyzer.
    fn text_terms(&self, query: &str) -> Result<Vec<Term>, ScopeIndexError> {
        let mut analyzer = self
            .index
            .tokenizer_for_field(self.fields.text)
            .map_err(|e| self.err(e))?;
        let mut words = Vec::new();
        analyzer
            .token_stream(query)
            .process(&mut |token| words.push(token.text.clone()));
        words.sort_unstable();
        words.dedup();
        let field = self.fields.text;
        Ok(words
            .iter()
            .map(|w| Term::from_field_text(field, w))
            .collect())
    }
}
