//! Approximate nearest-neighbour index (hnsw_rs) with candidate filtering and
//! crash-safe, checksummed snapshots.
//!
//! # Invariants
//!
//! * Points are keyed by the dense store id (`DataId = id as usize`). hnsw_rs
//!   cannot delete: invisible / deleted ids are excluded through the
//!   [`IdSet`] filter given to [`HnswIndex::search_filtered`]. Inserting an id
//!   twice adds a second point; results are de-duplicated by id.
//! * Distance is [`CosineDist`] = `clamp(1 - dot, 0, 2)` (NaN → 2), i.e.
//!   hnsw_rs's `DistDot` without its `assert!`s, which fire on rounding
//!   (`dot` of a unit vector with itself can be `1 + ε`). Scores returned are
//!   `1 - distance` = cosine.
//! * The graph is built with `max_layer = 16` (hnsw_rs `NB_LAYER_MAX`); dumps
//!   fail with any other value.
//! * Snapshots: `dir/CURRENT` names the live generation `gen-<n>` and the
//!   SHA-256 of its `manifest.json`; the manifest lists every file with size
//!   and SHA-256. All are fsynced before `CURRENT` is atomically replaced, and
//!   [`HnswIndex::load`] verifies everything before hnsw_rs parses a byte
//!   (hnsw_rs asserts/panics on malformed input).
//! * A loaded hnsw_rs graph borrows its `HnswIo` loader; to own the graph we
//!   `Box::leak` that loader (≈ 100 bytes, once per `load`, no mmap).

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use hnsw_rs::prelude::{AnnT, Distance, Hnsw, HnswIo, Neighbour};
use parking_lot::RwLock;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod frozen;

pub use frozen::FrozenGraph;

use super::bitset::IdSet;
use super::exact::dispatched_dot;
use super::{check_vector, VectorError};

/// hnsw_rs layer count; `file_dump` only works with its maximum (16).
const MAX_LAYER: usize = 16;
/// Basename of the hnsw_rs dump files inside a generation directory.
const DUMP_BASENAME: &str = "index";
const CURRENT: &str = "CURRENT";
const CURRENT_TMP: &str = "CURRENT.tmp";
const MANIFEST: &str = "manifest.json";
const GEN_PREFIX: &str = "gen-";
const MANIFEST_FORMAT: u32 = 1;
/// Upper bound on `CURRENT` / `manifest.json` sizes we are willing to read.
const MAX_META_BYTES: u64 = 1 << 20;

/// Cosine distance for L2-normalised vectors, `clamp(1 - dot, 0, 2)`.
///
/// Panic-free replacement for hnsw_rs's `DistDot`; its type name is stored
/// in dumps and checked (last path segment only) on reload.
#[derive(Debug, Default, Clone, Copy)]
pub struct CosineDist;

impl Distance<f32> for CosineDist {
    fn eval(&self, va: &[f32], vb: &[f32]) -> f32 {
        let d = 1.0 - dispatched_dot(va, vb);
        if d.is_nan() {
            2.0
        } else {
            d.clamp(0.0, 2.0)
        }
    }
}

/// Construction and search parameters of an [`HnswIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Max links per node and layer (hnsw_rs `max_nb_connection`); clamped to `2..=255`.
    pub m: usize,
    /// Candidate list width while inserting.
    pub ef_construction: usize,
    /// Default candidate list width while searching (callers pass `ef` explicitly).
    pub ef_search: usize,
    /// Capacity hint (pre-allocation only, not a limit).
    pub max_elements: usize,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self {
            m: 16,
            ef_construction: 100,
            ef_search: 64,
            max_elements: 100_000,
        }
    }
}

impl HnswParams {
    fn sanitized(self) -> Self {
        Self {
            m: self.m.clamp(2, 255),
            ef_construction: self.ef_construction.max(1),
            ef_search: self.ef_search.max(1),
            max_elements: self.max_elements.max(1),
        }
    }
}

type Graph = Hnsw<'static, f32, CosineDist>;

/// HNSW index over store ids. `Send + Sync`; insert, search and save take `&self`.
pub struct HnswIndex {
    graph: Graph,
    params: HnswParams,
    /// Vector dimension, 0 until the first insert (or from a snapshot).
    dim: AtomicUsize,
    /// Inserts hold it shared, `save` exclusively, so a dump is a consistent cut.
    gate: RwLock<()>,
}

impl std::fmt::Debug for HnswIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HnswIndex")
            .field("params", &self.params)
            .field("len", &self.len())
            .field("dim", &self.dim())
            .finish()
    }
}

