//! The write path of the engine's handle: check the actor, resolve namespaced ids, decide
//! under the write policy, answer an idempotent retry from the table, embed, and hand the
//! event to the writer thread.
//!
//! Invariants: the input is typed ([`EventInput`]): an edge parsed and validated it once
//! (`model::validate`), and checked any `tenantId` it carried against the key's; nothing
//! reaches the writer that the policy denies (a denial is audited as `deny`); the tenant
//! comes from the grant, never from the input; an idempotent retry (the same content as
//! the stored event, as the key sees it) found here is answered without embedding, and the
//! writer checks again, serially, for one racing its original; a deleted event's id is
//! never reused; an id as stored (`id~tag`, from an import line) is kept only when the key
//! knows that event, else it is read as the id its writer chose, so no key writes into
//! another key's namespace. [`Engine::decide`] and [`Engine::store`] are the two halves
//! bulk import uses to embed many decided writes in one model call.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::writer::{Command, Conflict, PendingPut, PutReply};
use super::{normalized, read_audit, writer_gone, Engine, Error};
use crate::audit::AuditAction;
use crate::auth::TenantGrant;
use crate::error::{FieldError, Invalid};
use crate::model::{Decision, EventInput, StoredEvent, Timestamp};
use crate::read::Lookup;

/// A write decided and checked against the table ([`Engine::decide`]), waiting for its
/// vector.
pub(super) struct Decided {
    grant: TenantGrant,
    pub(super) input: EventInput,
    decision: Decision,
    input_hash: String,
}

/// What [`Engine::decide`] found.
pub(super) enum Step {
    /// An idempotent retry, answered from the table.
    Answered(Box<WriteOutcome>),
    /// A new write, to be embedded and stored.
    Decided(Box<Decided>),
}

/// The result of an accepted write.
#[derive(Debug, Clone)]
pub struct WriteOutcome {
    /// The event as stored.
    pub event: StoredEvent,
    /// The decision that admitted it.
    pub decision: Decision,
    /// Whether this was an idempotent retry of an earlier write (answered with its result).
    pub retried: bool,
    /// The fields the server filled in or changed, and why (writes of an
    /// [`crate::model::EventDraft`]; empty otherwise).
    pub derived: Vec<crate::model::Derived>,
    /// Why the writing key will not see the stored event (its privacy class is above what
    /// the key may read), if it will not: reads, recalls and deletes by this key then treat
    /// it as absent.
    pub hidden_from_writer: Option<String>,
}

/// Why `grant` will not see `event`, if it will not.
fn hidden_from(grant: &TenantGrant, event: &StoredEvent) -> Option<String> {
    (event.privacy_class > grant.max_privacy_class()).then(|| {
        format!(
            "stored as {}, above what this key may read ({}): this key will not see it in \
             reads, recalls or deletions; a key with maxPrivacyClass {} will",
            event.privacy_class.as_str(),
            grant.max_privacy_class().as_str(),
            event.privacy_class.as_str()
        )
    })
}

/// The SHA-256 of the validated input, kept in its log record (idempotency compares
/// content, [`EventInput::same_content`], not this hash).
fn hash_input(input: &EventInput) -> String {
    let bytes = serde_json::to_vec(input).unwrap_or_default();
    hex::encode(Sha256::digest(bytes))
}

impl Engine {
    /// Decides, embeds and durably stores one validated event.
    pub async fn write(
        &self,
        grant: &TenantGrant,
        input: EventInput,
        wait_for: bool,
    ) -> Result<WriteOutcome, Error> {
        self.write_inner(grant, input, wait_for, None).await
    }

    /// [`Engine::write_embedded`] of a vector `model` made (embedded by this engine, which
    /// took the serving model before it prepared the text).
    pub(super) async fn write_tagged(
        &self,
        grant: &TenantGrant,
        input: EventInput,
        vector: Vec<f32>,
        model: Arc<str>,
        wait_for: bool,
    ) -> Result<WriteOutcome, Error> {
        self.write_inner(grant, input, wait_for, Some((vector, model)))
            .await
    }

    /// Like [`Engine::write`] with a precomputed vector of the event's passage text
    /// ([`Engine::passage_text`]; bulk loads, benchmarks).
    /// The vector must have the embedder's dimension; it is L2-normalised here.
    pub async fn write_embedded(
        &self,
        grant: &TenantGrant,
        input: EventInput,
        vector: Vec<f32>,
        wait_for: bool,
    ) -> Result<WriteOutcome, Error> {
        let model = self.serving_model();
        self.write_inner(grant, input, wait_for, Some((vector, model)))
            .await
    }

