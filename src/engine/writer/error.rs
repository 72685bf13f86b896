//! What the writer can fail with, typed: [`WriterError`] for anything that stops a request
//! from being carried out durably, [`Conflict`] for a write or review the stored state
//! refuses, and [`ReviewFailure`] for a review, which may also be refused on its merits
//! ([`Refusal`]).
//!
//! Invariants: the writer never reports failures as strings; each variant displays exactly
//! the text the engine has always put after "the event log cannot accept writes: " in its
//! 503 `storage_unavailable` answer (the engine does that mapping, not the writer); a
//! failure reported here acknowledged nothing the request asked for.

use std::sync::Arc;

use crate::index::scope::ScopeIndexError;
use crate::index::vector::VectorError;
use crate::store::LogError;

/// Why the writer could not carry out a request durably.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// The event log refused an append or a rewrite (disk full, I/O error, a fence). Shared
    /// so that every request of a failed group commit gets the same error.
    #[error(transparent)]
    Log(Arc<LogError>),
    /// The scope index failed while compaction merged it.
    #[error(transparent)]
    Scope(#[from] ScopeIndexError),
    /// The vector store or HNSW graph refused a vector.
    #[error(transparent)]
    Vectors(#[from] VectorError),
    /// A logged vector was made by another model than the store's: vectors of two models
    /// are not comparable, so the store refuses to mix them.
    #[error(
        "the vector of internal id {doc} was made by model {found}, but this store's vectors \
         are {store}'s: start the server with {found}'s model files, or re-embed"
    )]
    ModelMismatch {
        /// The event's internal id.
        doc: u32,
        /// The model the record names.
        found: String,
        /// The store's model.
        store: String,
    },
    /// Compaction found a live event without its vector.
    #[error("vector {doc} missing")]
    MissingVector {
        /// The event's internal id.
        doc: u32,
    },
    /// An event a policy re-evaluation denied was gone when its deletion was logged (the
    /// text says "replay", the name the HTTP API gives the operation).
    #[error("event {id} vanished during replay")]
    Vanished {
        /// The event.
        id: String,
    },
    /// A standby could not follow its log, or be promoted.
    #[error("following the log: {0}")]
    Following(String),
    /// The tenant is being copied to a shard of its own (cluster mode): nothing of it may
    /// change here; the engine answers a retryable 503 `not_ready`.
    #[error("tenant {0} is moving to a shard of its own; retry shortly")]
    Moving(String),
    /// The audit trail could not be made durable (a backup's barrier).
    #[error("the audit trail cannot be written: {0}")]
    Audit(Arc<crate::audit::AuditError>),
}

impl From<LogError> for WriterError {
    fn from(e: LogError) -> Self {
        WriterError::Log(Arc::new(e))
    }
}

/// A request the stored state refuses (answered 409 `conflict`). Each variant displays the
/// exact detail the API has always sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// A client id already names an event with different content.
    #[error(
        "event {0} already exists with different content; give the new event another \
         eventId, or omit eventId and the server makes one"
    )]
    Exists(String),
    /// A client id names a deleted event; ids are never reused.
    #[error("event {0} was deleted; its id cannot be reused: give another eventId, or omit it")]
    Deleted(String),
    /// A correction names its own id among the events it supersedes.
    #[error("event {0} cannot supersede itself; give the correction another eventId, or omit it")]
    SelfSupersession(String),
    /// A correction targets an event another correction already superseded.
    #[error(
        "event {0} is already superseded; correct the event that superseded it (its \
         supersededBy) instead"
    )]
    AlreadySuperseded(String),
    /// A correction targets an event still waiting for review.
    #[error(
        "event {0} is pending review and cannot be superseded; correct it once a reviewer \
         has approved it"
    )]
    TargetPending(String),
    /// A review names an event that is not pending review.
    #[error("event {id} is {status}, not pending review")]
    NotPending {
        /// The event.
        id: String,
        /// Its status (`active`, `rejected`, ...).
        status: &'static str,
    },
    /// Approving a correction whose target is no longer active; the id is given only when
    /// the reviewer's grant may know the target.
    #[error("{} no longer active; the correction cannot be approved", target_phrase(.0.as_deref()))]
    TargetInactive(Option<String>),
}

fn target_phrase(id: Option<&str>) -> String {
    match id {
        Some(id) => format!("event {id} is"),
        None => "an event it corrects is".to_string(),
    }
}

/// A review refused on its merits: the request was well formed, and nothing was logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No such event in the reviewer's view.
    #[error("event {0} not found")]
    NotFound(String),
    /// The stored state refuses the decision.
    #[error(transparent)]
    Conflict(#[from] Conflict),
    /// The key lacks the event's approver role.
    #[error("missing role: {0}")]
    MissingRole(String),
    /// The key that wrote the event may not decide it.
    #[error("the key that wrote an event cannot approve or reject it")]
    SelfApproval,
}

/// Why a review decision was not recorded.
#[derive(Debug)]
pub enum ReviewFailure {
    /// The request was refused on its merits (unknown event, not pending, missing role,
    /// self-approval, a correction whose targets changed).
    Refused(Refusal),
    /// The decision could not be logged.
    Failed(WriterError),
}

impl From<Refusal> for ReviewFailure {
    fn from(r: Refusal) -> Self {
        ReviewFailure::Refused(r)
    }
}

impl From<WriterError> for ReviewFailure {
    fn from(e: WriterError) -> Self {
        ReviewFailure::Failed(e)
    }
}
