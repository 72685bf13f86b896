//! Pure write-policy decisions: the runtime, not the model, decides what is stored.
//!
//! Invariants: `decide` is a pure function of the validated input and the policy (no I/O,
//! no clock); rules are checked in the seed's order and the first match wins; every stored
//! event records the `version` of the policy that admitted it.

use crate::model::{Decision, EventInput, PrivacyClass, SourceTrust};

/// Reason strings, exactly the seed's.
pub mod reasons {
    /// Untrusted sources go to review.
    pub const UNTRUSTED_EVENT_SOURCE: &str = "untrusted_event_source";
    /// Sensitive events must carry an expiry.
    pub const SENSITIVE_EVENT_REQUIRES_EXPIRY: &str = "sensitive_event_requires_expiry";
    /// Approvals must name what they approve.
    pub const APPROVAL_EVENT_MISSING_RESOURCE: &str = "approval_event_missing_resource";
    /// Everything else is admitted.
    pub const EPISODIC_WRITE_POLICY_PASSED: &str = "episodic_write_policy_passed";
}

/// The write policy in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePolicy {
    /// Recorded on every admitted event.
    pub version: String,
    /// Role that may approve events sent to review.
    pub approver_role: String,
}

impl Default for WritePolicy {
    /// The seed's rules as version `v1`.
    fn default() -> Self {
        WritePolicy {
            version: "v1".to_string(),
            approver_role: "memory_reviewer".to_string(),
        }
    }
}

impl WritePolicy {
    /// The seed's `decideEpisodicWrite`.
    pub fn decide(&self, event: &EventInput) -> Decision {
        if event.source_trust == SourceTrust::UntrustedContent {
            return Decision::Review {
                reason: reasons::UNTRUSTED_EVENT_SOURCE.to_string(),
                approver_role: self.approver_role.clone(),
            };
        }
        if event.privacy_class == PrivacyClass::Sensitive && event.retention.expires_at.is_none() {
            return Decision::Deny {
                reason: reasons::SENSITIVE_EVENT_REQUIRES_EXPIRY.to_string(),
            };
        }
        if event.event_type == "human_approval" && event.resource_refs.is_empty() {
            return Decision::Deny {
                reason: reasons::APPROVAL_EVENT_MISSING_RESOURCE.to_string(),
            };
        }
        Decision::Allow {
            reason: reasons::EPISODIC_WRITE_POLICY_PASSED.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Confidence, Retention, Timestamp};

    fn input() -> EventInput {
        EventInput {
            event_id: None,
            event_type: "task_milestone".into(),
            occurred_at: Timestamp::parse("2026-06-17T09:20:00Z").expect("time"),
            actor_id: "a".into(),
            project_id: None,
            resource_refs: vec![],
            summary: "s".into(),
            source_refs: vec!["src".into()],
            source_trust: SourceTrust::UserProvided,
            confidence: Confidence::High,
            privacy_class: PrivacyClass::Internal,
            retention: Retention {
                expires_at: None,
                delete_on_request: true,
            },
            supersedes_event_ids: vec![],
            correction_path: None,
        }
    }

    fn reason(d: &Decision) -> &str {
        match d {
            Decision::Allow { reason }
            | Decision::Deny { reason }
            | Decision::Review { reason, .. } => reason,
        }
    }

    #[test]
    fn seed_rules_in_order() {
        let p = WritePolicy::default();
        assert_eq!(
            reason(&p.decide(&input())),
            reasons::EPISODIC_WRITE_POLICY_PASSED
        );

        let mut untrusted_sensitive = input();
        untrusted_sensitive.source_trust = SourceTrust::UntrustedContent;
        untrusted_sensitive.privacy_class = PrivacyClass::Sensitive;
        let d = p.decide(&untrusted_sensitive);
        assert!(
            matches!(d, Decision::Review { ref approver_role, .. } if approver_role == "memory_reviewer")
        );
        assert_eq!(reason(&d), reasons::UNTRUSTED_EVENT_SOURCE);

        let mut sensitive = input();
        sensitive.privacy_class = PrivacyClass::Sensitive;
        assert_eq!(
            reason(&p.decide(&sensitive)),
            reasons::SENSITIVE_EVENT_REQUIRES_EXPIRY
        );
        sensitive.retention.expires_at = Timestamp::parse("2027-01-01T00:00:00Z");
        assert!(matches!(p.decide(&sensitive), Decision::Allow { .. }));

        let mut approval = input();
        approval.event_type = "human_approval".into();
        assert_eq!(
            reason(&p.decide(&approval)),
            reasons::APPROVAL_EVENT_MISSING_RESOURCE
        );
        approval.resource_refs = vec!["invoice-7".into()];
        assert!(matches!(p.decide(&approval), Decision::Allow { .. }));
    }
}
