//! Compaction, run by the writer: the physical purge of deleted, erased, rejected and expired
//! content from every file, for every tenant.
//!
//! Invariants: compaction rewrites the log ([`crate::store::EventLog::rewrite`]) with only
//! live events (in their current state, at their original sequences), content-free
//! tombstones and a marker keeping the highest sequence, so no sequence is ever reused;
//! it merges the scope index and rebuilds the HNSW graph and vector store without deleted
//! vectors (and drops the vector partitions, rebuilt from what remains); the audit trail
//! never holds content, so it needs no rewrite (its file is append-only, which keeps the
//! audit index's offsets valid); it blocks writes while it runs; it never writes a record
//! of a tenant evicted from this log ([`super::moving`]). On a stream (cluster mode)
//! the rewrite is a rotation to the shard's next generation, run only when some deleted
//! content awaits its purge.

use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use super::{Fill, Writer, WriterError, SWITCH_TAIL};
use crate::audit::{AuditAction, AuditEntry};
use crate::engine::shared::{Serving, ALL_TENANTS};
use crate::engine::{graphs, partitions};
use crate::index::vector::{HnswIndex, VectorStore};
use crate::model::Timestamp;
use crate::read::{Slot, Tombstone};
use crate::store::record::{encode, PutRecord, Record, TombstoneRecord};
use crate::store::LogRecord;

/// What the writer made of a re-embedding's request to switch models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// The log holds the new vectors, and they serve.
    Switched,
    /// Events were written since the vectors were made: embed them too, and ask again.
    Behind,
    /// A compaction ran since the re-embedding started: its vectors may hold purged
    /// content; start again.
    Stale,
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

impl Writer {
    /// Physically purges deleted and expired content from every file, for every tenant.
    /// Audited once per tenant with that tenant's purged ids (what it needs to prove the
    /// purge), and once for the store with the sizes (no tenant sees another's volume).
    pub(super) fn compact(&mut self, key_id: &str) -> Result<CompactReport, WriterError> {
        self.compact_into(key_id, None)
    }

    /// Switches to a re-embedding's vectors (see [`Switch`]): a compaction that writes them
    /// into the log, then serves them with their model.
    pub(super) fn switch_model(
        &mut self,
        next: Arc<VectorStore>,
        serving: Arc<Serving>,
        epoch: u64,
        fill: Fill,
    ) -> Result<Switch, WriterError> {
        if *self.shared.reembed_epoch.lock() != epoch {
            return Ok(Switch::Stale);
        }
        if self.following {
            return Err(WriterError::Following(
                "a standby cannot switch models; its writer does".into(),
            ));
        }
        let upto = self.shared.table.read().next_doc() as usize;
        if next.len() + SWITCH_TAIL < upto {
            return Ok(Switch::Behind);
        }
        if next.len() < upto {
            // A few writes came since the walk was level: embed them here (writes wait
            // that long), or a steady stream of writes would keep the walk behind.
            if let Err(e) = (fill.0)(&self.shared, &next, upto) {
                tracing::warn!(error = %e, "embedding the last events of a re-embedding failed");
                return Ok(Switch::Behind);
            }
        }
        self.compact_into("reembed", Some((next, serving)))?;
        Ok(Switch::Switched)
    }

    /// A compaction; with `next`, one that writes `next`'s vectors into the log and then
    /// serves them with their model. Without it, a re-embedding under way starts again.
    fn compact_into(
        &mut self,
        key_id: &str,
        next: Option<(Arc<VectorStore>, Arc<Serving>)>,
    ) -> Result<CompactReport, WriterError> {
        self.sweep_expired();
        self.commit_scope();
        let before = self.log.size_bytes();
        let vectors = match &next {
            Some((v, _)) => Arc::clone(v),
            None => self.shared.vectors.load_full(),
        };
        let (records, purged) = self.compacted_records(&vectors)?;
        // A stream's rotation copies the whole log: skipped when it would drop nothing
        // (deletions erased their records at once; the rotation is for what remains).
        // An eviction rotates even then: the evicted tenant's records must go. A switch of
        // models always rewrites.
        if next.is_some()
            || !(self.log.erases_in_place() && purged.is_empty())
            || self.rotate_evicted
        {
            self.log.rewrite(&records)?;
            self.rotate_evicted = false;
        }
        let switched_to = match next {
            Some((vectors, serving)) => {
                let model = serving.embedder.model_id().to_string();
                self.shared.vectors.store(vectors);
                self.shared.serving.store(serving);
                Some(model)
            }
            None => {
                *self.shared.reembed_epoch.lock() += 1;
                self.shared.paths.remove_reembed_files();
                None
            }
        };
        self.mark_purged();
        self.shared.scope.merge_all()?;
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
            log_bytes_after: self.log.size_bytes(),
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
        let mut detail = json!({
            "purged": report.purged_event_ids.len(),
            "logBytesBefore": before,
            "logBytesAfter": report.log_bytes_after,
            "liveEvents": live,
        });
        if let Some(model) = switched_to {
            detail["reembeddedTo"] = model.into();
        }
        self.audit.record(AuditEntry::new(
            ALL_TENANTS,
            key_id,
            AuditAction::Compact,
            Vec::new(),
            detail,
        ));
        Ok(report)
    }

