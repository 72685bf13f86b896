//! Scope index: the first stage of scope-first retrieval.
//!
//! A tantivy index over the *scope* attributes of every event (tenant, actor,
//! project, event type, resource references, occurrence time) plus the event
//! summary text for BM25 lexical retrieval. Retrieval narrows the candidate set
//! here, by exact scope predicates, BEFORE any vector scoring happens.
//!
//! # Invariants
//! - Actor, project, type and resource terms are indexed qualified by the tenant
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
//!   fast field), never tantivy's segment-local `DocId`s. [`ScopeIndex::search`]
//!   returns them sorted ascending and unique.
//! - [`matches`] is the in-memory twin of [`ScopeIndex::search`]: for every
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
}

impl ScopeFilter {
    /// Whether the filter lists actors, projects or types and narrows by something else
    /// as well (another of those lists or a time range), and lists no resources: the
    /// filters [`ScopeIndex::narrowest`] finds a clause of.
    pub fn narrows_twice(&self) -> bool {
        let lists = [&self.actor_ids, &self.project_ids, &self.event_types];
        let listed = lists.iter().filter(|l| !l.is_empty()).count();
        let timed = self.occurred_after_ms.is_some() || self.occurred_before_ms.is_some();
        self.resource_refs.is_empty() && listed > 0 && listed + usize::from(timed) >= 2
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

/// The clause of a filter read in place of the whole ([`ScopeIndex::narrowest`]): any of
/// these terms in this field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowest {
    field: Field,
    terms: Vec<String>,
}

impl Narrowest {
    /// Any of `values` (repeats dropped) of `tenant` in `field`.
    fn list<'v>(field: Field, tenant: &str, values: impl IntoIterator<Item = &'v String>) -> Self {
        let distinct: std::collections::BTreeSet<&String> = values.into_iter().collect();
        Narrowest {
            field,
            terms: distinct.into_iter().map(|v| qualified(tenant, v)).collect(),
        }
    }

    /// How many documents (deleted ones not yet merged away included) carry one of the
    /// terms: each event has at most one value per field, and one pair per tag, so their
    /// frequencies add up.
    fn size(&self, searcher: &Searcher) -> Option<usize> {
        self.terms
            .iter()
            .map(|t| searcher.doc_freq(&Term::from_field_text(self.field, t)))
            .map(|df| df.ok().map(|n| n as usize))
            .sum()
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

/// What a commit records about the logs it reflects (its payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommitMark {
    /// The last event-log sequence applied to the index.
    pub last_seq: u64,
    /// The last audit-log sequence that was durable when the commit was made (`None` for an
    /// index committed before audit sequences were recorded).
    pub audit_seq: Option<u64>,
}

impl CommitMark {
    /// The payload text: `{"lastSeq":N,"auditSeq":M}`.
    fn payload(&self) -> String {
        match self.audit_seq {
            Some(a) => format!("{{\"lastSeq\":{},\"auditSeq\":{a}}}", self.last_seq),
            None => format!("{{\"lastSeq\":{}}}", self.last_seq),
        }
    }

    /// Reads a payload: the JSON form, or the bare decimal sequence of older indexes.
    fn parse(text: &str) -> Option<CommitMark> {
        let text = text.trim();
        if let Ok(last_seq) = text.parse::<u64>() {
            return Some(CommitMark {
                last_seq,
                audit_seq: None,
            });
        }
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(CommitMark {
            last_seq: v.get("lastSeq")?.as_u64()?,
            audit_seq: match v.get("auditSeq") {
                None => None,
                Some(a) => Some(a.as_u64()?),
            },
        })
    }
}

/// The committed documents in brief: how many, and an order-free hash of their internal
/// ids ([`fingerprint_of`]). Two sets of ids with equal fingerprints are equal but with
/// negligible probability, so comparing the index's with the table's detects any event the
/// index lacks, holds twice, or holds after its deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fingerprint {
    /// Documents.
    pub docs: u64,
    /// Wrapping sum of each id's mix.
    pub hash: u64,
}

impl Fingerprint {
    /// Adds one internal id.
    pub fn add(&mut self, doc: u32) {
        self.docs += 1;
        self.hash = self.hash.wrapping_add(mix(doc));
    }
}

/// The fingerprint of a set of internal ids.
pub fn fingerprint_of(docs: impl IntoIterator<Item = u32>) -> Fingerprint {
    let mut f = Fingerprint::default();
    docs.into_iter().for_each(|d| f.add(d));
    f
}

