//! The episodic event record (the seed's `EpisodicMemoryEvent`) and its enums.
//!
//! Invariants: `StoredEvent` is what the log holds and what clients see; server-owned
//! fields (`recordedAt`, `policyVersion`, `status`, `tenantId`) are never taken from input;
//! enum wire values are exactly the seed's strings.

use serde::{Deserialize, Serialize};

use super::metadata::Metadata;
use super::time::Timestamp;

/// Where an event's evidence came from (the seed's `sourceTrust`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceTrust {
    /// Said by the user.
    UserProvided,
    /// Returned by a tool.
    ToolResult,
    /// From a vetted source.
    ApprovedSource,
    /// Entered by an operator.
    OperatorEntered,
    /// From content the system does not trust (documents, web pages).
    UntrustedContent,
    /// The writing agent's own inference: what a write that names no trust gets (unless its
    /// key carries a default). Not one of the seed's five values: trusted less than what a
    /// user said, more than untrusted content, and an agent's inference that corrects
    /// memory waits for review.
    AgentInferred,
}

impl SourceTrust {
    /// Every value, in declaration order.
    pub const ALL: [SourceTrust; 6] = [
        SourceTrust::UserProvided,
        SourceTrust::ToolResult,
        SourceTrust::ApprovedSource,
        SourceTrust::OperatorEntered,
        SourceTrust::UntrustedContent,
        SourceTrust::AgentInferred,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceTrust::UserProvided => "user_provided",
            SourceTrust::ToolResult => "tool_result",
            SourceTrust::ApprovedSource => "approved_source",
            SourceTrust::OperatorEntered => "operator_entered",
            SourceTrust::UntrustedContent => "untrusted_content",
            SourceTrust::AgentInferred => "agent_inferred",
        }
    }
}

/// How sure the writer is that the event happened as summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
}

impl Confidence {
    /// Every value.
    pub const ALL: [Confidence; 3] = [Confidence::Low, Confidence::Medium, Confidence::High];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

/// Privacy class of the event's content.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PrivacyClass {
    /// Public.
    Public,
    /// Internal to the tenant.
    Internal,
    /// Personal data.
    Private,
    /// Special-category data; must expire.
    Sensitive,
}

impl PrivacyClass {
    /// Every value, least to most restricted.
    pub const ALL: [PrivacyClass; 4] = [
        PrivacyClass::Public,
        PrivacyClass::Internal,
        PrivacyClass::Private,
        PrivacyClass::Sensitive,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            PrivacyClass::Public => "public",
            PrivacyClass::Internal => "internal",
            PrivacyClass::Private => "private",
            PrivacyClass::Sensitive => "sensitive",
        }
    }
}

/// What decides which keys of its tenant may see an event: its actor and privacy class.
/// Kept with a deleted event's tombstone (never its content), so that only keys that could
/// see the event learn that it was deleted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Audience {
    /// The event's actor.
    pub actor_id: String,
    /// The event's privacy class.
    pub privacy_class: PrivacyClass,
}

/// Lifecycle status of a stored event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// Admitted and retrievable.
    Active,
    /// Stored durably, waiting for a reviewer; never retrieved.
    PendingReview,
    /// Replaced by a correction; retrievable only on request.
    Superseded,
}

impl EventStatus {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Active => "active",
            EventStatus::PendingReview => "pending_review",
            EventStatus::Superseded => "superseded",
        }
    }
}

/// Retention rule of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// After this time the event is never returned.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expires_at: Option<Timestamp>,
    /// Whether an erasure request for the actor deletes it.
    pub delete_on_request: bool,
}

/// A write-policy decision (the seed's `EpisodicWriteDecision`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// Store and make retrievable.
    Allow {
        /// Why.
        reason: String,
    },
    /// Refuse; store nothing.
    Deny {
        /// Why.
        reason: String,
    },
    /// Store durably but keep out of retrieval until a holder of `approverRole` decides.
    Review {
        /// Why.
        reason: String,
        /// Who may approve.
        #[serde(rename = "approverRole")]
        approver_role: String,
    },
}

impl Decision {
    /// `allow`, `deny` or `review`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Decision::Allow { .. } => "allow",
            Decision::Deny { .. } => "deny",
            Decision::Review { .. } => "review",
        }
    }
}

