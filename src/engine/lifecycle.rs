//! Lifecycle operations run by the writer: deletion, erasure, the expiry sweep, compaction
//! (physical purge) and audit flushing.
//!
//! Invariants: a deletion is one durable log record (all ids of an erasure together) and is
//! applied to the table before the reply, so a deleted event is gone from every read at
//! once; compaction rewrites the log with only live events (in their current state),
//! content-free tombstones and a marker keeping the highest sequence, merges the scope index
//! and rebuilds the HNSW graph and vector store without deleted vectors; the audit trail
//! never holds content, so it needs no rewrite (its file is append-only, which keeps the
//! audit index's offsets valid); an audit batch is indexed only after its fsync returned.

use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use super::writer::Writer;
use super::{apply_delete, Lookup, Seen, Slot, Visible};
use crate::audit::{AuditAction, AuditEntry};
use crate::auth::TenantGrant;
use crate::index::vector::{HnswIndex, VectorStore};
use crate::model::{ident, Timestamp};
use crate::store::log::LogRecord;
use crate::store::record::{
    encode, DeleteReason, DeleteRecord, PutRecord, Record, TombstoneRecord,
};

/// Proof of a deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The deleted event.
    pub event_id: String,
    /// When it was deleted.
    pub deleted_at: Timestamp,
    /// Whether compaction has physically removed its content.
    pub purged: bool,
}

/// The writer's answer to a delete.
#[derive(Debug)]
pub enum DeleteReply {
    /// Deleted now or earlier (idempotent), one receipt per id.
    Deleted(Vec<Receipt>),
    /// An id does not exist in the tenant.
    NotFound(String),
    /// The log could not be written.
    Unavailable(String),
}

/// An event an erasure kept, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    /// The kept event.
    pub event_id: String,
    /// Why it was kept.
    pub reason: String,
}

/// Proof of an erasure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErasureReceipt {
    /// The actor erased.
    pub actor_id: String,
    /// When.
    pub erased_at: Timestamp,
    /// Ids erased.
    pub erased: Vec<String>,
    /// Ids kept, with reasons.
    pub kept: Vec<Kept>,
    /// Whether content is physically gone (after compaction).
    pub purged: bool,
}

/// What a compaction did (store-wide: only the admin, or the offline command, compacts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactReport {
    /// When.
    pub compacted_at: Timestamp,
    /// Every event whose content this run purged.
    pub purged_event_ids: Vec<String>,
    /// Log size before.
    pub log_bytes_before: u64,
    /// Log size after.
    pub log_bytes_after: u64,
    /// Live events kept.
    pub live_events: usize,
}

fn receipt(t: &super::Tombstone) -> Receipt {
    Receipt {
        event_id: t.event_id.clone(),
        deleted_at: t.deleted_at,
        purged: !t.unpurged,
    }
}

impl Writer {
    /// Deletes `ids` of `tenant`; already-deleted ids return their original receipt.
    pub(super) fn delete(
        &mut self,
        grant: &TenantGrant,
        tenant: &str,
        ids: &[String],
        key_id: &str,
        reason: DeleteReason,
    ) -> DeleteReply {
        // The stored ids the request names (a chosen id may name a namespaced one), and
        // which of them are live; an id the grant may not know is answered as unknown.
        let mut named = Vec::with_capacity(ids.len());
        let mut fresh = Vec::new();
        {
            let table = self.shared.table.read();
            let view = Visible::new(grant, &table, &self.shared.keyed, Timestamp::now());
            for id in ids {
                let seen = if grant.tenant() == super::ALL_TENANTS {
                    match table.lookup(tenant, id) {
                        Lookup::Live(e) => Seen::Live(e),
                        Lookup::Deleted(t) => Seen::Deleted(t),
                        Lookup::Missing => Seen::Absent,
                    }
                } else {
                    view.lookup(id)
                };
                match seen {
                    Seen::Live(e) => {
                        named.push(e.event.event_id.clone());
                        fresh.push(e.event.event_id.clone());
                    }
                    Seen::Deleted(t) => named.push(t.event_id.clone()),
                    Seen::Absent => return DeleteReply::NotFound(id.clone()),
                }
            }
        }
        if !fresh.is_empty() {
            let rec = Self::deletion(tenant, fresh, key_id, reason);
            if let Err(e) = self.log_delete(&rec, json!({})) {
                return DeleteReply::Unavailable(e);
            }
        }
        let table = self.shared.table.read();
        let receipts = named
            .iter()
            .filter_map(|id| match table.lookup(tenant, id) {
                Lookup::Deleted(t) => Some(receipt(t)),
                Lookup::Live(_) | Lookup::Missing => None,
            })
            .collect();
        DeleteReply::Deleted(receipts)
    }

