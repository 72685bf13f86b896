//! The review workflow run by the writer: approving or rejecting pending events.
//!
//! Invariants: only a key holding the event's `approverRole` may decide, never the key that
//! wrote the event; a decision is one durable log record applied before the reply; an
//! approved correction supersedes its targets at approval time; a rejected event is deleted
//! (a tombstone) and purged by the next compaction.

use serde::Serialize;

use super::{apply_review, Conflict, Refusal, ReviewFailure, Writer, WriterError};
use crate::auth::TenantGrant;
use crate::engine::logged::review_entry;
use crate::model::{Decision, EventStatus, Timestamp};
use crate::read::Visible;
use crate::store::record::{encode, Record, ReviewRecord};

/// The result of a review decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOutcome {
    /// The reviewed event.
    pub event_id: String,
    /// `active` or `rejected`.
    pub status: String,
    /// When.
    pub decided_at: Timestamp,
    /// Reviewer's note, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Writer {
    /// Approves (`approve`) or rejects a pending event.
    pub(super) fn review(
        &mut self,
        grant: &TenantGrant,
        event_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> Result<ReviewOutcome, ReviewFailure> {
        let event_id = self.check_review(grant, event_id, approve)?;
        let rec = ReviewRecord {
            tenant_id: grant.tenant().to_string(),
            event_id: event_id.clone(),
            approved: approve,
            decided_at: Timestamp::now(),
            key_id: grant.key_id().to_string(),
            note_hash: note
                .as_deref()
                .map(|n| self.shared.keyed.content_hash(grant.tenant(), n)),
        };
        let payload = encode(&Record::Review(rec.clone()));
        let seqs = self
            .log
            .append_batch(&[&payload])
            .map_err(WriterError::from)?;
        apply_review(&self.shared, &rec, true);
        let seq = seqs.first().copied().unwrap_or_default();
        self.audit.record(review_entry(seq, &rec));
        Ok(ReviewOutcome {
            event_id: event_id.to_string(),
            status: if approve { "active" } else { "rejected" }.to_string(),
            decided_at: rec.decided_at,
            note,
        })
    }

    fn check_review(
        &self,
        grant: &TenantGrant,
        event_id: &str,
        approve: bool,
    ) -> Result<String, Refusal> {
        let table = self.shared.table.read();
        let view = Visible::new(grant, &table, &self.shared.keyed, Timestamp::now());
        let Some(entry) = view.live(event_id) else {
            return Err(Refusal::NotFound(event_id.to_string()));
        };
        if entry.event.status != EventStatus::PendingReview {
            return Err(Conflict::NotPending {
                id: event_id.to_string(),
                status: entry.event.status.as_str(),
            }
            .into());
        }
        let role = match &entry.decision {
            Decision::Review { approver_role, .. } => approver_role.clone(),
            Decision::Allow { .. } | Decision::Deny { .. } => {
                crate::auth::roles::MEMORY_REVIEWER.to_string()
            }
        };
        if !grant.has_role(&role) {
            return Err(Refusal::MissingRole(role));
        }
        if entry.key_id == grant.key_id() {
            return Err(Refusal::SelfApproval);
        }
        if approve {
            for old in &entry.event.supersedes_event_ids {
                let active = table
                    .find(grant.tenant(), old)
                    .is_some_and(|o| o.event.status == EventStatus::Active);
                if !active {
                    let named = view.knows(old).then(|| old.clone());
                    return Err(Conflict::TargetInactive(named).into());
                }
            }
        }
        Ok(entry.event.event_id.clone())
    }
}
