//! What the writer can fail with, typed: [`WriterError`] for anything that stops a request
//! from being carried out durably, and [`ReviewFailure`] for a review, which may also be
//! refused on its merits.
//!
//! Invariants: the writer never reports failures as strings; each variant displays exactly
//! the text the engine has always put after "the event log cannot accept writes: " in its
//! 503 `storage_unavailable` answer (the engine does that mapping, not the writer); a
//! failure reported here acknowledged nothing the request asked for.

use std::sync::Arc;

use crate::error::Problem;
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
}

impl From<LogError> for WriterError {
    fn from(e: LogError) -> Self {
        WriterError::Log(Arc::new(e))
    }
}

/// Why a review decision was not recorded.
#[derive(Debug)]
pub enum ReviewFailure {
    /// The request was refused on its merits (unknown event, not pending, missing role,
    /// self-approval, a correction whose targets changed): the answer to send as is.
    Refused(Problem),
    /// The decision could not be logged.
    Failed(WriterError),
}

impl From<Problem> for ReviewFailure {
    fn from(p: Problem) -> Self {
        ReviewFailure::Refused(p)
    }
}

impl From<WriterError> for ReviewFailure {
    fn from(e: WriterError) -> Self {
        ReviewFailure::Failed(e)
    }
}
