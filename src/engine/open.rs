//! Start-up: open the audit trail and the event log, catch the table up with the log (the
//! writer's [`catch_up`], record by record as the log is read), bring each derived index up
//! to the log's last sequence (catch-up or full rebuild), check every witness, then start
//! the writer thread.
//!
//! Invariants: an index whose recorded sequence is ahead of the log, whose contents disagree
//! with the log, or which fails to open is discarded and rebuilt from the log; nothing here
//! re-embeds text; the model that serves is the one that made the log's vectors (the
//! configured one, or the re-embedding target once the log holds its vectors), and a log of
//! another model's vectors is refused, never mixed ([`settle_model`]); the event log is opened here (through [`store::LogLocation::open`], the
//! one choice of implementation: the data directory's file or a stream) and from then on
//! reached only through [`EventLog`].

use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::sync::Arc;

use anyhow::Context;
use arc_swap::{ArcSwap, ArcSwapOption};
use parking_lot::RwLock;

use super::logged::Reconciled;
use super::recovery;
use super::shared::{lock_data_dir, DataDirLock, Paths, Serving, Shared};
use super::writer::{catch_up, table_fingerprint, Writer};
use super::{graphs, partitions, reembed, Engine, EngineConfig};
use crate::audit::AuditAppender;
use crate::cpu::CpuPool;
use crate::embed::Embedder;
use crate::index::scope::{CommitMark, ScopeIndex, ScopeIndexError};
use crate::index::vector::{HnswIndex, VectorStore};
use crate::read::{Slot, Table};
use crate::store::EventLog;

/// Opens the engine of `config.data_dir`, under `lock` when the caller took it already
/// (it must be that directory's), else taking it here.
pub(super) fn open(
    config: EngineConfig,
    embedder: Arc<dyn Embedder>,
    lock: Option<DataDirLock>,
) -> anyhow::Result<Engine> {
    let paths = Paths::new(&config.data_dir);
    create_dirs(&paths)?;
    crate::fsutil::tighten_data_dir(&config.data_dir);
    let dir_lock = match lock {
        Some(lock) => {
            anyhow::ensure!(
                lock.dir() == config.data_dir,
                "the lock held is of {}, not of the data directory {}",
                lock.dir().display(),
                config.data_dir.display()
            );
            lock.into_file()
        }
        None => lock_data_dir(&config.data_dir)?,
    };
    let (mut audit, trail) = match &config.audit_log {
        crate::store::LogLocation::Local => AuditAppender::open(&paths.audit)?,
        remote => {
            let shown = remote.describe(&paths.audit);
            let (mirror, _) = remote
                .open(&paths.audit)
                .with_context(|| format!("opening audit {shown}"))?;
            AuditAppender::open_mirrored(&paths.audit, mirror)?
        }
    };
    let keyed = match &config.audit_secret {
        Some(keyed) => keyed.clone(),
        None => crate::audit::Keyed::open_or_create(&paths.hash_key)?,
    };
    let (scope, scope_seq) = open_scope(&paths)?;
    let mark = scope.commit_mark().ok().flatten();
    let hnsw_seq = HnswIndex::snapshot_seq(&paths.hnsw).ok().flatten();
    let (mut log_witnesses, audit_witnesses) = recovery::index_witnesses(mark, hnsw_seq);
    log_witnesses.extend(recovery::trail_witness(trail.max_log_seq));
    recovery::check(
        &paths.audit,
        audit.last_seq(),
        &audit_witnesses,
        &config.data_dir,
    )?;
    let serving = Serving {
        coalescer: config.coalescer_for(&embedder)?,
        embedder,
    };
    let shared = Arc::new(Shared {
        table: RwLock::new(Table::new(config.stale)),
        // Unlabelled, of dimension 0: it takes the log's model and dimension as it is read,
        // and `settle_model` then checks them against the configured model.
        vectors: ArcSwap::from_pointee(VectorStore::new(0)),
        hnsw: ArcSwap::from_pointee(HnswIndex::new(config.hnsw)),
        hnsw_enabled: config.recall.approximate,
        partition: ArcSwapOption::empty(),
        partition_min_vectors: config
            .recall
            .partitioned
            .then_some(config.recall.partition_min_vectors),
        partition_building: std::sync::atomic::AtomicBool::new(false),
        partition_epoch: Default::default(),
        graphs: Default::default(),
        graph_min_vectors: config
            .recall
            .graphs
            .then_some(config.recall.graph_min_vectors),
        measure_graphs: config.recall.calibrated_graphs,
        measure_probes: config.recall.calibrated_probes,
        graph_building: std::sync::atomic::AtomicBool::new(false),
        graph_epoch: Default::default(),
        graph_disk: Default::default(),
        scope,
        watermark: AtomicUsize::new(0),
        scope_health: Default::default(),
        audit: Arc::clone(audit.trail()),
        keyed,
        paths: paths.clone(),
        serving: ArcSwap::from_pointee(serving),
        reembed_epoch: Default::default(),
        reembed: RwLock::new(None),
    });
    let mut reconciled = Reconciled {
        after: recovery::reconcile_from(trail.max_log_seq, trail.entries),
        entries: Vec::new(),
    };
    let shown = config.log.describe(&paths.log);
    let (log, recovered) = config
        .log
        .open(&paths.log)
        .with_context(|| format!("opening log {shown}"))?;
    catch_up(&shared, log.as_ref(), &shown, scope_seq, &mut reconciled)?;
    let walk_to = settle_model(&shared, &config)?;
    if recovered.truncated_bytes > 0 {
        tracing::warn!(
            bytes = recovered.truncated_bytes,
            "dropped a torn, unacknowledged log tail"
        );
    }
    let last_seq = recovered.last_seq;
    recovery::check(&paths.log, last_seq, &log_witnesses, &config.data_dir)?;
    // A standby audits nothing: what the trail lacks is audited when it is promoted.
    if !reconciled.entries.is_empty() && !config.follower {
        tracing::warn!(
            entries = reconciled.entries.len(),
            "audited logged records the trail lacked (the writer stopped before the trail's fsync)"
        );
        let mut entries = reconciled.entries;
        audit
            .append_batch(&mut entries)
            .with_context(|| format!("appending to {}", paths.audit.display()))?;
    }
    attach_hnsw(&shared, &config, last_seq)?;
    let next_doc = shared.table.read().next_doc() as usize;
    let mark = CommitMark {
        last_seq: last_seq.unwrap_or(0),
        audit_seq: Some(audit.last_seq().unwrap_or(0)),
    };
    shared
        .scope
        .commit_marked(mark)
        .context("committing the scope index after catch-up")?;
    verify_scope(&shared, mark)?;
    shared
        .watermark
        .store(next_doc, std::sync::atomic::Ordering::Release);
    tracing::info!(
        events = shared.table.read().live(),
        "engine recovered from the log"
    );
    partitions::maybe_rebuild(&shared);
    if shared.graph_min_vectors.is_none() {
        // Graph recall is off: saved graphs would go stale.
        graphs::remove_files(&shared);
    }
    graphs::maybe_update(&shared);
    start(shared, log, audit, config, walk_to, dir_lock)
}

