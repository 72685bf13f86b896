//! A write as its caller gave it ([`EventDraft`]): only what only the caller knows is
//! required (`summary`, `actorId`, `occurredAt`, at least one `sourceRefs` entry; the scope
//! is the key's tenant), and [`EventDraft::complete`] fills in the rest from facts the
//! engine found ([`Facts`]), saying what it filled in and why ([`Derived`]).
//!
//! The rules (also in `docs/api.md`):
//! - `eventType`: the observe classifier's type for the summary;
//! - `privacyClass`: the detectors' class when omitted (`internal` when they find nothing);
//!   a class the caller gave below what the detectors found is raised to it, never denied;
//! - `confidence`: `medium`; `resourceRefs`, `supersedesEventIds`: `[]`;
//! - `retention`: `deleteOnRequest: true`, and for a `sensitive` event `expiresAt` =
//!   max(occurredAt, now) + the class's default retention, so the seed's rule (sensitive
//!   events expire) is met; a given retention is kept, and gets that expiry only when the
//!   server classed the event `sensitive`: a caller who states `sensitive` and gives a
//!   retention without an expiry is refused by the write policy;
//! - `sourceTrust`: the key's default, else `agent_inferred`, so an omitted trust never
//!   reads as more trusted than it is.
//!
//! Invariants: pure (the caller supplies every fact, `now` included); a field the caller
//! gave is kept, except a privacy class raised to what the detectors found; every filled-in
//! or raised field is listed once in the [`Derived`] list, in field order.

use serde::Serialize;
use serde_json::{json, Value};

use super::event::{Confidence, EventInput, PrivacyClass, Retention, SourceTrust};
use super::metadata::Metadata;
use super::time::Timestamp;

/// A validated write whose derivable fields may be missing.
#[derive(Debug, Clone, PartialEq)]
pub struct EventDraft {
    /// Optional client-chosen id.
    pub event_id: Option<String>,
    /// Registered event type, or derived.
    pub event_type: Option<String>,
    /// When it happened.
    pub occurred_at: Timestamp,
    /// Who.
    pub actor_id: String,
    /// Names a query may call the actor by (empty when none).
    pub actor_names: Vec<String>,
    /// Project, if any.
    pub project_id: Option<String>,
    /// What it is about, or `[]`.
    pub resource_refs: Option<Vec<String>>,
    /// What happened.
    pub summary: String,
    /// Evidence (at least one).
    pub source_refs: Vec<String>,
    /// Trust of the source, or derived.
    pub source_trust: Option<SourceTrust>,
    /// Confidence, or `medium`.
    pub confidence: Option<Confidence>,
    /// Privacy class, or derived.
    pub privacy_class: Option<PrivacyClass>,
    /// Retention, or derived.
    pub retention: Option<Retention>,
    /// Events this one corrects, or `[]`.
    pub supersedes_event_ids: Option<Vec<String>>,
    /// How the correction was made.
    pub correction_path: Option<String>,
    /// Free-form metadata (empty when omitted).
    pub metadata: Metadata,
}

impl From<EventInput> for EventDraft {
    fn from(e: EventInput) -> Self {
        EventDraft {
            event_id: e.event_id,
            event_type: Some(e.event_type),
            occurred_at: e.occurred_at,
            actor_id: e.actor_id,
            actor_names: e.actor_names,
            project_id: e.project_id,
            resource_refs: Some(e.resource_refs),
            summary: e.summary,
            source_refs: e.source_refs,
            source_trust: Some(e.source_trust),
            confidence: Some(e.confidence),
            privacy_class: Some(e.privacy_class),
            retention: Some(e.retention),
            supersedes_event_ids: Some(e.supersedes_event_ids),
            correction_path: e.correction_path,
            metadata: e.metadata,
        }
    }
}

