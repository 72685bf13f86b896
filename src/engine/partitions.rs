//! Keeps the vector partitions of partitioned recall ([`crate::index::vector::Partition`])
//! up to date: built in the background once the store holds
//! [`crate::retrieve::RecallConfig::partition_min_vectors`] vectors, and rebuilt whole (new centroids, new lists) once the vectors they do not
//! cover reach an eighth of those they do, so total build work stays proportional to the
//! corpus. Compaction drops them and starts a rebuild: centroids are means of stored
//! vectors, and none may outlive the vectors a purge removed.
//!
//! Invariants: at most one build runs at a time; a build that started before a reset
//! (compaction) publishes nothing; a build never holds the table lock
//! beyond copying the heads (one pass over a dense array); until a build finishes, recall
//! uses whatever partition (or the exact path) it had; a list's copy of a head is used only
//! while the table has not marked it changed, so it always equals the table's.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::Shared;
use crate::index::vector::Partition;
use crate::read::Partitioned;

/// Whether partitioned recall is on and the vectors past the partition's `upto` call for a
/// rebuild.
fn due(shared: &Shared) -> bool {
    let n = shared.vectors.load().len();
    if shared.partition_min_vectors.is_none_or(|min| n < min) {
        return false;
    }
    match &*shared.partition.load() {
        None => true,
        Some(p) => {
            n.saturating_sub(p.index.upto() as usize) >= (p.index.upto() as usize / 8).max(4096)
        }
    }
}

/// Whether a build runs, or one is due (it starts at the writer's next upkeep).
pub(crate) fn pending(shared: &Shared) -> bool {
    shared.partition_building.load(Ordering::Acquire) || due(shared)
}

/// Starts a background build when partitioned recall is on, one is due and none runs.
pub(crate) fn maybe_rebuild(shared: &Arc<Shared>) {
    if !due(shared) {
        return;
    }
    if shared.partition_building.swap(true, Ordering::AcqRel) {
        return;
    }
    let shared = Arc::clone(shared);
    rayon::spawn(move || {
        let epoch = *shared.partition_epoch.lock();
        let started = std::time::Instant::now();
        let copy = shared.table.read().watched_heads();
        let vectors = shared.vectors.load_full();
        let lists = Partition::lists_for(copy.0.len());
        if let Some(p) = Partitioned::build(&vectors, copy, (lists, shared.measure_probes)) {
            // A build that started before a compaction holds what the purge removed.
            let current = shared.partition_epoch.lock();
            if *current == epoch {
                tracing::info!(
                    vectors = p.index.upto(),
                    lists,
                    probe_shares = ?p.curve().buckets(),
                    seconds = started.elapsed().as_secs_f64(),
                    "vector partitions built"
                );
                shared.partition.store(Some(Arc::new(p)));
            }
        }
        shared.partition_building.store(false, Ordering::Release);
    });
}

/// Drops the partitions (after compaction) and starts a rebuild; a build already running
/// publishes nothing.
pub(crate) fn reset(shared: &Arc<Shared>) {
    {
        let mut epoch = shared.partition_epoch.lock();
        *epoch += 1;
        shared.partition.store(None);
    }
    maybe_rebuild(shared);
}
