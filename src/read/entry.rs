//! What the table holds per internal id: a live event's [`Entry`], a deleted one's
//! [`Tombstone`] (its ids and audience, never its content), or nothing.
//!
//! Invariants: entries are immutable `Arc`s replaced whole on a status change, so a reader
//! holding one sees a consistent event; a tombstone keeps no summary, refs or vector.

use std::sync::Arc;

use crate::index::scope::ScopeDoc;
use crate::model::{Decision, StoredEvent, Timestamp};
use crate::rank::{asks, Prior};

/// One live (not deleted) event plus what the engine needs around it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Internal id (also the vector and HNSW id).
    pub doc: u32,
    /// Log sequence number of the record that created it.
    pub seq: u64,
    /// The event, shared with the answers that present it unchanged (a status change
    /// replaces it whole, as it does the entry).
    pub event: Arc<StoredEvent>,
    /// `occurredAt` in unix milliseconds (cached).
    pub occurred_ms: i64,
    /// SHA-256 of the validated input (idempotency).
    pub input_hash: String,
    /// Key that wrote it.
    pub key_id: String,
    /// Decision that admitted it.
    pub decision: Decision,
    /// Index of its subject list (stale suppression), assigned by [`super::Table::push`].
    pub subject: Option<u32>,
    /// Its [`super::SubjectRule::topic`], assigned by [`super::Table::push`].
    pub topic: u32,
    /// Its tenant's number in the table ([`super::Table::tenant_number`]), assigned by
    /// [`super::Table::push`]: equal numbers mean equal tenant ids.
    pub tenant: u32,
}

impl Entry {
    /// Its actor is one of its resource refs: the subject speaking for itself.
    pub fn self_stated(&self) -> bool {
        self.event.resource_refs.contains(&self.event.actor_id)
    }

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
            metadata: &self.event.metadata,
        }
    }

    /// Ranking inputs other than relevance.
    pub fn prior(&self) -> Prior {
        Prior {
            occurred_ms: self.occurred_ms,
            trust: self.event.source_trust,
            confidence: self.event.confidence,
            asks: asks(&self.event.summary),
        }
    }

    /// Whether the retention rule has expired it at `now`.
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.event.retention.expires_at.is_some_and(|t| t <= now)
    }
}

/// What remains of a deleted event: its ids, never its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    /// Internal id it held.
    pub doc: u32,
    /// Log sequence of the record that created the event.
    pub seq: u64,
    /// Tenant.
    pub tenant_id: String,
    /// Event id.
    pub event_id: String,
    /// When it was deleted.
    pub deleted_at: Timestamp,
    /// Whether its record (and vector) is still in the log, i.e. not yet purged.
    pub unpurged: bool,
    /// Who could see the event (`None` when a log of an older version did not keep it).
    pub audience: Option<crate::model::Audience>,
    /// The key that wrote it (`None` when a log of an older version did not keep it).
    pub writer: Option<String>,
}

/// One internal id's state.
#[derive(Debug, Clone)]
pub enum Slot {
    /// Never used (a gap left by compaction).
    Empty,
    /// A live event.
    Live(Arc<Entry>),
    /// A deleted event.
    Deleted(Arc<Tombstone>),
}

/// The result of looking an event id up.
#[derive(Debug, Clone, Copy)]
pub enum Lookup<'a> {
    /// No such id in the tenant.
    Missing,
    /// A live event.
    Live(&'a Arc<Entry>),
    /// A deleted event.
    Deleted(&'a Arc<Tombstone>),
}
