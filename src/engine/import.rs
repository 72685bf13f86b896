//! Bulk import (`episodic import`, `POST /v1/import`): many typed events of one tenant,
//! each written through the ordinary write path, each with its own result.
//!
//! Invariants:
//! - every line is a write: actor check, stored id, write policy, idempotent retry,
//!   durability and audit exactly as [`Engine::write`]; nothing here decides anything else;
//! - a line is decided before anything is embedded, so a line the policy denies or one that
//!   repeats a stored event (`unchanged`) is never embedded; the others of a group are
//!   embedded in one model call on the CPU pool, unless they carry a usable vector of the
//!   model in use;
//! - order is kept where it matters: a line that corrects other events is decided and
//!   stored only after every earlier line is durable (its targets may be among them); the
//!   lines between corrections form a group, stored concurrently, so the writer
//!   group-commits them;
//! - one line's failure never fails another; results come back in line order.

use std::sync::Arc;

use futures_util::future::join_all;

use super::write::{Decided, Step};
use super::{normalized, Engine, Error, WriteOutcome};
use crate::auth::TenantGrant;
use crate::model::EventInput;

/// One line to import, parsed and validated by an edge.
#[derive(Debug, Clone)]
pub struct ImportLine {
    /// Its 1-based line number, for the results.
    pub line: usize,
    /// The event (its `eventId` may be an id as stored, see [`Engine::write`]'s id rule).
    pub input: EventInput,
    /// Its summary's embedding by the model in use, if the line carried one; reused
    /// instead of embedding again when it has the model's dimension and a norm.
    pub vector: Option<Vec<f32>>,
}

/// What became of one line.
#[derive(Debug)]
pub struct LineResult {
    /// Its line number.
    pub line: usize,
    /// The write's outcome (`retried` for a line that repeats a stored event).
    pub result: Result<WriteOutcome, Error>,
}

/// What an import batch did.
#[derive(Debug, Default)]
pub struct ImportedBatch {
    /// One result per line, in line order.
    pub results: Vec<LineResult>,
    /// Summaries embedded by the model.
    pub embedded: usize,
    /// Vectors reused from the lines.
    pub vectors_reused: usize,
}

/// A decided line waiting for its vector.
struct Waiting {
    line: usize,
    decided: Decided,
    vector: Option<Vec<f32>>,
}

impl Engine {
    /// Imports `lines` (one tenant's, the grant's) in order; see the module's invariants.
    /// Fails as a whole only when the model cannot embed (the lines of earlier groups are
    /// stored by then).
    pub async fn import(
        &self,
        grant: &TenantGrant,
        lines: Vec<ImportLine>,
    ) -> Result<ImportedBatch, Error> {
        let mut batch = ImportedBatch::default();
        let mut group = Vec::new();
        for line in lines {
            if line.input.supersedes_event_ids.is_empty() {
                group.push(line);
                continue;
            }
            // A correction is decided once everything before it is stored: its targets
            // may be among those lines.
            self.import_group(grant, std::mem::take(&mut group), &mut batch)
                .await?;
            self.import_group(grant, vec![line], &mut batch).await?;
        }
        self.import_group(grant, group, &mut batch).await?;
        batch.results.sort_by_key(|r| r.line);
        Ok(batch)
    }

    /// Decides every line of `group`, embeds those to be stored that need it in one model
    /// call, and stores them concurrently.
    async fn import_group(
        &self,
        grant: &TenantGrant,
        group: Vec<ImportLine>,
        batch: &mut ImportedBatch,
    ) -> Result<(), Error> {
        let model = self.serving_model();
        let dim = self.embedder().dim();
        let mut waiting = Vec::new();
        for ImportLine {
            line,
            input,
            vector,
        } in group
        {
            let result = match self.decide(grant, input) {
                Ok(Step::Decided(decided)) => {
                    waiting.push(Waiting {
                        line,
                        vector: vector.and_then(|v| normalized(v, dim).ok()),
                        decided: *decided,
                    });
                    continue;
                }
                Ok(Step::Answered(outcome)) => Ok(*outcome),
                Err(e) => Err(e),
            };
            batch.results.push(LineResult { line, result });
        }
        let texts: Vec<String> = waiting
            .iter()
            .filter(|w| w.vector.is_none())
            .map(|w| self.passage_text(&w.decided.input.actor_id, &w.decided.input.summary))
            .collect();
        batch.embedded += texts.len();
        batch.vectors_reused += waiting.len() - texts.len();
        if !texts.is_empty() {
            let mut vectors = self.embed_many(texts).await?.into_iter();
            for w in waiting.iter_mut().filter(|w| w.vector.is_none()) {
                w.vector = vectors.next();
            }
        }
        let stores = waiting.into_iter().map(|w| {
            let model = Arc::clone(&model);
            async move {
                let result = match w.vector {
                    Some(vector) => self.store(w.decided, vector, model, false).await,
                    None => Err(Error::Internal(
                        "the embedder returned too few vectors".into(),
                    )),
                };
                LineResult {
                    line: w.line,
                    result,
                }
            }
        });
        batch.results.extend(join_all(stores).await);
        Ok(())
    }
}
