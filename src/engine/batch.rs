//! Batch writes (`POST /v1/events:batch`): many drafts of one tenant completed and written
//! together, each with its own result.
//!
//! Invariants: the batch's passages ([`Engine::passage_text`], and the summaries of items
//! to classify whose passage differs, [`super::draft::classified_texts`]) are embedded in
//! one model call and the privacy detectors and the classifier run once for the batch, all
//! on the CPU pool; an item's stored vector is its passage's and its type is classified
//! from its summary's; every item is then written through [`Engine::write_embedded`]
//! (policy, idempotency, durability, audit, exactly as a single write), all at once, so the
//! writer group-commits them; one item's failure never fails another; results come back in
//! input order. Unlike a single write, a batch item the policy denies was embedded (with
//! the others).

use std::sync::Arc;

use futures_util::future::join_all;

use super::draft::{classified, classified_texts, detect, split_vectors};
use super::{Engine, Error, WriteOutcome};
use crate::auth::TenantGrant;
use crate::model::validate::check_derived;
use crate::model::EventDraft;
use crate::observe::prepare;

impl Engine {
    /// Completes and writes every draft; one result per draft, in order.
    pub async fn write_drafts(
        &self,
        grant: &TenantGrant,
        drafts: Vec<EventDraft>,
        wait_for: bool,
    ) -> Result<Vec<Result<WriteOutcome, Error>>, Error> {
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        let summaries: Vec<String> = drafts.iter().map(|d| d.summary.clone()).collect();
        let metadata: Vec<_> = drafts.iter().map(|d| d.metadata.clone()).collect();
        let needs: Vec<bool> = drafts.iter().map(EventDraft::needs_event_type).collect();
        // Each draft's passage, and the summary beside it when a draft is classified and
        // its passage is not the summary: all in one model call.
        let model = self.serving_model();
        let texts: Vec<Vec<String>> = drafts
            .iter()
            .zip(&needs)
            .map(|(d, needs)| {
                let passage = self.passage_text(&d.actor_id, &d.summary);
                if *needs {
                    classified_texts(passage, &d.summary)
                } else {
                    vec![passage]
                }
            })
            .collect();
        let counts: Vec<usize> = texts.iter().map(Vec::len).collect();
        let mut flat = self
            .embed_many(texts.into_iter().flatten().collect())
            .await?
            .into_iter();
        let (vectors, vectors_for_types): (Vec<_>, Vec<_>) = counts
            .iter()
            .map(|&n| split_vectors(flat.by_ref().take(n).collect()))
            .collect::<Result<Vec<_>, Error>>()?
            .into_iter()
            .unzip();
        let has_resources: Vec<bool> = drafts
            .iter()
            .map(|d| d.resource_refs.as_ref().is_some_and(|r| !r.is_empty()))
            .collect();
        let observer = if needs.iter().any(|n| *n) {
            Some(self.observer().await?)
        } else {
            None
        };
        let max_bytes = self.config.limits.max_summary_bytes;
        let (detected, types) = self
            .cpu
            .run(move || {
                let detected: Vec<_> = summaries
                    .iter()
                    .zip(&metadata)
                    .map(|(s, m)| detect(s, m))
                    .collect();
                let types: Vec<_> = summaries
                    .iter()
                    .zip(&vectors_for_types)
                    .zip(needs.iter().zip(&has_resources))
                    .map(
                        |((summary, vector), (needs, has))| match (&observer, needs) {
                            (Some(o), true) => {
                                Some(classified(o, &prepare(summary, max_bytes), vector, *has))
                            }
                            _ => None,
                        },
                    )
                    .collect();
                (detected, types)
            })
            .await
            .map_err(Error::Internal)?;
        let writes = drafts
            .into_iter()
            .zip(vectors)
            .zip(detected.into_iter().zip(types))
            .map(|((draft, vector), (detected, event_type))| {
                let model = Arc::clone(&model);
                async move {
                    let (input, derived) = draft.complete(&self.facts(grant, detected, event_type));
                    check_derived(&input, &self.config.limits)?;
                    let mut outcome = self
                        .write_tagged(grant, input, vector, model, false)
                        .await?;
                    outcome.derived = derived;
                    Ok(outcome)
                }
            });
        let results = join_all(writes).await;
        if wait_for && results.iter().any(Result::is_ok) {
            self.refresh().await?;
        }
        Ok(results)
    }
}