/// Checks the log's model against the configured one and the re-embedding target, labels
/// the vector store, and sets the model that serves; the target still to walk to, if any.
///
/// - an empty log takes the configured model;
/// - a log of the configured model's vectors (or of unrecorded ones, from before models
///   were recorded, of its dimension) is served by it, and re-embedded if a target is set;
/// - a log of the target's vectors (a re-embedding switched) is served by the target;
/// - any other log is refused, naming both models;
/// - offline maintenance (which never embeds) takes the log's model whatever it is.
fn settle_model(shared: &Shared, config: &EngineConfig) -> anyhow::Result<Option<Arc<Serving>>> {
    let primary = Arc::clone(&shared.serving.load().embedder);
    if primary.model_id() == crate::embed::OFFLINE_MODEL_ID {
        return Ok(None);
    }
    let store = shared.vectors.load_full();
    let target = config.reembed_to.as_ref().map(|t| Arc::clone(&t.0));
    let target = target.filter(|t| t.model_id() != primary.model_id());
    if store.dim() == 0 {
        shared.vectors.store(Arc::new(VectorStore::for_model(
            primary.model_id(),
            primary.dim(),
        )));
        return target.map(|t| serving_of(config, t)).transpose();
    }
    let label = store.model().map(str::to_string);
    if let (Some(t), Some(l)) = (&target, &label) {
        if t.model_id() == l && t.dim() == store.dim() {
            shared.serving.store(serving_of(config, Arc::clone(t))?);
            shared.paths.remove_reembed_files();
            return Ok(None);
        }
    }
    let ours = match &label {
        Some(l) => l == primary.model_id(),
        None => true,
    };
    anyhow::ensure!(
        ours && store.dim() == primary.dim(),
        "the event log's vectors were made by {} ({} dimensions), but this server embeds with \
         {} ({} dimensions): vectors of two models cannot be compared. Start it with the \
         model files of {} (--model-dir), or, to change models, start it with those and \
         --reembed-to the new model's directory",
        label.as_deref().unwrap_or("an unrecorded model"),
        store.dim(),
        primary.model_id(),
        primary.dim(),
        label.as_deref().unwrap_or("that model"),
    );
    if label.is_none() {
        // Older records name no model: they are taken to be the configured model's.
        let _ = store.label(primary.model_id());
    }
    target.map(|t| serving_of(config, t)).transpose()
}

