//! Keeps the per-tenant HNSW graphs of graph recall ([`crate::read::TenantGraphs`]) up to
//! date, in the background: once the vectors written since the last update reach
//! [`GRAPH_BATCH`], one update counts them by tenant, inserts those of tenants that have a
//! graph into it (on the CPU pool, in parallel), builds a graph for each tenant that has
//! reached [`crate::retrieve::RecallConfig::graph_min_vectors`], takes a read-only copy of
//! each graph that changed (what recall searches), and publishes the new set. When it
//! builds several graphs (largest tenant first), it publishes and saves the set after each
//! one, so that a stop in the middle loses only the graph being built.
//! Compaction drops every graph and starts over: a graph holds copies of vectors, and none
//! may outlive the vectors a purge removed.
//!
//! Graphs are saved after an update that built them, and again once they grew by a quarter
//! ([`super::graph_files`]); the first update after a start reads them back, checks each
//! against the table, extends it with what its tenant wrote since, and publishes them
//! before building any other. Compaction removes the files with the graphs.
//!
//! Invariants: at most one update runs at a time, never on the writer thread, and holds the
//! table lock only to read tenant numbers and, to read graphs back or save them, the records
//! their points' ids hold (files are read and written without it); an update that started before a reset publishes
//! nothing (the epoch); until an update is published, recall reads the previous set, whose
//! uncovered ids (at or above its `upto`) are scored exactly as its tail.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::graph_files::{self, Witness};
use super::shared::Shared;
use crate::index::vector::calibrate::GraphTuning;
use crate::index::vector::{FrozenGraph, HnswIndex, HnswParams, VectorError, VectorStore};
use crate::read::{GraphKeys, TenantGraphs, NONE};
use crate::retrieve::GRAPH_FANOUT;

/// The tenant graphs' files, as the engine keeps track of them.
#[derive(Debug, Default)]
pub struct GraphDisk {
    /// Points of each tenant's graph when it was last saved or read back.
    saved: parking_lot::Mutex<HashMap<u32, usize>>,
    /// Whether the saved graphs were read back (once, by the first update).
    read: AtomicBool,
    /// Set by shutdown: nothing more is written.
    stop: AtomicBool,
    /// Held while graph files are written or removed.
    io: parking_lot::Mutex<()>,
    /// Points read back at the start.
    loaded: AtomicUsize,
}

impl GraphDisk {
    /// Points of the graphs read back from disk at the start (0 when none were, or all
    /// were rebuilt).
    pub fn loaded(&self) -> usize {
        self.loaded.load(Ordering::Acquire)
    }

    /// Stops writing graph files, after the one being written, if any.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        drop(self.io.lock());
    }
}

/// A graph grows by this share of its points (1 / n) before it is saved again.
const SAVE_GROWTH_DIVISOR: usize = 4;

/// A graph grows by this share of its points (1 / n) before its widths are measured again.
const RETUNE_GROWTH_DIVISOR: usize = 4;

/// Vectors written since the last update that start the next one. Until then they are a
/// tail every graph recall of their tenant scores exactly (at most this many, about 0.3 ms
/// of CPU were they all one tenant's).
pub const GRAPH_BATCH: usize = 1024;

/// Links per node and layer of a tenant graph (hnsw_rs `max_nb_connection`). With 16 links
/// and an insert width of 100, hnsw_rs graphs reached recall@10 of only 0.79 at search
/// width 160 on the grid's clustered vectors (0.977 at 1,024), and 0.982 on real-model
/// embeddings; with 32 and 200, 1.000 and 0.994, for 3.5 times the build time.
pub const GRAPH_M: usize = 32;

/// Candidate list width while inserting into a tenant graph.
pub const GRAPH_EF_CONSTRUCTION: usize = 200;

/// Vectors copied out of the store per parallel insert (bounds the copy's memory).
const INSERT_CHUNK: usize = 16_384;

/// Whether graph recall is on, some tenant could have a graph, and a batch is waiting.
fn due(shared: &Shared) -> bool {
    let Some(min) = shared.graph_min_vectors else {
        return false;
    };
    let n = shared.vectors.load().len();
    n >= min && n.saturating_sub(shared.graphs.load().upto() as usize) >= GRAPH_BATCH
}