impl HnswIndex {
    /// An empty index (built with `max_layer = 16` so that dumps work).
    pub fn new(params: HnswParams) -> Self {
        let params = params.sanitized();
        let graph = Hnsw::new(
            params.m,
            params.max_elements,
            MAX_LAYER,
            params.ef_construction,
            CosineDist,
        );
        Self::from_graph(graph, params, 0)
    }

    fn from_graph(graph: Graph, params: HnswParams, dim: usize) -> Self {
        Self {
            graph,
            params,
            dim: AtomicUsize::new(dim),
            gate: RwLock::new(()),
        }
    }

    /// Parameters in effect (graph shape of a loaded index comes from its snapshot).
    pub fn params(&self) -> HnswParams {
        self.params
    }

    /// Vector dimension, 0 while the index is empty.
    pub fn dim(&self) -> usize {
        self.dim.load(Ordering::Acquire)
    }

    /// Number of points in the graph.
    pub fn len(&self) -> usize {
        self.graph.get_nb_point()
    }

    /// True when the graph holds no point.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks `v` against the index dimension, fixing it on first use.
    fn check(&self, id: u32, v: &[f32]) -> Result<(), VectorError> {
        let dim = match self
            .dim
            .compare_exchange(0, v.len(), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => v.len(),
            Err(current) => current,
        };
        check_vector(id, v, dim)
    }

    /// Inserts the (normalised) vector of `id`.
    /// Errors: [`VectorError::Dim`], [`VectorError::NonFinite`].
    pub fn insert(&self, id: u32, v: &[f32]) -> Result<(), VectorError> {
        self.check(id, v)?;
        let _shared = self.gate.read();
        self.graph.insert_slice((v, id as usize));
        Ok(())
    }

    /// Inserts many vectors in parallel (rebuilds). Validates all first and
    /// inserts nothing on error.
    ///
    /// hnsw_rs's `set_searching_mode` is not called: in 0.3.5 the flag is
    /// write-only (never read), and setting it would need `&mut`.
    pub fn insert_batch(&self, items: &[(u32, &[f32])]) -> Result<(), VectorError> {
        for (id, v) in items {
            self.check(*id, v)?;
        }
        let _shared = self.gate.read();
        items
            .par_iter()
            .for_each(|(id, v)| self.graph.insert_slice((v, *id as usize)));
        Ok(())
    }

    /// A read-only copy of the graph as it is now, for fast searches
    /// ([`FrozenGraph`]); inserts made later do not reach it.
    pub fn freeze(&self) -> FrozenGraph {
        let _shared = self.gate.read();
        if self.is_empty() {
            // hnsw_rs's point iterator unwraps the entry point, which an empty graph lacks.
            return FrozenGraph::default();
        }
        let dim = self.dim();
        let points: Vec<_> = self.graph.get_point_indexation().into_iter().collect();
        let points = points
            .par_iter()
            .filter_map(|p| {
                let (codes, scale) = frozen::PointCopy::encode(p.get_v(), dim);
                Some(frozen::PointCopy {
                    pid: p.get_point_id(),
                    id: u32::try_from(p.get_origin_id()).ok()?,
                    codes,
                    scale,
                    links: p
                        .get_neighborhood_id()
                        .into_iter()
                        .map(|layer| layer.into_iter().map(|n| n.p_id).collect())
                        .collect(),
                })
            })
            .collect();
        FrozenGraph::from_points(dim, points)
    }

    /// Nearest `k` among ids accepted by `allow`, best first, as `(id, cosine)`.
    /// `ef` is raised to at least `k`. May return fewer than `k` hits.
    pub fn search_filtered(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        allow: &IdSet,
    ) -> Vec<(u32, f32)> {
        if allow.is_empty() || !self.query_ok(query, k) {
            return Vec::new();
        }
        let filter = |id: &usize| u32::try_from(*id).is_ok_and(|id| allow.contains(id));
        let found = self.graph.search_filter(query, k, ef.max(k), Some(&filter));
        to_hits(found, k, Some(allow))
    }

    /// Nearest `k` among ids `allow` accepts (called during the search, so it may read
    /// state the caller holds), best first, as `(id, cosine)`. `ef` is raised to at least
    /// `k`. May return fewer than `k` hits.
    pub fn search_where(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        allow: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        if !self.query_ok(query, k) {
            return Vec::new();
        }
        let filter = |id: &usize| u32::try_from(*id).is_ok_and(&allow);
        let found = self.graph.search_filter(query, k, ef.max(k), Some(&filter));
        to_hits(found, k, None)
    }