/// A validated client write, before the server adds its own fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventInput {
    /// Optional client-chosen id: retrying a write with the same id and content is
    /// idempotent.
    #[schema(min_length = 1, max_length = 128, pattern = "^[A-Za-z0-9._:-]+$")]
    pub event_id: Option<String>,
    /// A registered event type; by default one of user_preference_stated,
    /// correction_received, task_milestone, human_approval, tool_observed_event,
    /// incident_or_failure.
    #[schema(min_length = 1)]
    pub event_type: String,
    /// When it happened, RFC 3339 (not in the future).
    pub occurred_at: Timestamp,
    /// Who the event is about or by.
    #[schema(min_length = 1, max_length = 256, pattern = "\\S")]
    pub actor_id: String,
    /// Names a query may call the actor by, the first its display name (at most 4, each up
    /// to 64 bytes with a letter or digit): a query that names one ranks the actor's events
    /// as if it named the id. Stored, returned, exported and erased with the event, and seen
    /// only by keys that may see the event.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub actor_names: Vec<String>,
    /// Project, if any.
    #[schema(min_length = 1, max_length = 256, pattern = "\\S")]
    pub project_id: Option<String>,
    /// What the event is about (may be empty).
    pub resource_refs: Vec<String>,
    /// One self-contained sentence describing what happened (at most
    /// `--max-summary-bytes`, default 4096 bytes of UTF-8; the schema states 1024
    /// characters, which always fit that default).
    #[schema(min_length = 1, max_length = 1024, pattern = "\\S")]
    pub summary: String,
    /// Evidence references (at least one), e.g. a ticket or message id.
    #[schema(min_items = 1)]
    pub source_refs: Vec<String>,
    /// Trust of the source.
    pub source_trust: SourceTrust,
    /// Writer's confidence.
    pub confidence: Confidence,
    /// Privacy class.
    pub privacy_class: PrivacyClass,
    /// Retention rule.
    pub retention: Retention,
    /// Ids of the events this one corrects (may be omitted); they become superseded.
    #[serde(default)]
    pub supersedes_event_ids: Vec<String>,
    /// How the correction was made, if any.
    pub correction_path: Option<String>,
    /// Free-form metadata: string, number and boolean values, nested at most 3 levels, at
    /// most 32 values and 4096 bytes; every value is indexed for `scope.metadata` filters.
    #[serde(skip_serializing_if = "Metadata::is_empty", default)]
    #[schema(value_type = Object)]
    pub metadata: Metadata,
}

/// An event as stored in the log and returned to clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    /// Unique within the tenant.
    pub event_id: String,
    /// A registered event type.
    pub event_type: String,
    /// When it happened (the timeline axis).
    pub occurred_at: Timestamp,
    /// When memory learned of it (the as-of axis).
    pub recorded_at: Timestamp,
    /// Who did or said it.
    pub actor_id: String,
    /// Names a query may call the actor by, the first its display name (omitted when none).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub actor_names: Vec<String>,
    /// Owning tenant, always from the writer's key.
    pub tenant_id: String,
    /// Project, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub project_id: Option<String>,
    /// Resources the event is about.
    pub resource_refs: Vec<String>,
    /// What happened.
    pub summary: String,
    /// Evidence references.
    pub source_refs: Vec<String>,
    /// Trust of the source.
    pub source_trust: SourceTrust,
    /// Writer's confidence.
    pub confidence: Confidence,
    /// Privacy class.
    pub privacy_class: PrivacyClass,
    /// Retention rule.
    pub retention: Retention,
    /// Events this one corrects.
    pub supersedes_event_ids: Vec<String>,
    /// How the correction was made (empty when none).
    pub correction_path: String,
    /// Version of the write policy that admitted it.
    pub policy_version: String,
    /// Lifecycle status.
    pub status: EventStatus,
    /// The correction that replaced this event, when superseded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub superseded_by: Option<String>,
    /// When the correction was recorded (the as-of axis of the supersession).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub superseded_at: Option<Timestamp>,
    /// Why the summary must be treated as data (instruction-like text, hidden characters).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub content_warnings: Vec<String>,
    /// Free-form metadata, as written (omitted when none).
    #[serde(skip_serializing_if = "Metadata::is_empty", default)]
    #[schema(value_type = Object)]
    pub metadata: Metadata,
}

