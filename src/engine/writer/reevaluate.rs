//! Policy re-evaluation run by the writer (`POST /v1/admin/policy/replay`): decide every
//! active or pending event again under a candidate policy, report what would change, and
//! optionally carry it out.
//!
//! Invariants: a dry run changes nothing; an applied re-evaluation deletes what the
//! candidate denies (one durable delete record per tenant, with receipts) and sends active
//! events it would review back to the queue (one requeue record each), all audited;
//! superseded and deleted events are not re-decided.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{apply_requeue, DeleteReply, Receipt, Writer, WriterError};
use crate::auth::TenantGrant;
use crate::engine::logged::requeue_entry;
use crate::engine::shared::ALL_TENANTS;
use crate::model::{Decision, EventInput, EventStatus, Timestamp};
use crate::policy::WritePolicy;
use crate::read::Slot;
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

/// What a re-evaluation found (and did). Its OpenAPI schema keeps the name and description
/// it had under the HTTP route's name for the operation (`ReplayReport`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ReplayReport, description = "What a replay found (and did).")]
pub struct ReevaluationReport {
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
    pub(super) fn reevaluate(
        &mut self,
        policy: &WritePolicy,
        dry_run: bool,
        key_id: &str,
    ) -> Result<ReevaluationReport, WriterError> {
        let (evaluated, would_deny, would_review) = self.verdicts(policy);
        let mut report = ReevaluationReport {
            policy_version: policy.version.clone(),
            dry_run,
            evaluated,
            would_deny,
            would_review,
            receipts: Vec::new(),
        };
        if !dry_run {
            report.receipts = self.delete_denied(&report.would_deny, key_id)?;
            self.requeue(&report.would_review, policy, key_id)?;
        }
        Ok(report)
    }

    /// How many live, unsuperseded events `policy` decided again, those it denies, and the
    /// active ones it would send to review.
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

    /// Deletes what the candidate denies, one record per tenant.
    fn delete_denied(
        &mut self,
        denied: &[Verdict],
        key_id: &str,
    ) -> Result<Vec<Receipt>, WriterError> {
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
                DeleteReply::NotFound(id) => return Err(WriterError::Vanished { id }),
                // The all-tenant grant deletes by tenant and id, never refused for a role.
                DeleteReply::NeedsOperator => {
                    return Err(WriterError::Vanished {
                        id: ids.first().cloned().unwrap_or_default(),
                    })
                }
                DeleteReply::Unavailable(e) => return Err(e),
            }
        }
        Ok(receipts)
    }

    /// Sends active events the candidate would review back to the queue, one record each.
    fn requeue(
        &mut self,
        review: &[Verdict],
        policy: &WritePolicy,
        key_id: &str,
    ) -> Result<(), WriterError> {
        for v in review {
            let rec = RequeueRecord {
                tenant_id: v.tenant_id.clone(),
                event_id: v.event_id.clone(),
                decision: v.decision.clone(),
                policy_version: policy.version.clone(),
                key_id: Some(key_id.to_string()),
            };
            let payload = encode(&Record::Requeue(rec.clone()));
            let seqs = self.log.append_batch(&[&payload])?;
            apply_requeue(&self.shared, &rec);
            let seq = seqs.first().copied().unwrap_or_default();
            self.audit.record(requeue_entry(seq, &rec));
        }
        Ok(())
    }
}
