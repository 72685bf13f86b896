//! A deterministic, model-free embedder for unit and property tests.
//!
//! Role: lets tests exercise indexing and retrieval without model files or
//! ONNX Runtime. It is not a semantic model: texts are similar only when they
//! share words or character trigrams.
//!
//! Invariants:
//! - the same text always yields the bit-identical vector, in every process and
//!   on every platform (a fixed FNV-1a hash, never `RandomState`);
//! - vectors have [`HASHING_DIM`] entries and unit L2 norm; a text with no
//!   word characters maps to one fixed unit vector;
//! - texts sharing more lowercase words / trigrams get higher cosine similarity.

use super::{l2_normalize, EmbedError, Embedder};

/// Model id reported by [`HashingEmbedder::new`].
pub const HASHING_MODEL_ID: &str = "hashing-test";

/// Dimension of [`HashingEmbedder::new`] (the default model's, so test vectors look alike).
pub const HASHING_DIM: usize = 384;

/// Weight of a whole-word feature.
const WORD_WEIGHT: f32 = 1.0;
/// Weight of a character-trigram feature (lets inflections like "email"/"emails" overlap).
const TRIGRAM_WEIGHT: f32 = 0.5;

/// Deterministic feature-hashing embedder for tests; see the module docs.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dim: usize,
    model_id: String,
    query_prefix: String,
    passage_prefix: String,
}

impl Default for HashingEmbedder {
    fn default() -> Self {
        Self::new()
    }
}

impl HashingEmbedder {
    /// The embedder of [`HASHING_DIM`] components, model id [`HASHING_MODEL_ID`].
    pub fn new() -> Self {
        Self {
            dim: HASHING_DIM,
            model_id: HASHING_MODEL_ID.into(),
            query_prefix: String::new(),
            passage_prefix: String::new(),
        }
    }

    /// Another model: `dim` components (at least 8), model id `hashing-test-<dim>`.
    pub fn with_dim(dim: usize) -> Self {
        Self {
            dim: dim.max(8),
            model_id: format!("{HASHING_MODEL_ID}-{}", dim.max(8)),
            ..Self::new()
        }
    }

    /// The same model under the prefixes a manifest may give queries and passages.
    pub fn with_prefixes(mut self, query: &str, passage: &str) -> Self {
        self.query_prefix = query.into();
        self.passage_prefix = passage.into();
        self
    }

    /// Embeds one text; infallible apart from the (unreachable) zero-norm case.
    fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut v = vec![0.0f32; self.dim];
        let lower = text.to_lowercase();
        let mut any = false;
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            any = true;
            add_feature(&mut v, b"w", word.as_bytes(), WORD_WEIGHT);
            let padded: Vec<char> = std::iter::once(' ')
                .chain(word.chars())
                .chain(std::iter::once(' '))
                .collect();
            for tri in padded.windows(3) {
                let s: String = tri.iter().collect();
                add_feature(&mut v, b"t", s.as_bytes(), TRIGRAM_WEIGHT);
            }
        }
        if !any {
            add_feature(&mut v, b"e", b"", 1.0);
        }
        l2_normalize(&mut v)?;
        Ok(v)
    }
}

/// Adds `weight` with a hash-derived sign to the hash-derived slot of `feature`.
fn add_feature(v: &mut [f32], kind: &[u8], feature: &[u8], weight: f32) {
    let h = fnv1a(kind, feature);
    // Lossless enough: the slot is the hash modulo a small dimension.
    let slot = (h % v.len() as u64) as usize;
    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
    v[slot] += sign * weight;
}

/// 64-bit FNV-1a over `kind`, a separator byte and `data`.
fn fnv1a(kind: &[u8], data: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    kind.iter()
        .chain(std::iter::once(&0xffu8))
        .chain(data)
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

impl Embedder for HashingEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        texts.iter().map(|t| self.embed_one(t)).collect()
    }

    fn query_prefix(&self) -> &str {
        &self.query_prefix
    }

    fn passage_prefix(&self) -> &str {
        &self.passage_prefix
    }
}

#[cfg(test)]
mod tests {
    use super::super::dot;
    use super::*;

    #[test]
    fn deterministic_and_normalised() {
        let e = HashingEmbedder::new();
        let texts = ["Hello world", "", "!!!", "Ünïcode wörds 123"];
        let a = e.embed(&texts).expect("embeds");
        let b = HashingEmbedder::new().embed(&texts).expect("embeds");
        assert_eq!(a, b);
        assert_eq!(a.len(), texts.len());
        for v in &a {
            assert_eq!(v.len(), HASHING_DIM);
            assert!((dot(v, v) - 1.0).abs() < 1e-5);
        }
        // Case and punctuation do not matter.
        let c = e.embed(&["hello, WORLD!"]).expect("embeds");
        assert!((dot(&a[0], &c[0]) - 1.0).abs() < 1e-5);
        assert_eq!(e.model_id(), HASHING_MODEL_ID);
        assert_eq!(e.dim(), HASHING_DIM);
    }

    #[test]
    fn stable_across_releases() {
        // Pin a value so an accidental change of hash or features is noticed.
        let v = HashingEmbedder::new().embed(&["stable"]).expect("embeds");
        let nonzero = v[0].iter().filter(|x| **x != 0.0).count();
        assert!((1..=8).contains(&nonzero), "{nonzero}");
        assert_eq!(fnv1a(b"w", b"stable"), 0xea0c_e0e7_7492_e0ec);
    }

    #[test]
    fn similar_texts_score_higher() {
        let e = HashingEmbedder::new();
        let v = e
            .embed(&[
                "the customer wants renewal notices by email",
                "customer prefers email renewal notices",
                "quarterly tax filing deadline moved to march",
            ])
            .expect("embeds");
        let related = dot(&v[0], &v[1]);
        let unrelated = dot(&v[0], &v[2]);
        assert!(related > 0.5, "{related}");
        assert!(related > unrelated + 0.3, "{related} vs {unrelated}");
    }

    #[test]
    fn order_is_preserved() {
        let e = HashingEmbedder::new();
        let texts = ["alpha", "beta gamma delta", "epsilon"];
        let all = e.embed(&texts).expect("embeds");
        for (t, v) in texts.iter().zip(&all) {
            assert_eq!(&e.embed(&[t]).expect("embeds")[0], v);
        }
    }
}