impl StoredEvent {
    /// Who may see it besides its tenant.
    pub fn audience(&self) -> Audience {
        Audience {
            actor_id: self.actor_id.clone(),
            privacy_class: self.privacy_class,
        }
    }
}

impl EventInput {
    /// The input a stored event was written from (for re-deciding it under another policy).
    pub fn from_stored(e: &StoredEvent) -> Self {
        EventInput {
            event_id: Some(e.event_id.clone()),
            event_type: e.event_type.clone(),
            occurred_at: e.occurred_at,
            actor_id: e.actor_id.clone(),
            actor_names: e.actor_names.clone(),
            project_id: e.project_id.clone(),
            resource_refs: e.resource_refs.clone(),
            summary: e.summary.clone(),
            source_refs: e.source_refs.clone(),
            source_trust: e.source_trust,
            confidence: e.confidence,
            privacy_class: e.privacy_class,
            retention: e.retention.clone(),
            supersedes_event_ids: e.supersedes_event_ids.clone(),
            correction_path: (!e.correction_path.is_empty()).then(|| e.correction_path.clone()),
            metadata: e.metadata.clone(),
        }
    }

    /// Whether writing this input again would store exactly what `stored` holds: every
    /// field a write gives, compared with the stored record's (what [`Self::from_stored`]
    /// reads back), an empty correction path being none. The id is not compared (a caller
    /// found `stored` by it), nor is anything the server owns (`recordedAt`, `status`,
    /// `policyVersion`, supersession, content warnings). This is what makes a write an
    /// idempotent retry, whether it came as the original body, with the fields the server
    /// derived filled in, or as a line of `episodic export`.
    pub fn same_content(&self, stored: &StoredEvent) -> bool {
        let mut theirs = EventInput::from_stored(stored);
        theirs.event_id = None;
        let mut mine = self.clone();
        mine.event_id = None;
        if mine.correction_path.as_deref() == Some("") {
            mine.correction_path = None;
        }
        mine == theirs
    }
}

impl StoredEvent {
    /// Builds the stored record from validated input and server-owned fields.
    pub fn from_input(
        input: EventInput,
        event_id: String,
        tenant_id: &str,
        recorded_at: Timestamp,
        policy_version: &str,
        status: EventStatus,
    ) -> Self {
        let content_warnings = super::warnings::content_warnings(&input.summary);
        StoredEvent {
            content_warnings,
            event_id,
            event_type: input.event_type,
            occurred_at: input.occurred_at,
            recorded_at,
            actor_id: input.actor_id,
            actor_names: input.actor_names,
            tenant_id: tenant_id.to_string(),
            project_id: input.project_id,
            resource_refs: input.resource_refs,
            summary: input.summary,
            source_refs: input.source_refs,
            source_trust: input.source_trust,
            confidence: input.confidence,
            privacy_class: input.privacy_class,
            retention: input.retention,
            supersedes_event_ids: input.supersedes_event_ids,
            correction_path: input.correction_path.unwrap_or_default(),
            policy_version: policy_version.to_string(),
            status,
            superseded_by: None,
            superseded_at: None,
            metadata: input.metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_wire_shape_matches_the_seed() {
        let d = Decision::Review {
            reason: "untrusted_event_source".into(),
            approver_role: "memory_reviewer".into(),
        };
        let v = serde_json::to_value(&d).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"decision": "review", "reason": "untrusted_event_source", "approverRole": "memory_reviewer"})
        );
        let a = serde_json::to_value(Decision::Allow {
            reason: "episodic_write_policy_passed".into(),
        })
        .expect("json");
        assert_eq!(
            a,
            serde_json::json!({"decision": "allow", "reason": "episodic_write_policy_passed"})
        );
    }

    #[test]
    fn enum_strings_match_serde() {
        for t in SourceTrust::ALL {
            assert_eq!(serde_json::to_value(t).expect("json"), t.as_str());
        }
        for c in Confidence::ALL {
            assert_eq!(serde_json::to_value(c).expect("json"), c.as_str());
        }
        for p in PrivacyClass::ALL {
            assert_eq!(serde_json::to_value(p).expect("json"), p.as_str());
        }
    }
}
