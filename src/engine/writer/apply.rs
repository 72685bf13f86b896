//! Applying a logged record to the read model: the table, the vectors and (for live writes)
//! the scope index and HNSW graph. One set of functions serves both the live writer, which
//! applies what it just logged, and the catch-up at open ([`super::catch_up`]), which applies
//! the whole log again; so a restart rebuilds exactly the state the writes built.
//!
//! Invariants: a record is applied only after it is durable in the log; an event is in the
//! table whatever the indexes do (an index failure degrades that index, see
//! [`super::scope_sync`], and never hides an acknowledged event); the vector of internal id
//! `doc` is always at position `doc` (gaps left by compaction are zero vectors); nothing
//! here logs, audits or answers a request.

use std::sync::Arc;

use super::{index_delete, index_put, WriterError};
use crate::engine::shared::Shared;
use crate::index::vector::VectorStore;
use crate::model::{Decision, EventStatus, StoredEvent};
use crate::read::{Entry, Tombstone, NONE};
use crate::store::record::{
    DeleteReason, DeleteRecord, PutRecord, RequeueRecord, ReviewRecord, TombstoneRecord,
};

/// Applies one logged put to the table and vectors, and with `index` to the scope index and
/// HNSW graph (catch-up indexes what each index lacks itself).
pub(crate) fn apply_put(
    shared: &Shared,
    seq: u64,
    put: PutRecord,
    index: bool,
) -> Result<(), WriterError> {
    let mut table = shared.table.write();
    let doc = put.doc;
    push_vector(shared, doc, &put.vector, put.model.as_deref())?;
    if matches!(put.decision, Decision::Allow { .. }) {
        for old in &put.event.supersedes_event_ids {
            table.mark_superseded(
                &put.event.tenant_id,
                old,
                &put.event.event_id,
                put.event.recorded_at,
            );
        }
    }
    let entry = Entry {
        doc,
        seq,
        occurred_ms: put.event.occurred_at.unix_millis(),
        event: Arc::new(put.event),
        input_hash: put.input_hash,
        key_id: put.key_id,
        decision: put.decision,
        subject: None,
        topic: NONE,
        tenant: 0,
    };
    table.push(entry);
    if !index {
        return Ok(());
    }
    if let Some(entry) = table.get(doc) {
        index_put(shared, entry);
    }
    drop(table);
    if shared.hnsw_enabled {
        shared.hnsw.load().insert(doc, &put.vector)?;
    }
    Ok(())
}

/// Appends `v`, made by `model` (unrecorded in older records), at `doc`, padding gaps left
/// by compaction with zero vectors. An engine opened without a model (offline maintenance,
/// whose store has dimension 0) takes the dimension of the first vector and the first model
/// named; otherwise a vector of another model than the store's is refused.
fn push_vector(
    shared: &Shared,
    doc: u32,
    v: &[f32],
    model: Option<&str>,
) -> Result<(), WriterError> {
    if shared.vectors.load().dim() == 0 && !v.is_empty() {
        // Only at open, before any reader: nothing is stored yet in a store of dimension 0.
        shared.vectors.store(Arc::new(VectorStore::new(v.len())));
    }
    let store = shared.vectors.load();
    if let Some(found) = model {
        store
            .label(found)
            .map_err(|held| WriterError::ModelMismatch {
                doc,
                found: found.to_string(),
                store: held,
            })?;
    }
    while (store.len() as u32) < doc {
        let gap = store.len() as u32;
        store.push(gap, &vec![0.0; store.dim()])?;
    }
    Ok(store.push(doc, v)?)
}

/// Applies a logged deletion: tombstones in the table, deletes in the scope index.
pub(crate) fn apply_delete(shared: &Shared, rec: &DeleteRecord, index: bool) -> Vec<Arc<Entry>> {
    let mut table = shared.table.write();
    let mut removed = Vec::new();
    for id in &rec.event_ids {
        if let Some(entry) = table.delete(&rec.tenant_id, id, rec.deleted_at) {
            if index {
                index_delete(shared, entry.doc);
            }
            removed.push(entry);
        }
    }
    removed
}

/// Applies a review decision: approval activates (and applies the correction), rejection
/// deletes.
pub(crate) fn apply_review(shared: &Shared, rec: &ReviewRecord, index: bool) {
    if !rec.approved {
        let delete = DeleteRecord {
            tenant_id: rec.tenant_id.clone(),
            event_ids: vec![rec.event_id.clone()],
            deleted_at: rec.decided_at,
            reason: DeleteReason::Rejected,
            key_id: rec.key_id.clone(),
            actor_id: None,
        };
        apply_delete(shared, &delete, index);
        return;
    }
    let mut table = shared.table.write();
    let Some(entry) = table.find(&rec.tenant_id, &rec.event_id).cloned() else {
        return;
    };
    let mut event = StoredEvent::clone(&entry.event);
    event.status = EventStatus::Active;
    for old in &event.supersedes_event_ids {
        table.mark_superseded(&rec.tenant_id, old, &event.event_id, rec.decided_at);
    }
    table.replace_event(entry.doc, event);
}

/// Applies a requeue: the event is pending review again under the new policy's decision.
pub(crate) fn apply_requeue(shared: &Shared, rec: &RequeueRecord) {
    let mut table = shared.table.write();
    let Some(entry) = table.find(&rec.tenant_id, &rec.event_id).cloned() else {
        return;
    };
    let mut event = StoredEvent::clone(&entry.event);
    event.status = EventStatus::PendingReview;
    event.policy_version = rec.policy_version.clone();
    table.replace_entry(entry.doc, event, rec.decision.clone());
}

/// Applies a compacted tombstone.
pub(crate) fn apply_tombstone(
    shared: &Shared,
    seq: u64,
    t: TombstoneRecord,
) -> Result<(), WriterError> {
    let dim = shared.vectors.load().dim();
    push_vector(shared, t.doc, &vec![0.0; dim], None)?;
    shared.table.write().push_tombstone(Tombstone {
        doc: t.doc,
        seq,
        tenant_id: t.tenant_id,
        event_id: t.event_id,
        deleted_at: t.deleted_at,
        unpurged: false,
        audience: t.audience,
        writer: t.writer,
    });
    Ok(())
}
