//! The single writer: one OS thread owns the event log (through [`EventLog`]) and the audit
//! trail's appender, batches concurrent writes into one fsync (group commit), applies them
//! to the table and indexes, then answers the waiting requests. Deletions, erasures, the
//! expiry sweep, compaction, reviews and policy re-evaluation run here too, and so does the
//! catch-up that rebuilds the read model from the log when the engine opens.
//!
//! It lives under `engine/` rather than at `src/writer/`: it changes the state the engine
//! shares with its readers ([`Shared`]) and is reached only through the engine's handle, so
//! it is the engine's write half, not a service other modules could call.
//!
//! # Vocabulary
//!
//! "Replay" used to name three different things; each has its own word now:
//! - **apply** ([`apply`]): one logged record changes the read model (table, vectors,
//!   indexes), with the same functions for a live write and at open;
//! - **catch-up** ([`catch_up`]): at open, the whole log is read and applied, and each index
//!   is given what it lacks;
//! - **re-evaluation** ([`reevaluate`]): stored events are decided again under a candidate
//!   policy (the HTTP API keeps its older name, `POST /v1/admin/policy/replay`);
//! - **idempotent retry** ([`puts`]): a write repeating an earlier one (same id, same
//!   content) gets the original result (its audit detail keeps the wire name `replayed`).
//!
//! # Invariants
//!
//! - a reply of success is sent only after the fsync of the log records it depends on and of
//!   the audit entries its batch produced: the audit appender is flushed before any reply of
//!   a batch (`answer`, `apply_batch`); entries of reads, which the engine queues after it
//!   answered, become durable with the next batch;
//! - checks that depend on stored state (idempotency, supersession, deletion) run here,
//!   serially, so they cannot race;
//! - the scope index is committed (and the fresh-doc watermark advanced) at most every
//!   `refresh_interval`, or at once for a `wait_for` request;
//! - the event log is reached only through [`EventLog`] and the audit log only through
//!   [`AuditAppender`]; failures are typed ([`WriterError`]) and the engine turns them into
//!   its answers.
//!
//! # Files
//!
//! This file: the thread's loop and batching. [`commands`]: what the engine sends.
//! [`puts`]: the group commit of writes. [`apply`]: a logged record into the read model.
//! [`catch_up`]: the log applied at open. [`lifecycle`]: deletion, erasure, expiry sweep.
//! [`compaction`]: the physical purge. [`backup`]: an online backup's barrier. [`moving`]: a
//! tenant frozen, read out and evicted when it moves to a shard of its own. [`review`]:
//! review decisions. [`reevaluate`]: policy re-evaluation. [`scope_sync`]: scope-index
//! commits and repairs. [`error`]: failures.
//!
//! Dependencies point one way. The files here use each other only through the names this
//! file brings in (never `super::sibling::item`), along commands → {puts, review, backup,
//! moving → compaction, reevaluate → lifecycle} → apply → scope_sync, all of them → error;
//! each may use [`Writer`] and the engine's leaf modules (`shared`, `logged`, `partitions`,
//! `scope_health`), never the engine's handle (`engine/mod.rs`), which is the only module
//! that uses this one besides start-up (`engine/open.rs`) and the handle's tenant moves
//! (`engine/moving.rs`).

mod apply;
mod backup;
mod catch_up;
mod commands;
mod compaction;
mod error;
mod follow;
mod lifecycle;
mod moving;
mod puts;
mod reevaluate;
mod review;
mod scope_sync;

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::audit::AuditAppender;
use crate::engine::shared::Shared;
use crate::store::record::DeleteReason;
use crate::store::EventLog;

use apply::{apply_delete, apply_put, apply_requeue, apply_review, apply_tombstone};
pub use backup::Barrier;
pub(crate) use catch_up::catch_up;
pub use commands::{Command, Fill, WriterConfig, SWITCH_TAIL};
use compaction::slot_record;
pub use compaction::{CompactReport, Switch};
pub use error::{Conflict, Refusal, ReviewFailure, WriterError};
pub use lifecycle::{DeleteReply, ErasureReceipt, Kept, Receipt};
pub(crate) use moving::tenant_records;
pub use puts::{PendingPut, PutReply};
pub use reevaluate::{ReevaluationReport, Verdict};
pub use review::ReviewOutcome;
pub(crate) use scope_sync::table_fingerprint;
use scope_sync::{index_delete, index_put};

/// The writer thread's state.
pub struct Writer {
    shared: Arc<Shared>,
    log: Box<dyn EventLog>,
    audit: AuditAppender,
    config: WriterConfig,
    last_commit: Instant,
    last_sweep: Instant,
    unsaved_hnsw: usize,
    /// A standby: it applies what the log gains and appends nothing until promoted.
    following: bool,
    /// Tenants being copied elsewhere: every change to them is refused ([`moving`]).
    frozen: std::collections::HashSet<String>,
    /// Tenants evicted from this log: compaction never writes their records again.
    evicted: std::collections::HashSet<String>,
    /// The next compaction must rewrite the log (an eviction happened).
    rotate_evicted: bool,
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
    pub fn new(
        shared: Arc<Shared>,
        log: Box<dyn EventLog>,
        audit: AuditAppender,
        config: WriterConfig,
    ) -> Self {
        Writer {
            shared,
            log,
            audit,
            config,
            last_commit: Instant::now(),
            last_sweep: Instant::now(),
            unsaved_hnsw: 0,
            following: false,
            frozen: Default::default(),
            evicted: Default::default(),
            rotate_evicted: false,
        }
    }

