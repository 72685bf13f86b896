//! What the engine's handle can fail with: one typed [`Error`], whatever the request.
//!
//! Invariants: the engine never speaks a wire format: only the edges (`wire`, used by the
//! HTTP API and MCP) turn an [`Error`] into a problem, with its stable code from
//! [`Error::code`]; each variant displays exactly the detail the API sends; a failure
//! acknowledged nothing the request asked for, except where a variant says otherwise.

use super::writer::{Conflict, Refusal, ReviewFailure, WriterError};
use crate::error::{ErrorCode, Invalid};
use crate::model::Decision;
use crate::retrieve::SearchError;

/// Why the engine did not carry out a request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input failed validation; every field error is listed.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A precomputed vector of the wrong dimension, not finite, or all zero.
    #[error("a precomputed vector must have {dim} finite components, not all zero")]
    BadVector {
        /// The embedder's dimension.
        dim: usize,
    },
    /// No such event in the caller's view (the same for another tenant's ids).
    #[error(
        "event {0} not found: no event with this id is visible to this key (recall and the \
         timeline give the ids it can see)"
    )]
    NotFound(String),
    /// The write policy refused the event; the denial was audited and nothing stored.
    #[error(
        "write policy {policy_version} denied the event: {}",
        denial(.decision)
    )]
    Denied {
        /// The policy's version.
        policy_version: String,
        /// The decision (a `deny`), sent to the client as is.
        decision: Decision,
    },
    /// The stored state refuses the request.
    #[error(transparent)]
    Conflict(#[from] Conflict),
    /// The key's actor limits exclude the actor the request names.
    #[error(
        "this key may not act for actor {0}: it is limited to its own actorIds; name one of \
         them, or use a key without an actor limit"
    )]
    ActorNotAllowed(String),
    /// An erasure asked by a key that may not read every privacy class.
    #[error(
        "erasure deletes every event of the actor, of every privacy class: it needs a key \
         whose maxPrivacyClass is sensitive"
    )]
    ErasureNeedsSensitive,
    /// The key lacks the role the request needs.
    #[error("missing role: {0}")]
    MissingRole(String),
    /// The key that wrote an event may not review it.
    #[error("the key that wrote an event cannot approve or reject it")]
    SelfApproval,
    /// The writer could not carry out the request durably (disk full, I/O error).
    #[error("the event log cannot accept writes: {0}")]
    Storage(#[source] WriterError),
    /// The tenant is moving to a shard of its own; nothing of it may change until it has.
    #[error("tenant {0} is moving to a shard of its own; retry shortly")]
    Moving(String),
    /// A re-embedding switched models while the request was embedded, again and again;
    /// nothing was stored, and a retry embeds with the new model.
    #[error("the embedding model changed while the request was embedded; retry shortly")]
    ModelChanged,
    /// The writer thread has stopped (the engine is shutting down).
    #[error("the writer has stopped")]
    WriterStopped,
    /// The scope index failed a search.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// An online backup could not be taken.
    #[error("the backup could not be taken: {0}")]
    Backup(#[source] super::backup::BackupError),
    /// The audit log could not be read (the cause is logged, not sent).
    #[error("the audit log could not be read")]
    AuditUnreadable,
    /// An unexpected failure (the embedder, a worker that panicked).
    #[error("{0}")]
    Internal(String),
}

/// The reason of a denial, and what would let the write through when the policy knows.
fn denial(decision: &Decision) -> String {
    let reason = match decision {
        Decision::Deny { reason } => reason.as_str(),
        Decision::Allow { reason } | Decision::Review { reason, .. } => reason.as_str(),
    };
    match crate::policy::remedy(reason) {
        Some(fix) => format!("{reason}; {fix}"),
        None => reason.to_string(),
    }
}

impl Error {
    /// The stable client-visible code (and so the HTTP status).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Invalid(_) | Error::BadVector { .. } => ErrorCode::ValidationFailed,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::Denied { .. } => ErrorCode::PolicyDenied,
            Error::Conflict(_) => ErrorCode::Conflict,
            Error::ActorNotAllowed(_) | Error::ErasureNeedsSensitive | Error::MissingRole(_) => {
                ErrorCode::Forbidden
            }
            Error::SelfApproval => ErrorCode::SelfApprovalForbidden,
            Error::Moving(_) | Error::ModelChanged => ErrorCode::NotReady,
            Error::Storage(_) | Error::WriterStopped => ErrorCode::StorageUnavailable,
            Error::Backup(super::backup::BackupError::Unsupported) => ErrorCode::Conflict,
            Error::Backup(_) => ErrorCode::StorageUnavailable,
            Error::Search(_) | Error::AuditUnreadable | Error::Internal(_) => ErrorCode::Internal,
        }
    }
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotFound(id) => Error::NotFound(id),
            Refusal::Conflict(c) => Error::Conflict(c),
            Refusal::MissingRole(role) => Error::MissingRole(role),
            Refusal::SelfApproval => Error::SelfApproval,
        }
    }
}

impl From<ReviewFailure> for Error {
    fn from(f: ReviewFailure) -> Self {
        match f {
            ReviewFailure::Refused(r) => r.into(),
            ReviewFailure::Failed(e) => e.into(),
        }
    }
}

impl From<WriterError> for Error {
    fn from(e: WriterError) -> Self {
        match e {
            WriterError::Moving(tenant) => Error::Moving(tenant),
            other => Error::Storage(other),
        }
    }
}
