//! Policy replay run by the writer: re-decide every active or pending event under a candidate
//! policy, report what would change, and optionally apply it.
//!
//! Invariants: a dry run changes nothing; an applied replay deletes what the candidate denies
//! (one durable delete record per tenant, with receipts) and sends active events it would
//! review back to the queue (one requeue record each), all audited; superseded and deleted
//! events are not re-decided.

use std::collections::BTreeMap;

use serde::Serialize;

use super::lifecycle::{DeleteReply, Receipt};
use super::writer::Writer;
use super::{apply_requeue, Slot, ALL_TENANTS};
use crate::auth::TenantGrant;
use crate::model::{Decision, EventInput, EventStatus, Timestamp};
use crate::policy::WritePolicy;
use crate::store::record::{encode, DeleteReason, Record, RequeueRecord};

/// One event whose fate would change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Tenant.
    pub tenant_id: String,
    /// Event.
    pub event_id: String,
    /// The candidate policy's decision.
    pub decision: Decision,
}

/// What a replay found (and did).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    /// The candidate's version.
    pub policy_version: String,
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// Events re-decided.
    pub evaluated: usize,
    /// Events the candidate denies (deleted when applied).
    pub would_deny: Vec<Verdict>,
    /// Active events the candidate sends to review (requeued when applied).
    pub would_review: Vec<Verdict>,
    /// Deletion receipts (applied runs only).
    pub receipts: Vec<Receipt>,
}

impl Writer {
    /// Re-decides every active or pending event under `policy`.
    pub(super) fn replay(
        &mut self,
        policy: &WritePolicy,
        dry_run: bool,
        key_id: &str,
    ) -> Result<ReplayReport, String> {
        let (evaluated, would_deny, would_review) = self.verdicts(policy);
        let mut report = ReplayReport {
            policy_version: policy.version.clone(),
            dry_run,
            evaluated,
            would_deny,
            would_review,
            receipts: Vec::new(),
        };
        if !dry_run {
            report.receipts = self.apply_denials(&report.would_deny, key_id)?;
            self.apply_reviews(&report.would_review, policy, key_id)?;
        }
        Ok(report)
    }

    fn verdicts(&self, policy: &WritePolicy) -> (usize, Vec<Verdict>, Vec<Verdict>) {
        let now = Timestamp::now();
        let table = self.shared.table.read();
        let (mut evaluated, mut deny, mut review) = (0, Vec::new(), Vec::new());
        for slot in table.slots() {
            let Slot::Live(e) = slot else { continue };
            if e.event.status == EventStatus::Superseded {
                continue;
            }
            evaluated += 1;
            let decision =
                policy.decide(&EventInput::from_stored(&e.event), &e.event.tenant_id, now);
            let verdict = Verdict {
                tenant_id: e.event.tenant_id.clone(),
                event_id: e.event.event_id.clone(),
                decision: decision.clone(),
            };
            match decision {
                Decision::Deny { .. } => deny.push(verdict),
                Decision::Review { .. } if e.event.status == EventStatus::Active => {
                    review.push(verdict)
                }
                Decision::Review { .. } | Decision::Allow { .. } => {}
            }
        }
        (evaluated, deny, review)
    }

    fn apply_denials(&mut self, denied: &[Verdict], key_id: &str) -> Result<Vec<Receipt>, String> {
        let mut by_tenant: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for v in denied {
            by_tenant
                .entry(&v.tenant_id)
                .or_default()
                .push(v.event_id.clone());
        }
        let grant = TenantGrant::internal(ALL_TENANTS, key_id);
        let mut receipts = Vec::new();
        for (tenant, ids) in by_tenant {
            match self.delete(&grant, tenant, &ids, key_id, DeleteReason::PolicyDenied) {
                DeleteReply::Deleted(mut r) => receipts.append(&mut r),
                DeleteReply::NotFound(id) => {
                    return Err(format!("event {id} vanished during replay"))
                }
                DeleteReply::Unavailable(e) => return Err(e),
            }
        }
        Ok(receipts)
    }

    fn apply_reviews(
        &mut self,
        review: &[Verdict],
        policy: &WritePolicy,
        key_id: &str,
    ) -> Result<(), String> {
        for v in review {
            let rec = RequeueRecord {
                tenant_id: v.tenant_id.clone(),
                event_id: v.event_id.clone(),
                decision: v.decision.clone(),
                policy_version: policy.version.clone(),
                key_id: Some(key_id.to_string()),
            };
            let payload = encode(&Record::Requeue(rec.clone()));
            let seqs = self
                .log
                .append_batch(&[&payload])
                .map_err(|e| e.to_string())?;
            apply_requeue(&self.shared, &rec);
            let seq = seqs.first().copied().unwrap_or_default();
            self.audit.record(super::logged::requeue_entry(seq, &rec));
        }
        Ok(())
    }
}