/// The serving model of `embedder`, with a batching worker of its own.
fn serving_of(config: &EngineConfig, embedder: Arc<dyn Embedder>) -> anyhow::Result<Arc<Serving>> {
    let coalescer = crate::embed::Coalescer::start(
        Arc::clone(&embedder),
        config.embed_max_wait,
        crate::embed::coalesce::DEFAULT_MAX_BATCH,
    )
    .map_err(|e| anyhow::anyhow!("starting the embedding worker: {e}"))?;
    Ok(Arc::new(Serving {
        embedder,
        coalescer,
    }))
}

fn create_dirs(paths: &Paths) -> anyhow::Result<()> {
    for dir in [
        paths.log.parent(),
        paths.audit.parent(),
        Some(paths.scope.as_path()),
        Some(paths.hnsw.as_path()),
    ]
    .into_iter()
    .flatten()
    {
        crate::fsutil::create_private_dir_all(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

/// Opens the scope index, discarding it when unreadable (an index ahead of the log is found
/// after catch-up and rebuilt by [`rebuild_scope`]).
fn open_scope(paths: &Paths) -> anyhow::Result<(ScopeIndex, Option<u64>)> {
    // A damaged index must never stop start-up: a panic inside tantivy while opening it
    // is treated like any other unreadable index.
    let opened = std::panic::catch_unwind(|| ScopeIndex::open(&paths.scope)).unwrap_or_else(|_| {
        Err(ScopeIndexError::Index {
            path: paths.scope.display().to_string(),
            message: "panicked while opening".to_string(),
        })
    });
    match opened {
        Ok(found) => return Ok(found),
        Err(e) => tracing::warn!(error = %e, "scope index unreadable; rebuilding from the log"),
    }
    std::fs::remove_dir_all(&paths.scope).ok();
    crate::fsutil::create_private_dir_all(&paths.scope)?;
    let (index, _) = ScopeIndex::open(&paths.scope).context("creating a fresh scope index")?;
    Ok((index, None))
}

/// Compares the committed scope index with the table's live events and rebuilds it when
/// they differ: an index that lost events (a failed commit before a crash, a damaged or
/// hand-edited directory) or kept deleted ones never survives a start.
fn verify_scope(shared: &Shared, mark: CommitMark) -> anyhow::Result<()> {
    let want = table_fingerprint(&shared.table.read());
    let have = shared.scope.fingerprint();
    if have == want {
        return Ok(());
    }
    tracing::warn!(
        index_events = have.docs,
        log_events = want.docs,
        "scope index disagrees with the log; rebuilding it"
    );
    rebuild_scope(shared)?;
    shared
        .scope
        .commit_marked(mark)
        .context("committing the rebuilt scope index")?;
    let have = shared.scope.fingerprint();
    anyhow::ensure!(
        have == want,
        "the rebuilt scope index holds {} events, the log {}",
        have.docs,
        want.docs
    );
    Ok(())
}

/// Replaces the scope index's contents with the table's live entries (the index recorded a
/// sequence the log does not reach, so it may hold events the log lost).
fn rebuild_scope(shared: &Shared) -> anyhow::Result<()> {
    shared.scope.clear()?;
    let table = shared.table.read();
    for entry in table.live_from(0) {
        shared.scope.add(&entry.scope_doc())?;
    }
    Ok(())
}

/// Removes the HNSW snapshot of an earlier run with approximate recall: it would go stale
/// (and keep vectors of events deleted meanwhile) while the graph is not maintained. The
/// removal is logged only when there was a snapshot (the directory is created empty at every
/// open).
fn remove_hnsw_snapshot(dir: &std::path::Path) -> anyhow::Result<()> {
    let held = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(e).with_context(|| format!("reading the hnsw directory {}", dir.display()))
        }
    };
    std::fs::remove_dir_all(dir)
        .with_context(|| format!("removing the unused hnsw snapshot {}", dir.display()))?;
    if held {
        tracing::info!(dir = %dir.display(), "approximate recall is off: removed the hnsw snapshot");
    }
    Ok(())
}

/// Loads the HNSW snapshot and inserts what it lacks, or rebuilds it from the stored vectors.
/// The snapshot holds every vector logged up to its sequence, deleted or not (until compaction).
fn attach_hnsw(
    shared: &Shared,
    config: &EngineConfig,
    last_seq: Option<u64>,
) -> anyhow::Result<()> {
    if !shared.hnsw_enabled {
        return remove_hnsw_snapshot(&shared.paths.hnsw);
    }
    let loaded = match HnswIndex::load(&shared.paths.hnsw, config.hnsw) {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "hnsw snapshot unusable; rebuilding from stored vectors");
            None
        }
    };
    let table = shared.table.read();
    let (hnsw, from_seq) = match loaded {
        Some((h, seq)) if Some(seq) <= last_seq && h.len() == vectors_upto(&table, seq) => {
            (h, Some(seq))
        }
        Some(_) => {
            tracing::warn!("hnsw snapshot disagrees with the log; rebuilding");
            (HnswIndex::new(config.hnsw), None)
        }
        None => (HnswIndex::new(config.hnsw), None),
    };
    let vectors = shared.vectors.load();
    let items: Vec<(u32, Vec<f32>)> = indexed_slots(&table)
        .filter(|(_, seq)| from_seq.is_none_or(|s| *seq > s))
        .filter_map(|(doc, _)| vectors.get(doc).map(|v| (doc, v)))
        .collect();
    drop(table);
    let refs: Vec<(u32, &[f32])> = items.iter().map(|(d, v)| (*d, v.as_slice())).collect();
    if !refs.is_empty() {
        hnsw.insert_batch(&refs)
            .context("rebuilding the hnsw graph")?;
        tracing::info!(inserted = refs.len(), "hnsw caught up with the log");
    }
    shared.hnsw.store(Arc::new(hnsw));
    Ok(())
}