    /// Appends one delete record, applies it and audits it (`extra` joins the entry's
    /// detail).
    fn log_delete(
        &mut self,
        rec: &DeleteRecord,
        extra: serde_json::Value,
    ) -> Result<Timestamp, String> {
        let payload = encode(&Record::Delete(rec.clone()));
        let seqs = self
            .log
            .append_batch(&[&payload])
            .map_err(|e| e.to_string())?;
        apply_delete(&self.shared, rec, true);
        let seq = seqs.first().copied().unwrap_or_default();
        self.audit
            .record(super::logged::delete_entry(seq, rec, extra));
        Ok(rec.deleted_at)
    }

    /// A deletion record of `ids` stamped now.
    fn deletion(
        tenant: &str,
        ids: Vec<String>,
        key_id: &str,
        reason: DeleteReason,
    ) -> DeleteRecord {
        DeleteRecord {
            tenant_id: tenant.to_string(),
            event_ids: ids,
            deleted_at: Timestamp::now(),
            reason,
            key_id: key_id.to_string(),
            actor_id: None,
        }
    }

    /// Erases every live event of the actor whose retention allows deletion on request.
    pub(super) fn erase(
        &mut self,
        tenant: &str,
        actor: &str,
        key_id: &str,
    ) -> Result<ErasureReceipt, String> {
        let (erased, kept, expired) = self.erasure_plan(tenant, actor);
        let erased_at = if erased.is_empty() {
            let reason = DeleteReason::Erased.as_str();
            let detail = json!({"reason": reason, "actorId": actor, "kept": kept});
            self.audit.record(AuditEntry::new(
                tenant,
                key_id,
                AuditAction::Erased,
                Vec::new(),
                detail,
            ));
            Timestamp::now()
        } else {
            let mut rec = Self::deletion(tenant, erased.clone(), key_id, DeleteReason::Erased);
            rec.actor_id = Some(actor.to_string());
            self.log_delete(&rec, json!({"kept": kept}))?
        };
        // Expired events are erased too but never named: expired means never returned.
        let erased = erased
            .into_iter()
            .filter(|id| !expired.contains(id))
            .collect();
        Ok(ErasureReceipt {
            actor_id: actor.to_string(),
            erased_at,
            erased,
            kept,
            purged: false,
        })
    }

    /// The actor's events to erase, those kept (with why), and which are expired.
    fn erasure_plan(
        &self,
        tenant: &str,
        actor: &str,
    ) -> (Vec<String>, Vec<Kept>, std::collections::HashSet<String>) {
        let table = self.shared.table.read();
        let now = Timestamp::now();
        let mut erased = Vec::new();
        let mut kept = Vec::new();
        let mut expired = std::collections::HashSet::new();
        for e in table.live_from(0) {
            if e.event.tenant_id != tenant || !ident::same_actor(&e.event.actor_id, actor) {
                continue;
            }
            if e.is_expired(now) {
                expired.insert(e.event.event_id.clone());
                erased.push(e.event.event_id.clone());
            } else if e.event.retention.delete_on_request {
                erased.push(e.event.event_id.clone());
            } else {
                kept.push(Kept {
                    event_id: e.event.event_id.clone(),
                    reason: "retention.deleteOnRequest is false".to_string(),
                });
            }
        }
        (erased, kept, expired)
    }

    /// Periodic work: the expiry sweep, and a partition rebuild when one is due.
    pub(super) fn maintenance(&mut self) {
        if self.last_sweep.elapsed() >= self.config.sweep_interval {
            self.sweep_expired();
        }
        super::partitions::maybe_rebuild(&self.shared);
    }

    /// Deletes every expired live event (one record per tenant).
    pub(super) fn sweep_expired(&mut self) {
        self.last_sweep = std::time::Instant::now();
        let now = Timestamp::now();
        let mut by_tenant: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        {
            let table = self.shared.table.read();
            for doc in table.expiring() {
                if let Some(e) = table.get(*doc).filter(|e| e.is_expired(now)) {
                    by_tenant
                        .entry(e.event.tenant_id.clone())
                        .or_default()
                        .push(e.event.event_id.clone());
                }
            }
        }
        for (tenant, ids) in by_tenant {
            let rec = Self::deletion(&tenant, ids, "system", DeleteReason::Expired);
            if let Err(e) = self.log_delete(&rec, json!({})) {
                tracing::warn!(error = %e, "expiry sweep could not log deletions; will retry");
            }
        }
    }

    /// Appends queued audit entries durably; on failure they stay queued for the next try.
    pub(super) fn flush_audit(&mut self) {
        if let Err(e) = self.audit.flush() {
            tracing::error!(error = %e, "audit append failed; entries kept for retry");
        }
    }

