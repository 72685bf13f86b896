//! Vector scoring layer of the scope-first retrieval path.
//!
//! A tantivy query first yields the in-scope candidate ids; this module scores
//! them against a query embedding:
//!
//! * candidate sets are scored **exactly** ([`exact_scores`] + [`top_k`]), in
//!   parallel with rayon, straight from the [`VectorStore`];
//! * large sets can first be bounded from the vectors' 8-bit codes
//!   ([`code_bounds`], [`QueryCode`]), so the caller rescores only what could rank;
//! * with approximate recall on, large sets can go through an [`HnswIndex`]
//!   (hnsw_rs) whose search is restricted to the candidates by an [`IdSet`];
//! * with partitioned recall on, broad scopes look only at the members of the lists of a
//!   [`Partition`] (k-means centroids, members grouped by tenant) nearest the query.
//!
//! # Invariants
//!
//! * Internal ids are dense `u32`s assigned `0, 1, 2, …` by a single writer, in
//!   order, and never reused: the store is append-only ([`VectorError::OutOfOrder`]
//!   otherwise). Deletion and visibility are expressed by leaving ids out of the
//!   allow set; neither the store nor the HNSW graph ever forgets a vector.
//! * Every vector has the store's dimension (384 in production) and is
//!   L2-normalised by the caller, so the score of a pair is the cosine
//!   similarity, computed as a plain dot product. HNSW distances are
//!   `1 - dot`, converted back to the same cosine before they leave this module.
//! * Readers never observe a partially written vector: an id becomes visible
//!   (`len()` grows past it) only after its whole vector has been written.
//! * The exact path is the reference: HNSW results are approximations of
//!   `top_k(exact_scores(..))` and are tested against it; a code bound always
//!   contains the cosine [`exact_scores`] computes (property-tested).
//! * An HNSW snapshot on disk is only trusted after every file checksum listed
//!   in its manifest has been verified; anything else is reported as
//!   [`VectorError::Corrupt`] so the caller can rebuild from the log.

mod bitset;
pub mod calibrate;
mod exact;
mod hnsw;
mod partition;
mod quant;
mod store;

use std::path::PathBuf;

pub use bitset::IdSet;
pub use exact::{block_bounds, code_bounds, dot, exact_scores, top_k};
pub use hnsw::{FrozenGraph, HnswIndex, HnswParams};
pub use partition::Partition;
pub use quant::{CodeBlock, QueryCode};
pub use store::VectorStore;

/// Errors of the vector layer.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// An I/O operation on `path` failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// File or directory the operation was about.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// Persisted data at `path` failed verification; rebuild it from the log.
    #[error("corrupt vector snapshot at {path}: {reason}")]
    Corrupt {
        /// File or directory that failed verification.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// A vector had the wrong number of components.
    #[error("vector dimension mismatch: expected {expected}, got {got}")]
    Dim {
        /// Dimension of the store / index.
        expected: usize,
        /// Dimension of the offending vector.
        got: usize,
    },
    /// An append did not use the next dense id.
    #[error("out-of-order vector id: expected {expected}, got {got}")]
    OutOfOrder {
        /// The only id that may be appended next.
        expected: u32,
        /// The id that was offered.
        got: u32,
    },
    /// A vector contained a NaN or infinite component.
    #[error("vector {id} has a non-finite component")]
    NonFinite {
        /// Id of the offending vector.
        id: u32,
    },
    /// The store is full: no `u32` id is left.
    #[error("vector id space exhausted")]
    Full,
    /// hnsw_rs failed to write a snapshot.
    #[error("hnsw dump into {path} failed: {reason}")]
    Dump {
        /// Generation directory being written.
        path: PathBuf,
        /// Error reported by hnsw_rs.
        reason: String,
    },
}

impl VectorError {
    /// Builds an [`VectorError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds a [`VectorError::Corrupt`] for `path`.
    fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Checks that `v` has `dim` finite components.
fn check_vector(id: u32, v: &[f32], dim: usize) -> Result<(), VectorError> {
    if v.len() != dim {
        return Err(VectorError::Dim {
            expected: dim,
            got: v.len(),
        });
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(VectorError::NonFinite { id });
    }
    Ok(())
}