    async fn write_inner(
        &self,
        grant: &TenantGrant,
        input: EventInput,
        wait_for: bool,
        vector: Option<(Vec<f32>, Arc<str>)>,
    ) -> Result<WriteOutcome, Error> {
        let decided = match self.decide(grant, input)? {
            Step::Answered(outcome) => return Ok(*outcome),
            Step::Decided(decided) => decided,
        };
        let (vector, model) = match vector {
            Some((v, model)) => (normalized(v, self.embedder().dim())?, model),
            None => self.embed_passage(&decided.input).await?,
        };
        self.store(*decided, vector, model, wait_for).await
    }

    /// The vector of `input`'s passage and the model that made it.
    async fn embed_passage(&self, input: &EventInput) -> Result<(Vec<f32>, Arc<str>), Error> {
        let model = self.serving_model();
        let vector = self
            .embed_one(self.passage_text(&input.actor_id, &input.summary))
            .await?;
        Ok((vector, model))
    }

    /// Everything of a write up to its vector: the actor check, the stored id, the
    /// supersession targets as the grant finds them, the policy's decision (a denial is
    /// audited and answered here), and an idempotent retry answered from the table.
    pub(super) fn decide(&self, grant: &TenantGrant, mut input: EventInput) -> Result<Step, Error> {
        let now = Timestamp::now();
        if !grant.allows_actor(&input.actor_id) {
            return Err(Error::ActorNotAllowed(input.actor_id));
        }
        if let Some(chosen) = input.event_id.take() {
            input.event_id = Some(self.chosen_id(grant, chosen, input.privacy_class)?);
        }
        self.resolve_targets(grant, &mut input.supersedes_event_ids);
        let decision = self.config.policy.decide(&input, grant.tenant(), now);
        crate::telemetry::policy_decision(decision.outcome());
        if let Decision::Deny { .. } = &decision {
            let decision_json = serde_json::to_value(&decision).unwrap_or_default();
            let audit_detail = serde_json::json!({
                "decision": decision_json,
                "policyVersion": self.config.policy.version,
                "contentHash": self.shared.keyed.content_hash(grant.tenant(), &input.summary),
            });
            let ids = input.event_id.iter().cloned().collect();
            self.audit(read_audit(grant, AuditAction::Deny, ids, audit_detail));
            return Err(Error::Denied {
                policy_version: self.config.policy.version.clone(),
                decision,
            });
        }
        if let Some(mut done) = self.retry_without_embedding(grant, &input)? {
            done.hidden_from_writer = hidden_from(grant, &done.event);
            return Ok(Step::Answered(Box::new(done)));
        }
        Ok(Step::Decided(Box::new(Decided {
            grant: grant.clone(),
            input_hash: hash_input(&input),
            input,
            decision,
        })))
    }

    /// Hands a decided write and its unit vector to the writer and awaits its answer.
    pub(super) async fn store(
        &self,
        decided: Decided,
        vector: Vec<f32>,
        model: Arc<str>,
        wait_for: bool,
    ) -> Result<WriteOutcome, Error> {
        let Decided {
            grant,
            input,
            decision,
            input_hash,
        } = decided;
        let mut pending = PendingPut {
            tenant: grant.tenant().to_string(),
            key_id: grant.key_id().to_string(),
            grant: grant.clone(),
            input,
            input_hash,
            decision,
            policy_version: self.config.policy.version.clone(),
            vector,
            model,
        };
        // A re-embedding may switch models between the embedding and the writer: the
        // writer then refuses the vector, and the passage is embedded again with the new
        // model (a switch is rare; two in a row rarer still).
        let mut tries = 0;
        let mut outcome = loop {
            tries += 1;
            match self.send_put(pending.clone()).await {
                Err(Error::ModelChanged) if tries < 3 => {
                    let (vector, model) = self.embed_passage(&pending.input).await?;
                    pending.vector = vector;
                    pending.model = model;
                }
                other => break other?,
            }
        };
        outcome.hidden_from_writer = hidden_from(&grant, &outcome.event);
        if wait_for {
            self.refresh().await?;
        }
        Ok(outcome)
    }

