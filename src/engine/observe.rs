//! Observing a raw interaction: validate, prepare (mask), embed once, classify, and write the
//! candidate through the ordinary write path.
//!
//! Invariants: this is the one pipeline behind `POST /v1/observe`, the MCP
//! `observe_interaction` tool and the scenario eval; the summary is embedded exactly once and
//! that vector is both the classifier's input and the stored event's; a candidate is written
//! only through [`Engine::write_embedded`] (validation, policy, durability, audit); the
//! observer is built off the async threads.

use std::sync::Arc;

use serde_json::Value;

use super::{Engine, WriteOutcome};
use crate::auth::TenantGrant;
use crate::error::{ErrorCode, Problem};
use crate::model::Timestamp;
use crate::observe::{candidate_body, parse_interaction, prepare, Classification, Observer};

/// What observing one interaction did.
#[derive(Debug)]
pub struct Observation {
    /// The prepared (masked, bounded) summary that was embedded.
    pub summary: String,
    /// The classifier's judgement.
    pub classification: Classification,
    /// The candidate write body, when the observer did not ignore the interaction.
    pub candidate: Option<Value>,
    /// The write's result, when a candidate was written.
    pub written: Option<Result<WriteOutcome, Problem>>,
}

impl Engine {
    /// Observes one interaction body for a caller already granted `writer`. Errors are the
    /// body's validation problems and engine failures; a refused candidate write is
    /// `Ok` with `written: Some(Err(..))`, so the caller still sees the classification.
    pub async fn observe(&self, grant: &TenantGrant, body: &Value) -> Result<Observation, Problem> {
        let now = Timestamp::now();
        let limits = &self.config.limits;
        let interaction = parse_interaction(body, limits, now).map_err(Problem::validation)?;
        let prepared = prepare(&interaction.text, limits.max_summary_bytes);
        let observer = self.observer().await?;
        let vector = self.embed_one(prepared.summary.clone()).await?;
        let classification = observer.classify(&prepared, interaction.role, &vector);
        if classification.verdict.ignore.is_some() {
            return Ok(Observation {
                summary: prepared.summary,
                classification,
                candidate: None,
                written: None,
            });
        }
        let candidate = candidate_body(&interaction, &prepared, &classification, now);
        let written = self.write_embedded(grant, &candidate, vector, false).await;
        Ok(Observation {
            summary: prepared.summary,
            classification,
            candidate: Some(candidate),
            written: Some(written),
        })
    }

    /// The cached observer for this engine's model, built on first use.
    async fn observer(&self) -> Result<Arc<Observer>, Problem> {
        let embedder = self.embedder();
        if let Some(found) = Observer::cached(embedder.model_id()) {
            return Ok(found);
        }
        tokio::task::spawn_blocking(move || Observer::shared(embedder.as_ref()))
            .await
            .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?
            .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))
    }
}
