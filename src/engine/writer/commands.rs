//! What the engine asks of the writer thread: [`Command`], one per kind of request, each
//! carrying the channel its answer goes back on, and the writer's tuning.
//!
//! Invariants: every command that changes stored state is answered only once its log record
//! and audit entries are durable (see [`super::Writer`]); `Audit` and `Refresh` change no
//! stored state; nothing but the writer thread receives these commands.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{
    Barrier, CompactReport, DeleteReply, ErasureReceipt, PendingPut, PutReply, ReevaluationReport,
    ReviewFailure, ReviewOutcome, Switch, WriterError,
};
use crate::audit::AuditEntry;
use crate::auth::TenantGrant;
use crate::engine::shared::Serving;
use crate::index::vector::VectorStore;

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
        reply: oneshot::Sender<Result<ErasureReceipt, WriterError>>,
    },
    /// Physically purge deleted content.
    Compact {
        /// Acting key.
        key_id: String,
        /// Reply.
        reply: oneshot::Sender<Result<CompactReport, WriterError>>,
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
        reply: oneshot::Sender<Result<ReviewOutcome, ReviewFailure>>,
    },
    /// Re-evaluate stored events under a candidate policy.
    Reevaluate {
        /// The candidate.
        policy: Box<crate::policy::WritePolicy>,
        /// Report only.
        dry_run: bool,
        /// Acting key.
        key_id: String,
        /// Reply.
        reply: oneshot::Sender<Result<ReevaluationReport, WriterError>>,
    },
    /// Record an audit entry produced outside the writer (reads, denials).
    Audit(Box<AuditEntry>),
    /// Make everything acknowledged so far searchable and every audit entry durable.
    Refresh(oneshot::Sender<()>),
    /// A standby's step: apply what the log gained since the last step (and the audit
    /// trail's new entries); answers the log's next sequence.
    Follow(oneshot::Sender<Result<u64, String>>),
    /// Make a standby the writer: follow to the end, audit the records the trail lacks,
    /// then accept writes.
    Promote(oneshot::Sender<Result<u64, String>>),
    /// Refuse every change to a tenant from now on (it is being copied elsewhere);
    /// answers the log's next sequence.
    Freeze {
        /// Tenant.
        tenant: String,
        /// Reply.
        reply: oneshot::Sender<u64>,
    },
    /// Accept changes to a frozen tenant again (its copy was abandoned).
    Thaw {
        /// Tenant.
        tenant: String,
        /// Reply.
        reply: oneshot::Sender<()>,
    },
    /// Drop a frozen tenant's events from the read model, then compact without them.
    Evict {
        /// Tenant.
        tenant: String,
        /// Acting key.
        key_id: String,
        /// Reply.
        reply: oneshot::Sender<Result<CompactReport, WriterError>>,
    },
    /// Switch to a re-embedding's vectors and model, if they cover every internal id given
    /// and no compaction ran since the re-embedding's `epoch` ([`crate::engine`]'s
    /// `reembed`): the log is rewritten with them, then they serve.
    SwitchModel {
        /// The new vectors, labelled with their model.
        next: Arc<VectorStore>,
        /// The model that made them, and its batching worker.
        serving: Arc<Serving>,
        /// The re-embedding's epoch.
        epoch: u64,
        /// Embeds the ids written since the vectors were made, when they are few.
        fill: Fill,
        /// Reply.
        reply: oneshot::Sender<Result<Switch, WriterError>>,
    },
    /// Take an online backup's barrier: the log and the audit trail as they stand.
    Backup(oneshot::Sender<Result<Barrier, WriterError>>),
    /// Flush indexes and stop.
    Shutdown(oneshot::Sender<()>),
}

/// Most ids a re-embedding may lack when it asks to switch: the writer embeds them itself
/// ([`Command::SwitchModel`]), holding writes for as long as that takes.
pub const SWITCH_TAIL: usize = 32;

/// Embeds a re-embedding's vectors of the ids from the store's length up to the given
/// one into it (the writer's part of a switch, [`Command::SwitchModel`]).
pub struct Fill(
    #[allow(clippy::type_complexity)]
    pub  Box<
        dyn FnOnce(&crate::engine::shared::Shared, &VectorStore, usize) -> Result<(), String>
            + Send,
    >,
);

impl std::fmt::Debug for Fill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fill")
    }
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
