//! Export (`episodic export`, `GET /v1/export`): one tenant's events as one grant sees
//! them, read from one consistent view while writes go on; and batch embedding for import.
//!
//! Invariants:
//! - an export is taken at one instant: under the table's read lock, once, it keeps a
//!   reference to each visible event (entries are immutable and replaced whole on a change,
//!   so a kept entry never changes) and to the vector store (append-only; compaction swaps
//!   in a new one), and copies nothing else: the lines are written from these after the lock
//!   is released, so the writer is held up only while the references are gathered;
//! - it holds exactly what the grant's reads return: live, unexpired events of the grant's
//!   tenant, actors and privacy classes ([`crate::read::Visible`]), each presented as the
//!   grant sees it (a supersession by a correction the grant cannot see does not show;
//!   `supersedesEventIds` lists only ids it knows); deleted, erased, rejected and expired
//!   events never come out;
//! - events come out in log order, so a correction always follows the events it supersedes
//!   and an import writes them again in a valid order;
//! - vectors come out only when asked for; an export is audited (`export`, with its count).

use std::sync::Arc;

use super::{read_audit, Engine, Error};
use crate::audit::AuditAction;
use crate::auth::TenantGrant;
use crate::index::vector::VectorStore;
use crate::model::{StoredEvent, Timestamp};
use crate::read::{Entry, Visible};

/// One exported event.
#[derive(Debug, Clone, Copy)]
pub struct ExportedEvent<'a> {
    /// The event as the grant sees it.
    pub event: &'a StoredEvent,
    /// Its internal id (for its vector).
    doc: u32,
}

/// One event of an export: the stored entry, and the event as the grant sees it when that
/// differs from the stored one.
struct Kept {
    entry: Arc<Entry>,
    presented: Option<Box<StoredEvent>>,
}

/// A tenant's events as one grant saw them at one instant (see the module's invariants).
pub struct ExportSnapshot {
    events: Vec<Kept>,
    vectors: Option<Arc<VectorStore>>,
}

impl ExportSnapshot {
    /// Events in the export.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the export holds no event.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The events, in log order.
    pub fn events(&self) -> impl Iterator<Item = ExportedEvent<'_>> {
        self.events.iter().map(|k| ExportedEvent {
            event: k.presented.as_deref().unwrap_or(&k.entry.event),
            doc: k.entry.doc,
        })
    }

    /// The summary embedding of `e`, when the export was taken with vectors.
    pub fn vector(&self, e: ExportedEvent<'_>) -> Option<Vec<f32>> {
        self.vectors.as_ref().and_then(|v| v.get(e.doc))
    }
}

impl Engine {
    /// Embeds many texts in one call on the CPU pool (bulk import).
    pub async fn embed_many(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, Error> {
        let embedder = self.embedder();
        let count = texts.len();
        let vectors = self
            .cpu
            .run(move || {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                embedder.embed(&refs)
            })
            .await
            .map_err(Error::Internal)?
            .map_err(|e| Error::Internal(e.to_string()))?;
        if vectors.len() != count {
            return Err(Error::Internal("embedder returned too few vectors".into()));
        }
        Ok(vectors)
    }

    /// The grant's export, taken on the CPU pool (see the module's invariants); audited.
    pub async fn export(
        &self,
        grant: &TenantGrant,
        with_vectors: bool,
    ) -> Result<ExportSnapshot, Error> {
        let engine = self.clone();
        let g = grant.clone();
        let snapshot = self
            .cpu
            .run(move || engine.export_now(&g, with_vectors))
            .await
            .map_err(Error::Internal)?;
        let detail = serde_json::json!({"events": snapshot.len(), "withVectors": with_vectors});
        self.audit(read_audit(grant, AuditAction::Export, Vec::new(), detail));
        Ok(snapshot)
    }

    /// The grant's export, taken on the calling thread (blocking callers: the CLI). Not
    /// audited: an offline command has no key.
    pub fn export_now(&self, grant: &TenantGrant, with_vectors: bool) -> ExportSnapshot {
        let vectors = with_vectors.then(|| self.shared.vectors.load_full());
        let table = self.shared.table.read();
        let view = Visible::new(grant, &table, &self.shared.keyed, Timestamp::now());
        let mut events: Vec<Kept> = table
            .live_from(0)
            .filter(|e| view.sees(&e.event))
            .map(|e| {
                let shown = (e.event.superseded_by.is_some()
                    || !e.event.supersedes_event_ids.is_empty())
                .then(|| view.present(&e.event))
                .filter(|p| *p != *e.event);
                Kept {
                    entry: Arc::clone(e),
                    presented: shown.map(Box::new),
                }
            })
            .collect();
        drop(view);
        drop(table);
        events.sort_by_key(|k| k.entry.seq);
        ExportSnapshot { events, vectors }
    }
}
