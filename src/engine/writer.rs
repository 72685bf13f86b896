//! The single writer: one OS thread owns the event log and the audit log, batches concurrent
//! writes into one fsync (group commit), applies them to the table and indexes, then answers
//! the waiting requests. Deletions, erasures, expiry sweeps and compaction run here too.
//!
//! Invariants: a reply of success is sent only after the batch's fsync returned; checks that
//! depend on stored state (idempotency, supersession, deletion) run here, serially, so they
//! cannot race; the scope index is committed (and the fresh-doc watermark advanced) at most
//! every `refresh_interval`, or at once for a `wait_for` request; audit entries of a batch
//! are durable before the next batch starts.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::oneshot;

use super::lifecycle::{CompactReport, DeleteReply, ErasureReceipt};
use super::{apply_put, logged, Lookup, Shared};
use crate::audit::{AuditAction, AuditAppender, AuditEntry};
use crate::auth::TenantGrant;
use crate::model::{Decision, EventInput, EventStatus, StoredEvent, Timestamp};
use crate::store::log::Log;
use crate::store::record::{encode, DeleteReason, PutRecord, Record};

/// A write the handler has validated, decided and embedded.
#[derive(Debug)]
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
}

/// What the writer answers for one put.
#[derive(Debug)]
pub enum PutReply {
    /// Stored now.
    Stored(Box<StoredEvent>, Decision),
    /// Same id and content as an earlier write: the original result.
    Replayed(Box<StoredEvent>, Decision),
    /// A supersedes id does not exist in the tenant.
    NotFound(String),
    /// Conflicting id reuse, already-superseded target or a cycle.
    Conflict(String),
    /// The log could not be written; nothing was acknowledged.
    Unavailable(String),
}

/// Commands for the writer thread.
#[derive(Debug)]
pub enum Command {
    /// Store one event.
    Put(Box<PendingPut>, oneshot::Sender<PutReply>),
    /// Delete events of a tenant.
    Delete {
        /// The caller's grant (targets must be inside it).
        grant: TenantGrant,
        /// Tenant.
        tenant: String,
        /// Event ids.
        event_ids: Vec<String>,
        /// Acting key.
        key_id: String,
        /// Reply.
        reply: oneshot::Sender<DeleteReply>,
    },
    /// Erase an actor's deletable events.
    Erase {
        /// Tenant.
        tenant: String,
        /// Actor.
        actor_id: String,
        /// Acting key.
        key_id: String,
        /// Reply.
        reply: oneshot::Sender<Result<ErasureReceipt, String>>,
    },
    /// Physically purge deleted content.
    Compact {
        /// Acting key.
        key_id: String,
        /// Reply.
        reply: oneshot::Sender<Result<CompactReport, String>>,
    },
    /// Approve or reject a pending event.
    Review {
        /// The reviewer's grant.
        grant: TenantGrant,
        /// The event.
        event_id: String,
        /// Approve (true) or reject.
        approve: bool,
        /// Optional note.
        note: Option<String>,
        /// Reply.
        reply: oneshot::Sender<Result<super::ReviewOutcome, crate::error::Problem>>,
    },
    /// Re-decide stored events under a candidate policy.
    Replay {
        /// The candidate.
        policy: Box<crate::policy::WritePolicy>,
        /// Report only.
        dry_run: bool,
        /// Acting key.
        key_id: String,
        /// Reply.
        reply: oneshot::Sender<Result<super::ReplayReport, String>>,
    },
    /// Record an audit entry produced outside the writer (reads, denials).
    Audit(Box<AuditEntry>),
    /// Make everything acknowledged so far searchable and every audit entry durable.
    Refresh(oneshot::Sender<()>),
    /// Flush indexes and stop.
    Shutdown(oneshot::Sender<()>),
}

/// Writer tuning.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// Longest time a fresh event waits before the scope index commits.
    pub refresh_interval: Duration,
    /// Most puts in one group commit.
    pub max_batch: usize,
    /// Save an HNSW snapshot once this many inserts are unsaved and the writer is idle.
    pub hnsw_save_every: usize,
    /// How often expired events are deleted.
    pub sweep_interval: Duration,
}

/// The writer thread's state.
pub struct Writer {
    pub(super) shared: Arc<Shared>,
    pub(super) log: Log,
    pub(super) audit: AuditAppender,
    pub(super) config: WriterConfig,
    pub(super) last_commit: Instant,
    pub(super) last_sweep: Instant,
    pub(super) unsaved_hnsw: usize,
}

