//! Observe: the runtime (no LLM) decides whether a raw interaction is worth remembering and,
//! if so, turns it into a candidate event for the ordinary write path.
//!
//! Pipeline: [`parse_interaction`] (validation) → [`prepare`] (privacy signals, card
//! masking, bounded summary) → embed the summary once → [`Observer::classify`] (rules +
//! prototype similarity) → [`candidate_input`] (event type, privacy class, confidence,
//! retention; typed, never a JSON body parsed again) → `model::validate::check_derived` →
//! `Engine::write_embedded` with the same vector, so policy, durability and audit are
//! exactly those of `POST /v1/events`, and the candidate meets its validation rules.
//!
//! Invariants:
//! - the observer never stores anything itself: it only proposes an event;
//! - privacy detection and the rule layer are pure; only [`Observer::classify`] needs
//!   vectors, and those come from whatever [`Embedder`] the engine runs;
//! - prototypes are embedded once per model id and cached for the process
//!   ([`Observer::shared`]);
//! - a `sensitive` candidate always carries `expiresAt` = max(occurredAt, now) + 30 days;
//!   every candidate is `deleteOnRequest: true`;
//! - a full payment card number never reaches the summary (masked to its last four digits);
//! - an interaction holding a credential ([`crate::credentials`]: API keys, tokens,
//!   passwords, private keys, URLs with a password) is **ignored** with reason
//!   `contains_credential`, and the secret is masked (`[redacted <kind>]`) in the prepared
//!   summary before anything else sees it, so it is neither embedded, echoed in a response,
//!   nor stored. Ignoring rather than storing the masked text is deliberate: a message that
//!   carries a secret is usually handing it over ("remember this key"), and a memory that
//!   the agent was given a key invites it to act as if it had one. The cost is that an
//!   event mentioned alongside a secret (a CI log that leaked a token) is not remembered by
//!   the observer; a caller that needs it writes a redacted event through `POST /v1/events`
//!   (where the write policy denies any event still holding a credential).

pub mod classify;
pub mod privacy;
pub mod request;

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

pub use classify::{IgnoreReason, Role, Thresholds, Verdict};
pub use privacy::{Signal, SignalKind};
pub use request::{parse_interaction, Interaction};

use crate::credentials::{self, CredentialKind};
use crate::embed::{EmbedError, Embedder};
use crate::model::{Confidence, EventInput, PrivacyClass, Retention, SourceTrust, Timestamp};

/// How long a sensitive candidate is kept.
pub const SENSITIVE_RETENTION_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// Text ready for classification: the bounded summary, the privacy signals and the kinds
/// of credential found.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// Trimmed, credential- and card-masked, at most `max_bytes` (cut on a character
    /// boundary).
    pub summary: String,
    /// Privacy signals found in the credential-masked text.
    pub signals: Vec<Signal>,
    /// Kinds of credential found in the trimmed text (the interaction is then ignored).
    pub credentials: Vec<CredentialKind>,
}

/// Trims, masks credentials, detects privacy signals, masks card numbers and bounds the
/// summary.
pub fn prepare(text: &str, max_bytes: usize) -> Prepared {
    let trimmed = text.trim();
    let found = credentials::detect(trimmed);
    let without_secrets = credentials::mask(trimmed, &found);
    let signals = privacy::detect(&without_secrets);
    let masked = privacy::mask_cards(&without_secrets, &signals);
    Prepared {
        summary: truncate(&masked, max_bytes).to_string(),
        signals,
        credentials: credentials::kinds(&found),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim_end()
}

/// The observer's full judgement of one interaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    /// Store/ignore, type and scores.
    pub verdict: Verdict,
    /// The class implied by the privacy signals.
    pub privacy_class: PrivacyClass,
    /// Distinct privacy signal kinds.
    pub privacy_signals: Vec<SignalKind>,
    /// Kinds of credential found (non-empty means ignored as `contains_credential`).
    pub credentials: Vec<CredentialKind>,
    /// Rule cues that matched.
    pub cues: Vec<&'static str>,
    /// How sure the observer is of the event type.
    pub confidence: Confidence,
}