    /// The id a write that chose `chosen` is stored under ([`crate::read::stored_id`]).
    /// A chosen id holding the namespace mark is an id as stored (a line of an export):
    /// kept when it names an event the grant knows (the write is then a retry of it, or a
    /// conflict), else read as the id its writer chose, the part before the mark, and
    /// stored as this key's write of that id would be; so no key creates an id in another
    /// key's namespace, and an export moved to another store keeps its ids as far as the
    /// importing key's namespace allows. In-process tools (import) keep every id as given.
    fn chosen_id(
        &self,
        grant: &TenantGrant,
        chosen: String,
        class: crate::model::PrivacyClass,
    ) -> Result<String, Error> {
        let keyed = &self.shared.keyed;
        let mark = crate::read::NAMESPACE_MARK;
        let Some((base, _)) = chosen.split_once(mark).filter(|_| !grant.is_internal()) else {
            return Ok(crate::read::stored_id(grant, keyed, &chosen, class));
        };
        if base.is_empty() {
            return Err(Invalid(vec![FieldError::new(
                "eventId",
                format!("must have an id before `{mark}` (it marks ids namespaced by key)"),
            )])
            .into());
        }
        if self.view(grant, &self.shared.table.read()).knows(&chosen) {
            return Ok(chosen);
        }
        Ok(crate::read::stored_id(grant, keyed, base, class))
    }

    /// Answers an idempotent retry of a stored write from the table, before any embedding
    /// (the writer checks again, serially, for a retry racing its original).
    fn retry_without_embedding(
        &self,
        grant: &TenantGrant,
        input: &EventInput,
    ) -> Result<Option<WriteOutcome>, Error> {
        let Some(id) = &input.event_id else {
            return Ok(None);
        };
        let table = self.shared.table.read();
        let entry = match table.lookup(grant.tenant(), id) {
            Lookup::Missing => return Ok(None),
            Lookup::Deleted(_) => return Err(Conflict::Deleted(id.clone()).into()),
            Lookup::Live(entry) => entry,
        };
        let view = self.view(grant, &table);
        if !view.repeats(input, &entry.event) {
            return Err(Conflict::Exists(id.clone()).into());
        }
        let detail = serde_json::json!({"replayed": true, "contentHash": self.shared.keyed.content_hash(grant.tenant(), &entry.event.summary)});
        self.audit(read_audit(
            grant,
            AuditAction::Write,
            vec![id.clone()],
            detail,
        ));
        Ok(Some(WriteOutcome {
            event: view.present(&entry.event),
            decision: entry.decision.clone(),
            retried: true,
            derived: Vec::new(),
            hidden_from_writer: None,
        }))
    }

    async fn send_put(&self, pending: PendingPut) -> Result<WriteOutcome, Error> {
        let grant = pending.grant.clone();
        let (tx, rx) = oneshot::channel();
        let _queued = crate::telemetry::QueueGuard::enter();
        self.tx
            .send(Command::Put(Box::new(pending), tx))
            .map_err(|_| writer_gone())?;
        match rx.await.map_err(|_| writer_gone())? {
            PutReply::Stored(event, decision) => Ok(WriteOutcome {
                event: *event,
                decision,
                retried: false,
                derived: Vec::new(),
                hidden_from_writer: None,
            }),
            PutReply::Retried(event, decision) => Ok(WriteOutcome {
                event: self.view(&grant, &self.shared.table.read()).present(&event),
                decision,
                retried: true,
                derived: Vec::new(),
                hidden_from_writer: None,
            }),
            PutReply::NotFound(id) => Err(Error::NotFound(id)),
            PutReply::Conflict(c) => Err(c.into()),
            PutReply::Unavailable(e) => Err(e.into()),
            PutReply::ModelChanged => Err(Error::ModelChanged),
        }
    }

    /// Replaces each id the grant finds under another stored id (a chosen id that was
    /// namespaced) with that id; an id as stored that it cannot find (another store's
    /// export) is looked up as the id its writer chose, as [`Engine::chosen_id`] stores it;
    /// ids it cannot find stay as given (and are answered 404).
    fn resolve_targets(&self, grant: &TenantGrant, ids: &mut [String]) {
        let table = self.shared.table.read();
        let view = self.view(grant, &table);
        for id in ids.iter_mut() {
            let found = view.live(id).or_else(|| {
                let (base, _) = id.split_once(crate::read::NAMESPACE_MARK)?;
                (!grant.is_internal() && !base.is_empty())
                    .then(|| view.live(base))
                    .flatten()
            });
            if let Some(e) = found {
                id.clone_from(&e.event.event_id);
            }
        }
    }
}