/// A write body (`POST /v1/events`, the MCP `record_event` tool): only `summary`, `actorId`,
/// `occurredAt` and one `sourceRefs` entry are required; the server derives the rest and says
/// what it derived (`derived` in the answer).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "summary": "Dana asked for renewal notices by email instead of post.",
    "actorId": "user:dana",
    "occurredAt": "2026-06-17T09:20:00Z",
    "sourceRefs": ["chat-2026-06-17"]
}))]
pub struct EventWrite {
    /// What happened, in one self-contained sentence (at most `--max-summary-bytes`, default
    /// 4096 bytes of UTF-8).
    #[schema(min_length = 1, max_length = 1024, pattern = "\\S")]
    pub summary: String,
    /// Who the event is about or by.
    #[schema(min_length = 1, max_length = 256, pattern = "\\S")]
    pub actor_id: String,
    /// When it happened, RFC 3339 (not in the future).
    pub occurred_at: Timestamp,
    /// Evidence references (at least one), e.g. a ticket or message id.
    #[schema(min_items = 1)]
    pub source_refs: Vec<String>,
    /// Optional client-chosen id: retrying a write with the same id and content is
    /// idempotent.
    #[schema(min_length = 1, max_length = 128, pattern = "^[A-Za-z0-9._:-]+$")]
    pub event_id: Option<String>,
    /// A registered event type (by default one of user_preference_stated,
    /// correction_received, task_milestone, human_approval, tool_observed_event,
    /// incident_or_failure). Omitted: the observe classifier's type for the summary.
    pub event_type: Option<String>,
    /// Names a query may call the actor by, the first its display name (at most 4, each up
    /// to 64 bytes with a letter or digit): a query that names one ranks the actor's events
    /// as if it named the id, for keys that may see an event carrying the name.
    #[schema(max_items = 4)]
    pub actor_names: Option<Vec<String>>,
    /// Project, if any.
    #[schema(min_length = 1, max_length = 256)]
    pub project_id: Option<String>,
    /// What the event is about. Omitted: `[]`.
    pub resource_refs: Option<Vec<String>>,
    /// Trust of the source. Omitted: the key's `defaultSourceTrust`, else `agent_inferred`
    /// (the writing agent's own inference).
    pub source_trust: Option<SourceTrust>,
    /// The writer's confidence. Omitted: `medium`.
    pub confidence: Option<Confidence>,
    /// Privacy class. Omitted: what the privacy detectors find in the summary (`internal`
    /// when nothing); a class given below what they find is raised to it.
    pub privacy_class: Option<PrivacyClass>,
    /// Retention. Omitted: `{"deleteOnRequest": true}`, plus an `expiresAt` 30 days on when
    /// the server classes the event `sensitive`.
    pub retention: Option<Retention>,
    /// Ids of the events this one corrects; they become superseded. Omitted: `[]`.
    pub supersedes_event_ids: Option<Vec<String>>,
    /// How the correction was made, if any.
    pub correction_path: Option<String>,
    /// Free-form metadata: an object of string, number and boolean values, nested at most 3
    /// levels, at most 32 values and 4096 bytes. Stored, returned, exported and erased with
    /// the event; every value is indexed, so `scope.metadata` filters by equality.
    #[schema(value_type = Option<Object>, example = json!({"channel": "email", "ticket": {"priority": 2}}))]
    pub metadata: Option<Metadata>,
    /// Optional; must be the key's tenant when given.
    pub tenant_id: Option<String>,
}

/// What the engine found for a draft's missing fields.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The classifier's event type for the summary and why (needed only when the draft has
    /// none).
    pub event_type: Option<(String, String)>,
    /// The detectors' privacy class for the summary, with the kinds of signal found (`None`:
    /// nothing found).
    pub detected: Option<(PrivacyClass, Vec<String>)>,
    /// The writing key's default source trust.
    pub key_trust: Option<SourceTrust>,
    /// How long a `sensitive` event the server classed is kept, in milliseconds.
    pub sensitive_retention_ms: i64,
    /// Now.
    pub now: Timestamp,
}

/// A field the server filled in or changed, with its value and why.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Derived {
    /// The field (`eventType`, `privacyClass`, `retention.expiresAt`, ...).
    pub field: String,
    /// Its value now.
    #[schema(value_type = Object)]
    pub value: Value,
    /// Why.
    pub reason: String,
}

/// Where the detectors found `kinds` (those found in the metadata name their path).
fn found_in(kinds: &[String]) -> &'static str {
    let in_metadata = |k: &String| k.starts_with("metadata.");
    match (kinds.iter().any(in_metadata), kinds.iter().all(in_metadata)) {
        (false, _) => "summary",
        (true, true) => "metadata",
        (true, false) => "summary and metadata",
    }
}

fn derived(out: &mut Vec<Derived>, field: &str, value: Value, reason: impl Into<String>) {
    out.push(Derived {
        field: field.to_string(),
        value,
        reason: reason.into(),
    });
}

impl EventDraft {
    /// Whether completing it needs the classifier (its event type is missing).
    pub fn needs_event_type(&self) -> bool {
        self.event_type.is_none()
    }