    /// Nearest `k` over all points, best first, as `(id, cosine)`.
    pub fn search(&self, query: &[f32], k: usize, ef: usize) -> Vec<(u32, f32)> {
        if !self.query_ok(query, k) {
            return Vec::new();
        }
        to_hits(self.graph.search(query, k, ef.max(k)), k, None)
    }

    fn query_ok(&self, query: &[f32], k: usize) -> bool {
        let dim = self.dim();
        let ok = k > 0 && dim != 0 && query.len() == dim && query.iter().all(|x| x.is_finite());
        if !ok && k > 0 && dim != 0 {
            tracing::warn!(dim, got = query.len(), "invalid hnsw query ignored");
        }
        ok
    }

    /// Durable snapshot into a new generation `dir/gen-<n>/` (hnsw_rs dump +
    /// `manifest.json`), all fsynced; then atomically switches `dir/CURRENT`
    /// and removes older generations. Inserts wait while this runs; searches
    /// do not. Only one process may save into `dir`.
    pub fn save(&self, dir: &Path, last_seq: u64) -> Result<(), VectorError> {
        let _exclusive = self.gate.write();
        crate::fsutil::create_private_dir_all(dir).map_err(|e| VectorError::io(dir, e))?;
        let gen = next_generation(dir)?;
        let gen_name = format!("{GEN_PREFIX}{gen}");
        let gen_dir = dir.join(&gen_name);
        fs::DirBuilder::new()
            .mode(crate::fsutil::PRIVATE_DIR)
            .create(&gen_dir)
            .map_err(|e| VectorError::io(&gen_dir, e))?;
        let files = self.dump_graph(&gen_dir)?;
        // hnsw_rs creates its dump files with the process umask; make them owner-only.
        if let Some((path, e)) = crate::fsutil::tighten_tree(&gen_dir)
            .failed
            .into_iter()
            .next()
        {
            return Err(VectorError::io(&path, e));
        }
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            generation: gen,
            last_seq,
            count: self.len(),
            dim: self.dim(),
            params: self.params,
            files,
        };
        let manifest_bytes = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| VectorError::corrupt(&gen_dir, e.to_string()))?;
        write_synced(&gen_dir.join(MANIFEST), &manifest_bytes)?;
        sync_dir(&gen_dir)?;
        let current = format!("{gen_name} {}\n", sha256_hex(&manifest_bytes));
        switch_current(dir, current.as_bytes())?;
        remove_other_generations(dir, &gen_name);
        tracing::info!(dir = %dir.display(), gen, last_seq, count = manifest.count, "hnsw snapshot saved");
        Ok(())
    }

    /// Dumps the graph into `gen_dir` (nothing for an empty graph), fsyncs
    /// and checksums the files.
    fn dump_graph(&self, gen_dir: &Path) -> Result<Vec<FileEntry>, VectorError> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let dumped = catch_unwind(AssertUnwindSafe(|| {
            self.graph.file_dump(gen_dir, DUMP_BASENAME)
        }));
        let dump_err = |reason: String| VectorError::Dump {
            path: gen_dir.to_path_buf(),
            reason,
        };
        match dumped {
            Ok(Ok(name)) if name == DUMP_BASENAME => {}
            Ok(Ok(name)) => return Err(dump_err(format!("unexpected basename {name}"))),
            Ok(Err(e)) => return Err(dump_err(e.to_string())),
            Err(_) => return Err(dump_err("hnsw_rs panicked".into())),
        }
        dump_file_names()
            .iter()
            .map(|name| file_entry(&gen_dir.join(name), name))
            .collect()
    }

    /// The log sequence the snapshot in `dir` covers, read from its manifest alone (`None`
    /// when there is no snapshot).
    pub fn snapshot_seq(dir: &Path) -> Result<Option<u64>, VectorError> {
        Ok(read_current(dir)?.map(|(_, m)| m.last_seq))
    }

    /// Loads the `CURRENT` generation of `dir` after verifying every checksum.
    ///
    /// `Ok(None)` if `dir/CURRENT` does not exist; [`VectorError::Corrupt`] if
    /// anything fails verification (rebuild from the log). The graph shape
    /// (`m`, `ef_construction`) comes from the snapshot; `ef_search` and
    /// `max_elements` from `params`.
    pub fn load(dir: &Path, params: HnswParams) -> Result<Option<(HnswIndex, u64)>, VectorError> {
        let Some((gen_dir, manifest)) = read_current(dir)? else {
            return Ok(None);
        };
        for entry in &manifest.files {
            verify_file(&gen_dir, entry)?;
        }
        let params = HnswParams {
            m: manifest.params.m,
            ef_construction: manifest.params.ef_construction,
            ..params
        }
        .sanitized();
        if manifest.params.m != params.m {
            return Err(VectorError::corrupt(&gen_dir, "invalid m in manifest"));
        }
        if manifest.count == 0 {
            let index = Self::from_graph(Self::new(params).graph, params, manifest.dim);
            return Ok(Some((index, manifest.last_seq)));
        }
        let graph = load_graph(&gen_dir)?;
        let shape = (
            graph.get_nb_point(),
            graph.get_point_indexation().get_data_dimension(),
        );
        if shape != (manifest.count, manifest.dim) {
            return Err(VectorError::corrupt(
                &gen_dir,
                "graph differs from manifest",
            ));
        }
        let index = Self::from_graph(graph, params, manifest.dim);
        Ok(Some((index, manifest.last_seq)))
    }
}

