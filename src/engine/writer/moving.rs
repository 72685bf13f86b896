//! A tenant leaving this engine's log (cluster mode: a tenant pinned to a shard of its
//! own): frozen, copied elsewhere by the caller, then evicted.
//!
//! Invariants:
//! - once [`super::Command::Freeze`] is processed, nothing of the tenant changes here: its
//!   writes, deletions, erasures and reviews are refused with a retryable error, and the
//!   expiry sweep passes it by; so a copy of its records read after the freeze is complete
//!   and stays true until the tenant is thawed or evicted;
//! - eviction removes the tenant from the read model (table, scope index; the vectors and
//!   HNSW graph with the compaction that follows) without logging a deletion (the tenant's
//!   events were not deleted, they moved), then compacts without any of its records,
//!   tombstones included; an evicted tenant's records are never written to this log again;
//! - [`tenant_records`] reads the read model, not the log: the tenant's records in the
//!   compacted form (live events as they are now, tombstones), at their log sequences,
//!   with internal ids renumbered from the caller's counter so the copy is dense.

use super::{apply_delete, slot_record, Writer, WriterError};
use crate::engine::shared::Shared;
use crate::model::Timestamp;
use crate::read::Slot;
use crate::store::record::{encode, DeleteReason, DeleteRecord, Record};
use crate::store::LogRecord;

impl Writer {
    /// Whether changes to `tenant` are refused (it is moving away).
    pub(super) fn refuses(&self, tenant: &str) -> bool {
        self.frozen.contains(tenant)
    }

    /// Refuses changes to `tenant` from now on; the log's next sequence.
    pub(super) fn freeze(&mut self, tenant: String) -> u64 {
        self.frozen.insert(tenant);
        self.log.next_seq()
    }

    /// Accepts changes to `tenant` again.
    pub(super) fn thaw(&mut self, tenant: &str) {
        self.frozen.remove(tenant);
    }

    /// Drops the frozen `tenant` from the read model, then compacts the log without it.
    pub(super) fn evict(
        &mut self,
        tenant: &str,
        key_id: &str,
    ) -> Result<super::CompactReport, WriterError> {
        let ids: Vec<String> = self
            .shared
            .table
            .read()
            .live_from(0)
            .filter(|e| e.event.tenant_id == tenant)
            .map(|e| e.event.event_id.clone())
            .collect();
        let removal = DeleteRecord {
            tenant_id: tenant.to_string(),
            event_ids: ids,
            deleted_at: Timestamp::now(),
            reason: DeleteReason::Deleted,
            key_id: key_id.to_string(),
            actor_id: None,
        };
        apply_delete(&self.shared, &removal, true);
        self.evicted.insert(tenant.to_string());
        self.rotate_evicted = true;
        self.compact(key_id)
    }
}

/// Up to `limit` of `tenant`'s records in compacted form, from internal id `from` on; the
/// internal id to continue from (`None`: no more). Each record's internal id is taken from
/// `next_doc`, which advances.
pub(crate) fn tenant_records(
    shared: &Shared,
    tenant: &str,
    from: u32,
    limit: usize,
    next_doc: &mut u32,
) -> Result<(Vec<LogRecord>, Option<u32>), WriterError> {
    let table = shared.table.read();
    let vectors = shared.vectors.load();
    let slots = table.slots();
    let mut out = Vec::new();
    let mut doc = from as usize;
    while doc < slots.len() && out.len() < limit {
        let slot = &slots[doc];
        doc += 1;
        let theirs = match slot {
            Slot::Live(e) => e.event.tenant_id == tenant,
            Slot::Deleted(t) => t.tenant_id == tenant,
            Slot::Empty => false,
        };
        if !theirs {
            continue;
        }
        if let Some((seq, mut record)) = slot_record(slot, &vectors)? {
            match &mut record {
                Record::Put(put) => put.doc = *next_doc,
                Record::Tombstone(t) => t.doc = *next_doc,
                _ => {}
            }
            *next_doc += 1;
            out.push(LogRecord {
                seq,
                payload: encode(&record),
            });
        }
    }
    let more = (doc < slots.len()).then_some(doc as u32);
    Ok((out, more))
}
