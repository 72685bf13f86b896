//! Observing a raw interaction: prepare (mask), embed once, classify, and write the
//! candidate through the ordinary write path.
//!
//! Invariants: this is the one pipeline behind `POST /v1/observe`, the MCP
//! `observe_interaction` tool and the scenario eval; the interaction arrives typed (the edge
//! parsed and validated it); one model call embeds the prepared summary, the classifier's
//! input, and the stored event's passage ([`Engine::passage_text`]; the same text, embedded
//! once, unless the passage carries an actor label); a candidate is a typed [`EventInput`]
//! that meets the write's validation rules ([`check_derived`]) and is written only through
//! [`Engine::write_embedded`] (policy, durability, audit); the observer is built off the
//! async threads.

use std::sync::Arc;

use super::draft::{classified_texts, split_vectors};
use super::{Engine, Error, WriteOutcome};
use crate::auth::TenantGrant;
use crate::model::validate::check_derived;
use crate::model::{EventInput, Timestamp};
use crate::observe::{candidate_input, prepare, Classification, Interaction, Observer};

/// What observing one interaction did.
#[derive(Debug)]
pub struct Observation {
    /// The prepared (masked, bounded) summary that was embedded.
    pub summary: String,
    /// The classifier's judgement.
    pub classification: Classification,
    /// The candidate event, when the observer did not ignore the interaction.
    pub candidate: Option<EventInput>,
    /// The write's result, when a candidate was written.
    pub written: Option<Result<WriteOutcome, Error>>,
}

impl Engine {
    /// Observes one interaction for a caller already granted `writer`. Errors are engine
    /// failures; a refused candidate write is `Ok` with `written: Some(Err(..))`, so the
    /// caller still sees the classification.
    pub async fn observe(
        &self,
        grant: &TenantGrant,
        interaction: &Interaction,
    ) -> Result<Observation, Error> {
        let now = Timestamp::now();
        let limits = &self.config.limits;
        let prepared = prepare(&interaction.text, limits.max_summary_bytes);
        let observer = self.observer().await?;
        let model = self.serving_model();
        let passage = self.passage_text(&interaction.actor_id, &prepared.summary);
        let texts = classified_texts(passage, &prepared.summary);
        let (vector, summary_vector) = split_vectors(self.embed_made_all(|| ((), texts)).await?.1)?;
        let classification = observer.classify(&prepared, interaction.role, &summary_vector);
        if classification.verdict.ignore.is_some() {
            return Ok(Observation {
                summary: prepared.summary,
                classification,
                candidate: None,
                written: None,
            });
        }
        let candidate = candidate_input(
            interaction,
            &prepared,
            &classification,
            now,
            grant.default_source_trust(),
        );
        let written = match check_derived(&candidate, limits) {
            Ok(()) => {
                self.write_tagged(grant, candidate.clone(), vector, model, false)
                    .await
            }
            Err(invalid) => Err(invalid.into()),
        };
        Ok(Observation {
            summary: prepared.summary,
            classification,
            candidate: Some(candidate),
            written: Some(written),
        })
    }

    /// The cached observer for this engine's model, built on first use.
    pub(super) async fn observer(&self) -> Result<Arc<Observer>, Error> {
        let embedder = self.embedder();
        if let Some(found) = Observer::cached(embedder.model_id()) {
            return Ok(found);
        }
        tokio::task::spawn_blocking(move || Observer::shared(embedder.as_ref()))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
            .map_err(|e| Error::Internal(e.to_string()))
    }
}