    /// The new log (live events as they are now, tombstones, then a marker), and
    /// `(tenant, id)` of every event whose content it purges.
    #[allow(clippy::type_complexity)]
    fn compacted_records(
        &self,
        vectors: &VectorStore,
    ) -> Result<(Vec<LogRecord>, Vec<(String, String)>), WriterError> {
        let table = self.shared.table.read();
        let mut out: Vec<(u64, Record)> = Vec::new();
        let mut purged = Vec::new();
        for slot in table.slots() {
            let tenant = match slot {
                Slot::Empty => continue,
                Slot::Live(e) => &e.event.tenant_id,
                Slot::Deleted(t) => &t.tenant_id,
            };
            if self.evicted.contains(tenant.as_str()) {
                continue;
            }
            if let Slot::Deleted(t) = slot {
                if t.unpurged {
                    purged.push((t.tenant_id.clone(), t.event_id.clone()));
                }
            }
            if let Some(record) = slot_record(slot, vectors)? {
                out.push(record);
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
        let purged: Vec<Tombstone> = table
            .slots()
            .iter()
            .filter_map(|s| match s {
                Slot::Deleted(t) if t.unpurged => Some(Tombstone {
                    unpurged: false,
                    ..Tombstone::clone(t)
                }),
                Slot::Deleted(_) | Slot::Empty | Slot::Live(_) => None,
            })
            .collect();
        for t in purged {
            table.push_tombstone(t);
        }
    }

    /// New vector store and HNSW graph holding only live vectors (gaps are zero vectors).
    fn rebuild_vectors(&mut self) -> Result<usize, WriterError> {
        let old = self.shared.vectors.load_full();
        let table = self.shared.table.read();
        let store = match old.model() {
            Some(model) => VectorStore::for_model(model, old.dim()),
            None => VectorStore::new(old.dim()),
        };
        let zero = vec![0.0; old.dim()];
        let mut live: Vec<(u32, Vec<f32>)> = Vec::new();
        for (doc, slot) in table.slots().iter().enumerate() {
            let doc = doc as u32;
            let v = match slot {
                Slot::Live(_) => old.get(doc).unwrap_or_else(|| zero.clone()),
                Slot::Empty | Slot::Deleted(_) => zero.clone(),
            };
            store.push(doc, &v)?;
            if matches!(slot, Slot::Live(_)) {
                live.push((doc, v));
            }
        }
        drop(table);
        let hnsw = HnswIndex::new(self.shared.hnsw.load().params());
        if self.shared.hnsw_enabled {
            let refs: Vec<(u32, &[f32])> = live.iter().map(|(d, v)| (*d, v.as_slice())).collect();
            hnsw.insert_batch(&refs)?;
        }
        self.shared.vectors.store(Arc::new(store));
        self.shared.hnsw.store(Arc::new(hnsw));
        partitions::reset(&self.shared);
        graphs::reset(&self.shared);
        self.unsaved_hnsw = 1;
        Ok(live.len())
    }
}

/// The compacted record of one slot at its log sequence: a live event as it is now (with
/// its vector), a content-free tombstone, or nothing for an empty slot.
pub(super) fn slot_record(
    slot: &Slot,
    vectors: &VectorStore,
) -> Result<Option<(u64, Record)>, WriterError> {
    Ok(match slot {
        Slot::Empty => None,
        Slot::Live(e) => {
            let vector = vectors
                .get(e.doc)
                .ok_or(WriterError::MissingVector { doc: e.doc })?;
            let put = PutRecord {
                doc: e.doc,
                event: crate::model::StoredEvent::clone(&e.event),
                input_hash: e.input_hash.clone(),
                key_id: e.key_id.clone(),
                decision: e.decision.clone(),
                model: vectors.model().map(str::to_string),
                vector,
            };
            Some((e.seq, Record::Put(put)))
        }
        Slot::Deleted(t) => {
            let rec = TombstoneRecord {
                doc: t.doc,
                tenant_id: t.tenant_id.clone(),
                event_id: t.event_id.clone(),
                deleted_at: t.deleted_at,
                audience: t.audience.clone(),
                writer: t.writer.clone(),
            };
            Some((t.seq, Record::Tombstone(rec)))
        }
    })
}
