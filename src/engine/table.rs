//! The in-memory event table: every logged event by dense internal id, with a per-tenant
//! id lookup. Rebuilt from the log on start.
//!
//! Invariants: internal ids are dense, assigned in log order, and never reused within a
//! process; `(tenant, eventId)` is unique; entries are immutable `Arc`s replaced whole on a
//! status change, so readers holding one see a consistent event.

use std::collections::HashMap;
use std::sync::Arc;

use crate::index::scope::ScopeDoc;
use crate::model::{Decision, EventStatus, StoredEvent, Timestamp};
use crate::rank::Prior;

/// One stored event plus what the engine needs around it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Dense internal id (also the vector and HNSW id).
    pub doc: u32,
    /// Log sequence number of the record that created it.
    pub seq: u64,
    /// The event.
    pub event: StoredEvent,
    /// `occurredAt` in unix milliseconds (cached).
    pub occurred_ms: i64,
    /// SHA-256 of the validated input (idempotency).
    pub input_hash: String,
    /// Key that wrote it.
    pub key_id: String,
    /// Decision that admitted it.
    pub decision: Decision,
}

impl Entry {
    /// The document the scope index holds for this entry.
    pub fn scope_doc(&self) -> ScopeDoc<'_> {
        ScopeDoc {
            doc: self.doc,
            tenant: &self.event.tenant_id,
            actor: &self.event.actor_id,
            project: self.event.project_id.as_deref(),
            event_type: &self.event.event_type,
            resource_refs: &self.event.resource_refs,
            occurred_at_ms: self.occurred_ms,
            text: &self.event.summary,
        }
    }

    /// Ranking inputs other than relevance.
    pub fn prior(&self) -> Prior {
        Prior {
            occurred_ms: self.occurred_ms,
            trust: self.event.source_trust,
            confidence: self.event.confidence,
        }
    }

    /// Whether the retention rule has expired it at `now`.
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.event.retention.expires_at.is_some_and(|t| t <= now)
    }
}

/// All events, by internal id.
#[derive(Debug, Default)]
pub struct Table {
    entries: Vec<Arc<Entry>>,
    by_id: HashMap<(String, String), u32>,
}

impl Table {
    /// Number of events (= next internal id).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry with internal id `doc`.
    pub fn get(&self, doc: u32) -> Option<&Arc<Entry>> {
        self.entries.get(doc as usize)
    }

    /// The entry for `(tenant, event_id)`.
    pub fn find(&self, tenant: &str, event_id: &str) -> Option<&Arc<Entry>> {
        let doc = self
            .by_id
            .get(&(tenant.to_string(), event_id.to_string()))?;
        self.get(*doc)
    }

    /// Appends a new entry; its `doc` must equal `len()`.
    pub fn push(&mut self, entry: Entry) {
        debug_assert_eq!(entry.doc as usize, self.entries.len());
        let key = (entry.event.tenant_id.clone(), entry.event.event_id.clone());
        self.by_id.insert(key, entry.doc);
        self.entries.push(Arc::new(entry));
    }

    /// Marks `(tenant, event_id)` superseded by `by`; returns whether it existed.
    pub fn mark_superseded(&mut self, tenant: &str, event_id: &str, by: &str) -> bool {
        let Some(doc) = self
            .by_id
            .get(&(tenant.to_string(), event_id.to_string()))
            .copied()
        else {
            return false;
        };
        let Some(slot) = self.entries.get_mut(doc as usize) else {
            return false;
        };
        let mut entry = Entry::clone(slot);
        entry.event.status = EventStatus::Superseded;
        entry.event.superseded_by = Some(by.to_string());
        *slot = Arc::new(entry);
        true
    }

    /// Entries with internal id ≥ `from`.
    pub fn tail(&self, from: usize) -> &[Arc<Entry>] {
        self.entries.get(from..).unwrap_or(&[])
    }
}
