//! Keeping the scope index in step with the table, through failed commits.
//!
//! The table is the in-memory image of the log; the scope index is derived from it. Every
//! put and delete the writer applies is mirrored into the index's buffered operations, and
//! [`Writer::commit_scope`] commits them and advances the watermark: internal ids below it
//! are searched in the index, ids at or above it are matched in memory.
//!
//! Invariants:
//! - the watermark only moves after a commit that succeeded and whose document count equals
//!   the table's live count, so it never passes an event the index lacks;
//! - a failed commit or update is never silent: it is logged, counted, and marks the index
//!   degraded ([`ScopeHealth`](crate::engine::ScopeHealth), shown by `/readyz` and
//!   `/metrics`); the fresh-write tail keeps
//!   being answered from memory meanwhile, so every acknowledged event stays in recall and
//!   timeline;
//! - a degraded index is repaired on the writer thread, with backoff: a new tantivy writer,
//!   the deletions and puts since the last good commit applied again (delete before add, so
//!   a put that did reach the index is not held twice), a commit, and a fingerprint check of
//!   the committed ids against the table's live ids; any disagreement rebuilds the index from
//!   the table.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Writer;
use crate::engine::shared::Shared;
use crate::index::scope::{fingerprint_of, CommitMark, Fingerprint, ScopeIndexError};
use crate::read::{Entry, Table};

/// Buffers one live event in the scope index; a failure degrades the index.
pub(crate) fn index_put(shared: &Shared, entry: &Entry) {
    if let Err(e) = shared.scope.add(&entry.scope_doc()) {
        shared.scope_health.failed("scope index update failed", &e);
    }
}

/// Buffers the deletion of one internal id; a failure degrades the index.
pub(crate) fn index_delete(shared: &Shared, doc: u32) {
    shared.scope_health.deleted(doc);
    if let Err(e) = shared.scope.delete(doc) {
        shared.scope_health.failed("scope index update failed", &e);
    }
}

/// The fingerprint of the table's live ids: what the committed index must hold.
pub(crate) fn table_fingerprint(table: &Table) -> Fingerprint {
    fingerprint_of(table.live_from(0).map(|e| e.doc))
}

impl Writer {
    /// Commits the scope index and publishes the new watermark, or repairs a degraded index.
    pub(super) fn commit_scope(&mut self) {
        self.last_commit = Instant::now();
        if self.shared.scope_health.degraded().is_some() {
            if self.shared.scope_health.repair_due() {
                self.repair_scope();
            }
            return;
        }
        if !self.shared.scope.has_uncommitted() {
            return;
        }
        let next_doc = self.shared.table.read().next_doc() as usize;
        if let Err(e) = self.shared.scope.commit_marked(self.commit_mark()) {
            tracing::error!(error = %e, "scope index commit failed; fresh events stay on the in-memory path");
            self.shared
                .scope_health
                .failed("scope index commit failed", &e);
            return;
        }
        self.shared.scope_health.committed();
        let live = self.shared.table.read().live() as u64;
        let docs = self.shared.scope.num_docs();
        if docs != live {
            self.shared.scope_health.degrade(format!(
                "scope index holds {docs} events after a commit, the table {live}"
            ));
            return;
        }
        self.shared.watermark.store(next_doc, Ordering::Release);
    }

    /// What a commit records: the log's and the audit trail's last durable sequences.
    pub(super) fn commit_mark(&self) -> CommitMark {
        CommitMark {
            last_seq: self.log.next_seq().saturating_sub(1),
            audit_seq: Some(self.audit.last_seq().unwrap_or(0)),
        }
    }

    /// A new writer, the operations since the last good commit applied again, a commit, and
    /// a fingerprint check; a full rebuild from the table when the check disagrees.
    fn repair_scope(&mut self) {
        match self.try_repair_scope() {
            Ok(()) => self.shared.scope_health.healed(),
            Err(e) => self
                .shared
                .scope_health
                .failed("scope index repair failed", &e),
        }
    }

    fn try_repair_scope(&mut self) -> Result<(), ScopeIndexError> {
        let scope = &self.shared.scope;
        scope.reopen_writer()?;
        let watermark = self.shared.watermark.load(Ordering::Acquire);
        let deleted = self.shared.scope_health.pending_deletes();
        let next_doc = {
            let table = self.shared.table.read();
            for doc in deleted {
                scope.delete(doc)?;
            }
            for entry in table.live_from(watermark) {
                scope.delete(entry.doc)?;
                scope.add(&entry.scope_doc())?;
            }
            table.next_doc() as usize
        };
        scope.commit_marked(self.commit_mark())?;
        if scope.fingerprint() != table_fingerprint(&self.shared.table.read()) {
            tracing::warn!("scope index disagrees with the table after a repair; rebuilding it");
            self.rebuild_scope()?;
        }
        self.shared.watermark.store(next_doc, Ordering::Release);
        Ok(())
    }

    /// Replaces the index's contents with the table's live events and commits.
    fn rebuild_scope(&mut self) -> Result<(), ScopeIndexError> {
        let scope = &self.shared.scope;
        {
            let table = self.shared.table.read();
            scope.clear()?;
            for entry in table.live_from(0) {
                scope.add(&entry.scope_doc())?;
            }
        }
        scope.commit_marked(self.commit_mark())?;
        let (have, want) = (
            scope.fingerprint(),
            table_fingerprint(&self.shared.table.read()),
        );
        if have != want {
            return Err(ScopeIndexError::Index {
                path: self.shared.paths.scope.display().to_string(),
                message: format!(
                    "rebuilt index holds {} events, the table {}",
                    have.docs, want.docs
                ),
            });
        }
        Ok(())
    }
}
