//! Writes that give only what only the caller knows ([`EventDraft`]): the engine finds the
//! facts the rest is derived from (the classifier's event type, the privacy detectors'
//! class), completes the event ([`EventDraft::complete`]) and writes it through the
//! ordinary path, reporting what it derived.
//!
//! Invariants: a draft with its event type is completed without a vector and written by
//! [`Engine::write`] (the policy decides before anything is embedded); one without is
//! embedded once, and that vector both classifies and is stored (so a denied write that
//! omitted its type was embedded);
//! detection and classification run on the CPU pool, never on an async thread; a derived
//! event type the registry does not hold is a 422 naming `eventType` (never a silent
//! substitute); everything else is [`Engine::write_embedded`]'s (policy, idempotency,
//! durability, audit).

use super::{Engine, Error, WriteOutcome};
use crate::auth::TenantGrant;
use crate::model::validate::check_derived;
use crate::model::{EventDraft, Facts, PrivacyClass, Timestamp};
use crate::observe::{prepare, privacy, Role};

/// How long a `sensitive` event the server classed is kept: 30 days, as the observer keeps
/// one.
pub const SENSITIVE_RETENTION_MS: i64 = crate::observe::SENSITIVE_RETENTION_MS;

impl Engine {
    /// Completes `draft` (see [`crate::model::draft`]) and writes it; the outcome lists what
    /// was derived.
    pub async fn write_draft(
        &self,
        grant: &TenantGrant,
        draft: EventDraft,
        wait_for: bool,
    ) -> Result<WriteOutcome, Error> {
        let limits = self.config.limits.clone();
        let summary = draft.summary.clone();
        if !draft.needs_event_type() {
            // Nothing needs the vector: complete, then the ordinary write decides before it
            // embeds (a denied write is never embedded; a retry is answered without).
            let detected = self
                .cpu
                .run(move || detect(&summary))
                .await
                .map_err(Error::Internal)?;
            let (input, derived) = draft.complete(&self.facts(detected, None));
            check_derived(&input, &self.config.limits)?;
            let mut outcome = self.write(grant, input, wait_for).await?;
            outcome.derived = derived;
            return Ok(outcome);
        }
        // The type comes from the summary's vector: embed first (once), classify with it,
        // and store it.
        let observer = self.observer().await?;
        let ((detected, prepared), vector) = self
            .embed_made(move || {
                let prepared = prepare(&summary, limits.max_summary_bytes);
                ((detect(&summary), prepared), summary)
            })
            .await?;
        let v = vector.clone();
        let c = self
            .cpu
            .run(move || observer.classify(&prepared, Role::User, &v))
            .await
            .map_err(Error::Internal)?;
        let cues = if c.cues.is_empty() {
            String::new()
        } else {
            format!("; cues: {}", c.cues.join(", "))
        };
        let why = format!(
            "classified from the summary (margin {:.2}{cues})",
            c.verdict.type_margin
        );
        let event_type = Some((c.verdict.event_type.to_string(), why));
        let (input, derived) = draft.complete(&self.facts(detected, event_type));
        check_derived(&input, &self.config.limits)?;
        let mut outcome = self.write_embedded(grant, input, vector, wait_for).await?;
        outcome.derived = derived;
        Ok(outcome)
    }

    fn facts(
        &self,
        detected: Option<(PrivacyClass, Vec<String>)>,
        event_type: Option<(String, String)>,
    ) -> Facts {
        Facts {
            event_type,
            detected,
            // Keys carry no default trust yet: an omitted trust is the agent's inference.
            key_trust: None,
            sensitive_retention_ms: SENSITIVE_RETENTION_MS,
            now: Timestamp::now(),
        }
    }
}

/// The privacy detectors' class for `summary` and the kinds of signal found (`None`: none).
fn detect(summary: &str) -> Option<(PrivacyClass, Vec<String>)> {
    let signals = privacy::detect(summary);
    if signals.is_empty() {
        return None;
    }
    let kinds = privacy::kinds(&signals)
        .into_iter()
        .map(|k| {
            serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        })
        .collect();
    Some((privacy::class_of(&signals), kinds))
}