/// Maps hnsw_rs neighbours to `(id, cosine)`, best first, unique ids, at most `k`.
fn to_hits(found: Vec<Neighbour>, k: usize, allow: Option<&IdSet>) -> Vec<(u32, f32)> {
    let mut hits: Vec<(u32, f32)> = found
        .into_iter()
        .filter_map(|n| Some((u32::try_from(n.d_id).ok()?, 1.0 - n.distance)))
        .filter(|(id, _)| allow.is_none_or(|a| a.contains(*id)))
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut seen = HashSet::with_capacity(hits.len());
    hits.retain(|(id, _)| seen.insert(*id));
    hits.truncate(k);
    hits
}

/// Names of the two files hnsw_rs writes for [`DUMP_BASENAME`].
fn dump_file_names() -> [String; 2] {
    [
        format!("{DUMP_BASENAME}.hnsw.graph"),
        format!("{DUMP_BASENAME}.hnsw.data"),
    ]
}

/// Parses a verified dump. hnsw_rs may still panic on inputs it rejects;
/// that is reported as corruption, never propagated.
fn load_graph(gen_dir: &Path) -> Result<Graph, VectorError> {
    let loaded = catch_unwind(|| {
        // Leaked on purpose: the graph borrows its loader for its whole life.
        let io: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(gen_dir, DUMP_BASENAME)));
        io.load_hnsw::<f32, CosineDist>()
    });
    match loaded {
        Ok(Ok(graph)) => Ok(graph),
        Ok(Err(e)) => Err(VectorError::corrupt(gen_dir, format!("hnsw_rs: {e}"))),
        Err(_) => Err(VectorError::corrupt(
            gen_dir,
            "hnsw_rs panicked while loading",
        )),
    }
}

/// `manifest.json` of one generation.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    generation: u64,
    last_seq: u64,
    count: usize,
    dim: usize,
    params: HnswParams,
    files: Vec<FileEntry>,
}

/// One checksummed file of a generation.
#[derive(Debug, Serialize, Deserialize)]
struct FileEntry {
    name: String,
    sha256: String,
    size: u64,
}