/// Starts a background update when one is due and none runs.
pub(crate) fn maybe_update(shared: &Arc<Shared>) {
    if !due(shared) || shared.graph_building.swap(true, Ordering::AcqRel) {
        return;
    }
    let shared = Arc::clone(shared);
    rayon::spawn(move || {
        let epoch = *shared.graph_epoch.lock();
        if !shared.graph_disk.read.swap(true, Ordering::AcqRel) {
            if let Err(e) = read_back(&shared, epoch) {
                tracing::warn!(error = %e, "saved tenant graphs not read back");
            }
        }
        let started = std::time::Instant::now();
        let min = shared.graph_min_vectors.unwrap_or(usize::MAX);
        match update(&shared, min, epoch) {
            Ok(0) => {}
            Ok(built) => {
                let set = shared.graphs.load();
                tracing::info!(
                    graphs = set.graphs().len(),
                    points = set.points(),
                    built,
                    seconds = started.elapsed().as_secs_f64(),
                    "tenant graphs built"
                );
            }
            Err(e) => tracing::warn!(error = %e, "tenant graph update failed"),
        }
        shared.graph_building.store(false, Ordering::Release);
    });
}

/// Publishes `next` unless the graphs were reset since `epoch`, then saves what grew in it
/// ([`save_grown`]); whether it was published.
fn publish(shared: &Shared, next: TenantGraphs, epoch: u64) -> bool {
    let next = Arc::new(next);
    {
        let current = shared.graph_epoch.lock();
        if *current != epoch {
            return false;
        }
        shared.graphs.store(Arc::clone(&next));
    }
    save_grown(shared, &next, epoch);
    true
}

/// Reads the saved graphs back (see the module docs) and publishes those that pass, each
/// extended by its tenant's vectors written since it was saved, with every tenant's count.
fn read_back(shared: &Shared, epoch: u64) -> Result<(), VectorError> {
    let vectors = shared.vectors.load_full();
    let Some(model) = vectors.model().map(str::to_string) else {
        return Ok(());
    };
    let dir = &shared.paths.graphs;
    let started = std::time::Instant::now();
    // Files are read and checksummed without the table lock, which writes need.
    let read = graph_files::read_all(dir, graph_params(0), &model);
    if read.is_empty() {
        return Ok(());
    }
    let (upto, tenants, checked) = {
        let table = shared.table.read();
        let upto = (vectors.len() as u32).min(table.next_doc());
        let tenants: Vec<u32> = (0..upto).map(|d| table.head(d).tenant).collect();
        let checked: Vec<_> = read
            .into_iter()
            .map(|r| (graph_files::check(&r, &table, upto), r))
            .collect();
        (upto, tenants, checked)
    };
    let mut counts: HashMap<u32, u32> = HashMap::new();
    for &t in tenants.iter().filter(|&&t| t != NONE) {
        *counts.entry(t).or_default() += 1;
    }
    let (mut graphs, mut frozen, mut saved) = (HashMap::new(), HashMap::new(), HashMap::new());
    for (number, r) in checked {
        let number = match number {
            Ok(n) => n,
            Err(reason) => {
                graph_files::rejected(dir, &r.tenant, &reason);
                continue;
            }
        };
        let since: Vec<u32> = (r.witness.upto..upto)
            .filter(|&d| tenants[d as usize] == number)
            .collect();
        let copy = if since.is_empty() {
            r.frozen
        } else {
            insert(&r.graph, &vectors, &since)?;
            r.graph.freeze()
        };
        saved.insert(number, r.witness.points.len());
        frozen.insert(number, Arc::new(copy));
        graphs.insert(number, Arc::new(r.graph));
    }
    let keys = keyed(shared, &TenantGraphs::default(), &frozen);
    let tunings = tuned(shared, &vectors, &TenantGraphs::default(), &frozen);
    let set = TenantGraphs::new(upto, counts, graphs, frozen, (keys, tunings));
    let current = shared.graph_epoch.lock();
    if *current == epoch && shared.graphs.load().upto() == 0 {
        // The points read from disk, not those added since they were saved.
        let read: usize = saved.values().sum();
        tracing::info!(
            graphs = set.graphs().len(),
            read,
            points = set.points(),
            seconds = started.elapsed().as_secs_f64(),
            "tenant graphs read back"
        );
        shared.graph_disk.loaded.store(read, Ordering::Release);
        *shared.graph_disk.saved.lock() = saved;
        shared.graphs.store(Arc::new(set));
    }
    Ok(())
}

