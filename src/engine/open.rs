//! Start-up: replay the log into the table, bring each derived index up to the log's last
//! sequence (catch-up or full rebuild), then start the writer thread.
//!
//! Invariants: an index whose recorded sequence is ahead of the log, whose contents disagree
//! with the log, or which fails to open is discarded and rebuilt from the log; nothing here
//! re-embeds text.

use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::sync::Arc;

use anyhow::Context;
use parking_lot::RwLock;

use super::writer::Writer;
use super::{apply_put, Engine, EngineConfig, Paths, Shared, Table};
use crate::cpu::CpuPool;
use crate::embed::Embedder;
use crate::index::scope::ScopeIndex;
use crate::index::vector::{HnswIndex, VectorStore};
use crate::store::log::{Log, LogRecord};
use crate::store::record::{decode, Record};

pub(super) fn open(config: EngineConfig, embedder: Arc<dyn Embedder>) -> anyhow::Result<Engine> {
    let paths = Paths::new(&config.data_dir);
    create_dirs(&paths)?;
    let (log, recovery) =
        Log::open(&paths.log).with_context(|| format!("opening log {}", paths.log.display()))?;
    if recovery.truncated_bytes > 0 {
        tracing::warn!(
            bytes = recovery.truncated_bytes,
            "dropped a torn, unacknowledged log tail"
        );
    }
    let last_seq = recovery.records.last().map(|r| r.seq);
    let (scope, scope_seq) = open_scope(&paths, last_seq)?;
    let shared = Arc::new(Shared {
        table: RwLock::new(Table::default()),
        vectors: VectorStore::new(embedder.dim()),
        hnsw: HnswIndex::new(config.hnsw),
        scope,
        watermark: AtomicUsize::new(0),
        paths: paths.clone(),
    });
    replay(&shared, recovery.records, scope_seq)?;
    let shared = attach_hnsw(shared, &config, last_seq)?;
    let len = shared.table.read().len();
    shared
        .scope
        .commit(last_seq.unwrap_or(0))
        .context("committing the scope index after replay")?;
    shared
        .watermark
        .store(len, std::sync::atomic::Ordering::Release);
    tracing::info!(events = len, "engine recovered from the log");
    start(shared, log, config, embedder)
}

fn create_dirs(paths: &Paths) -> anyhow::Result<()> {
    for dir in [
        paths.log.parent(),
        Some(paths.scope.as_path()),
        Some(paths.hnsw.as_path()),
    ]
    .into_iter()
    .flatten()
    {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

/// Opens the scope index, discarding it when unreadable or ahead of the log.
fn open_scope(paths: &Paths, last_seq: Option<u64>) -> anyhow::Result<(ScopeIndex, Option<u64>)> {
    match ScopeIndex::open(&paths.scope) {
        Ok((index, seq)) if seq <= last_seq || seq.is_none() => return Ok((index, seq)),
        Ok((_, seq)) => tracing::warn!(
            ?seq,
            ?last_seq,
            "scope index is ahead of the log; rebuilding"
        ),
        Err(e) => tracing::warn!(error = %e, "scope index unreadable; rebuilding from the log"),
    }
    std::fs::remove_dir_all(&paths.scope).ok();
    std::fs::create_dir_all(&paths.scope)?;
    let (index, _) = ScopeIndex::open(&paths.scope).context("creating a fresh scope index")?;
    Ok((index, None))
}

/// Replays records into the table and vectors; the scope index gets those it lacks.
fn replay(shared: &Shared, records: Vec<LogRecord>, scope_seq: Option<u64>) -> anyhow::Result<()> {
    for rec in records {
        let Record::Put(put) =
            decode(&rec.payload).with_context(|| format!("log record seq {}", rec.seq))?;
        let needs_scope = scope_seq.is_none_or(|s| rec.seq > s);
        let doc = shared.table.read().len() as u32;
        apply_put(shared, rec.seq, put, false).map_err(anyhow::Error::msg)?;
        if needs_scope {
            let table = shared.table.read();
            if let Some(entry) = table.get(doc) {
                shared.scope.add(&entry.scope_doc())?;
            }
        }
    }
    let docs = shared.table.read().len() as u64;
    if shared.scope.has_uncommitted() || scope_seq.is_some() {
        tracing::info!(docs, "scope index caught up with the log");
    }
    Ok(())
}

/// Loads the HNSW snapshot and inserts what it lacks, or rebuilds it from the stored vectors.
fn attach_hnsw(
    shared: Arc<Shared>,
    config: &EngineConfig,
    last_seq: Option<u64>,
) -> anyhow::Result<Arc<Shared>> {
    let loaded = match HnswIndex::load(&shared.paths.hnsw, config.hnsw) {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "hnsw snapshot unusable; rebuilding from stored vectors");
            None
        }
    };
    let table = shared.table.read();
    let (hnsw, from) = match loaded {
        Some((h, seq)) if Some(seq) <= last_seq && h.len() == count_upto(&table, seq) => {
            let len = h.len();
            (h, len)
        }
        Some(_) => {
            tracing::warn!("hnsw snapshot disagrees with the log; rebuilding");
            (HnswIndex::new(config.hnsw), 0)
        }
        None => (HnswIndex::new(config.hnsw), 0),
    };
    let items: Vec<(u32, Vec<f32>)> = (from..table.len())
        .filter_map(|doc| shared.vectors.get(doc as u32).map(|v| (doc as u32, v)))
        .collect();
    drop(table);
    let refs: Vec<(u32, &[f32])> = items.iter().map(|(d, v)| (*d, v.as_slice())).collect();
    if !refs.is_empty() {
        hnsw.insert_batch(&refs)
            .context("rebuilding the hnsw graph")?;
        tracing::info!(inserted = refs.len(), "hnsw caught up with the log");
    }
    let mut shared = Arc::into_inner(shared).context("engine state shared during open")?;
    shared.hnsw = hnsw;
    Ok(Arc::new(shared))
}

fn count_upto(table: &Table, seq: u64) -> usize {
    let all = table.tail(0);
    all.partition_point(|e| e.seq <= seq)
}

fn start(
    shared: Arc<Shared>,
    log: Log,
    config: EngineConfig,
    embedder: Arc<dyn Embedder>,
) -> anyhow::Result<Engine> {
    let (tx, rx) = mpsc::channel();
    let writer = Writer::new(Arc::clone(&shared), log, config.writer.clone());
    let handle = std::thread::Builder::new()
        .name("episodic-writer".into())
        .spawn(move || writer.run(&rx))
        .context("spawning the writer thread")?;
    let cpu = CpuPool::new(config.cpu_threads).context("building the cpu pool")?;
    Ok(Engine {
        shared,
        tx,
        embedder,
        cpu,
        config: Arc::new(config),
        writer_thread: Arc::new(parking_lot::Mutex::new(Some(handle))),
    })
}
