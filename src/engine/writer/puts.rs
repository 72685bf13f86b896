//! Writes: the group commit of concurrent puts. A batch is checked serially against the
//! stored state and the batch so far (idempotent retries, id reuse, supersession), its
//! accepted records are appended with one fsync, applied, audited, and only then answered.
//!
//! Invariants: a put is answered `Stored` only after its record's fsync and its audit
//! entry's; an idempotent retry (same id, same content as the writer's grant sees the stored
//! event, [`crate::read::Visible::repeats`]) is answered with the original event
//! and audited as a `write` with `"replayed": true`, and never logged twice; a deleted
//! event's id is never reused; a correction may only supersede active events of its grant,
//! each at most once, and never itself.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::json;
use tokio::sync::oneshot;

use super::{apply_put, Conflict, Writer, WriterError};
use crate::audit::{AuditAction, AuditEntry, Keyed};
use crate::auth::TenantGrant;
use crate::engine::logged::put_entry;
use crate::model::{Decision, EventInput, EventStatus, StoredEvent, Timestamp};
use crate::read::{Lookup, Visible};
use crate::store::record::{encode, PutRecord, Record};

/// A write the handler has validated, decided and embedded.
#[derive(Debug, Clone)]
pub struct PendingPut {
    /// The writer's grant (supersession targets must be inside it).
    pub grant: TenantGrant,
    /// Tenant from the grant.
    pub tenant: String,
    /// Writing key.
    pub key_id: String,
    /// Validated input.
    pub input: EventInput,
    /// Hash of the input.
    pub input_hash: String,
    /// Allow or review (denials never reach the writer).
    pub decision: Decision,
    /// Policy version that decided.
    pub policy_version: String,
    /// The summary's embedding.
    pub vector: Vec<f32>,
    /// The model that made `vector`: a put whose model is no longer the store's (a
    /// re-embedding switched models after it was embedded) is answered
    /// [`PutReply::ModelChanged`], and embedded again.
    pub model: Arc<str>,
}

/// What the writer answers for one put.
#[derive(Debug)]
pub enum PutReply {
    /// Stored now.
    Stored(Box<StoredEvent>, Decision),
    /// An idempotent retry (same id and content as an earlier write): the original result.
    Retried(Box<StoredEvent>, Decision),
    /// A supersedes id does not exist in the tenant.
    NotFound(String),
    /// Conflicting id reuse, already-superseded target or a cycle.
    Conflict(Conflict),
    /// The log could not be written; nothing was acknowledged.
    Unavailable(WriterError),
    /// The vector was made by another model than the store's (it switched meanwhile):
    /// nothing was stored; embed again with the serving model.
    ModelChanged,
}

/// Decisions taken for one batch before the fsync.
struct BatchPlan {
    accepted: Vec<(PutRecord, oneshot::Sender<PutReply>)>,
    new_ids: HashMap<(String, String), (Decision, StoredEvent)>,
    superseded: HashSet<(String, String)>,
    next_doc: u32,
}

impl Writer {
    /// Checks a batch of puts, logs the accepted ones with one fsync, applies and audits
    /// them, then answers every put of the batch (refused ones at once, during the checks).
    pub(super) fn write_puts(&mut self, puts: Vec<(Box<PendingPut>, oneshot::Sender<PutReply>)>) {
        if puts.is_empty() {
            return;
        }
        let plan = self.plan(puts);
        if plan.accepted.is_empty() {
            return;
        }
        let payloads: Vec<Vec<u8>> = plan
            .accepted
            .iter()
            .map(|(put, _)| encode(&Record::Put(put.clone())))
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        match self.log.append_batch(&refs) {
            Ok(seqs) => self.apply_batch(plan, &seqs),
            Err(e) => {
                tracing::error!(error = %e, "log append failed; batch not acknowledged");
                let e = Arc::new(e);
                for (_, reply) in plan.accepted {
                    let _ = reply.send(PutReply::Unavailable(WriterError::Log(Arc::clone(&e))));
                }
            }
        }
    }

    /// Applies a durable batch at `seqs` and answers it, once its audit entries are durable.
    fn apply_batch(&mut self, plan: BatchPlan, seqs: &[u64]) {
        let mut replies = Vec::with_capacity(plan.accepted.len());
        for ((put, reply), seq) in plan.accepted.into_iter().zip(seqs) {
            let event = put.event.clone();
            let decision = put.decision.clone();
            let entry = put_entry(*seq, &put, &self.shared.keyed);
            self.audit.record(entry);
            if let Err(e) = apply_put(&self.shared, *seq, put, true) {
                tracing::error!(error = %e, "index update failed after a durable write");
            }
            self.unsaved_hnsw += 1;
            replies.push((reply, PutReply::Stored(Box::new(event), decision)));
        }
        // No reply before the batch's audit entries are as durable as its events.
        self.flush_audit();
        for (reply, answer) in replies {
            let _ = reply.send(answer);
        }
    }

    /// Serial checks against stored state plus the batch so far.
    fn plan(&mut self, puts: Vec<(Box<PendingPut>, oneshot::Sender<PutReply>)>) -> BatchPlan {
        let mut plan = BatchPlan {
            accepted: Vec::new(),
            new_ids: HashMap::new(),
            superseded: HashSet::new(),
            next_doc: self.shared.table.read().next_doc(),
        };
        let recorded_at = Timestamp::now();
        for (pending, reply) in puts {
            match self.check(&pending, &plan, recorded_at) {
                Ok(record) => accept(&mut plan, &pending, record, reply),
                Err(answer) => {
                    if let PutReply::Retried(event, _) = &answer {
                        let entry = retry_audit(&pending, event, &self.shared.keyed);
                        self.audit.record(entry);
                    }
                    let _ = reply.send(answer);
                }
            }
        }
        plan
    }