/// `(doc, seq)` of every slot whose vector is in the log (live, or deleted but unpurged).
fn indexed_slots(table: &Table) -> impl Iterator<Item = (u32, u64)> + '_ {
    table.slots().iter().filter_map(|s| match s {
        Slot::Live(e) => Some((e.doc, e.seq)),
        Slot::Deleted(t) if t.unpurged => Some((t.doc, t.seq)),
        Slot::Deleted(_) | Slot::Empty => None,
    })
}

fn vectors_upto(table: &Table, seq: u64) -> usize {
    indexed_slots(table).filter(|(_, s)| *s <= seq).count()
}

fn start(
    shared: Arc<Shared>,
    log: Box<dyn EventLog>,
    audit: AuditAppender,
    config: EngineConfig,
    walk_to: Option<Arc<Serving>>,
    dir_lock: std::fs::File,
) -> anyhow::Result<Engine> {
    let (tx, rx) = mpsc::channel();
    let writer = Writer::new(Arc::clone(&shared), log, audit, config.writer.clone());
    let writer = if config.follower {
        writer.following()
    } else {
        writer
    };
    let handle = std::thread::Builder::new()
        .name("episodic-writer".into())
        .spawn(move || {
            // The directory stays locked exactly as long as this thread can write.
            let _dir_lock = dir_lock;
            writer.run(&rx);
        })
        .context("spawning the writer thread")?;
    let cpu = match &config.cpu_pool {
        Some(pool) => pool.clone(),
        None => CpuPool::new(config.cpu_threads).context("building the cpu pool")?,
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let walk = match walk_to {
        Some(target) if !config.follower => Some(
            reembed::start(
                Arc::clone(&shared),
                tx.clone(),
                target,
                config.passage,
                Arc::clone(&stop),
            )
            .context("spawning the re-embedding thread")?,
        ),
        Some(_) | None => None,
    };
    Ok(Engine {
        shared,
        tx,
        cpu,
        config: Arc::new(config),
        writer_thread: Arc::new(parking_lot::Mutex::new(Some(handle))),
        reembed_stop: stop,
        reembed_thread: Arc::new(parking_lot::Mutex::new(walk)),
    })
}