/// Saves each graph of `set` that was never saved or grew by a [`SAVE_GROWTH_DIVISOR`]th
/// since, and whose copy holds all of it, unless the graphs were reset since `epoch` or
/// the engine is stopping.
fn save_grown(shared: &Shared, set: &TenantGraphs, epoch: u64) {
    let Some(model) = shared.vectors.load().model().map(str::to_string) else {
        return;
    };
    for (&tenant, graph) in set.graphs() {
        let points = graph.len();
        let last = shared.graph_disk.saved.lock().get(&tenant).copied();
        if last.is_some_and(|s| points < s + s / SAVE_GROWTH_DIVISOR) {
            continue;
        }
        let Some(copy) = set.graph(tenant).filter(|c| c.len() == points) else {
            continue;
        };
        let named = {
            let table = shared.table.read();
            table.tenant_name(tenant).and_then(|name| {
                let witness = Witness::of(copy, (name, set.upto()), &model, &table)?;
                Some((name.to_string(), witness))
            })
        };
        let Some((name, witness)) = named else {
            continue;
        };
        let _io = shared.graph_disk.io.lock();
        if shared.graph_disk.stop.load(Ordering::Acquire) || *shared.graph_epoch.lock() != epoch {
            return;
        }
        match graph_files::save(&shared.paths.graphs, &name, graph, &witness) {
            Ok(()) => {
                shared.graph_disk.saved.lock().insert(tenant, points);
            }
            Err(e) => tracing::warn!(tenant = %name, error = %e, "tenant graph not saved"),
        }
    }
}

/// A tenant graph's shape, for `points` vectors.
fn graph_params(points: usize) -> HnswParams {
    HnswParams {
        m: GRAPH_M,
        ef_construction: GRAPH_EF_CONSTRUCTION,
        ef_search: GRAPH_EF_CONSTRUCTION,
        max_elements: points * 2,
    }
}

/// Drops every graph and its files (after compaction) and starts over.
pub(crate) fn reset(shared: &Arc<Shared>) {
    {
        let _io = shared.graph_disk.io.lock();
        let mut epoch = shared.graph_epoch.lock();
        *epoch += 1;
        shared.graphs.store(Arc::default());
        shared.graph_disk.saved.lock().clear();
        remove_files(shared);
    }
    maybe_update(shared);
}

/// Removes every saved graph.
pub(crate) fn remove_files(shared: &Shared) {
    let dir = &shared.paths.graphs;
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove the tenant graphs");
        }
    }
}

/// Publishes the next set: the current one's graphs extended by the ids written since,
/// plus a new graph for every tenant that reached `min`, each new graph published (and
/// saved) as soon as it is built, so that a stop loses at most the one being built;
/// returns how many graphs were new. Stops when the graphs were reset since `epoch`.
fn update(shared: &Shared, min: usize, epoch: u64) -> Result<usize, VectorError> {
    let current = shared.graphs.load_full();
    let vectors = shared.vectors.load_full();
    let from = current.upto();
    let (upto, fresh) = {
        let table = shared.table.read();
        // Every id the table holds has its vector; the store may be ahead of the table.
        let upto = (vectors.len() as u32).min(table.next_doc()).max(from);
        let tenants: Vec<u32> = (from..upto).map(|d| table.head(d).tenant).collect();
        (upto, tenants)
    };
    let mut counts = current.counts().clone();
    let mut graphs = current.graphs().clone();
    let mut added: HashMap<u32, Vec<u32>> = HashMap::new();
    for (doc, tenant) in (from..).zip(fresh) {
        if tenant != NONE {
            added.entry(tenant).or_default().push(doc);
            *counts.entry(tenant).or_default() += 1;
        }
    }
    let mut frozen = current.frozen().clone();
    for (tenant, docs) in &added {
        if let Some(graph) = graphs.get(tenant) {
            insert(graph, &vectors, docs)?;
            frozen.insert(*tenant, Arc::new(graph.freeze()));
        }
    }
    let mut newcomers: Vec<u32> = counts
        .iter()
        .filter(|(t, c)| **c as usize >= min && !graphs.contains_key(t))
        .map(|(t, _)| *t)
        .collect();
    // Largest first: the graphs that save recall the most work are searchable soonest.
    newcomers.sort_unstable_by_key(|t| (std::cmp::Reverse(counts[t]), *t));
    // Each set's keys and widths are made against the set published last, whose copies
    // (all but the newest graph's) they reuse.
    let set = |graphs: &HashMap<_, _>, frozen: &HashMap<_, _>| {
        let current = shared.graphs.load_full();
        let keys = keyed(shared, &current, frozen);
        let tunings = tuned(shared, &vectors, &current, frozen);
        TenantGraphs::new(
            upto,
            counts.clone(),
            graphs.clone(),
            frozen.clone(),
            (keys, tunings),
        )
    };
    if newcomers.is_empty() {
        publish(shared, set(&graphs, &frozen), epoch);
        return Ok(0);
    }
    let tenants: Vec<u32> = {
        let table = shared.table.read();
        (0..upto).map(|d| table.head(d).tenant).collect()
    };
    for (built, tenant) in newcomers.iter().enumerate() {
        if shared.graph_disk.stop.load(Ordering::Acquire) {
            // The engine is shutting down: the graph could be neither served nor saved.
            return Ok(built);
        }
        let docs: Vec<u32> = (0..upto)
            .filter(|d| tenants[*d as usize] == *tenant)
            .collect();
        let graph = HnswIndex::new(graph_params(docs.len()));
        insert(&graph, &vectors, &docs)?;
        frozen.insert(*tenant, Arc::new(graph.freeze()));
        graphs.insert(*tenant, Arc::new(graph));
        if !publish(shared, set(&graphs, &frozen), epoch) {
            return Ok(built);
        }
    }
    Ok(newcomers.len())
}

