//! What an audit entry records: [`AuditAction`], one variant per audited action.
//!
//! Invariants: each action serializes to the exact string the trail has always held
//! (`write`, `policy_denied`, …), so existing audit files read back unchanged and
//! `GET /v1/audit?action=` filters on the same names; the set is closed — every string ever
//! written is a variant, and an unknown one in a file is a decoding error, as damage is.

use serde::{Deserialize, Serialize};

use crate::store::record::DeleteReason;

/// One audited action; its wire name is [`AuditAction::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// A write was stored (or an idempotent retry of one was answered: `detail.replayed`).
    Write,
    /// An allowed correction was stored (it supersedes the events it names).
    Correct,
    /// The write policy refused a write.
    Deny,
    /// One event was read.
    Get,
    /// A recall returned events.
    Recall,
    /// A timeline page returned events.
    Timeline,
    /// An event's history was read.
    History,
    /// Events were deleted on request.
    Deleted,
    /// An actor's events were erased (or an erasure found nothing to erase).
    Erased,
    /// Expired events were deleted by the sweep.
    Expired,
    /// A pending event was deleted because its review rejected it (recovery's records).
    Rejected,
    /// Stored events were deleted because a re-evaluated policy denies them.
    PolicyDenied,
    /// A reviewer approved a pending event.
    Approve,
    /// A reviewer rejected a pending event.
    Reject,
    /// A re-evaluated policy sent an active event back to review.
    Requeue,
    /// Compaction purged deleted content.
    Compact,
    /// `episodic recover` accepted a loss (or the entry was derived at start-up for a
    /// logged record the trail lacked, marked in its detail).
    Recovered,
    /// A tenant's events were exported (`detail.events`: how many).
    Export,
    /// The admin took a backup of the whole store (`detail.backupId`, `detail.logSequence`).
    Backup,
}

impl AuditAction {
    /// Every action, in declaration order.
    pub const ALL: [AuditAction; 19] = [
        AuditAction::Write,
        AuditAction::Correct,
        AuditAction::Deny,
        AuditAction::Get,
        AuditAction::Recall,
        AuditAction::Timeline,
        AuditAction::History,
        AuditAction::Deleted,
        AuditAction::Erased,
        AuditAction::Expired,
        AuditAction::Rejected,
        AuditAction::PolicyDenied,
        AuditAction::Approve,
        AuditAction::Reject,
        AuditAction::Requeue,
        AuditAction::Compact,
        AuditAction::Recovered,
        AuditAction::Export,
        AuditAction::Backup,
    ];

    /// The action named `name` (its wire name), if any.
    pub fn from_name(name: &str) -> Option<AuditAction> {
        AuditAction::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// Every wire name, comma-separated, in declaration order (for error messages).
    pub fn names() -> String {
        AuditAction::ALL.map(AuditAction::as_str).join(", ")
    }

    /// The wire name (what the trail holds and `?action=` filters on).
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Write => "write",
            AuditAction::Correct => "correct",
            AuditAction::Deny => "deny",
            AuditAction::Get => "get",
            AuditAction::Recall => "recall",
            AuditAction::Timeline => "timeline",
            AuditAction::History => "history",
            AuditAction::Deleted => "deleted",
            AuditAction::Erased => "erased",
            AuditAction::Expired => "expired",
            AuditAction::Rejected => "rejected",
            AuditAction::PolicyDenied => "policy_denied",
            AuditAction::Approve => "approve",
            AuditAction::Reject => "reject",
            AuditAction::Requeue => "requeue",
            AuditAction::Compact => "compact",
            AuditAction::Recovered => "recovered",
            AuditAction::Export => "export",
            AuditAction::Backup => "backup",
        }
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A deletion is audited under its reason's name.
impl From<DeleteReason> for AuditAction {
    fn from(reason: DeleteReason) -> Self {
        match reason {
            DeleteReason::Deleted => AuditAction::Deleted,
            DeleteReason::Erased => AuditAction::Erased,
            DeleteReason::Expired => AuditAction::Expired,
            DeleteReason::Rejected => AuditAction::Rejected,
            DeleteReason::PolicyDenied => AuditAction::PolicyDenied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strings the trail held before actions were typed: they must never change.
    const WIRE: [&str; 17] = [
        "write",
        "correct",
        "deny",
        "get",
        "recall",
        "timeline",
        "history",
        "deleted",
        "erased",
        "expired",
        "rejected",
        "policy_denied",
        "approve",
        "reject",
        "requeue",
        "compact",
        "recovered",
    ];

    #[test]
    fn actions_keep_their_wire_names() {
        for (action, wire) in AuditAction::ALL.iter().zip(WIRE) {
            assert_eq!(action.as_str(), wire);
            let json = serde_json::to_string(action).expect("serialize");
            assert_eq!(json, format!("\"{wire}\""));
            let back: AuditAction = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, *action);
        }
        assert!(serde_json::from_str::<AuditAction>("\"supersede\"").is_err());
        for action in AuditAction::ALL {
            assert_eq!(AuditAction::from_name(action.as_str()), Some(action));
        }
        assert_eq!(AuditAction::from_name("supersede"), None);
        assert_eq!(
            AuditAction::names().split(", ").count(),
            AuditAction::ALL.len()
        );
    }

    #[test]
    fn deletions_are_audited_under_their_reason() {
        for reason in [
            DeleteReason::Deleted,
            DeleteReason::Erased,
            DeleteReason::Expired,
            DeleteReason::Rejected,
            DeleteReason::PolicyDenied,
        ] {
            assert_eq!(AuditAction::from(reason).as_str(), reason.as_str());
        }
    }
}
