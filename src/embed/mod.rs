//! Text embedding: turns text into fixed-size dense vectors for vector retrieval.
//!
//! Role: every piece of text that enters the vector index, and every query that
//! searches it, goes through an [`Embedder`]. Production uses [`FastEmbedder`]
//! (the ONNX model `models/manifest.json` describes, all-MiniLM-L6-v2 int8 by default,
//! run by ONNX Runtime loaded from `models/files/`); unit and property tests use the deterministic
//! [`HashingEmbedder`], which needs no model files. Which text of a stored event is
//! embedded, its summary alone or with its actor's label, is [`passage`]'s one rule.
//!
//! Invariants:
//! - every vector an [`Embedder`] returns has exactly [`Embedder::dim`] entries (the
//!   manifest's `dim`; no dimension is built in) and unit L2 norm, so a dot product is the
//!   cosine similarity;
//! - a query is embedded as [`Embedder::query_prefix`] + its text and a stored event as
//!   [`Embedder::passage_prefix`] + its passage ([`as_query`], [`as_passage`]);
//! - `embed(texts)` returns exactly one vector per input text, in input order,
//!   or an error — never a partial result;
//! - vectors from different [`Embedder::model_id`]s are not comparable: every stored
//!   vector records the model id that made it;
//! - model files are only used after their sha256 matches `models/manifest.json`
//!   ([`verify_model_dir`]); a missing or corrupt file is an error naming the file
//!   and the command that fetches it ([`FETCH_COMMAND`]).

pub mod coalesce;
mod fastembed;
mod hashing;
mod manifest;
pub mod passage;

pub use self::coalesce::{Coalescer, CoalescerStats};
pub use self::fastembed::{FastEmbedder, DEFAULT_BATCH_SIZE, FAST_MODEL_ID};
pub use self::hashing::{HashingEmbedder, HASHING_DIM, HASHING_MODEL_ID};
pub use self::manifest::{
    verify_model_dir, ManifestFile, ModelManifest, ModelSpec, Pooling, VerifiedFiles,
};
pub use self::passage::{actor_label, PassageText};

/// The command, relative to the repository root, that fetches the model files.
pub const FETCH_COMMAND: &str = "bash models/fetch.sh";

/// Why embedding, or loading an embedder, failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedError {
    /// A file listed in the model manifest is not on disk.
    #[error("model file missing: {path} (run `{fetch}` to fetch it)")]
    MissingFile {
        /// Path of the missing file.
        path: String,
        /// Command that fetches the model files.
        fetch: String,
    },
    /// A model file is on disk but its sha256 does not match the manifest.
    #[error("model file corrupt: {path}: expected sha256 {expected}, found {actual} (run `{fetch}` to fetch it again)")]
    CorruptFile {
        /// Path of the corrupt file.
        path: String,
        /// sha256 (hex) the manifest expects.
        expected: String,
        /// sha256 (hex) of the file on disk.
        actual: String,
        /// Command that fetches the model files.
        fetch: String,
    },
    /// The manifest is unreadable or malformed.
    #[error("model manifest invalid: {0}")]
    Manifest(String),
    /// ONNX Runtime, the tokenizer or the model failed.
    #[error("embedding runtime failed: {0}")]
    Runtime(String),
    /// The runtime returned a different number of vectors than texts given.
    #[error("embedder returned {got} vectors for {expected} texts")]
    Count {
        /// Number of texts given.
        expected: usize,
        /// Number of vectors returned.
        got: usize,
    },
}

/// Something that turns texts into L2-normalised vectors.
pub trait Embedder: Send + Sync {
    /// Stable identifier of the model, e.g. `"all-MiniLM-L6-v2-int8"` or `"hashing-test"`.
    fn model_id(&self) -> &str;
    /// Number of entries in every returned vector.
    fn dim(&self) -> usize;
    /// L2-normalised vectors, one per text, same order. Blocking CPU work: callers run it off async threads.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Prepended to a recall query before it is embedded (models trained with one).
    fn query_prefix(&self) -> &str {
        ""
    }
    /// Prepended to a stored event's passage before it is embedded.
    fn passage_prefix(&self) -> &str {
        ""
    }
}

/// The text `embedder` embeds for the recall query `text`.
pub fn as_query(embedder: &dyn Embedder, text: &str) -> String {
    format!("{}{text}", embedder.query_prefix())
}

/// The text `embedder` embeds for a stored event whose passage is `text`.
pub fn as_passage(embedder: &dyn Embedder, text: &str) -> String {
    format!("{}{text}", embedder.passage_prefix())
}

/// Scales `v` to unit L2 norm in place.
///
/// Fails if the norm is zero or not finite (such a vector cannot be normalised
/// and would poison every similarity computed with it).
fn l2_normalize(v: &mut [f32]) -> Result<(), EmbedError> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return Err(EmbedError::Runtime(format!(
            "cannot normalise vector with norm {norm}"
        )));
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Ok(())
}

/// Dot product of two vectors; the cosine similarity when both are normalised.
#[cfg(test)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Stands in for the model in offline maintenance (compaction, export), which never embeds;
/// any call to embed fails loudly rather than returning a made-up vector. The engine takes
/// the model and dimension of the store it opens ([`OFFLINE_MODEL_ID`]).
pub struct OfflineEmbedder;

/// Model id of [`OfflineEmbedder`]: an engine opened with it adopts its store's model.
pub const OFFLINE_MODEL_ID: &str = "offline";

impl Embedder for OfflineEmbedder {
    fn model_id(&self) -> &str {
        OFFLINE_MODEL_ID
    }
    fn dim(&self) -> usize {
        0
    }
    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Runtime(
            "offline maintenance does not embed".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_normalize_makes_unit_vectors_and_rejects_zero() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v).expect("non-zero vector normalises");
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        assert!(l2_normalize(&mut [0.0, 0.0]).is_err());
        assert!(l2_normalize(&mut [f32::NAN, 1.0]).is_err());
    }

    #[test]
    fn error_messages_name_file_and_fetch_command() {
        let e = EmbedError::MissingFile {
            path: "models/files/model.onnx".into(),
            fetch: FETCH_COMMAND.into(),
        };
        let s = e.to_string();
        assert!(s.contains("models/files/model.onnx") && s.contains("bash models/fetch.sh"));
    }
}