    /// The event as given, if it gives every field (nothing to derive).
    pub fn into_input(self) -> Option<EventInput> {
        Some(EventInput {
            event_id: self.event_id,
            event_type: self.event_type?,
            occurred_at: self.occurred_at,
            actor_id: self.actor_id,
            actor_names: self.actor_names,
            project_id: self.project_id,
            resource_refs: self.resource_refs?,
            summary: self.summary,
            source_refs: self.source_refs,
            source_trust: self.source_trust?,
            confidence: self.confidence?,
            privacy_class: self.privacy_class?,
            retention: self.retention?,
            supersedes_event_ids: self.supersedes_event_ids.unwrap_or_default(),
            correction_path: self.correction_path,
            metadata: self.metadata,
        })
    }

    /// The complete event, and what was derived.
    pub fn complete(self, facts: &Facts) -> (EventInput, Vec<Derived>) {
        let mut out = Vec::new();
        let event_type = match self.event_type {
            Some(t) => t,
            None => {
                let (t, why) = facts
                    .event_type
                    .clone()
                    .unwrap_or_else(|| ("tool_observed_event".into(), "no classification".into()));
                derived(&mut out, "eventType", json!(t), why);
                t
            }
        };
        let resource_refs = self.resource_refs.unwrap_or_else(|| {
            derived(&mut out, "resourceRefs", json!([]), "omitted: none");
            Vec::new()
        });
        let source_trust = match (self.source_trust, facts.key_trust) {
            (Some(t), _) => t,
            (None, Some(t)) => {
                derived(
                    &mut out,
                    "sourceTrust",
                    json!(t),
                    "omitted: the key's default",
                );
                t
            }
            (None, None) => {
                let t = SourceTrust::AgentInferred;
                derived(
                    &mut out,
                    "sourceTrust",
                    json!(t),
                    "omitted: an unattributed write is the agent's own inference",
                );
                t
            }
        };
        let confidence = self.confidence.unwrap_or_else(|| {
            derived(
                &mut out,
                "confidence",
                json!(Confidence::Medium),
                "omitted: the default",
            );
            Confidence::Medium
        });
        let (privacy_class, server_classed) = match (self.privacy_class, &facts.detected) {
            (None, Some((found, kinds))) => {
                let why = format!("detected in the {}: {}", found_in(kinds), kinds.join(", "));
                derived(&mut out, "privacyClass", json!(found), why);
                (*found, true)
            }
            (None, None) => {
                let class = PrivacyClass::Internal;
                derived(
                    &mut out,
                    "privacyClass",
                    json!(class),
                    "omitted, and nothing personal detected in the summary or metadata",
                );
                (class, true)
            }
            (Some(given), Some((found, kinds))) if *found > given => {
                let why = format!(
                    "raised from {} (given): detected in the {}: {}",
                    given.as_str(),
                    found_in(kinds),
                    kinds.join(", ")
                );
                derived(&mut out, "privacyClass", json!(found), why);
                (*found, true)
            }
            (Some(given), _) => (given, false),
        };
        let retention = match self.retention {
            Some(r) => {
                if server_classed
                    && privacy_class == PrivacyClass::Sensitive
                    && r.expires_at.is_none()
                {
                    let at = self
                        .occurred_at
                        .max(facts.now)
                        .plus_millis(facts.sensitive_retention_ms);
                    derived(
                        &mut out,
                        "retention.expiresAt",
                        json!(at),
                        "the server classed the event sensitive: sensitive events expire",
                    );
                    Retention {
                        expires_at: Some(at),
                        ..r
                    }
                } else {
                    r
                }
            }
            None => {
                let expires_at = (privacy_class == PrivacyClass::Sensitive).then(|| {
                    self.occurred_at
                        .max(facts.now)
                        .plus_millis(facts.sensitive_retention_ms)
                });
                let r = Retention {
                    expires_at,
                    delete_on_request: true,
                };
                let why = match expires_at {
                    Some(_) => "omitted: deletable on request, and sensitive events expire",
                    None => "omitted: deletable on request",
                };
                derived(&mut out, "retention", json!(r), why);
                r
            }
        };
        let supersedes_event_ids = self.supersedes_event_ids.unwrap_or_default();
        let input = EventInput {
            event_id: self.event_id,
            event_type,
            occurred_at: self.occurred_at,
            actor_id: self.actor_id,
            actor_names: self.actor_names,
            project_id: self.project_id,
            resource_refs,
            summary: self.summary,
            source_refs: self.source_refs,
            source_trust,
            confidence,
            privacy_class,
            retention,
            supersedes_event_ids,
            correction_path: self.correction_path,
            metadata: self.metadata,
        };
        (input, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).expect("time")
    }