    fn check(
        &self,
        p: &PendingPut,
        plan: &BatchPlan,
        recorded_at: Timestamp,
    ) -> Result<PutRecord, PutReply> {
        let model = self.shared.vectors.load().model().map(str::to_string);
        if model.as_deref() != Some(&*p.model) {
            return Err(PutReply::ModelChanged);
        }
        let event_id = match &p.input.event_id {
            Some(id) => {
                self.check_idempotent(p, id, plan)?;
                id.clone()
            }
            // A generated id follows the chosen ids' rule too: an id without the namespace
            // mark always names an event every key that may choose plain ids can see.
            None => crate::read::stored_id(
                &p.grant,
                &self.shared.keyed,
                &uuid::Uuid::now_v7().to_string(),
                p.input.privacy_class,
            ),
        };
        self.check_supersedes(p, &event_id, plan)?;
        let status = match p.decision {
            Decision::Review { .. } => EventStatus::PendingReview,
            Decision::Allow { .. } | Decision::Deny { .. } => EventStatus::Active,
        };
        let event = StoredEvent::from_input(
            p.input.clone(),
            event_id,
            &p.tenant,
            recorded_at,
            &p.policy_version,
            status,
        );
        Ok(PutRecord {
            doc: plan.next_doc,
            event,
            input_hash: p.input_hash.clone(),
            key_id: p.key_id.clone(),
            decision: p.decision.clone(),
            model,
            vector: p.vector.clone(),
        })
    }

    fn check_idempotent(&self, p: &PendingPut, id: &str, plan: &BatchPlan) -> Result<(), PutReply> {
        let key = (p.tenant.clone(), id.to_string());
        if let Some((decision, event)) = plan.new_ids.get(&key) {
            return Err(retry_or_conflict(
                p.input.same_content(event),
                event.clone(),
                decision.clone(),
            ));
        }
        let table = self.shared.table.read();
        match table.lookup(&p.tenant, id) {
            Lookup::Live(entry) => {
                let view = Visible::new(&p.grant, &table, &self.shared.keyed, Timestamp::now());
                Err(retry_or_conflict(
                    view.repeats(&p.input, &entry.event),
                    StoredEvent::clone(&entry.event),
                    entry.decision.clone(),
                ))
            }
            Lookup::Deleted(_) => Err(PutReply::Conflict(Conflict::Deleted(id.to_string()))),
            Lookup::Missing => Ok(()),
        }
    }

    fn check_supersedes(
        &self,
        p: &PendingPut,
        new_id: &str,
        plan: &BatchPlan,
    ) -> Result<(), PutReply> {
        let table = self.shared.table.read();
        let view = Visible::new(&p.grant, &table, &self.shared.keyed, Timestamp::now());
        for old in &p.input.supersedes_event_ids {
            if old == new_id {
                return Err(PutReply::Conflict(Conflict::SelfSupersession(
                    new_id.to_string(),
                )));
            }
            let key = (p.tenant.clone(), old.clone());
            let status = match plan.new_ids.get(&key) {
                Some((_, e)) => e.status,
                None => match view.live(old) {
                    Some(entry) if entry.event.event_id == *old => {
                        // The status as the writer sees it: a supersession by a correction
                        // outside its grant does not show (and is still a conflict below).
                        view.present(&entry.event).status
                    }
                    _ => return Err(PutReply::NotFound(old.clone())),
                },
            };
            if plan.superseded.contains(&key) || status == EventStatus::Superseded {
                return Err(PutReply::Conflict(Conflict::AlreadySuperseded(old.clone())));
            }
            if status == EventStatus::PendingReview {
                return Err(PutReply::Conflict(Conflict::TargetPending(old.clone())));
            }
        }
        Ok(())
    }
}

fn accept(
    plan: &mut BatchPlan,
    pending: &PendingPut,
    record: PutRecord,
    reply: oneshot::Sender<PutReply>,
) {
    let key = (pending.tenant.clone(), record.event.event_id.clone());
    if matches!(record.decision, Decision::Allow { .. }) {
        for old in &record.event.supersedes_event_ids {
            plan.superseded
                .insert((pending.tenant.clone(), old.clone()));
        }
    }
    let value = (record.decision.clone(), record.event.clone());
    plan.new_ids.insert(key, value);
    plan.next_doc += 1;
    plan.accepted.push((record, reply));
}

/// The entry of an idempotent retry: a `write` marked `replayed` (the trail's name for it).
fn retry_audit(p: &PendingPut, event: &StoredEvent, keyed: &Keyed) -> AuditEntry {
    let detail =
        json!({"replayed": true, "contentHash": keyed.content_hash(&p.tenant, &event.summary)});
    AuditEntry::new(
        &p.tenant,
        &p.key_id,
        AuditAction::Write,
        vec![event.event_id.clone()],
        detail,
    )
}

/// The original result when the content is the same (an idempotent retry), else a conflict.
fn retry_or_conflict(same: bool, event: StoredEvent, decision: Decision) -> PutReply {
    if same {
        PutReply::Retried(Box::new(event), decision)
    } else {
        PutReply::Conflict(Conflict::Exists(event.event_id))
    }
}
