//! Keeps the per-tenant HNSW graphs of graph recall ([`crate::read::TenantGraphs`]) up to
//! date, in the background: once the vectors written since the last update reach
//! [`GRAPH_BATCH`], one update counts them by tenant, inserts those of tenants that have a
//! graph into it (on the CPU pool, in parallel), builds a graph for each tenant that has
//! reached [`crate::retrieve::RecallConfig::graph_min_vectors`], takes a read-only copy of
//! each graph that changed (what recall searches), and publishes the new set.
//! Compaction drops every graph and starts over: a graph holds copies of vectors, and none
//! may outlive the vectors a purge removed.
//!
//! Invariants: at most one update runs at a time, never on the writer thread, and holds the
//! table lock only to read tenant numbers; an update that started before a reset publishes
//! nothing (the epoch); until an update is published, recall reads the previous set, whose
//! uncovered ids (at or above its `upto`) are scored exactly as its tail.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::Shared;
use crate::index::vector::{HnswIndex, HnswParams, VectorError, VectorStore};
use crate::read::{TenantGraphs, NONE};

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
        let started = std::time::Instant::now();
        let min = shared.graph_min_vectors.unwrap_or(usize::MAX);
        match update(&shared, min) {
            Ok((next, built)) => {
                let current = shared.graph_epoch.lock();
                if *current == epoch {
                    if built > 0 {
                        tracing::info!(
                            graphs = next.graphs().len(),
                            points = next.points(),
                            built,
                            seconds = started.elapsed().as_secs_f64(),
                            "tenant graphs built"
                        );
                    }
                    shared.graphs.store(Arc::new(next));
                }
            }
            Err(e) => tracing::warn!(error = %e, "tenant graph update failed"),
        }
        shared.graph_building.store(false, Ordering::Release);
    });
}

/// Drops every graph (after compaction) and starts over.
pub(crate) fn reset(shared: &Arc<Shared>) {
    {
        let mut epoch = shared.graph_epoch.lock();
        *epoch += 1;
        shared.graphs.store(Arc::default());
    }
    maybe_update(shared);
}

/// The next set: the current one's graphs extended by the ids written since, plus a new
/// graph for every tenant that reached `min`; with how many graphs were new.
fn update(shared: &Shared, min: usize) -> Result<(TenantGraphs, usize), VectorError> {
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
    let newcomers: Vec<u32> = counts
        .iter()
        .filter(|(t, c)| **c as usize >= min && !graphs.contains_key(t))
        .map(|(t, _)| *t)
        .collect();
    if !newcomers.is_empty() {
        let tenants: Vec<u32> = {
            let table = shared.table.read();
            (0..upto).map(|d| table.head(d).tenant).collect()
        };
        for tenant in &newcomers {
            let docs: Vec<u32> = (0..upto)
                .filter(|d| tenants[*d as usize] == *tenant)
                .collect();
            let graph = HnswIndex::new(HnswParams {
                m: GRAPH_M,
                ef_construction: GRAPH_EF_CONSTRUCTION,
                ef_search: GRAPH_EF_CONSTRUCTION,
                max_elements: docs.len() * 2,
            });
            insert(&graph, &vectors, &docs)?;
            frozen.insert(*tenant, Arc::new(graph.freeze()));
            graphs.insert(*tenant, Arc::new(graph));
        }
    }
    Ok((
        TenantGraphs::new(upto, counts, graphs, frozen),
        newcomers.len(),
    ))
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