/// The scope keys of each copy in `frozen`: `current`'s for a copy it holds too, new ones
/// for the others, each made under its own hold of the table's read lock (about 10 ms for a
/// copy of 100,000 points), so that writers never wait for all of them.
fn keyed(
    shared: &Shared,
    current: &TenantGraphs,
    frozen: &HashMap<u32, Arc<FrozenGraph>>,
) -> HashMap<u32, Arc<GraphKeys>> {
    frozen
        .iter()
        .map(|(&tenant, copy)| {
            let same = current.graph(tenant).is_some_and(|c| Arc::ptr_eq(c, copy));
            let keys = match current.keys(tenant) {
                Some(keys) if same => Arc::clone(keys),
                _ => Arc::new(GraphKeys::of(copy.ids(), &shared.table.read())),
            };
            (tenant, keys)
        })
        .collect()
}

/// The widths each copy in `frozen` needs ([`GraphTuning`]): `current`'s measure while the
/// graph has grown by less than a [`RETUNE_GROWTH_DIVISOR`]th since it was taken, a new one
/// for the others (recall at a given width falls only slowly as a graph grows); none when
/// a fixed width is set, which recall then uses.
fn tuned(
    shared: &Shared,
    vectors: &VectorStore,
    current: &TenantGraphs,
    frozen: &HashMap<u32, Arc<FrozenGraph>>,
) -> HashMap<u32, GraphTuning> {
    if !shared.measure_graphs {
        return HashMap::new();
    }
    frozen
        .iter()
        .map(|(&tenant, copy)| {
            let tuning = match current.tuning(tenant) {
                Some(t) if copy.len() < t.points + t.points / RETUNE_GROWTH_DIVISOR => *t,
                _ => {
                    let started = std::time::Instant::now();
                    let t = GraphTuning::measure(vectors, copy, GRAPH_FANOUT);
                    tracing::info!(
                        tenant,
                        points = t.points,
                        plain = ?t.plain,
                        within = ?t.within,
                        seconds = started.elapsed().as_secs_f64(),
                        "tenant graph widths measured"
                    );
                    t
                }
            };
            (tenant, tuning)
        })
        .collect()
}

/// Inserts the vectors of `docs` into `graph`, a chunk at a time, each in parallel.
fn insert(graph: &HnswIndex, vectors: &VectorStore, docs: &[u32]) -> Result<(), VectorError> {
    for chunk in docs.chunks(INSERT_CHUNK) {
        let owned: Vec<(u32, Vec<f32>)> = chunk
            .iter()
            .filter_map(|&d| vectors.get(d).map(|v| (d, v)))
            .collect();
        let items: Vec<(u32, &[f32])> = owned.iter().map(|(d, v)| (*d, v.as_slice())).collect();
        graph.insert_batch(&items)?;
    }
    Ok(())
}