/// A 64-bit mix of an id (splitmix64's finalizer), so sums of distinct sets rarely collide.
fn mix(doc: u32) -> u64 {
    let mut z = u64::from(doc).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
        }
    }

    /// [`ScopeView::search`] on the current commit.
    pub fn search(&self, filter: &ScopeFilter) -> Result<Vec<u32>, ScopeIndexError> {
        self.view().search(filter)
    }

    /// [`ScopeView::count`] on the current commit.
    pub fn count(&self, filter: &ScopeFilter) -> Result<usize, ScopeIndexError> {
        self.view().count(filter)
    }

    /// [`ScopeView::lexical`] on the current commit.
    pub fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
    ) -> Result<Vec<(u32, f32)>, ScopeIndexError> {
        self.view().lexical(filter, query, k)
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

    /// Builds the scope query: each non-empty any-of group (its terms qualified by the
    /// tenant) or, without any, the tenant; AND the time range.
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

/// One commit of a [`ScopeIndex`], as one searcher sees it: a read that searches through
/// one view (a recall, a timeline page) sees the same documents in every search.
pub struct ScopeView<'a> {
    index: &'a ScopeIndex,
    searcher: Searcher,
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

    /// Bounds on [`ScopeIndex::count`] read from term statistics alone (no posting list is
    /// read), for a filter of the tenant and at most one actor, project or event-type list
    /// (each event has at most one of each, so the terms' document frequencies add up);
    /// `None` for any other filter. The upper bound also counts deleted documents not yet
    /// merged away; the lower one subtracts every deleted document of the index.
    pub fn count_bounds(&self, filter: &ScopeFilter) -> Option<(usize, usize)> {
        let lists = self.index.lists(filter);
        let mut lists = lists.iter().filter(|(_, values)| !values.is_empty());
        let single = lists.next();
        let simple = lists.next().is_none()
            && filter.resource_refs.is_empty()
            && filter.occurred_after_ms.is_none()
            && filter.occurred_before_ms.is_none();
        if !simple {
            return None;
        }
        let searcher = &self.searcher;
        let upper = match single {
            None => {
                let tenant = Term::from_field_text(self.index.fields.tenant, &filter.tenant);
                searcher.doc_freq(&tenant).ok()? as usize
            }
            Some(&(field, values)) => {
                Narrowest::list(field, &filter.tenant, values).size(searcher)?
            }
        };
        let deleted: usize = searcher
            .segment_readers()
            .iter()
            .map(|s| s.num_deleted_docs() as usize)
            .sum();
        Some((upper.saturating_sub(deleted), upper))
    }

    /// The clause of `filter` that the fewest documents carry (by term statistics): one of
    /// its actor, project and event-type lists, or the pairs of two of them (an actor and a
    /// type, an actor and a project, a type and a project, each event indexed under its
    /// own), when the filter narrows by something else as well (another list or a time
    /// range) and lists no resources; `None` otherwise. Its events, all of the filter's
    /// tenant, include the filter's; listing them ([`ScopeIndex::search_narrowest`]) and
    /// checking each on its head spares intersecting the lists' postings, which in a large
    /// tenant costs a seek in each list per event of the narrowest.
    pub fn narrowest(&self, filter: &ScopeFilter) -> Option<Narrowest> {
        if !filter.narrows_twice() {
            return None;
        }
        let tenant = &filter.tenant;
        let lists = self.index.lists(filter);
        let lists = lists.iter().filter(|(_, values)| !values.is_empty());
        let mut options: Vec<Narrowest> = lists
            .map(|&(field, values)| Narrowest::list(field, tenant, values))
            .collect();
        let pairs = [
            (ACTOR_TYPE, &filter.actor_ids, &filter.event_types),
            (ACTOR_PROJECT, &filter.actor_ids, &filter.project_ids),
            (TYPE_PROJECT, &filter.event_types, &filter.project_ids),
        ];
        for (tag, first, second) in pairs {
            if first.len() * second.len() > MAX_PAIR_TERMS {
                continue;
            }
            let combined: Vec<String> = first
                .iter()
                .flat_map(|a| second.iter().map(move |b| pair(tag, a, b)))
                .collect();
            if !combined.is_empty() {
                options.push(Narrowest::list(self.index.fields.pair, tenant, &combined));
            }
        }
        let searcher = &self.searcher;
        options
            .into_iter()
            .min_by_key(|n| n.size(searcher).unwrap_or(usize::MAX))
    }

    /// Internal ids of committed docs carrying any term of `narrowest`, sorted ascending,
    /// unique.
    pub fn search_narrowest(&self, narrowest: &Narrowest) -> Result<Vec<u32>, ScopeIndexError> {
        let terms = narrowest
            .terms
            .iter()
            .map(|t| Term::from_field_text(narrowest.field, t))
            .collect();
        let query = any_of(terms, IndexRecordOption::Basic);
        let collector = DocIdsCollector {
            columns: &self.index.columns,
        };
        self.searcher
            .search(&*query, &collector)
            .map_err(|e| self.index.err(e))
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
    fn text_in_scope(
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

/// The `k` best of `hits` (`(doc, score)` pairs, as [`ScopeIndex::lexical_all`] gives them),
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
fn is_empty_range(filter: &ScopeFilter) -> bool {
    matches!(
        (filter.occurred_after_ms, filter.occurred_before_ms),
        (Some(after), Some(before)) if after >= before
    )
}

/// Should-of-TermQuery group: matches documents with at least one term.
fn any_of(terms: Vec<Term>, option: IndexRecordOption) -> Box<dyn Query> {
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

/// Reads the latest commit payload.
fn read_payload(index: &Index, path: &str) -> Result<Option<CommitMark>, ScopeIndexError> {
    let metas = index.load_metas().map_err(|e| index_error(path, e))?;
    match metas.payload {
        None => Ok(None),
        Some(payload) => CommitMark::parse(&payload)
            .map(Some)
            .ok_or_else(|| index_error(path, format!("bad commit payload {payload:?}"))),
    }
}

/// Internal id of a segment-local doc, if present and in `u32` range.
fn internal_id(column: &Column<u64>, doc: DocId) -> Option<u32> {
    column.first(doc).and_then(|v| u32::try_from(v).ok())
}

/// The `doc` fast-field column of each segment, opened once per segment rather than once
/// per query: opening it decodes the column's block metadata (about two thousand blocks per
/// million docs), which was a good share of a narrow query's time. A segment's values never
/// change (deletes are a separate bitset), so a cached column stays right.
#[derive(Default)]
struct IdColumns {
    by_segment: Mutex<HashMap<SegmentId, Column<u64>>>,
}

impl IdColumns {
    /// The column of `segment`, from the cache or opened and cached.
    fn get(&self, segment: &SegmentReader) -> tantivy::Result<Column<u64>> {
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
    fn prune(&self, searcher: &Searcher) {
        let readers = searcher.segment_readers();
        let mut cache = self.by_segment.lock();
        if cache.len() > 2 * readers.len() {
            let live: Vec<SegmentId> = readers.iter().map(SegmentReader::segment_id).collect();
            cache.retain(|id, _| live.contains(id));
        }
    }
}

/// Collects `(internal id, BM25 score)` of every matching doc, in no particular order.
struct ScoredIdsCollector<'a> {
    columns: &'a IdColumns,
}

/// Per-segment half of [`ScoredIdsCollector`].
struct SegmentScoredIds {
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
struct DocIdsCollector<'a> {
    columns: &'a IdColumns,
}

/// Per-segment half of [`DocIdsCollector`].
struct SegmentDocIds {
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
        all.sort_unstable();
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
        self.scratch.clear();
        self.scratch.resize(docs.len(), None);
        self.column.first_vals(docs, &mut self.scratch);
        let ids = self
            .scratch
            .iter()
            .filter_map(|v| v.and_then(|v| u32::try_from(v).ok()));
        self.ids.extend(ids);
    }

    fn harvest(self) -> Vec<u32> {
        self.ids
    }
}

/// Pure in-memory predicate with exactly the semantics of
/// [`ScopeIndex::search`]; used for fresh, not-yet-committed events.
pub fn matches(filter: &ScopeFilter, doc: &ScopeDoc<'_>) -> bool {
    doc.tenant == filter.tenant
        && any_or_contains(&filter.actor_ids, doc.actor)
        && project_matches(&filter.project_ids, doc.project)
        && any_or_contains(&filter.event_types, doc.event_type)
        && resources_match(&filter.resource_refs, doc.resource_refs)
        && filter
            .occurred_after_ms
            .is_none_or(|a| doc.occurred_at_ms >= a)
        && filter
            .occurred_before_ms
            .is_none_or(|b| doc.occurred_at_ms < b)
}

/// Empty list = any; otherwise `value` must be in the list.
fn any_or_contains(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v == value)
}

/// Empty list = any; otherwise the event must have one of the projects.
fn project_matches(list: &[String], project: Option<&str>) -> bool {
    list.is_empty() || project.is_some_and(|p| list.iter().any(|v| v == p))
}

/// Empty list = any; otherwise the event references one of the resources.
fn resources_match(list: &[String], refs: &[String]) -> bool {
    list.is_empty() || refs.iter().any(|r| list.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Instant;

    /// Owned test event.
    #[derive(Debug, Clone)]
    struct Ev {
        doc: u32,
        tenant: String,
        actor: String,
        project: Option<String>,
        event_type: String,
        resources: Vec<String>,
        at: i64,
        text: String,
    }

    impl Ev {
        fn as_doc(&self) -> ScopeDoc<'_> {
            ScopeDoc {
                doc: self.doc,
                tenant: &self.tenant,
                actor: &self.actor,
                project: self.project.as_deref(),
                event_type: &self.event_type,
                resource_refs: &self.resources,
                occurred_at_ms: self.at,
                text: &self.text,
            }
        }
    }

    fn ev(doc: u32, tenant: &str, actor: &str, project: Option<&str>, ty: &str, at: i64) -> Ev {
        Ev {
            doc,
            tenant: tenant.into(),
            actor: actor.into(),
            project: project.map(Into::into),
            event_type: ty.into(),
            resources: Vec::new(),
            at,
            text: String::new(),
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn tenant(t: &str) -> ScopeFilter {
        ScopeFilter {
            tenant: t.into(),
            ..ScopeFilter::default()
        }
    }

    fn open_tmp() -> (tempfile::TempDir, ScopeIndex) {
        let dir = tempfile::tempdir().unwrap();
        let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
        assert_eq!(seq, None);
        (dir, index)
    }

    fn add_all(index: &ScopeIndex, evs: &[Ev]) {
        for e in evs {
            index.add(&e.as_doc()).unwrap();
        }
    }

    /// Fixture: two tenants sharing actor names.
    fn fixture() -> Vec<Ev> {
        let mut evs = vec![
            ev(1, "t1", "alice", Some("p1"), "note", 100),
            ev(2, "t1", "bob", Some("p2"), "commit", 200),
            ev(3, "t1", "alice", None, "commit", 300),
            ev(4, "t1", "carol", Some("p1"), "deploy", 400),
            ev(5, "t2", "alice", Some("p1"), "note", 100),
            ev(6, "t2", "bob", None, "commit", 500),
        ];
        evs[0].resources = strings(&["file:a", "file:b"]);
        evs[1].resources = strings(&["file:b"]);
        evs[3].resources = strings(&["svc:x"]);
        evs[4].resources = strings(&["file:a"]);
        evs
    }

    fn fixture_index() -> (tempfile::TempDir, ScopeIndex, Vec<Ev>) {
        let (dir, index) = open_tmp();
        let evs = fixture();
        add_all(&index, &evs);
        index.commit(6).unwrap();
        (dir, index, evs)
    }

    /// Asserts search == expected, count agrees, and `matches` agrees.
    fn check(index: &ScopeIndex, evs: &[Ev], filter: &ScopeFilter, expected: &[u32]) {
        assert_eq!(index.search(filter).unwrap(), expected, "{filter:?}");
        assert_eq!(index.count(filter).unwrap(), expected.len());
        let by_pred: Vec<u32> = evs
            .iter()
            .filter(|e| matches(filter, &e.as_doc()))
            .map(|e| e.doc)
            .collect();
        assert_eq!(by_pred, expected, "matches() disagrees for {filter:?}");
    }

    #[test]
    fn index_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ScopeIndex>();
    }

    #[test]
    fn each_dimension_and_combinations() {
        let (_d, index, evs) = fixture_index();
        check(&index, &evs, &tenant("t1"), &[1, 2, 3, 4]);
        check(&index, &evs, &tenant("t2"), &[5, 6]);
        check(&index, &evs, &tenant("nobody"), &[]);
        let mut f = tenant("t1");
        f.actor_ids = strings(&["alice", "carol"]);
        check(&index, &evs, &f, &[1, 3, 4]);
        let mut f = tenant("t1");
        f.event_types = strings(&["commit"]);
        check(&index, &evs, &f, &[2, 3]);
        let mut f = tenant("t1");
        f.project_ids = strings(&["p1"]);
        check(&index, &evs, &f, &[1, 4]);
        let mut f = tenant("t1");
        f.actor_ids = strings(&["alice"]);
        f.event_types = strings(&["commit", "note"]);
        f.project_ids = strings(&["p1", "p2"]);
        check(&index, &evs, &f, &[1]);
    }

    #[test]
    fn the_narrowest_list_alone_holds_the_whole_scope() {
        let (_d, index, evs) = fixture_index();
        let mut one = tenant("t1");
        one.actor_ids = strings(&["alice"]);
        assert_eq!(
            index.view().narrowest(&tenant("t1")),
            None,
            "the tenant alone"
        );
        assert_eq!(
            index.view().narrowest(&one),
            None,
            "a single list is the whole filter"
        );
        let mut resources = one.clone();
        resources.event_types = strings(&["commit"]);
        resources.resource_refs = strings(&["file:a"]);
        assert_eq!(
            index.view().narrowest(&resources),
            None,
            "heads cannot check resources"
        );

        let fields = index.fields;
        let of = |f: &ScopeFilter| {
            let n = index.view().narrowest(f).expect("a narrowest clause");
            let ids = index.view().search_narrowest(&n).unwrap();
            (n.field, ids)
        };
        let mut f = tenant("t1");
        f.actor_ids = strings(&["alice", "bob"]);
        f.event_types = strings(&["deploy", "note"]);
        assert_eq!(
            of(&f),
            (fields.pair, vec![1]),
            "1 event, by its actor and type"
        );
        f.event_types = strings(&["commit", "note", "deploy"]);
        assert_eq!(
            of(&f),
            (fields.actor, vec![1, 2, 3]),
            "3 events, the first of a tie"
        );
        f.project_ids = strings(&["p2"]);
        assert_eq!(of(&f).0, fields.project, "1 event, by its project");
        let mut timed = one.clone();
        timed.occurred_after_ms = Some(150);
        assert_eq!(of(&timed), (fields.actor, vec![1, 3]));
        for filter in [f, timed] {
            let narrow = of(&filter).1;
            let all = index.search(&filter).unwrap();
            assert!(all.iter().all(|d| narrow.contains(d)), "{filter:?}");
            assert!(narrow.iter().all(|d| evs[*d as usize - 1].tenant == "t1"));
        }
    }

    #[test]
    fn tenant_isolation() {
        let (_d, index, evs) = fixture_index();
        let mut f = tenant("t2");
        f.actor_ids = strings(&["alice", "bob"]);
        check(&index, &evs, &f, &[5, 6]);
        f.tenant = "t1".into();
        check(&index, &evs, &f, &[1, 2, 3]);
    }

    #[test]
    fn time_range_edges() {
        let (_d, index, evs) = fixture_index();
        let mut f = tenant("t1");
        f.occurred_after_ms = Some(200);
        check(&index, &evs, &f, &[2, 3, 4]);
        f.occurred_before_ms = Some(400);
        check(&index, &evs, &f, &[2, 3]);
        f.occurred_after_ms = None;
        check(&index, &evs, &f, &[1, 2, 3]);
        f.occurred_after_ms = Some(300);
        f.occurred_before_ms = Some(300);
        check(&index, &evs, &f, &[]);
        f.occurred_after_ms = Some(301);
        f.occurred_before_ms = Some(300);
        check(&index, &evs, &f, &[]);
        f.occurred_after_ms = Some(i64::MIN);
        f.occurred_before_ms = Some(i64::MAX);
        check(&index, &evs, &f, &[1, 2, 3, 4]);
    }

    #[test]
    fn resources_any_of() {
        let (_d, index, evs) = fixture_index();
        let mut f = tenant("t1");
        f.resource_refs = strings(&["file:b"]);
        check(&index, &evs, &f, &[1, 2]);
        f.resource_refs = strings(&["file:a", "svc:x"]);
        check(&index, &evs, &f, &[1, 4]);
        f.resource_refs = strings(&["none"]);
        check(&index, &evs, &f, &[]);
    }

    #[test]
    fn project_list_excludes_projectless() {
        let (_d, index, evs) = fixture_index();
        let mut f = tenant("t2");
        f.project_ids = strings(&["p1", "p2"]);
        check(&index, &evs, &f, &[5]);
        let mut f = tenant("t1");
        f.actor_ids = strings(&["alice"]);
        check(&index, &evs, &f, &[1, 3]);
        f.project_ids = strings(&["p1", "p2", ""]);
        check(&index, &evs, &f, &[1]);
    }

    #[test]
    fn payload_round_trip_and_visibility() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
            assert_eq!(seq, None);
            assert!(!index.has_uncommitted());
            index.add(&fixture()[0].as_doc()).unwrap();
            assert!(index.has_uncommitted());
            assert_eq!(index.search(&tenant("t1")).unwrap(), Vec::<u32>::new());
            assert_eq!(index.num_docs(), 0);
            index.commit(41).unwrap();
            assert!(!index.has_uncommitted());
            assert_eq!(index.search(&tenant("t1")).unwrap(), vec![1]);
            index.commit(42).unwrap();
        }
        let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
        assert_eq!(seq, Some(42));
        assert_eq!(index.search(&tenant("t1")).unwrap(), vec![1]);
        assert_eq!(index.num_docs(), 1);
    }

    #[test]
    fn commit_marks_round_trip_and_older_payloads_read() {
        let mark = CommitMark {
            last_seq: 7,
            audit_seq: Some(9),
        };
        assert_eq!(CommitMark::parse(&mark.payload()), Some(mark));
        let bare = CommitMark {
            last_seq: 7,
            audit_seq: None,
        };
        assert_eq!(CommitMark::parse(&bare.payload()), Some(bare));
        assert_eq!(
            CommitMark::parse(" 12 "),
            Some(CommitMark {
                last_seq: 12,
                audit_seq: None
            })
        );
        assert_eq!(CommitMark::parse("{\"auditSeq\":1}"), None);
        let dir = tempfile::tempdir().unwrap();
        let (index, _) = ScopeIndex::open(dir.path()).unwrap();
        index.commit_marked(mark).unwrap();
        assert_eq!(index.commit_mark().unwrap(), Some(mark));
    }

    /// A commit that fails (its directory vanished) closes the writer instead of leaving one
    /// that indexes nothing; a reopened writer commits what is added again, and the
    /// fingerprint shows exactly the committed ids.
    #[test]
    fn a_failed_commit_closes_the_writer_until_reopened() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("scope");
        let moved = parent.path().join("moved");
        let (index, _) = ScopeIndex::open(&dir).unwrap();
        let evs = fixture();
        index.add(&evs[0].as_doc()).unwrap();
        index.commit(1).unwrap();
        assert_eq!(index.fingerprint(), fingerprint_of([evs[0].doc]));
        std::fs::rename(&dir, &moved).unwrap();
        let failed = index.add(&evs[1].as_doc()).and_then(|()| index.commit(2));
        assert!(failed.is_err(), "a commit into a missing directory fails");
        assert!(!index.writer_ready());
        assert!(index.add(&evs[1].as_doc()).is_err(), "no silent adds");
        std::fs::rename(&moved, &dir).unwrap();
        index.reopen_writer().unwrap();
        assert!(index.writer_ready());
        assert_eq!(index.fingerprint(), fingerprint_of([evs[0].doc]));
        index.delete(evs[1].doc).unwrap();
        index.add(&evs[1].as_doc()).unwrap();
        index.commit(2).unwrap();
        assert_eq!(
            index.fingerprint(),
            fingerprint_of([evs[0].doc, evs[1].doc])
        );
        assert_ne!(
            index.fingerprint(),
            fingerprint_of([evs[0].doc, evs[2].doc])
        );
    }

    #[test]
    fn corrupt_index_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (index, _) = ScopeIndex::open(dir.path()).unwrap();
            index.add(&fixture()[0].as_doc()).unwrap();
            index.commit(1).unwrap();
        }
        std::fs::write(dir.path().join("meta.json"), b"{not json").unwrap();
        let err = ScopeIndex::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("scope index at"), "{err}");
    }

    #[test]
    fn an_index_of_another_schema_is_an_error() {
        // The layout before pair terms: every field but the pairs.
        let dir = tempfile::tempdir().unwrap();
        let (schema, _) = build_schema();
        let mut older = Schema::builder();
        for (_, entry) in schema.fields().filter(|(_, e)| e.name() != "tenant_pair") {
            older.add_field(entry.clone());
        }
        let index = Index::create_in_dir(dir.path(), older.build()).unwrap();
        index
            .writer::<TantivyDocument>(15_000_000)
            .unwrap()
            .commit()
            .unwrap();
        let err = ScopeIndex::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("scope index at"), "{err}");
    }

    #[test]
    fn delete_after_commit() {
        let (_d, index, _) = fixture_index();
        index.delete(3).unwrap();
        assert!(index.has_uncommitted());
        assert_eq!(index.search(&tenant("t1")).unwrap(), vec![1, 2, 3, 4]);
        index.commit(7).unwrap();
        assert_eq!(index.search(&tenant("t1")).unwrap(), vec![1, 2, 4]);
        assert_eq!(index.count(&tenant("t1")).unwrap(), 3);
        assert_eq!(index.num_docs(), 5);
    }

    #[test]
    fn count_bounds_hold_the_count_and_are_exact_without_deletions() {
        let (_d, index, _) = fixture_index();
        let mut f = tenant("t1");
        assert_eq!(index.view().count_bounds(&f), Some((4, 4)));
        f.actor_ids = strings(&["alice", "carol", "alice", "nobody"]);
        assert_eq!(index.view().count_bounds(&f), Some((3, 3)));
        f.actor_ids.clear();
        f.event_types = strings(&["commit"]);
        assert_eq!(index.view().count_bounds(&f), Some((2, 2)));
        f.project_ids = strings(&["p1"]);
        assert_eq!(index.view().count_bounds(&f), None, "two lists");
        f.project_ids.clear();
        f.occurred_after_ms = Some(150);
        assert_eq!(index.view().count_bounds(&f), None, "time range");
        f.occurred_after_ms = None;
        f.resource_refs = strings(&["file:a"]);
        assert_eq!(index.view().count_bounds(&f), None, "resources");
        assert_eq!(index.view().count_bounds(&tenant("nope")), Some((0, 0)));

        index.delete(3).unwrap();
        index.commit(7).unwrap();
        let f = tenant("t1");
        let (lower, upper) = index.view().count_bounds(&f).unwrap();
        let count = index.count(&f).unwrap();
        assert!(
            lower <= count && count <= upper,
            "{lower} <= {count} <= {upper}"
        );
    }

    #[test]
    fn delete_then_add_replaces() {
        let (_d, index, evs) = fixture_index();
        index.delete(1).unwrap();
        let mut moved = evs[0].clone();
        moved.actor = "zed".into();
        index.add(&moved.as_doc()).unwrap();
        index.commit(8).unwrap();
        let mut f = tenant("t1");
        f.actor_ids = strings(&["alice"]);
        assert_eq!(index.search(&f).unwrap(), vec![3]);
        f.actor_ids = strings(&["zed"]);
        assert_eq!(index.search(&f).unwrap(), vec![1]);
        assert_eq!(index.search(&tenant("t1")).unwrap(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn merge_all_keeps_results_and_payload() {
        let dir = tempfile::tempdir().unwrap();
        let evs = fixture();
        {
            let (index, _) = ScopeIndex::open(dir.path()).unwrap();
            for (i, e) in evs.iter().enumerate() {
                index.add(&e.as_doc()).unwrap();
                index.commit(i as u64).unwrap();
            }
            index.delete(2).unwrap();
            index.commit(99).unwrap();
            index.merge_all().unwrap();
            let metas = index.index.searchable_segment_metas().unwrap();
            assert_eq!(metas.len(), 1);
            assert!(!metas[0].has_deletes());
            assert_eq!(index.search(&tenant("t1")).unwrap(), vec![1, 3, 4]);
            assert_eq!(index.num_docs(), 5);
            let mut f = tenant("t1");
            f.resource_refs = strings(&["file:b"]);
            assert_eq!(index.search(&f).unwrap(), vec![1]);
            index.merge_all().unwrap();
        }
        let (index, seq) = ScopeIndex::open(dir.path()).unwrap();
        assert_eq!(seq, Some(99));
        assert_eq!(index.search(&tenant("t2")).unwrap(), vec![5, 6]);
    }

    fn text_fixture() -> (tempfile::TempDir, ScopeIndex) {
        let (dir, index) = open_tmp();
        let texts = [
            (1, "t1", "Deployed the billing service to production"),
            (2, "t1", "Reviewed pull request for search ranking"),
            (3, "t1", "Billing invoice failed; retried billing job twice"),
            (4, "t2", "Billing billing billing billing"),
            (5, "t1", "Lunch with the team"),
        ];
        for (doc, t, text) in texts {
            let mut e = ev(doc, t, "a", None, "note", 0);
            e.text = text.into();
            index.add(&e.as_doc()).unwrap();
        }
        index.commit(5).unwrap();
        (dir, index)
    }

    #[test]
    fn lexical_ranks_and_is_scoped() {
        let (_d, index) = text_fixture();
        let hits = index.lexical(&tenant("t1"), "billing", 10).unwrap();
        let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
        assert_eq!(ids, vec![3, 1], "{hits:?}");
        assert!(hits[0].1 > hits[1].1 && hits[1].1 > 0.0);
        // stemming: "deploying" matches "Deployed"
        let hits = index.lexical(&tenant("t1"), "deploying", 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1]);
        let hits = index.lexical(&tenant("t2"), "billing", 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![4]);
        let hits = index.lexical(&tenant("t1"), "search ranking", 1).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2]);
        let mut f = tenant("t1");
        f.occurred_after_ms = Some(1);
        assert!(index.lexical(&f, "billing", 10).unwrap().is_empty());
        assert!(index
            .lexical(&tenant("t1"), "billing", 0)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn lexical_all_scores_every_match_as_top_k_does() {
        let (_d, index) = text_fixture();
        for (t, q) in [
            ("t1", "billing"),
            ("t1", "search ranking deploying"),
            ("t2", "billing"),
        ] {
            let mut all = index.view().lexical_all(&tenant(t), q).unwrap();
            all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut top = index.lexical(&tenant(t), q, 100).unwrap();
            top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            assert_eq!(all, top, "{t} {q}");
            assert!(!all.is_empty());
        }
        assert!(index
            .view()
            .lexical_all(&tenant("t1"), "?!")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn lexical_never_errors_on_operators() {
        let (_d, index) = text_fixture();
        for q in [
            "\"AND OR ( : * -",
            "billing AND (",
            "title:billing",
            "\"unterminated",
            "-billing +* ~2 ^3 [a TO b} {}",
            "",
            "   ",
            "ünïcödé 日本語 🚀",
            "\\ / ? ! @ # $ % & | < > =",
        ] {
            let hits = index.lexical(&tenant("t1"), q, 5);
            assert!(hits.is_ok(), "{q:?}: {hits:?}");
        }
        let hits = index.lexical(&tenant("t1"), "billing AND (", 5).unwrap();
        assert_eq!(hits[0].0, 3);
    }

    fn pick(alphabet: &'static [&'static str]) -> impl Strategy<Value = String> {
        proptest::sample::select(alphabet).prop_map(String::from)
    }

    fn subset(alphabet: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(pick(alphabet), 0..3)
    }

    fn arb_ev() -> impl Strategy<Value = Ev> {
        (
            pick(&["t0", "t1"]),
            pick(&["a0", "a1", "a2"]),
            proptest::option::of(pick(&["p0", "p1"])),
            pick(&["x", "y", "z"]),
            subset(&["r0", "r1", "r2", "r3"]),
            -5i64..100,
        )
            .prop_map(|(tenant, actor, project, event_type, resources, at)| Ev {
                doc: 0,
                tenant,
                actor,
                project,
                event_type,
                resources,
                at,
                text: String::new(),
            })
    }

    fn arb_filter() -> impl Strategy<Value = ScopeFilter> {
        (
            pick(&["t0", "t1", "t9"]),
            subset(&["a0", "a1", "a2", "a9"]),
            subset(&["p0", "p1", "p9"]),
            subset(&["x", "y", "z", "w"]),
            subset(&["r0", "r1", "r2", "r3", "r9"]),
            proptest::option::of(-10i64..110),
            proptest::option::of(-10i64..110),
        )
            .prop_map(|(tenant, a, p, t, r, after, before)| ScopeFilter {
                tenant,
                actor_ids: a,
                project_ids: p,
                event_types: t,
                resource_refs: r,
                occurred_after_ms: after,
                occurred_before_ms: before,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn search_equals_matches(
            mut evs in proptest::collection::vec(arb_ev(), 0..60),
            filters in proptest::collection::vec(arb_filter(), 1..12),
            deleted in proptest::collection::vec(0u32..60, 0..5),
            merge in any::<bool>(),
        ) {
            for (i, e) in evs.iter_mut().enumerate() {
                e.doc = (i as u32) * 3 + 7; // sparse, unordered relative to segments
            }
            let (_dir, index) = open_tmp();
            let half = evs.len() / 2;
            add_all(&index, &evs[half..]);
            index.commit(1).unwrap();
            add_all(&index, &evs[..half]);
            for d in &deleted {
                index.delete(d * 3 + 7).unwrap();
            }
            index.commit(2).unwrap();
            if merge {
                index.merge_all().unwrap();
            }
            let alive: Vec<&Ev> = evs
                .iter()
                .filter(|e| !deleted.iter().any(|d| d * 3 + 7 == e.doc))
                .collect();
            for f in &filters {
                let expected: Vec<u32> = alive
                    .iter()
                    .filter(|e| matches(f, &e.as_doc()))
                    .map(|e| e.doc)
                    .collect();
                prop_assert_eq!(&index.search(f).unwrap(), &expected, "filter {:?}", f);
                prop_assert_eq!(index.count(f).unwrap(), expected.len());
                if let Some(narrowest) = index.view().narrowest(f) {
                    // A superset of the scope, within the tenant.
                    let narrow = index.view().search_narrowest(&narrowest).unwrap();
                    prop_assert!(expected.iter().all(|d| narrow.binary_search(d).is_ok()));
                    let tenant_of = |d: &u32| evs.iter().find(|e| e.doc == *d).map(|e| &e.tenant);
                    prop_assert!(narrow.iter().all(|d| tenant_of(d) == Some(&f.tenant)));
                }
            }
        }
    }

    /// Latency measurement at 100k docs; run with
    /// `cargo test --release -- --ignored --nocapture measure_latency`.
    #[test]
    #[ignore]
    fn measure_latency() {
        let (_d, index) = open_tmp();
        let n: u32 = 100_000;
        let start = Instant::now();
        for i in 0..n {
            // 80% in one big tenant, the rest spread over 50 small tenants.
            let tenant = if i % 5 != 0 {
                "big".to_string()
            } else {
                format!("small{}", i % 50)
            };
            let actor = format!("actor{}", i % 200);
            let project = format!("p{}", i % 20);
            let res = vec![format!("file:{}", i % 1000)];
            let text = format!("event number {i} about topic{} and billing", i % 100);
            let doc = ScopeDoc {
                doc: i,
                tenant: &tenant,
                actor: &actor,
                project: Some(&project),
                event_type: ["note", "commit", "deploy"][(i % 3) as usize],
                resource_refs: &res,
                occurred_at_ms: i64::from(i) * 1000,
                text: &text,
            };
            index.add(&doc).unwrap();
            if i % 10_000 == 9_999 {
                index.commit(u64::from(i)).unwrap();
            }
        }
        index.commit(u64::from(n)).unwrap();
        println!("indexed {n} docs in {:?}", start.elapsed());
        let mut f = tenant("big");
        f.actor_ids = vec!["actor7".into()];
        time("tenant∧actor", 200, || index.search(&f).unwrap().len());
        time("big tenant (80k)", 50, || {
            index.search(&tenant("big")).unwrap().len()
        });
        time("big tenant count", 200, || {
            index.count(&tenant("big")).unwrap()
        });
        let mut f = tenant("big");
        f.occurred_after_ms = Some(10_000_000);
        f.occurred_before_ms = Some(20_000_000);
        f.event_types = vec!["note".into(), "commit".into()];
        time("big tenant∧type∧time", 100, || {
            index.search(&f).unwrap().len()
        });
        time("lexical big tenant k=20", 100, || {
            index
                .lexical(&tenant("big"), "billing topic7", 20)
                .unwrap()
                .len()
        });
        index.merge_all().unwrap();
        time("big tenant after merge_all", 50, || {
            index.search(&tenant("big")).unwrap().len()
        });
    }

    fn time(label: &str, iters: u32, mut f: impl FnMut() -> usize) {
        let hits = f();
        let start = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(f());
        }
        let per = start.elapsed() / iters;
        println!("{label}: {hits} hits, {per:?}/query");
    }
}