    fn minimal() -> EventDraft {
        EventDraft {
            event_id: None,
            event_type: None,
            occurred_at: t("2026-06-17T09:20:00Z"),
            actor_id: "user:dana".into(),
            actor_names: Vec::new(),
            project_id: None,
            resource_refs: None,
            summary: "Dana asked for renewal notices by email".into(),
            source_refs: vec!["chat-1".into()],
            source_trust: None,
            confidence: None,
            privacy_class: None,
            retention: None,
            supersedes_event_ids: None,
            correction_path: None,
            metadata: Metadata::default(),
        }
    }

    fn facts(detected: Option<PrivacyClass>) -> Facts {
        Facts {
            event_type: Some(("user_preference_stated".into(), "classified".into())),
            detected: detected.map(|c| (c, vec!["email".into()])),
            key_trust: None,
            sensitive_retention_ms: 1000,
            now: t("2026-07-01T00:00:00Z"),
        }
    }

    fn fields(derived: &[Derived]) -> Vec<&str> {
        derived.iter().map(|d| d.field.as_str()).collect()
    }

    #[test]
    fn a_minimal_draft_is_completed_and_every_derivation_named() {
        let (input, derived) = minimal().complete(&facts(None));
        assert_eq!(input.event_type, "user_preference_stated");
        assert_eq!(input.source_trust, SourceTrust::AgentInferred);
        assert_eq!(input.confidence, Confidence::Medium);
        assert_eq!(input.privacy_class, PrivacyClass::Internal);
        assert!(input.resource_refs.is_empty() && input.supersedes_event_ids.is_empty());
        assert!(input.retention.delete_on_request && input.retention.expires_at.is_none());
        assert_eq!(
            fields(&derived),
            vec![
                "eventType",
                "resourceRefs",
                "sourceTrust",
                "confidence",
                "privacyClass",
                "retention"
            ]
        );
    }

    #[test]
    fn a_complete_draft_derives_nothing() {
        let mut draft = minimal();
        draft.event_type = Some("task_milestone".into());
        draft.resource_refs = Some(vec![]);
        draft.source_trust = Some(SourceTrust::UserProvided);
        draft.confidence = Some(Confidence::High);
        draft.privacy_class = Some(PrivacyClass::Private);
        draft.retention = Some(Retention {
            expires_at: None,
            delete_on_request: false,
        });
        let (input, derived) = draft.complete(&facts(Some(PrivacyClass::Private)));
        assert!(derived.is_empty(), "{derived:?}");
        assert_eq!(input.event_type, "task_milestone");
        assert!(!input.retention.delete_on_request);
    }

    #[test]
    fn a_class_below_the_detectors_is_raised_and_the_key_default_trust_used() {
        let mut draft = minimal();
        draft.privacy_class = Some(PrivacyClass::Public);
        let mut f = facts(Some(PrivacyClass::Private));
        f.key_trust = Some(SourceTrust::ToolResult);
        let (input, derived) = draft.complete(&f);
        assert_eq!(input.privacy_class, PrivacyClass::Private);
        assert_eq!(input.source_trust, SourceTrust::ToolResult);
        let raised = derived
            .iter()
            .find(|d| d.field == "privacyClass")
            .expect("raised");
        assert!(
            raised.reason.contains("raised from public"),
            "{}",
            raised.reason
        );
    }

    #[test]
    fn a_server_classed_sensitive_event_expires() {
        let (input, derived) = minimal().complete(&facts(Some(PrivacyClass::Sensitive)));
        assert_eq!(input.privacy_class, PrivacyClass::Sensitive);
        // max(occurredAt, now) + the retention.
        assert_eq!(
            input.retention.expires_at,
            Some(t("2026-07-01T00:00:00Z").plus_millis(1000))
        );
        assert!(fields(&derived).contains(&"retention"));
        // A raised class with a retention given but no expiry gets one too.
        let mut draft = minimal();
        draft.privacy_class = Some(PrivacyClass::Internal);
        draft.retention = Some(Retention {
            expires_at: None,
            delete_on_request: true,
        });
        let (input, derived) = draft.complete(&facts(Some(PrivacyClass::Sensitive)));
        assert!(input.retention.expires_at.is_some());
        assert!(fields(&derived).contains(&"retention.expiresAt"));
        // A caller who states sensitive keeps their retention (the policy then judges it).
        let mut draft = minimal();
        draft.privacy_class = Some(PrivacyClass::Sensitive);
        draft.retention = Some(Retention {
            expires_at: None,
            delete_on_request: true,
        });
        let (input, _) = draft.complete(&facts(None));
        assert!(input.retention.expires_at.is_none());
    }
}