/// Reads and verifies `CURRENT` and the manifest it points to.
fn read_current(dir: &Path) -> Result<Option<(PathBuf, Manifest)>, VectorError> {
    let current_path = dir.join(CURRENT);
    let current = match read_small(&current_path) {
        Ok(bytes) => bytes,
        Err(VectorError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let (gen_name, manifest_sha) = parse_current(&current)
        .ok_or_else(|| VectorError::corrupt(&current_path, "malformed CURRENT"))?;
    let gen_dir = dir.join(gen_name);
    let manifest_path = gen_dir.join(MANIFEST);
    let bytes = read_small(&manifest_path).map_err(|e| missing_is_corrupt(e, &manifest_path))?;
    if sha256_hex(&bytes) != manifest_sha {
        return Err(VectorError::corrupt(
            &manifest_path,
            "manifest checksum mismatch",
        ));
    }
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| VectorError::corrupt(&manifest_path, e.to_string()))?;
    check_manifest(&manifest, gen_name).map_err(|r| VectorError::corrupt(&manifest_path, r))?;
    Ok(Some((gen_dir, manifest)))
}

/// `"gen-<n> <sha256hex>\n"` → (`"gen-<n>"`, sha).
fn parse_current(bytes: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let (gen, sha) = text.split_once(' ')?;
    let digits = gen.strip_prefix(GEN_PREFIX)?;
    let valid_gen = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let valid_sha = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
    (valid_gen && valid_sha).then_some((gen, sha))
}

/// Structural checks: format, generation name, exactly the expected files.
fn check_manifest(m: &Manifest, gen_name: &str) -> Result<(), String> {
    if m.format != MANIFEST_FORMAT {
        return Err(format!("unsupported manifest format {}", m.format));
    }
    if format!("{GEN_PREFIX}{}", m.generation) != gen_name {
        return Err("generation does not match CURRENT".into());
    }
    let names: Vec<&str> = m.files.iter().map(|f| f.name.as_str()).collect();
    let expected = dump_file_names();
    let ok = if m.count == 0 {
        names.is_empty()
    } else {
        names.len() == 2 && expected.iter().all(|e| names.contains(&e.as_str()))
    };
    if !ok {
        return Err(format!("unexpected file list {names:?}"));
    }
    if m.count > 0 && m.dim == 0 {
        return Err("dimension 0 with points".into());
    }
    Ok(())
}

/// Checks size and SHA-256 of one manifest entry.
fn verify_file(gen_dir: &Path, entry: &FileEntry) -> Result<(), VectorError> {
    let path = gen_dir.join(&entry.name);
    let actual = file_entry(&path, &entry.name).map_err(|e| missing_is_corrupt(e, &path))?;
    if actual.size != entry.size {
        return Err(VectorError::corrupt(&path, "size mismatch"));
    }
    if actual.sha256 != entry.sha256 {
        return Err(VectorError::corrupt(&path, "checksum mismatch"));
    }
    Ok(())
}

/// A referenced file that vanished means the snapshot is unusable.
fn missing_is_corrupt(e: VectorError, path: &Path) -> VectorError {
    match e {
        VectorError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            VectorError::corrupt(path, "missing file")
        }
        other => other,
    }
}

/// Streams `path` through SHA-256 after fsyncing it.
fn file_entry(path: &Path, name: &str) -> Result<FileEntry, VectorError> {
    let io_err = |e| VectorError::io(path, e);
    let mut file = File::open(path).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok(FileEntry {
        name: name.to_string(),
        sha256: hex::encode(hasher.finalize()),
        size,
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Reads a small metadata file, refusing anything over [`MAX_META_BYTES`].
fn read_small(path: &Path) -> Result<Vec<u8>, VectorError> {
    let file = File::open(path).map_err(|e| VectorError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_META_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| VectorError::io(path, e))?;
    if bytes.len() as u64 > MAX_META_BYTES {
        return Err(VectorError::corrupt(path, "metadata file too large"));
    }
    Ok(bytes)
}

/// Creates/truncates `path` with `bytes` and fsyncs it.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), VectorError> {
    let io_err = |e| VectorError::io(path, e);
    let mut file = crate::fsutil::create_private(path).map_err(io_err)?;
    file.write_all(bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)
}

/// Fsyncs a directory so entries created/renamed in it are durable.
fn sync_dir(dir: &Path) -> Result<(), VectorError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| VectorError::io(dir, e))
}

/// Atomically replaces `dir/CURRENT` (tmp + fsync + rename + fsync dir).
fn switch_current(dir: &Path, contents: &[u8]) -> Result<(), VectorError> {
    let tmp = dir.join(CURRENT_TMP);
    write_synced(&tmp, contents)?;
    let target = dir.join(CURRENT);
    fs::rename(&tmp, &target).map_err(|e| VectorError::io(&target, e))?;
    sync_dir(dir)
}

/// Generation numbers of the `gen-<n>` directories in `dir`.
fn generations(dir: &Path) -> Result<Vec<(u64, String)>, VectorError> {
    let entries = fs::read_dir(dir).map_err(|e| VectorError::io(dir, e))?;
    let mut gens = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| VectorError::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(n) = name.strip_prefix(GEN_PREFIX).and_then(|d| d.parse().ok()) {
            gens.push((n, name));
        }
    }
    Ok(gens)
}

/// One past the highest generation present (including crash leftovers).
fn next_generation(dir: &Path) -> Result<u64, VectorError> {
    let max = generations(dir)?.into_iter().map(|(n, _)| n).max();
    Ok(max.map_or(1, |n| n + 1))
}

/// Best-effort removal of every generation except `keep`.
fn remove_other_generations(dir: &Path, keep: &str) {
    let Ok(gens) = generations(dir) else { return };
    for (_, name) in gens.into_iter().filter(|(_, name)| name != keep) {
        if let Err(e) = fs::remove_dir_all(dir.join(&name)) {
            tracing::warn!(dir = %dir.display(), generation = %name, error = %e, "could not remove old hnsw generation");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
