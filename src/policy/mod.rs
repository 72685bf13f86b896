//! Pure write-policy decisions: the runtime, not the model, decides what is stored.
//!
//! Invariants: `decide` is a pure function of the validated input and the policy (no I/O,
//! no clock); rules are checked in the seed's order and the first match wins; every stored
//! event records the `version` of the policy that admitted it.
//!
//! One rule precedes the seed's: an event whose summary, `sourceRefs` or `resourceRefs`
//! hold a credential ([`crate::credentials`]) is denied as `contains_credential:<kind>`,
//! whatever its trust, because a pending review event is stored too and a secret must never
//! be. The reason names the kind of credential, never its value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::credentials::{self, CredentialKind};
use crate::model::{Decision, EventInput, PrivacyClass, SourceTrust, Timestamp};

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

/// Extra reason strings of the versioned policy's own rules.
pub mod extra_reasons {
    /// The event type is denied for this tenant or project.
    pub const EVENT_TYPE_DENIED: &str = "event_type_denied";
    /// A field the policy requires for this event type is missing.
    pub const REQUIRED_FIELD_MISSING: &str = "required_field_missing";
    /// The event would be kept longer than its privacy class allows.
    pub const RETENTION_EXCEEDS_MAXIMUM: &str = "retention_exceeds_maximum";
    /// The privacy class requires review.
    pub const PRIVACY_CLASS_REQUIRES_REVIEW: &str = "privacy_class_requires_review";
    /// The event type requires review.
    pub const EVENT_TYPE_REQUIRES_REVIEW: &str = "event_type_requires_review";
    /// The event holds a credential (the reason is `contains_credential:<kind>`).
    pub const CONTAINS_CREDENTIAL: &str = "contains_credential";
    /// An agent's own inference would supersede stored events.
    pub const AGENT_INFERENCE_CORRECTS: &str = "agent_inference_corrects_memory";
}

/// What would let a write denied for `reason` through, for the reasons the policy can say
/// that of: the fix a client is told with the denial. `None` for other reasons.
pub fn remedy(reason: &str) -> Option<String> {
    let (name, detail) = reason.split_once(':').unwrap_or((reason, ""));
    let fix = match name {
        extra_reasons::CONTAINS_CREDENTIAL => {
            "remove the credential from summary, actorNames, sourceRefs, resourceRefs and \
             metadata (a secret is never stored); record that one exists without its value"
                .to_string()
        }
        reasons::SENSITIVE_EVENT_REQUIRES_EXPIRY => {
            "a sensitive event must expire: give retention.expiresAt (a future RFC 3339 time)"
                .to_string()
        }
        reasons::APPROVAL_EVENT_MISSING_RESOURCE => {
            "a human_approval event must name what was approved: give resourceRefs".to_string()
        }
        extra_reasons::REQUIRED_FIELD_MISSING if !detail.is_empty() => {
            format!("the policy requires {detail} for this event type: give it")
        }
        extra_reasons::RETENTION_EXCEEDS_MAXIMUM => {
            "the policy keeps events of this privacy class for a limited time: give an \
             earlier retention.expiresAt"
                .to_string()
        }
        extra_reasons::EVENT_TYPE_DENIED => {
            "the policy does not store this event type here; record it as another type, or \
             not at all"
                .to_string()
        }
        _ => return None,
    };
    Some(fix)
}

/// Denies an event type, optionally only for one tenant or project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DenyRule {
    /// The event type.
    pub event_type: String,
    /// Only in this tenant.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// Only in this project.
    #[serde(default)]
    pub project_id: Option<String>,
}

/// The write policy in force: the seed's three rules, then the file's own rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WritePolicy {
    /// Recorded on every admitted event.
    pub version: String,
    /// Role that may approve events sent to review.
    #[serde(default = "default_approver")]
    pub approver_role: String,
    /// Longest retention per privacy class, in days (the event must then carry an expiry).
    #[serde(default)]
    pub max_retention_days: BTreeMap<PrivacyClass, u32>,
    /// Privacy classes that go to review.
    #[serde(default)]
    pub review_privacy_classes: Vec<PrivacyClass>,
    /// Event types that go to review.
    #[serde(default)]
    pub review_event_types: Vec<String>,
    /// Event types denied (per tenant or project when given).
    #[serde(default)]
    pub deny_event_types: Vec<DenyRule>,
    /// Fields required per event type: any of `projectId`, `resourceRefs`, `correctionPath`,
    /// `expiresAt`.
    #[serde(default)]
    pub required_fields: BTreeMap<String, Vec<String>>,
}

