//! The audit entry each event-log record implies: one function for the writer, which audits
//! what it just logged, and for start-up, which audits logged records the trail lacks (the
//! writer died between the log's fsync and the trail's: [`Reconciled`]).
//!
//! Invariants: an entry derived here carries the record's `logSeq`; it holds ids, times,
//! keys, decisions and keyed hashes, never content; the writer and recovery derive the same
//! entry from the same record (recovery adds `"recovered": true` to the detail).

use serde_json::{json, Value};

use crate::audit::{AuditAction, AuditEntry, Keyed};
use crate::model::{Decision, Timestamp};
use crate::store::record::{DeleteRecord, PutRecord, Record, RequeueRecord, ReviewRecord};

/// The audit entry of log record `seq`, or `None` for records that audit nothing
/// (compaction's tombstones and markers).
pub(crate) fn audit_entry(seq: u64, record: &Record, keyed: &Keyed) -> Option<AuditEntry> {
    match record {
        Record::Put(p) => Some(put_entry(seq, p, keyed)),
        Record::Delete(d) => Some(delete_entry(seq, d, Value::Null)),
        Record::Review(r) => Some(review_entry(seq, r)),
        Record::Requeue(r) => Some(requeue_entry(seq, r)),
        Record::Tombstone(_) | Record::Marker => None,
    }
}

/// A write (`write`, or `correct` for an allowed correction) of event-log record `seq`.
pub(crate) fn put_entry(seq: u64, put: &PutRecord, keyed: &Keyed) -> AuditEntry {
    let e = &put.event;
    let correcting =
        matches!(put.decision, Decision::Allow { .. }) && !e.supersedes_event_ids.is_empty();
    let mut ids = vec![e.event_id.clone()];
    ids.extend(e.supersedes_event_ids.iter().cloned());
    let detail = json!({
        "decision": put.decision,
        "policyVersion": e.policy_version,
        "contentHash": keyed.content_hash(&e.tenant_id, &e.summary),
        "supersedes": e.supersedes_event_ids,
    });
    let action = if correcting {
        AuditAction::Correct
    } else {
        AuditAction::Write
    };
    stamped(
        AuditEntry::new(&e.tenant_id, &put.key_id, action, ids, detail),
        e.recorded_at,
        seq,
    )
}

/// A deletion (`deleted`, `erased`, `expired`, `rejected`, `policy_denied`); `extra` members
/// are merged into the detail.
pub(crate) fn delete_entry(seq: u64, rec: &DeleteRecord, extra: Value) -> AuditEntry {
    let mut detail = json!({"reason": rec.reason.as_str()});
    if let Some(actor) = &rec.actor_id {
        detail["actorId"] = json!(actor);
    }
    if let (Some(obj), Value::Object(more)) = (detail.as_object_mut(), extra) {
        obj.extend(more);
    }
    let entry = AuditEntry::new(
        &rec.tenant_id,
        &rec.key_id,
        AuditAction::from(rec.reason),
        rec.event_ids.clone(),
        detail,
    );
    stamped(entry, rec.deleted_at, seq)
}

/// A review decision (`approve` or `reject`).
pub(crate) fn review_entry(seq: u64, rec: &ReviewRecord) -> AuditEntry {
    let action = if rec.approved {
        AuditAction::Approve
    } else {
        AuditAction::Reject
    };
    let detail = json!({"noteHash": rec.note_hash});
    let entry = AuditEntry::new(
        &rec.tenant_id,
        &rec.key_id,
        action,
        vec![rec.event_id.clone()],
        detail,
    );
    stamped(entry, rec.decided_at, seq)
}

/// A policy re-evaluation sending an event back to review (`requeue`).
pub(crate) fn requeue_entry(seq: u64, rec: &RequeueRecord) -> AuditEntry {
    let detail = json!({"decision": rec.decision, "policyVersion": rec.policy_version});
    AuditEntry::new(
        &rec.tenant_id,
        rec.key_id.as_deref().unwrap_or("system"),
        AuditAction::Requeue,
        vec![rec.event_id.clone()],
        detail,
    )
    .logged(seq)
}

fn stamped(mut entry: AuditEntry, at: Timestamp, seq: u64) -> AuditEntry {
    entry.at = at;
    entry.logged(seq)
}

/// Marks an entry derived at start-up for a record the trail lacked.
pub(crate) fn recovered(mut entry: AuditEntry) -> AuditEntry {
    if let Some(obj) = entry.detail.as_object_mut() {
        obj.insert("recovered".into(), Value::Bool(true));
    } else {
        entry.detail = json!({"recovered": true});
    }
    entry
}

/// Entries derived at start-up for logged records the trail lacks.
#[derive(Debug, Default)]
pub(crate) struct Reconciled {
    /// Records after this sequence are audited here (`None`: none are).
    pub after: Option<u64>,
    /// The derived entries, in log order.
    pub entries: Vec<AuditEntry>,
}

impl Reconciled {
    /// Derives the entry of record `seq` when the trail lacks it.
    pub fn see(&mut self, seq: u64, record: &Record, keyed: &Keyed) {
        if self.after.is_some_and(|after| seq > after) {
            if let Some(e) = audit_entry(seq, record, keyed) {
                self.entries.push(recovered(e));
            }
        }
    }
}
