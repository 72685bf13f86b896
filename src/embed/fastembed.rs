//! The production embedder: the ONNX model a manifest describes (by default all-MiniLM-L6-v2,
//! int8), run by ONNX Runtime via fastembed.
//!
//! Role: loads the verified model files from `<model dir>/files/` and embeds texts into
//! L2-normalised vectors of the manifest's dimension, pooled as it says ([`ModelSpec`]).
//!
//! Invariants:
//! - nothing is loaded before [`verify_model_dir`] has checked every file
//!   against `models/manifest.json`;
//! - ONNX Runtime is loaded from `models/files/libonnxruntime.so.1.24.4` and its
//!   environment created at most once per process (a `OnceLock`); later loads,
//!   from any directory, reuse that first library and environment;
//! - [`FastEmbedder::embed`] returns one unit vector per text, in input order,
//!   whatever the internal length-sorted batching; it may be called from many
//!   threads at once (runs are serialised per batch by a mutex).

use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use ::fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};
use ort::environment::Environment;
use parking_lot::Mutex;

use super::manifest::{ModelSpec, Pooling as ManifestPooling};
use super::{l2_normalize, verify_model_dir, EmbedError, Embedder};

/// Model id of the default manifest (`models/manifest.json`).
pub const FAST_MODEL_ID: &str = "all-MiniLM-L6-v2-int8";

/// Texts per ONNX Runtime run. Texts are sorted by length before batching, so
/// batches waste little on padding. Measured on 2 cores with ~500 short texts:
/// batch 1 ≈ 62, 4 ≈ 95, 8 ≈ 112, 16–64 ≈ 116–119 texts per CPU-second.
pub const DEFAULT_BATCH_SIZE: usize = 16;

/// File name of the ONNX Runtime shared library under `models/files/`.
const ORT_LIBRARY: &str = "libonnxruntime.so.1.24.4";
/// Most intra-op threads ONNX Runtime may use (the target machines have 2 cores).
const MAX_INTRA_THREADS: usize = 2;

/// The process-wide ONNX Runtime environment, or why it could not be created.
static ORT_ENVIRONMENT: OnceLock<Result<Environment, String>> = OnceLock::new();

/// Loads ONNX Runtime from `library` and creates its environment, once per process.
fn ort_environment(library: &Path) -> Result<Environment, EmbedError> {
    ORT_ENVIRONMENT
        .get_or_init(|| {
            let builder = ort::init_from(library)
                .map_err(|e| format!("cannot load ONNX Runtime from {}: {e}", library.display()))?;
            builder
                .with_name("episodic")
                .build()
                .map_err(|e| format!("cannot create ONNX Runtime environment: {e}"))
        })
        .clone()
        .map_err(EmbedError::Runtime)
}

/// A sentence embedder described by a manifest; see the module docs.
pub struct FastEmbedder {
    model: Mutex<TextEmbedding>,
    spec: ModelSpec,
    batch_size: usize,
}