    /// A writer that starts as a standby ([`Command::Follow`], [`Command::Promote`]).
    pub fn following(mut self) -> Self {
        self.following = true;
        self
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
                other @ (Command::Follow(_) | Command::Promote(_)) => batch.others.push(other),
                other @ (Command::Delete { .. }
                | Command::Erase { .. }
                | Command::Compact { .. }
                | Command::Review { .. }
                | Command::Reevaluate { .. }
                | Command::Freeze { .. }
                | Command::Thaw { .. }
                | Command::Evict { .. }
                | Command::SwitchModel { .. }
                | Command::Backup(_)) => batch.others.push(other),
            }
            if batch.shutdown.is_none() && batch.puts.len() < self.config.max_batch {
                next = rx.try_recv().ok();
            }
        }
        batch
    }

    /// Drains a batch of commands and processes them; false when shut down.
    fn handle_batch(&mut self, first: Command, rx: &Receiver<Command>) -> bool {
        let mut batch = self.collect(first, rx);
        if !self.frozen.is_empty() {
            batch.puts.retain_mut(|(put, reply)| {
                let tenant = &put.tenant;
                if !self.frozen.contains(tenant.as_str()) {
                    return true;
                }
                let (dead, _) = oneshot::channel();
                let reply = std::mem::replace(reply, dead);
                let _ = reply.send(PutReply::Unavailable(WriterError::Moving(tenant.clone())));
                false
            });
        }
        self.write_puts(batch.puts);
        for cmd in batch.others {
            self.handle_other(cmd);
        }
        self.maintenance();
        let refresh_due = self.last_commit.elapsed() >= self.config.refresh_interval;
        if !batch.refreshes.is_empty() || refresh_due {
            self.commit_scope();
        }
        if !self.following {
            self.flush_audit();
        }
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
        let Some(cmd) = self.refuse_frozen(cmd) else {
            return;
        };
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
            Command::Reevaluate {
                policy,
                dry_run,
                key_id,
                reply,
            } => {
                let r = self.reevaluate(&policy, dry_run, &key_id);
                self.answer(reply, r);
            }
            Command::Follow(reply) => {
                let _ = reply.send(self.follow().map_err(|e| format!("{e:#}")));
            }
            Command::Promote(reply) => {
                let _ = reply.send(self.promote().map_err(|e| format!("{e:#}")));
            }
            Command::Freeze { tenant, reply } => {
                let next = self.freeze(tenant);
                self.answer(reply, next);
            }
            Command::Thaw { tenant, reply } => {
                self.thaw(&tenant);
                let _ = reply.send(());
            }
            Command::Evict {
                tenant,
                key_id,
                reply,
            } => {
                let r = self.evict(&tenant, &key_id);
                self.answer(reply, r);
            }
            Command::Backup(reply) => {
                let _ = reply.send(self.backup_barrier());
            }
            Command::SwitchModel {
                next,
                serving,
                epoch,
                fill,
                reply,
            } => {
                let r = self.switch_model(next, serving, epoch, fill);
                self.answer(reply, r);
            }
            Command::Put(..) | Command::Audit(_) | Command::Refresh(_) | Command::Shutdown(_) => {}
        }
    }

    /// Answers a change to a frozen tenant with [`WriterError::Moving`] (`None`), or hands
    /// the command back.
    fn refuse_frozen(&mut self, cmd: Command) -> Option<Command> {
        let moving = |t: &str| WriterError::Moving(t.to_string());
        match cmd {
            Command::Delete { tenant, reply, .. } if self.refuses(&tenant) => {
                let _ = reply.send(DeleteReply::Unavailable(moving(&tenant)));
                None
            }
            Command::Erase { tenant, reply, .. } if self.refuses(&tenant) => {
                let _ = reply.send(Err(moving(&tenant)));
                None
            }
            Command::Review { grant, reply, .. } if self.refuses(grant.tenant()) => {
                let _ = reply.send(Err(ReviewFailure::Failed(moving(grant.tenant()))));
                None
            }
            other => Some(other),
        }
    }

    /// Answers a command once every audit entry it produced is durable.
    fn answer<T>(&mut self, reply: oneshot::Sender<T>, value: T) {
        self.flush_audit();
        let _ = reply.send(value);
    }

    fn idle(&mut self) {
        self.maintenance();
        if self.following {
            // A standby appends nothing: no sweeps, no audit of its own.
            self.commit_scope();
            return;
        }
        self.commit_scope();
        self.flush_audit();
        if self.unsaved_hnsw >= self.config.hnsw_save_every {
            self.save_hnsw();
        }
    }

    /// Saves the HNSW graph with the log's last sequence (the snapshot's witness).
    fn save_hnsw(&mut self) {
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

    /// Appends queued audit entries durably; on failure they stay queued for the next try.
    fn flush_audit(&mut self) {
        if let Err(e) = self.audit.flush() {
            tracing::error!(error = %e, "audit append failed; entries kept for retry");
        }
    }
}
