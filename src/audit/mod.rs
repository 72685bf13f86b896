//! The audit trail: every read, write, decision, correction, deletion, erasure, expiry and
//! compaction, appended to a durable log of its own and queried from that log.
//!
//! Invariants: an audit entry holds ids, actions, scopes and content hashes, never event
//! content or query text, so purging an event never requires rewriting the trail; entries
//! are tenant-scoped and ordered by their sequence number; the log file is the only copy
//! of the trail — memory holds a sparse block index over it ([`trail`]), so memory does not
//! grow with the number of audited requests; entries reach the file only through
//! [`AuditAppender`] (owned by the writer), which makes a batch durable before indexing it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::Timestamp;

pub mod action;
pub mod appender;
pub mod keyed;
pub mod trail;

pub use action::AuditAction;
pub use appender::{AuditAppender, AuditError, TrailFacts};
pub use keyed::Keyed;
pub use trail::AuditTrail;

/// One audited action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Position in its tenant's trail, assigned when appended (1, 2, ... per tenant; entries
    /// written by older versions hold a store-wide number, which also grows).
    #[serde(default)]
    pub seq: u64,
    /// When.
    pub at: Timestamp,
    /// Tenant.
    pub tenant_id: String,
    /// Acting key (`system` for the sweeper).
    pub key_id: String,
    /// What happened: `write`, `correct`, `deny`, `get`, `recall`, `timeline`, `history`,
    /// `deleted`, `erased`, `expired`, `rejected`, `policy_denied`, `approve`, `reject`,
    /// `requeue`, `compact` or `recovered`.
    #[schema(value_type = String)]
    pub action: AuditAction,
    /// Events concerned (returned, written, deleted, ...).
    pub event_ids: Vec<String>,
    /// Action-specific detail (decision, scope, reason, content hash).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub detail: Value,
    /// The event-log record this entry audits (writes, deletions, reviews, requeues): the
    /// trail is complete up to the highest such sequence, and proves the log reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>)]
    pub log_seq: Option<u64>,
}

/// The fields of a logged [`AuditEntry`] the trail's index needs; reading only these at
/// start-up skips building every entry's detail.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditStamp<'a> {
    /// Position in its tenant's trail.
    #[serde(default)]
    pub seq: u64,
    /// When.
    pub at: Timestamp,
    /// Tenant (borrowed from the record unless it holds escapes).
    #[serde(borrow)]
    pub tenant_id: std::borrow::Cow<'a, str>,
    /// The event-log record it audits, if any.
    #[serde(default)]
    pub log_seq: Option<u64>,
}

impl AuditEntry {
    /// A new entry stamped now.
    pub fn new(
        tenant: &str,
        key_id: &str,
        action: AuditAction,
        event_ids: Vec<String>,
        detail: Value,
    ) -> Self {
        AuditEntry {
            seq: 0,
            at: Timestamp::now(),
            tenant_id: tenant.to_string(),
            key_id: key_id.to_string(),
            action,
            event_ids,
            detail,
            log_seq: None,
        }
    }

    /// The same entry, marked as auditing event-log record `seq`.
    pub fn logged(mut self, seq: u64) -> Self {
        self.log_seq = Some(seq);
        self
    }
}

/// A validated audit query.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Only entries mentioning this event.
    pub event_id: Option<String>,
    /// Only this action.
    pub action: Option<AuditAction>,
    /// Inclusive lower bound on `at`.
    pub from: Option<Timestamp>,
    /// Exclusive upper bound on `at`.
    pub to: Option<Timestamp>,
    /// Page size.
    pub limit: usize,
    /// Continue after this sequence number.
    pub after_seq: Option<u64>,
}

impl AuditQuery {
    /// Whether `e` (already of the right tenant) matches.
    pub fn matches(&self, e: &AuditEntry) -> bool {
        self.event_id
            .as_ref()
            .is_none_or(|id| e.event_ids.contains(id))
            && self.action.is_none_or(|a| e.action == a)
            && self.from.is_none_or(|f| e.at >= f)
            && self.to.is_none_or(|t| e.at < t)
            && self.after_seq.is_none_or(|s| e.seq > s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_filters_compose() {
        let mut e = AuditEntry::new("t", "k", AuditAction::Recall, vec!["a".into()], Value::Null);
        e.seq = 5;
        let q = AuditQuery {
            event_id: Some("a".into()),
            action: Some(AuditAction::Recall),
            after_seq: Some(4),
            limit: 10,
            ..AuditQuery::default()
        };
        assert!(q.matches(&e));
        assert!(!AuditQuery {
            after_seq: Some(5),
            ..q.clone()
        }
        .matches(&e));
        assert!(!AuditQuery {
            action: Some(AuditAction::Write),
            ..q
        }
        .matches(&e));
    }
}