/// Decisions taken for one batch before the fsync.
struct BatchPlan {
    accepted: Vec<(PutRecord, oneshot::Sender<PutReply>)>,
    new_ids: HashMap<(String, String), (String, Decision, StoredEvent)>,
    superseded: HashSet<(String, String)>,
    next_doc: u32,
}

/// Commands sorted by kind for one batch.
#[derive(Default)]
struct Batch {
    puts: Vec<(Box<PendingPut>, oneshot::Sender<PutReply>)>,
    others: Vec<Command>,
    refreshes: Vec<oneshot::Sender<()>>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Writer {
    /// A writer over the opened event log and audit trail.
    pub fn new(shared: Arc<Shared>, log: Log, audit: AuditAppender, config: WriterConfig) -> Self {
        Writer {
            shared,
            log,
            audit,
            config,
            last_commit: Instant::now(),
            last_sweep: Instant::now(),
            unsaved_hnsw: 0,
        }
    }

    /// Runs until `Shutdown` or until every sender is gone.
    pub fn run(mut self, rx: &Receiver<Command>) {
        loop {
            match rx.recv_timeout(self.config.refresh_interval) {
                Ok(cmd) => {
                    if !self.handle_batch(cmd, rx) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.idle(),
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush();
                    self.shared.scope.close_writer();
                    return;
                }
            }
        }
    }

    fn collect(&mut self, first: Command, rx: &Receiver<Command>) -> Batch {
        let mut batch = Batch::default();
        let mut next = Some(first);
        while let Some(cmd) = next.take() {
            match cmd {
                Command::Put(p, reply) => batch.puts.push((p, reply)),
                Command::Audit(entry) => self.audit.record(*entry),
                Command::Refresh(reply) => batch.refreshes.push(reply),
                Command::Shutdown(reply) => batch.shutdown = Some(reply),
                other @ (Command::Delete { .. }
                | Command::Erase { .. }
                | Command::Compact { .. }
                | Command::Review { .. }
                | Command::Replay { .. }) => batch.others.push(other),
            }
            if batch.shutdown.is_none() && batch.puts.len() < self.config.max_batch {
                next = rx.try_recv().ok();
            }
        }
        batch
    }

    /// Drains a batch of commands and processes them; false when shut down.
    fn handle_batch(&mut self, first: Command, rx: &Receiver<Command>) -> bool {
        let batch = self.collect(first, rx);
        self.write_puts(batch.puts);
        for cmd in batch.others {
            self.handle_other(cmd);
        }
        self.maintenance();
        let refresh_due = self.last_commit.elapsed() >= self.config.refresh_interval;
        if !batch.refreshes.is_empty() || refresh_due {
            self.commit_scope();
        }
        self.flush_audit();
        for reply in batch.refreshes {
            let _ = reply.send(());
        }
        if let Some(reply) = batch.shutdown {
            self.flush();
            // Release the index directory now: readers may keep the shared state alive
            // after shutdown, but another process or engine must be able to open the index.
            self.shared.scope.close_writer();
            let _ = reply.send(());
            return false;
        }
        true
    }

    fn handle_other(&mut self, cmd: Command) {
        match cmd {
            Command::Delete {
                grant,
                tenant,
                event_ids,
                key_id,
                reply,
            } => {
                let r = self.delete(&grant, &tenant, &event_ids, &key_id, DeleteReason::Deleted);
                self.answer(reply, r);
            }
            Command::Erase {
                tenant,
                actor_id,
                key_id,
                reply,
            } => {
                let r = self.erase(&tenant, &actor_id, &key_id);
                self.answer(reply, r);
            }
            Command::Compact { key_id, reply } => {
                let r = self.compact(&key_id);
                self.answer(reply, r);
            }
            Command::Review {
                grant,
                event_id,
                approve,
                note,
                reply,
            } => {
                let r = self.review(&grant, &event_id, approve, note);
                self.answer(reply, r);
            }
            Command::Replay {
                policy,
                dry_run,
                key_id,
                reply,
            } => {
                let r = self.replay(&policy, dry_run, &key_id);
                self.answer(reply, r);
            }
            Command::Put(..) | Command::Audit(_) | Command::Refresh(_) | Command::Shutdown(_) => {}
        }
    }

    fn write_puts(&mut self, puts: Vec<(Box<PendingPut>, oneshot::Sender<PutReply>)>) {
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
                for (_, reply) in plan.accepted {
                    let _ = reply.send(PutReply::Unavailable(e.to_string()));
                }
            }
        }
    }

    fn apply_batch(&mut self, plan: BatchPlan, seqs: &[u64]) {
        let mut replies = Vec::with_capacity(plan.accepted.len());
        for ((put, reply), seq) in plan.accepted.into_iter().zip(seqs) {
            let event = put.event.clone();
            let decision = put.decision.clone();
            let entry = logged::put_entry(*seq, &put, &self.shared.keyed);
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

    /// Answers a command once every audit entry it produced is durable.
    fn answer<T>(&mut self, reply: oneshot::Sender<T>, value: T) {
        self.flush_audit();
        let _ = reply.send(value);
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
                    if let PutReply::Replayed(event, _) = &answer {
                        let entry = replay_audit(&pending, event, &self.shared.keyed);
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
            vector: p.vector.clone(),
        })
    }

    fn check_idempotent(&self, p: &PendingPut, id: &str, plan: &BatchPlan) -> Result<(), PutReply> {
        let key = (p.tenant.clone(), id.to_string());
        if let Some((hash, decision, event)) = plan.new_ids.get(&key) {
            return Err(replay_or_conflict(
                &p.input_hash,
                hash,
                event.clone(),
                decision.clone(),
            ));
        }
        let table = self.shared.table.read();
        match table.lookup(&p.tenant, id) {
            Lookup::Live(entry) => Err(replay_or_conflict(
                &p.input_hash,
                &entry.input_hash,
                entry.event.clone(),
                entry.decision.clone(),
            )),
            Lookup::Deleted(_) => Err(PutReply::Conflict(format!(
                "event {id} was deleted; its id cannot be reused"
            ))),
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
        let view = super::Visible::new(&p.grant, &table, &self.shared.keyed, Timestamp::now());
        for old in &p.input.supersedes_event_ids {
            if old == new_id {
                return Err(PutReply::Conflict(format!(
                    "event {new_id} cannot supersede itself"
                )));
            }
            let key = (p.tenant.clone(), old.clone());
            let status = match plan.new_ids.get(&key) {
                Some((_, _, e)) => e.status,
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
                return Err(PutReply::Conflict(format!(
                    "event {old} is already superseded"
                )));
            }
            if status == EventStatus::PendingReview {
                return Err(PutReply::Conflict(format!(
                    "event {old} is pending review and cannot be superseded"
                )));
            }
        }
        Ok(())
    }

    fn idle(&mut self) {
        self.maintenance();
        self.commit_scope();
        self.flush_audit();
        if self.unsaved_hnsw >= self.config.hnsw_save_every {
            self.save_hnsw();
        }
    }

    pub(super) fn save_hnsw(&mut self) {
        if !self.shared.hnsw_enabled {
            self.unsaved_hnsw = 0;
            return;
        }
        let last_seq = self.log.next_seq().saturating_sub(1);
        match self
            .shared
            .hnsw
            .load()
            .save(&self.shared.paths.hnsw, last_seq)
        {
            Ok(()) => self.unsaved_hnsw = 0,
            Err(e) => {
                tracing::warn!(error = %e, "hnsw snapshot failed; it will be rebuilt from the log if needed")
            }
        }
    }

    fn flush(&mut self) {
        self.commit_scope();
        self.flush_audit();
        if self.unsaved_hnsw > 0 {
            self.save_hnsw();
        }
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
    let value = (
        pending.input_hash.clone(),
        record.decision.clone(),
        record.event.clone(),
    );
    plan.new_ids.insert(key, value);
    plan.next_doc += 1;
    plan.accepted.push((record, reply));
}

fn replay_audit(p: &PendingPut, event: &StoredEvent, keyed: &crate::audit::Keyed) -> AuditEntry {
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

fn replay_or_conflict(
    new_hash: &str,
    old_hash: &str,
    event: StoredEvent,
    decision: Decision,
) -> PutReply {
    if new_hash == old_hash {
        PutReply::Replayed(Box::new(event), decision)
    } else {
        PutReply::Conflict(format!(
            "event {} already exists with different content",
            event.event_id
        ))
    }
}