impl Classification {
    /// The `classification` member of an observe response.
    pub fn to_json(&self) -> Value {
        let scores: serde_json::Map<String, Value> = self
            .verdict
            .scores
            .iter()
            .map(|(k, v)| ((*k).to_string(), json!(round3(*v))))
            .collect();
        json!({
            "eventType": self.verdict.event_type,
            "scores": scores,
            "privacySignals": self.privacy_signals,
            "credentials": self.credentials,
            "cues": self.cues,
            "confidence": self.confidence,
        })
    }
}

fn round3(x: f32) -> f64 {
    (f64::from(x) * 1000.0).round() / 1000.0
}

/// The classifier with its prototype vectors for one embedding model.
pub struct Observer {
    prototypes: classify::Prototypes,
    thresholds: Thresholds,
}

static SHARED: Mutex<Vec<Arc<Observer>>> = Mutex::new(Vec::new());

impl Observer {
    /// Embeds the prototypes with `embedder`. Blocking CPU work.
    pub fn new(embedder: &dyn Embedder) -> Result<Self, EmbedError> {
        Ok(Observer {
            prototypes: classify::Prototypes::build(embedder)?,
            thresholds: Thresholds::default(),
        })
    }

    /// The process-wide observer for `embedder`'s model, built on first use. Blocking the
    /// first time for a model id (call it off async threads, e.g. at start-up).
    pub fn shared(embedder: &dyn Embedder) -> Result<Arc<Observer>, EmbedError> {
        let mut all = SHARED.lock();
        if let Some(found) = all
            .iter()
            .find(|o| o.prototypes.model_id() == embedder.model_id())
        {
            return Ok(Arc::clone(found));
        }
        let built = Arc::new(Observer::new(embedder)?);
        all.push(Arc::clone(&built));
        Ok(built)
    }

    /// The cached observer for `model_id`, if one was built (never blocks on embedding).
    pub fn cached(model_id: &str) -> Option<Arc<Observer>> {
        SHARED
            .lock()
            .iter()
            .find(|o| o.prototypes.model_id() == model_id)
            .cloned()
    }

    /// Classifies prepared text given the embedding of its summary.
    pub fn classify(&self, prepared: &Prepared, role: Role, vector: &[f32]) -> Classification {
        let lex = classify::lexical(&prepared.summary);
        let sims = self.prototypes.similarities(vector);
        let mut verdict = classify::decide(&lex, &sims, role, &self.thresholds);
        if !prepared.credentials.is_empty() {
            verdict.ignore = Some(IgnoreReason::ContainsCredential);
        }
        let confidence = confidence(&lex, &verdict);
        Classification {
            privacy_class: privacy::class_of(&prepared.signals),
            privacy_signals: privacy::kinds(&prepared.signals),
            credentials: prepared.credentials.clone(),
            cues: lex.cues,
            confidence,
            verdict,
        }
    }
}

fn confidence(lex: &classify::Lexical, verdict: &Verdict) -> Confidence {
    match (lex.cues.is_empty(), verdict.type_margin) {
        (false, m) if m >= 0.1 => Confidence::High,
        (false, _) => Confidence::Medium,
        (true, m) if m >= 0.05 => Confidence::Medium,
        _ => Confidence::Low,
    }
}

