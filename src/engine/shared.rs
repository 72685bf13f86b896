//! The state the writer thread and the readers share, and the data directory's layout.
//!
//! Invariants: the writer thread is the only one that changes the table, vectors, graphs and
//! indexes ([`Shared`] hands readers locks and atomic swaps, never a second writer); a read
//! takes one [`Shared::snapshot`] and consults nothing else; the data directory is locked
//! ([`lock_data_dir`]) for as long as a writer may write it; a process that reads the
//! directory's key store before its engine opens takes the lock first ([`DataDirLock`]) and
//! hands it to the engine, so no other process can change the keys in between.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use anyhow::Context;
use arc_swap::{ArcSwap, ArcSwapOption};
use parking_lot::RwLock;

use super::scope_health::ScopeHealth;
use crate::audit::AuditTrail;
use crate::index::scope::ScopeIndex;
use crate::index::vector::{HnswIndex, VectorStore};
use crate::read::{Partitioned, Snapshot, Table, TenantGraphs};

/// Pseudo-tenant of offline maintenance: compaction reports every tenant's purged ids.
/// It can never be a real tenant (`*` is not allowed in tenant ids).
pub const ALL_TENANTS: &str = "*";

/// File locations under the data directory.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The event log file.
    pub log: PathBuf,
    /// The tantivy directory.
    pub scope: PathBuf,
    /// The HNSW snapshot directory.
    pub hnsw: PathBuf,
    /// The saved tenant graphs (see [`super::graph_files`]).
    pub graphs: PathBuf,
    /// Where a re-embedding keeps the vectors it made until it switches models.
    pub reembed: PathBuf,
    /// The audit trail.
    pub audit: PathBuf,
    /// The secret of the trail's keyed hashes.
    pub hash_key: PathBuf,
}