impl std::fmt::Debug for FastEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastEmbedder")
            .field("model_id", &self.spec.model_id)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl FastEmbedder {
    /// Verifies and loads the model from `model_dir` (the `models` directory
    /// holding `manifest.json` and `files/`).
    ///
    /// Fails with [`EmbedError::MissingFile`] / [`EmbedError::CorruptFile`]
    /// naming the file and the fetch command when a file is absent or altered.
    pub fn load(model_dir: &Path) -> Result<Self, EmbedError> {
        let started = Instant::now();
        let files = verify_model_dir(model_dir)?;
        let environment = ort_environment(files.path(ORT_LIBRARY)?)?;
        let tokenizer = TokenizerFiles {
            tokenizer_file: files.read("tokenizer.json")?,
            config_file: files.read("config.json")?,
            special_tokens_map_file: files.read("special_tokens_map.json")?,
            tokenizer_config_file: files.read("tokenizer_config.json")?,
        };
        let spec = files.manifest().spec()?;
        let pooling = match spec.pooling {
            ManifestPooling::Mean => Pooling::Mean,
            ManifestPooling::Cls => Pooling::Cls,
        };
        let model = UserDefinedEmbeddingModel::new(files.read(&spec.onnx)?, tokenizer)
            .with_pooling(pooling);
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(MAX_INTRA_THREADS);
        let options = InitOptionsUserDefined::new()
            .with_environment(environment)
            .with_intra_threads(threads)
            .with_max_length(spec.max_tokens);
        let embedding = TextEmbedding::try_new_from_user_defined(model, options)
            .map_err(|e| EmbedError::Runtime(format!("cannot build {}: {e}", spec.model_id)))?;
        let embedder = Self {
            model: Mutex::new(embedding),
            spec,
            batch_size: DEFAULT_BATCH_SIZE,
        };
        // Probe once so a model with the wrong output shape fails at load, not at first use.
        embedder.embed(&["probe"])?;
        tracing::info!(
            model = %embedder.spec.model_id,
            dim = embedder.spec.dim,
            dir = %model_dir.display(),
            intra_threads = threads,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "embedding model loaded"
        );
        Ok(embedder)
    }

    /// Sets the most texts (at least 1) per ONNX Runtime call.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Texts per ONNX Runtime run.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Embeds one batch under the model lock and normalises the vectors.
    fn embed_batch(&self, batch: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = self
            .model
            .lock()
            .embed(batch, Some(batch.len()))
            .map_err(|e| EmbedError::Runtime(e.to_string()))?;
        if vectors.len() != batch.len() {
            return Err(EmbedError::Count {
                expected: batch.len(),
                got: vectors.len(),
            });
        }
        for v in &mut vectors {
            if v.len() != self.spec.dim {
                return Err(EmbedError::Runtime(format!(
                    "model returned {} dimensions, its manifest says {}",
                    v.len(),
                    self.spec.dim
                )));
            }
            // fastembed already normalises; doing it again is cheap and guards the invariant.
            l2_normalize(v)?;
        }
        Ok(vectors)
    }
}

impl Embedder for FastEmbedder {
    fn model_id(&self) -> &str {
        &self.spec.model_id
    }

    fn dim(&self) -> usize {
        self.spec.dim
    }

    fn query_prefix(&self) -> &str {
        &self.spec.query_prefix
    }

    fn passage_prefix(&self) -> &str {
        &self.spec.passage_prefix
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let started = std::time::Instant::now();
        // Sort by length so each batch pads little, then put results back in input order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let lengths: Vec<usize> = order.iter().map(|&i| texts[i].len()).collect();
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for range in length_batches(&lengths, self.batch_size) {
            let chunk = &order[range];
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                slots[i] = Some(v);
            }
        }
        crate::telemetry::embedded(texts.len(), started.elapsed());
        let out: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
        if out.len() != texts.len() {
            return Err(EmbedError::Count {
                expected: texts.len(),
                got: out.len(),
            });
        }
        Ok(out)
    }
}

/// Texts whose byte length is within this of a batch's shortest share its batch whatever
/// their ratio (short texts pad to a few tokens at most).
const SHORT_SPREAD: usize = 48;