fn default_approver() -> String {
    crate::auth::roles::MEMORY_REVIEWER.to_string()
}

impl Default for WritePolicy {
    /// The seed's rules as version `v1`.
    fn default() -> Self {
        WritePolicy {
            version: "v1".to_string(),
            approver_role: default_approver(),
            max_retention_days: BTreeMap::new(),
            review_privacy_classes: Vec::new(),
            review_event_types: Vec::new(),
            deny_event_types: Vec::new(),
            required_fields: BTreeMap::new(),
        }
    }
}

const KNOWN_REQUIRED: [&str; 4] = ["projectId", "resourceRefs", "correctionPath", "expiresAt"];

impl WritePolicy {
    /// Parses and checks a policy file's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let p: WritePolicy = serde_json::from_slice(bytes).map_err(|e| format!("policy: {e}"))?;
        p.check()?;
        Ok(p)
    }

    /// Rejects policies that could never be applied as written.
    pub fn check(&self) -> Result<(), String> {
        if self.version.trim().is_empty() || self.approver_role.trim().is_empty() {
            return Err("policy: version and approverRole must not be empty".into());
        }
        for (ty, fields) in &self.required_fields {
            if let Some(f) = fields
                .iter()
                .find(|f| !KNOWN_REQUIRED.contains(&f.as_str()))
            {
                return Err(format!("policy: requiredFields.{ty}: unknown field {f}"));
            }
        }
        Ok(())
    }

    /// Decides a write. `now` bounds retention; `tenant` scopes deny rules.
    pub fn decide(&self, event: &EventInput, tenant: &str, now: Timestamp) -> Decision {
        if let Some(kind) = credential_in(event) {
            return Decision::Deny {
                reason: format!("{}:{}", extra_reasons::CONTAINS_CREDENTIAL, kind.as_str()),
            };
        }
        if let Some(d) = self.seed_rules(event) {
            return d;
        }
        if let Some(reason) = self.denial(event, tenant, now) {
            return Decision::Deny { reason };
        }
        if let Some(reason) = self.review_reason(event) {
            return Decision::Review {
                reason: reason.to_string(),
                approver_role: self.approver_role.clone(),
            };
        }
        Decision::Allow {
            reason: reasons::EPISODIC_WRITE_POLICY_PASSED.to_string(),
        }
    }

    /// The seed's `decideEpisodicWrite`, in its order (allow is left to the caller).
    fn seed_rules(&self, event: &EventInput) -> Option<Decision> {
        if event.source_trust == SourceTrust::UntrustedContent {
            return Some(Decision::Review {
                reason: reasons::UNTRUSTED_EVENT_SOURCE.to_string(),
                approver_role: self.approver_role.clone(),
            });
        }
        if event.privacy_class == PrivacyClass::Sensitive && event.retention.expires_at.is_none() {
            return Some(Decision::Deny {
                reason: reasons::SENSITIVE_EVENT_REQUIRES_EXPIRY.to_string(),
            });
        }
        if event.event_type == "human_approval" && event.resource_refs.is_empty() {
            return Some(Decision::Deny {
                reason: reasons::APPROVAL_EVENT_MISSING_RESOURCE.to_string(),
            });
        }
        None
    }

    fn denial(&self, event: &EventInput, tenant: &str, now: Timestamp) -> Option<String> {
        let denied = self.deny_event_types.iter().any(|r| {
            r.event_type == event.event_type
                && r.tenant_id.as_deref().is_none_or(|t| t == tenant)
                && r.project_id
                    .as_ref()
                    .is_none_or(|p| event.project_id.as_ref() == Some(p))
        });
        if denied {
            return Some(extra_reasons::EVENT_TYPE_DENIED.to_string());
        }
        if let Some(field) = self.missing_field(event) {
            return Some(format!("{}:{field}", extra_reasons::REQUIRED_FIELD_MISSING));
        }
        self.retention_too_long(event, now)
            .then(|| extra_reasons::RETENTION_EXCEEDS_MAXIMUM.to_string())
    }

    fn missing_field(&self, event: &EventInput) -> Option<String> {
        let fields = self.required_fields.get(&event.event_type)?;
        fields
            .iter()
            .find(|f| match f.as_str() {
                "projectId" => event.project_id.is_none(),
                "resourceRefs" => event.resource_refs.is_empty(),
                "correctionPath" => event.correction_path.as_deref().is_none_or(str::is_empty),
                "expiresAt" => event.retention.expires_at.is_none(),
                _ => false,
            })
            .cloned()
    }

    fn retention_too_long(&self, event: &EventInput, now: Timestamp) -> bool {
        let Some(days) = self.max_retention_days.get(&event.privacy_class) else {
            return false;
        };
        let limit = now.plus_millis(i64::from(*days) * 86_400_000);
        event.retention.expires_at.is_none_or(|t| t > limit)
    }

    fn review_reason(&self, event: &EventInput) -> Option<&'static str> {
        if event.source_trust == SourceTrust::AgentInferred
            && !event.supersedes_event_ids.is_empty()
        {
            return Some(extra_reasons::AGENT_INFERENCE_CORRECTS);
        }
        if self.review_privacy_classes.contains(&event.privacy_class) {
            return Some(extra_reasons::PRIVACY_CLASS_REQUIRES_REVIEW);
        }
        self.review_event_types
            .contains(&event.event_type)
            .then_some(extra_reasons::EVENT_TYPE_REQUIRES_REVIEW)
    }
}