/// The event proposed for an interaction the observer keeps, typed as a write's input: the
/// interaction's validated fields, the prepared summary and the classification's type, class
/// and confidence; an interaction that names no trust gets the one a write would
/// (`key_trust`, the key's `defaultSourceTrust`, else `agent_inferred`).
/// [`crate::model::validate::check_derived`] checks what the interaction's own validation
/// did not.
pub fn candidate_input(
    interaction: &Interaction,
    prepared: &Prepared,
    c: &Classification,
    now: Timestamp,
    key_trust: Option<SourceTrust>,
) -> EventInput {
    let expires_at = (c.privacy_class == PrivacyClass::Sensitive).then(|| {
        interaction
            .occurred_at
            .max(now)
            .plus_millis(SENSITIVE_RETENTION_MS)
    });
    EventInput {
        event_id: None,
        event_type: c.verdict.event_type.to_string(),
        occurred_at: interaction.occurred_at,
        actor_id: interaction.actor_id.clone(),
        actor_names: Vec::new(),
        project_id: interaction.project_id.clone(),
        resource_refs: interaction.resource_refs.clone(),
        summary: prepared.summary.clone(),
        source_refs: interaction.source_refs.clone(),
        source_trust: interaction
            .source_trust
            .or(key_trust)
            .unwrap_or(SourceTrust::AgentInferred),
        confidence: c.confidence,
        privacy_class: c.privacy_class,
        retention: Retention {
            expires_at,
            delete_on_request: true,
        },
        supersedes_event_ids: Vec::new(),
        correction_path: None,
        metadata: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashingEmbedder;
    use crate::model::validate::{check_derived, validate_event, Limits};
    use crate::model::SourceTrust;

    fn interaction(text: &str) -> Interaction {
        Interaction {
            text: text.into(),
            role: Role::User,
            actor_id: "user-1".into(),
            occurred_at: Timestamp::parse("2026-06-17T09:20:00Z").expect("t"),
            source_refs: vec!["chat-1".into()],
            source_trust: Some(SourceTrust::UserProvided),
            project_id: Some("p1".into()),
            resource_refs: vec![],
        }
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(prepare("  ok  ", 10).summary, "ok");
    }

    #[test]
    fn a_sensitive_candidate_is_a_valid_event_with_an_expiry() {
        let e = HashingEmbedder::new();
        let obs = Observer::new(&e).expect("observer");
        let i = interaction("From now on please book my insulin refill pickups on Fridays");
        let p = prepare(&i.text, 4096);
        let v = e.embed(&[p.summary.as_str()]).expect("embed").remove(0);
        let c = obs.classify(&p, i.role, &v);
        assert_eq!(c.verdict.ignore, None);
        assert_eq!(c.privacy_class, PrivacyClass::Sensitive);
        let now = Timestamp::parse("2026-07-01T00:00:00Z").expect("t");
        let input = candidate_input(&i, &p, &c, now, None);
        let expiry = Timestamp::parse("2026-07-31T00:00:00Z").expect("t");
        assert_eq!(input.retention.expires_at, Some(expiry));
        assert_eq!(input.project_id.as_deref(), Some("p1"));
        assert_eq!(input.event_type, "user_preference_stated");
        check_derived(&input, &Limits::default()).expect("meets the write rules");
        // The same event sent as a body passes the write's validation unchanged.
        let body = serde_json::to_value(&input).expect("json");
        let parsed = validate_event(&body, &Limits::default(), now).expect("valid event");
        assert_eq!(parsed, input);
    }

    #[test]
    fn a_credential_is_masked_before_embedding_and_the_interaction_ignored() {
        let e = HashingEmbedder::new();
        let obs = Observer::new(&e).expect("observer");
        let secret = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        let text = format!("Deploy step printed GITHUB_TOKEN={secret} while pushing tags.");
        let p = prepare(&text, 4096);
        assert!(!p.summary.contains(secret), "{}", p.summary);
        assert_eq!(
            p.summary,
            "Deploy step printed GITHUB_TOKEN=[redacted github_token] while pushing tags."
        );
        assert_eq!(p.credentials, vec![CredentialKind::GithubToken]);
        let v = e.embed(&[p.summary.as_str()]).expect("embed").remove(0);
        let c = obs.classify(&p, Role::Tool, &v);
        assert_eq!(c.verdict.ignore, Some(IgnoreReason::ContainsCredential));
        let json = c.to_json().to_string();
        assert!(!json.contains(secret));
        assert!(json.contains("github_token"), "{json}");

        let p = prepare("the user asked how to reset their password", 4096);
        assert!(p.credentials.is_empty());
    }

    #[test]
    fn shared_observers_are_cached_per_model() {
        let e = HashingEmbedder::new();
        let a = Observer::shared(&e).expect("a");
        let b = Observer::shared(&e).expect("b");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(Observer::cached(e.model_id()).is_some());
    }
}