    /// Physically purges deleted and expired content from every file, for every tenant.
    /// Audited once per tenant with that tenant's purged ids (what it needs to prove the
    /// purge), and once for the store with the sizes (no tenant sees another's volume).
    pub(super) fn compact(&mut self, key_id: &str) -> Result<CompactReport, String> {
        self.sweep_expired();
        self.commit_scope();
        let before = self.log.len_bytes();
        let (records, purged) = self.compacted_records()?;
        self.log.rewrite(&records).map_err(|e| e.to_string())?;
        self.mark_purged();
        self.shared.scope.merge_all().map_err(|e| e.to_string())?;
        let live = self.rebuild_vectors()?;
        self.save_hnsw();
        let mut by_tenant: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (tenant, id) in purged {
            by_tenant.entry(tenant).or_default().push(id);
        }
        let report = CompactReport {
            compacted_at: Timestamp::now(),
            purged_event_ids: by_tenant.values().flatten().cloned().collect(),
            log_bytes_before: before,
            log_bytes_after: self.log.len_bytes(),
            live_events: live,
        };
        for (tenant, ids) in by_tenant {
            let detail = json!({"purged": ids.len()});
            self.audit.record(AuditEntry::new(
                &tenant,
                key_id,
                AuditAction::Compact,
                ids,
                detail,
            ));
        }
        let detail = json!({
            "purged": report.purged_event_ids.len(),
            "logBytesBefore": before,
            "logBytesAfter": report.log_bytes_after,
            "liveEvents": live,
        });
        self.audit.record(AuditEntry::new(
            super::ALL_TENANTS,
            key_id,
            AuditAction::Compact,
            Vec::new(),
            detail,
        ));
        Ok(report)
    }

    /// The new log: live events as they are now, tombstones, then a marker.
    /// The new log, and `(tenant, id)` of every event whose content it purges.
    #[allow(clippy::type_complexity)]
    fn compacted_records(&self) -> Result<(Vec<LogRecord>, Vec<(String, String)>), String> {
        let table = self.shared.table.read();
        let vectors = self.shared.vectors.load();
        let mut out: Vec<(u64, Record)> = Vec::new();
        let mut purged = Vec::new();
        for slot in table.slots() {
            match slot {
                Slot::Empty => {}
                Slot::Live(e) => {
                    let vector = vectors
                        .get(e.doc)
                        .ok_or_else(|| format!("vector {} missing", e.doc))?;
                    let put = PutRecord {
                        doc: e.doc,
                        event: e.event.clone(),
                        input_hash: e.input_hash.clone(),
                        key_id: e.key_id.clone(),
                        decision: e.decision.clone(),
                        vector,
                    };
                    out.push((e.seq, Record::Put(put)));
                }
                Slot::Deleted(t) => {
                    if t.unpurged {
                        purged.push((t.tenant_id.clone(), t.event_id.clone()));
                    }
                    let rec = TombstoneRecord {
                        doc: t.doc,
                        tenant_id: t.tenant_id.clone(),
                        event_id: t.event_id.clone(),
                        deleted_at: t.deleted_at,
                        audience: t.audience.clone(),
                    };
                    out.push((t.seq, Record::Tombstone(rec)));
                }
            }
        }
        out.sort_by_key(|(seq, _)| *seq);
        let last = self.log.next_seq().saturating_sub(1);
        if out.last().is_none_or(|(seq, _)| *seq < last) {
            out.push((last, Record::Marker));
        }
        let records = out
            .into_iter()
            .map(|(seq, r)| LogRecord {
                seq,
                payload: encode(&r),
            })
            .collect();
        Ok((records, purged))
    }

    fn mark_purged(&self) {
        let mut table = self.shared.table.write();
        let purged: Vec<super::Tombstone> = table
            .slots()
            .iter()
            .filter_map(|s| match s {
                Slot::Deleted(t) if t.unpurged => Some(super::Tombstone {
                    unpurged: false,
                    ..super::Tombstone::clone(t)
                }),
                Slot::Deleted(_) | Slot::Empty | Slot::Live(_) => None,
            })
            .collect();
        for t in purged {
            table.push_tombstone(t);
        }
    }

    /// New vector store and HNSW graph holding only live vectors (gaps are zero vectors).
    fn rebuild_vectors(&mut self) -> Result<usize, String> {
        let old = self.shared.vectors.load_full();
        let table = self.shared.table.read();
        let store = VectorStore::new(old.dim());
        let zero = vec![0.0; old.dim()];
        let mut live: Vec<(u32, Vec<f32>)> = Vec::new();
        for (doc, slot) in table.slots().iter().enumerate() {
            let doc = doc as u32;
            let v = match slot {
                Slot::Live(_) => old.get(doc).unwrap_or_else(|| zero.clone()),
                Slot::Empty | Slot::Deleted(_) => zero.clone(),
            };
            store.push(doc, &v).map_err(|e| e.to_string())?;
            if matches!(slot, Slot::Live(_)) {
                live.push((doc, v));
            }
        }
        drop(table);
        let hnsw = HnswIndex::new(self.shared.hnsw.load().params());
        if self.shared.hnsw_enabled {
            let refs: Vec<(u32, &[f32])> = live.iter().map(|(d, v)| (*d, v.as_slice())).collect();
            hnsw.insert_batch(&refs).map_err(|e| e.to_string())?;
        }
        self.shared.vectors.store(Arc::new(store));
        self.shared.hnsw.store(Arc::new(hnsw));
        super::partitions::reset(&self.shared);
        self.unsaved_hnsw = 1;
        Ok(live.len())
    }
}
