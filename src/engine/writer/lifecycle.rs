//! Lifecycle operations run by the writer: deletion, erasure and the expiry sweep (the
//! physical purge that follows them is [`super::compaction`]).
//!
//! Invariants: a deletion is one durable log record (all ids of an erasure together, one per
//! tenant for a sweep) and is applied to the table before the reply, so a deleted event is
//! gone from every read at once; a second deletion of an id answers the first one's receipt
//! and logs nothing; an erasure names only events it erased that were not expired (expired
//! means never returned) and says why it kept the others.

use serde::Serialize;
use serde_json::json;

use super::{apply_delete, Writer, WriterError};
use crate::audit::{AuditAction, AuditEntry};
use crate::auth::{roles, TenantGrant};
use crate::engine::logged::delete_entry;
use crate::engine::shared::ALL_TENANTS;
use crate::engine::{graphs, partitions};
use crate::model::{ident, Timestamp};
use crate::read::{Lookup, Seen, Tombstone, Visible};
use crate::store::record::{encode, DeleteReason, DeleteRecord, Record};

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
    /// A key that may read the event, without the operator role, named another key's event.
    NeedsOperator,
    /// The log could not be written.
    Unavailable(WriterError),
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

fn receipt(t: &Tombstone) -> Receipt {
    Receipt {
        event_id: t.event_id.clone(),
        deleted_at: t.deleted_at,
        purged: !t.unpurged,
    }
}

impl Writer {
    /// Deletes `ids` of `tenant`; already-deleted ids return their original receipt.
    ///
    /// Which ids a grant may name: with the operator role, every event it sees; with any
    /// role, the events its own key wrote, seen or not (a writer may forget what it wrote,
    /// including a write stored above what its key may read). Another key's event is refused
    /// for want of the operator role when the grant may read it anyway (the reader role, and
    /// the event in sight), and unknown otherwise, so a deletion never confirms that an event
    /// the key may not read exists.
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
                let seen = if grant.tenant() == ALL_TENANTS {
                    match table.lookup(tenant, id) {
                        Lookup::Live(e) => Seen::Live(e),
                        Lookup::Deleted(t) => Seen::Deleted(t),
                        Lookup::Missing => Seen::Absent,
                    }
                } else {
                    match (grant.has_role(roles::OPERATOR), view.own(id)) {
                        (true, Seen::Absent) => view.lookup(id),
                        (false, Seen::Absent) => {
                            let readable = grant.has_role(roles::READER)
                                && !matches!(view.lookup(id), Seen::Absent);
                            if readable {
                                return DeleteReply::NeedsOperator;
                            }
                            Seen::Absent
                        }
                        (_, own) => own,
                    }
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
    ) -> Result<Timestamp, WriterError> {
        let payload = encode(&Record::Delete(rec.clone()));
        let seqs = self.log.append_batch(&[&payload])?;
        apply_delete(&self.shared, rec, true);
        let seq = seqs.first().copied().unwrap_or_default();
        self.audit.record(delete_entry(seq, rec, extra));
        self.erase_in_place(rec);
        Ok(rec.deleted_at)
    }

    /// Where the log erases cheaply (a stream), the deleted events' records are erased
    /// from it at once; a failure only waits for compaction, which drops them regardless.
    /// Receipts say `purged` only after compaction, which also purges the derived indexes.
    fn erase_in_place(&mut self, rec: &DeleteRecord) {
        if !self.log.erases_in_place() {
            return;
        }
        let seqs: Vec<u64> = {
            let table = self.shared.table.read();
            rec.event_ids
                .iter()
                .filter_map(|id| match table.lookup(&rec.tenant_id, id) {
                    Lookup::Deleted(t) => Some(t.seq),
                    Lookup::Live(_) | Lookup::Missing => None,
                })
                .collect()
        };
        if let Err(e) = self.log.erase(&seqs) {
            tracing::warn!(error = %e, "erasing deleted records from the log failed; compaction drops them");
        }
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
    ) -> Result<ErasureReceipt, WriterError> {
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

    /// Periodic work: the expiry sweep (not on a standby, which appends nothing), and the
    /// derived indexes' upkeep when due (on a standby too, so that a promoted standby
    /// answers from its vector partitions and tenant graphs at once rather than from the
    /// exact path while it builds them).
    pub(super) fn maintenance(&mut self) {
        if !self.following && self.last_sweep.elapsed() >= self.config.sweep_interval {
            self.sweep_expired();
        }
        partitions::maybe_rebuild(&self.shared);
        graphs::maybe_update(&self.shared);
    }

    /// Deletes every expired live event (one record per tenant).
    pub(super) fn sweep_expired(&mut self) {
        self.last_sweep = std::time::Instant::now();
        let now = Timestamp::now();
        let mut by_tenant: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        {
            let table = self.shared.table.read();
            for doc in table.expiring() {
                let due = table
                    .get(*doc)
                    .filter(|e| e.is_expired(now) && !self.refuses(&e.event.tenant_id));
                if let Some(e) = due {
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
}