/// Batches over `lengths` (ascending byte lengths): at most `batch_size` texts each, and a
/// new batch wherever a text is more than twice as long as its batch's first (plus
/// [`SHORT_SPREAD`]), since every text of a batch is padded to its longest.
fn length_batches(lengths: &[usize], batch_size: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &len) in lengths.iter().enumerate() {
        if i > start && (i - start >= batch_size || len > 2 * lengths[start] + SHORT_SPREAD) {
            out.push(start..i);
            start = i;
        }
    }
    if start < lengths.len() {
        out.push(start..lengths.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::dot;
    use super::*;

    #[test]
    fn batches_are_cut_by_count_and_where_lengths_diverge() {
        assert_eq!(
            length_batches(&[], 16),
            Vec::<std::ops::Range<usize>>::new()
        );
        assert_eq!(length_batches(&[10; 5], 2), vec![0..2, 2..4, 4..5]);
        // Short queries stay together; a 600-byte write gets a batch of its own.
        assert_eq!(length_batches(&[20, 30, 60, 600], 16), vec![0..3, 3..4]);
        assert_eq!(length_batches(&[100, 200, 249, 250], 16), vec![0..2, 2..4]);
    }
    use std::path::PathBuf;

    /// The model dir: `$EPISODIC_MODEL_DIR`, else `models/` of this crate.
    fn model_dir() -> Option<PathBuf> {
        let dir = std::env::var_os("EPISODIC_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"));
        if dir.join("manifest.json").is_file() {
            Some(dir)
        } else {
            eprintln!(
                "skipping real-model test: no manifest.json in {}",
                dir.display()
            );
            None
        }
    }

    /// One embedder shared by the tests of this process.
    fn embedder() -> Option<&'static FastEmbedder> {
        static EMBEDDER: OnceLock<FastEmbedder> = OnceLock::new();
        let dir = model_dir()?;
        Some(EMBEDDER.get_or_init(|| FastEmbedder::load(&dir).expect("model loads")))
    }

    #[test]
    fn real_model_similarity() {
        let Some(e) = embedder() else { return };
        let v = e
            .embed(&[
                "The customer asked for renewal notices by email",
                "User prefers email for renewal reminders",
                "The cat sat quietly on the warm windowsill",
            ])
            .expect("embeds");
        for x in &v {
            assert_eq!(x.len(), 384);
            assert!((dot(x, x) - 1.0).abs() < 1e-4);
        }
        let related = dot(&v[0], &v[1]);
        let unrelated = dot(&v[0], &v[2]);
        eprintln!("cosine related {related:.4}, unrelated {unrelated:.4}");
        assert!(related > 0.45, "related cosine {related}");
        assert!(unrelated < 0.25, "unrelated cosine {unrelated}");
        assert_eq!(e.model_id(), FAST_MODEL_ID);
        assert_eq!(e.dim(), 384);
    }

    #[test]
    fn real_model_keeps_input_order() {
        let Some(e) = embedder() else { return };
        let long = "The quarterly review covered churn, renewals, pricing changes, \
                    the support backlog and the migration of the billing system. "
            .repeat(12);
        let texts: Vec<&str> = vec![
            long.as_str(),
            "hi",
            "A medium length sentence about renewal notices and email.",
            "",
            "ok",
            "Another sentence, this one about cats and windowsills in the sun.",
            long.as_str(),
            "renewal",
            "x",
            "Database migration finished on Tuesday without downtime.",
        ];
        let batched = e.embed(&texts).expect("embeds");
        assert_eq!(batched.len(), texts.len());
        for (t, v) in texts.iter().zip(&batched) {
            let alone = e.embed(&[t]).expect("embeds");
            let cos = dot(&alone[0], v);
            assert!(cos > 0.999, "order or batching changed {t:?}: cosine {cos}");
        }
        assert!(e.embed(&[]).expect("empty input").is_empty());
    }

    /// Texts of many lengths (empty, one token, a sentence, a paragraph, past the 256-token
    /// limit) for the batch-consistency test.
    fn varied_texts() -> Vec<String> {
        let paragraph = "The quarterly review covered churn, renewals, pricing changes, \
                         the support backlog and the migration of the billing system. ";
        vec![
            String::new(),
            "ok".into(),
            "Dana: renewal reminders".into(),
            "The customer asked for renewal notices by email instead of post.".into(),
            "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.".into(),
            "Wow, Mel, that's awesome! What's your best camping memory? We should go again \
             next summer when the kids are off school."
                .into(),
            paragraph.repeat(3),
            paragraph.repeat(12),
            "Le client a demandé des rappels par courriel. 顧客はメールでの通知を希望した。".into(),
        ]
    }

    /// The smallest cosine and the largest absolute difference of any entry between `a[i]`
    /// and `b[i]`.
    fn divergence(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f32, f32) {
        let mut worst = (1.0f32, 0.0f32);
        for (x, y) in a.iter().zip(b) {
            worst.0 = worst.0.min(dot(x, y));
            let diff = x
                .iter()
                .zip(y)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0, f32::max);
            worst.1 = worst.1.max(diff);
        }
        worst
    }

    /// A quantized model whose activation ranges are computed per batch (dynamic
    /// quantization over the whole input tensor) gives a text a different vector beside
    /// other texts than alone (cosine 0.87–0.97 was seen for one). all-MiniLM-L6-v2 int8
    /// must not: each text's vector alone must equal its vector inside every kind of batch
    /// this embedder makes (the length-sorted batches of one call, in any order, and a
    /// single ONNX run that pads it to a long or beside an empty neighbour). Measured with
    /// ONNX Runtime 1.24.4 on 2 intra-op threads: every entry equal bit for bit (largest
    /// difference 0; the smallest cosine, 0.99999994, is a unit vector's rounding against
    /// itself). The bounds sit just above: 1e-6 per entry leaves room only for a change of
    /// summation order, and any batch dependence fails them by orders of magnitude.
    #[test]
    fn real_model_gives_a_text_the_same_vector_alone_and_in_any_batch() {
        const MIN_COSINE: f32 = 0.999_999;
        const MAX_ABS_DIFF: f32 = 1e-6;
        let Some(e) = embedder() else { return };
        let texts = varied_texts();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let alone: Vec<Vec<f32>> = refs
            .iter()
            .map(|t| e.embed(&[t]).expect("embeds").remove(0))
            .collect();
        let mut checks: Vec<(String, Vec<Vec<f32>>)> = Vec::new();
        // One call: the embedder's own length-sorted batches (several ONNX runs).
        checks.push(("one call".into(), e.embed(&refs).expect("embeds")));
        // The same texts reversed and repeated, so batch mates and positions change.
        let mut shuffled: Vec<&str> = refs.iter().rev().copied().collect();
        shuffled.extend(refs.iter().copied());
        let v = e.embed(&shuffled).expect("embeds");
        let n = refs.len();
        let back: Vec<Vec<f32>> = (0..n).map(|i| v[n - 1 - i].clone()).collect();
        checks.push(("reversed call".into(), back));
        checks.push(("repeated call".into(), v[n..].to_vec()));
        // One ONNX run of every text: each is padded to the longest (256 tokens).
        checks.push((
            "single padded run".into(),
            e.embed_batch(&refs).expect("embeds"),
        ));
        // Each text in one run beside the longest text only, and beside the shortest only.
        let longest = refs[7];
        for (name, mate) in [("beside the longest", longest), ("beside the empty", "")] {
            let paired: Vec<Vec<f32>> = refs
                .iter()
                .map(|t| e.embed_batch(&[mate, t]).expect("embeds").remove(1))
                .collect();
            checks.push((name.into(), paired));
        }
        let mut worst = (1.0f32, 0.0f32);
        for (name, vectors) in &checks {
            assert_eq!(vectors.len(), n, "{name}");
            let (cos, diff) = divergence(&alone, vectors);
            eprintln!("{name}: min cosine {cos:.9}, max |diff| {diff:.3e}");
            worst = (worst.0.min(cos), worst.1.max(diff));
        }
        eprintln!(
            "worst: min cosine {:.9}, max |diff| {:.3e}",
            worst.0, worst.1
        );
        assert!(
            worst.0 >= MIN_COSINE && worst.1 <= MAX_ABS_DIFF,
            "a text's vector depends on its batch: min cosine {}, max |diff| {}",
            worst.0,
            worst.1
        );
    }

    #[test]
    fn real_model_loads_twice_and_embeds_from_threads() {
        let Some(dir) = model_dir() else { return };
        let Some(first) = embedder() else { return };
        let second = FastEmbedder::load(&dir).expect("second load in one process");
        let a = first.embed(&["renewal reminders"]).expect("embeds");
        let b = second.embed(&["renewal reminders"]).expect("embeds");
        assert!(dot(&a[0], &b[0]) > 0.9999);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let second = &second;
                    s.spawn(move || {
                        let text = format!("thread {i} asks about renewal reminders");
                        second.embed(&[text.as_str()]).expect("embeds")
                    })
                })
                .collect();
            for h in handles {
                assert_eq!(h.join().expect("thread ran").len(), 1);
            }
        });
    }

    #[test]
    fn real_model_reports_corrupt_file() {
        let Some(dir) = model_dir() else { return };
        // A copy of the manifest with a wrong hash for one small file.
        let tmp = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(tmp.path().join("files")).expect("mkdir");
        let mut manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
        )
        .expect("json");
        manifest["files"] = serde_json::json!([{
            "name": "config.json", "sha256": "0".repeat(64), "size": 1,
            "wheel": "w", "member": "m"
        }]);
        std::fs::write(tmp.path().join("manifest.json"), manifest.to_string()).expect("write");
        std::fs::copy(
            dir.join("files/config.json"),
            tmp.path().join("files/config.json"),
        )
        .expect("copy");
        let err = FastEmbedder::load(tmp.path()).expect_err("corrupt");
        assert!(matches!(err, EmbedError::CorruptFile { .. }), "{err}");
        let missing = tempfile::tempdir().expect("temp dir");
        std::fs::copy(
            dir.join("manifest.json"),
            missing.path().join("manifest.json"),
        )
        .expect("copy");
        let err = FastEmbedder::load(missing.path()).expect_err("missing");
        assert!(
            matches!(&err, EmbedError::MissingFile { path, .. } if path.contains("model.onnx")),
            "{err}"
        );
    }
}