/// The first credential in the event's free-text, name and reference fields and its
/// metadata's string values.
fn credential_in(event: &EventInput) -> Option<CredentialKind> {
    let metadata = event.metadata.strings();
    std::iter::once(&event.summary)
        .chain(&event.actor_names)
        .chain(&event.source_refs)
        .chain(&event.resource_refs)
        .chain(&metadata)
        .find_map(|t| credentials::first_kind(t))
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
            actor_names: Vec::new(),
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
            metadata: Default::default(),
        }
    }

    fn reason(d: &Decision) -> &str {
        match d {
            Decision::Allow { reason }
            | Decision::Deny { reason }
            | Decision::Review { reason, .. } => reason,
        }
    }

    impl WritePolicy {
        fn decide_now(&self, e: &EventInput) -> Decision {
            self.decide(
                e,
                "t",
                Timestamp::parse("2026-07-01T00:00:00Z").expect("now"),
            )
        }
    }

    #[test]
    fn file_rules_deny_then_review() {
        let p = WritePolicy::from_json(
            br#"{
            "version": "v2", "approverRole": "privacy_officer",
            "maxRetentionDays": {"private": 30},
            "reviewPrivacyClasses": ["sensitive"], "reviewEventTypes": ["human_approval"],
            "denyEventTypes": [{"eventType": "tool_observed_event", "tenantId": "t"}],
            "requiredFields": {"incident_or_failure": ["projectId"]}
        }"#,
        )
        .expect("policy");
        let mut e = input();
        e.event_type = "tool_observed_event".into();
        assert_eq!(reason(&p.decide_now(&e)), extra_reasons::EVENT_TYPE_DENIED);
        assert!(matches!(
            p.decide(&e, "other", Timestamp::now()),
            Decision::Allow { .. }
        ));
        e.event_type = "incident_or_failure".into();
        assert_eq!(
            reason(&p.decide_now(&e)),
            "required_field_missing:projectId"
        );
        e.project_id = Some("p".into());
        e.privacy_class = PrivacyClass::Private;
        assert_eq!(
            reason(&p.decide_now(&e)),
            extra_reasons::RETENTION_EXCEEDS_MAXIMUM
        );
        e.retention.expires_at = Timestamp::parse("2026-07-20T00:00:00Z");
        assert!(matches!(p.decide_now(&e), Decision::Allow { .. }));
        e.privacy_class = PrivacyClass::Sensitive;
        let d = p.decide_now(&e);
        assert!(
            matches!(d, Decision::Review { ref approver_role, .. } if approver_role == "privacy_officer")
        );
        assert!(WritePolicy::from_json(br#"{"version": "v3", "colour": 1}"#).is_err());
        assert!(
            WritePolicy::from_json(br#"{"version": "v3", "requiredFields": {"x": ["nope"]}}"#)
                .is_err()
        );
    }

    #[test]
    fn seed_rules_in_order() {
        let p = WritePolicy::default();
        assert_eq!(
            reason(&p.decide_now(&input())),
            reasons::EPISODIC_WRITE_POLICY_PASSED
        );

        let mut untrusted_sensitive = input();
        untrusted_sensitive.source_trust = SourceTrust::UntrustedContent;
        untrusted_sensitive.privacy_class = PrivacyClass::Sensitive;
        let d = p.decide_now(&untrusted_sensitive);
        assert!(
            matches!(d, Decision::Review { ref approver_role, .. } if approver_role == "memory_reviewer")
        );
        assert_eq!(reason(&d), reasons::UNTRUSTED_EVENT_SOURCE);

        let mut sensitive = input();
        sensitive.privacy_class = PrivacyClass::Sensitive;
        assert_eq!(
            reason(&p.decide_now(&sensitive)),
            reasons::SENSITIVE_EVENT_REQUIRES_EXPIRY
        );
        sensitive.retention.expires_at = Timestamp::parse("2027-01-01T00:00:00Z");
        assert!(matches!(p.decide_now(&sensitive), Decision::Allow { .. }));

        let mut approval = input();
        approval.event_type = "human_approval".into();
        assert_eq!(
            reason(&p.decide_now(&approval)),
            reasons::APPROVAL_EVENT_MISSING_RESOURCE
        );
        approval.resource_refs = vec!["invoice-7".into()];
        assert!(matches!(p.decide_now(&approval), Decision::Allow { .. }));
    }

    #[test]
    fn a_credential_anywhere_is_denied_first_naming_the_kind_only() {
        let p = WritePolicy::default();
        let mut e = input();
        e.summary = "Provisioned the analytics database; admin user is analytics_admin with password Xk9#pq!2mLw7.".into();
        // Even untrusted content, which would otherwise go to review, is denied: a pending
        // event is stored too.
        e.source_trust = SourceTrust::UntrustedContent;
        let d = p.decide_now(&e);
        assert!(matches!(d, Decision::Deny { .. }), "{d:?}");
        assert_eq!(reason(&d), "contains_credential:password");
        assert!(!format!("{d:?}").contains("Xk9#pq"));

        let mut e = input();
        e.source_refs = vec!["https://deploy:Sup3rS3cret@ci.example.test/job/7".into()];
        assert_eq!(
            reason(&p.decide_now(&e)),
            "contains_credential:url_credentials"
        );
        let mut e = input();
        e.resource_refs = vec!["ghp_16C7e42F292c6912E7710c838347Ae178B4a".into()];
        assert_eq!(
            reason(&p.decide_now(&e)),
            "contains_credential:github_token"
        );
        let mut e = input();
        e.actor_names = vec!["ghp_16C7e42F292c6912E7710c838347Ae178B4a".into()];
        assert_eq!(
            reason(&p.decide_now(&e)),
            "contains_credential:github_token"
        );

        let mut e = input();
        e.summary = "Customer 881 could not log in after the password reset e-mail expired.".into();
        assert!(matches!(p.decide_now(&e), Decision::Allow { .. }));
    }

    #[test]
    fn an_agent_inference_that_corrects_memory_waits_for_review() {
        let policy = WritePolicy::default();
        let now = Timestamp::parse("2026-07-01T00:00:00Z").expect("now");
        let mut e = input();
        e.source_trust = SourceTrust::AgentInferred;
        assert!(matches!(
            policy.decide(&e, "t", now),
            Decision::Allow { .. }
        ));
        e.supersedes_event_ids = vec!["e1".into()];
        match policy.decide(&e, "t", now) {
            Decision::Review { reason, .. } => {
                assert_eq!(reason, extra_reasons::AGENT_INFERENCE_CORRECTS)
            }
            other => panic!("expected review, got {other:?}"),
        }
        e.source_trust = SourceTrust::UserProvided;
        assert!(matches!(
            policy.decide(&e, "t", now),
            Decision::Allow { .. }
        ));
    }

    #[test]
    fn a_denial_names_its_fix_when_the_policy_knows_one() {
        let fix = |r: &str| remedy(r).unwrap_or_default();
        assert!(fix("contains_credential:password").starts_with("remove the credential"));
        assert!(fix(reasons::SENSITIVE_EVENT_REQUIRES_EXPIRY).contains("retention.expiresAt"));
        assert!(fix(reasons::APPROVAL_EVENT_MISSING_RESOURCE).contains("resourceRefs"));
        assert!(fix("required_field_missing:projectId").contains("projectId"));
        assert!(fix(extra_reasons::RETENTION_EXCEEDS_MAXIMUM).contains("expiresAt"));
        assert!(remedy("required_field_missing").is_none());
        assert!(remedy("sensitive_without_expiry").is_none());
        assert!(remedy(reasons::EPISODIC_WRITE_POLICY_PASSED).is_none());
    }
}