impl Paths {
    /// Removes every re-embedding side file (a compaction purged content they may hold,
    /// or the switch made them useless).
    pub fn remove_reembed_files(&self) {
        if let Ok(entries) = std::fs::read_dir(&self.reembed) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Paths under `data_dir`.
    pub fn new(data_dir: &std::path::Path) -> Self {
        Paths {
            log: data_dir.join("log").join("events.log"),
            scope: data_dir.join("index").join("scope"),
            hnsw: data_dir.join("index").join("hnsw"),
            graphs: data_dir.join("index").join("graphs"),
            reembed: data_dir.join("index").join("reembed"),
            audit: data_dir.join("audit").join("audit.log"),
            hash_key: data_dir.join("audit").join("hash.key"),
        }
    }
}

/// State shared by the writer thread and readers.
pub struct Shared {
    /// All events.
    pub table: RwLock<Table>,
    /// All vectors, by internal id (swapped whole by compaction).
    pub vectors: ArcSwap<VectorStore>,
    /// The HNSW graph over all vectors (swapped whole by compaction); empty unless
    /// `hnsw_enabled`.
    pub hnsw: ArcSwap<HnswIndex>,
    /// Whether the HNSW graph is maintained (approximate recall is on): otherwise no vector is
    /// inserted, no snapshot is written and an old snapshot is removed at open.
    pub hnsw_enabled: bool,
    /// The vector partitions of partitioned recall (see [`super::partitions`]); `None` until built
    /// and whenever partitioned recall is off.
    pub partition: ArcSwapOption<Partitioned>,
    /// With partitioned recall on, the number of vectors from which partitions are built.
    pub partition_min_vectors: Option<usize>,
    /// Whether a partition build is running.
    pub partition_building: AtomicBool,
    /// Bumped by every reset of the partitions (compaction): a build that started before it
    /// publishes nothing.
    pub partition_epoch: parking_lot::Mutex<u64>,
    /// The per-tenant HNSW graphs of graph recall (see [`super::graphs`]); empty until a
    /// tenant holds `graph_min_vectors` vectors, and always with graph recall off.
    pub graphs: ArcSwap<TenantGraphs>,
    /// With graph recall on, the tenant size from which a tenant gets a graph.
    pub graph_min_vectors: Option<usize>,
    /// Whether each graph's search widths are measured (off when a fixed width is set).
    pub measure_graphs: bool,
    /// Whether each partition's probe shares are measured (off when a fixed share is set).
    pub measure_probes: bool,
    /// Whether a graph update is running.
    pub graph_building: AtomicBool,
    /// Bumped by every reset of the graphs (compaction): an update that started before it
    /// publishes nothing.
    pub graph_epoch: parking_lot::Mutex<u64>,
    /// The tenant graphs' files: what was saved, and the lock their writes take.
    pub graph_disk: super::graphs::GraphDisk,
    /// The tantivy scope index.
    pub scope: ScopeIndex,
    /// Internal ids below this are committed in `scope` (see [`super::writer`]'s scope sync).
    pub watermark: AtomicUsize,
    /// Whether `scope` is in step with the log, and what a repair must apply again.
    pub scope_health: ScopeHealth,
    /// The audit trail: its log file plus a sparse, bounded index over it.
    pub audit: Arc<AuditTrail>,
    /// The data directory's hashing secret (keyed content and query hashes, key tags).
    pub keyed: crate::audit::Keyed,
    /// File locations.
    pub paths: Paths,
    /// The model writes and recalls embed with (the one that made `vectors`), and the
    /// worker that batches their texts; replaced together with `vectors` when a
    /// re-embedding switches models ([`super::reembed`]).
    pub serving: ArcSwap<Serving>,
    /// Bumped by every compaction: a re-embedding's vectors made before it are dropped
    /// (they may hold purged content) and it starts again.
    pub reembed_epoch: parking_lot::Mutex<u64>,
    /// A re-embedding's progress, from its start until the engine stops.
    pub reembed: RwLock<Option<super::reembed::ReembedStatus>>,
}

/// The model an engine embeds with, and its batching worker.
pub struct Serving {
    /// The model.
    pub embedder: Arc<dyn crate::embed::Embedder>,
    /// Batches concurrent texts into one call of `embedder`.
    pub coalescer: crate::embed::Coalescer,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("model", &self.embedder.model_id())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The one view a read takes of everything it consults (see [`crate::read`]'s
    /// invariants for the order). The table stays read-locked until the snapshot is dropped:
    /// take it on the CPU pool, after any embedding, and drop it before anything else locks
    /// the table.
    pub(crate) fn snapshot(&self) -> Snapshot<'_> {
        let watermark = self.watermark.load(std::sync::atomic::Ordering::Acquire);
        let scope = self.scope.view();
        let table = self.table.read();
        Snapshot {
            table,
            scope,
            watermark,
            vectors: self.vectors.load_full(),
            hnsw: self.hnsw.load_full(),
            partition: self.partition.load_full(),
            graphs: self.graphs.load_full(),
            keyed: &self.keyed,
        }
    }
}

/// The exclusive lock of one data directory, taken before the engine opens and handed to
/// it ([`super::Engine::open_locked`]): `serve` and `mcp --stdio` read the key store under
/// it, and `keys create` writes the key store under it, so the two never overlap.
#[derive(Debug)]
pub struct DataDirLock {
    dir: PathBuf,
    file: std::fs::File,
}

impl DataDirLock {
    /// Takes the lock of `data_dir` (which must exist), or fails naming the directory in
    /// use.
    pub fn take(data_dir: &std::path::Path) -> anyhow::Result<DataDirLock> {
        Ok(DataDirLock {
            dir: data_dir.to_path_buf(),
            file: lock_data_dir(data_dir)?,
        })
    }

    /// The directory it locks.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The locked file, held by whoever may write the directory.
    pub(crate) fn into_file(self) -> std::fs::File {
        self.file
    }
}

/// Takes the data directory's exclusive lock, so a second process (a second server, or an
/// offline import, export or compaction while the server runs) fails clearly instead of
/// writing the same log. The kernel releases it when the process dies.
pub(crate) fn lock_data_dir(data_dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = data_dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .mode(crate::fsutil::PRIVATE_FILE)
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "data directory {} is in use by another episodic process (stop the server first)",
            data_dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}
