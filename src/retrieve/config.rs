//! How a recall may run: the knobs of its candidate paths (exact scoring, partition
//! lists, per-tenant graphs, filtered HNSW) and of the exact path's code bounds.

use super::codes::CODE_MIN_CANDIDATES;
use super::cost::EXACT_CHEAP_CANDIDATES;
use super::partition::{PARTITION_PROBE_MAX_MEMBERS, PARTITION_PROBE_SHARE};

/// The default [`RecallConfig::partition_min_vectors`]: below it no scope holds enough
/// candidates for a probe to pay off by much (the exact path scores 16,384 in about 5 ms of
/// CPU), while a build costs seconds of background CPU and about 470 bytes per event.
pub const PARTITION_MIN_VECTORS: usize = 16_384;

/// The default [`RecallConfig::graph_min_vectors`]: a tenant gets its own HNSW graph once it
/// holds this many vectors. From about this size a search of the whole tenant's graph
/// (about 0.8 ms of CPU at the default width, measured on tenants of 10,000 and 100,000)
/// is expected to cost less than the partition probe (5/8 of the members at about 200 ns
/// each: 1.0 ms at 8,192) and under a third of exact scoring; below it the saving does not
/// pay for a graph's memory (about 5.4 KB per vector: hnsw_rs's graph and the copy recall
/// searches) and build (about 1,000 vectors per second of both cores).
pub const GRAPH_MIN_VECTORS: usize = 8_192;

/// The default [`RecallConfig::graph_ef`]: the width of a tenant graph search over a whole
/// tenant: recall@10 0.995 against exact on a tenant of 160,000 real-model embeddings, 0.991
/// at 128 (see the benchmarks doc).
pub const GRAPH_EF: usize = 160;

/// The default [`RecallConfig::graph_min_share`]: a scope of at least this share of its
/// tenant is searched plainly in the tenant's graph, `graph_ef / share` wide; a narrower one
/// is walked within its own ids (`retrieve/graph.rs`), where a plain search would have to be
/// too wide and a filtered one walks mostly rejected points.
pub const GRAPH_MIN_SHARE: f64 = 0.3;

/// How recall chooses between exact scoring, partition lists and HNSW.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallConfig {
    /// Allow filtered HNSW for large scopes (off by default: answers are then approximate).
    pub approximate: bool,
    /// At or below this many in-scope candidates, every recall is exact whatever an
    /// approximate path would cost ([`super::cost::EXACT_CHEAP_CANDIDATES`] by default).
    pub exact_max_candidates: usize,
    /// HNSW is used only when candidates are at least this share of all vectors.
    pub hnsw_min_fraction: f64,
    /// HNSW depth as a multiple of k (with `approximate`).
    pub hnsw_oversample: usize,
    /// A newer event on the same subject makes an older one stale only when their summary
    /// embeddings have at least this cosine (0, the default: any same-subject event). Raising
    /// it keeps unrelated older events of a subject (the train booking next to a newer hotel
    /// booking) but lets through updates phrased very differently from what they replace.
    pub stale_min_similarity: f32,
    /// Answer broad scopes from the vector partitions nearest the query when the cost model
    /// expects a probe to cost less than exact scoring (on by default; such answers are
    /// approximate in ranking and say so). Independent of `approximate`, and tried first.
    pub partitioned: bool,
    /// With `partitioned`, the share of partition lists probed (at least one; more while
    /// fewer than k in-scope events were found) when `calibrated_probes` is off, or the
    /// scope is sparser than any the partition's calibration measured.
    pub partition_probe_share: f64,
    /// With `partitioned`, probe the share of lists measured, per scope density, to reach
    /// recall@10 of [`crate::index::vector::calibrate::RECALL_TARGET`] on the partition's
    /// own vectors (on by default; off: `partition_probe_share` always).
    pub calibrated_probes: bool,
    /// With `partitioned`, a probe stops taking further lists once those it took hold this
    /// many of the tenant's members (fewer than the probe share then), which caps a probe's
    /// cost for the largest tenants at the price of their recall.
    pub partition_probe_max_members: usize,
    /// With `partitioned`, partitions are built in the background once the store holds this
    /// many vectors ([`PARTITION_MIN_VECTORS`] by default).
    pub partition_min_vectors: usize,
    /// Answer scopes that are most of a large tenant from the tenant's own HNSW graph (on by
    /// default; such answers are approximate in ranking and say so). Tried before the
    /// partition lists.
    pub graphs: bool,
    /// With `graphs`, a tenant gets a graph once it holds this many vectors
    /// ([`GRAPH_MIN_VECTORS`] by default).
    pub graph_min_vectors: usize,
    /// With `graphs`, the candidate list width of a graph search ([`GRAPH_EF`]) when
    /// `calibrated_graphs` is off or a graph was not measured.
    pub graph_ef: usize,
    /// With `graphs`, search each tenant graph at the narrowest width measured to reach
    /// recall@10 of [`crate::index::vector::calibrate::RECALL_TARGET`] on its own points,
    /// and not at all where no width did (on by default; off: `graph_ef` always).
    pub calibrated_graphs: bool,
    /// With `graphs`, the smallest share of its tenant a scope must be to be searched
    /// plainly in the tenant's graph ([`GRAPH_MIN_SHARE`]); narrower scopes are walked within
    /// their ids.
    pub graph_min_share: f64,
    /// From this many candidates on, scores are first bounded from the vectors' 8-bit codes
    /// and only the candidates that could rank are scored from their full vectors (the
    /// answer is the same; `usize::MAX` turns the bounding off). From an eighth of it when
    /// a partition probe has read most candidates' bounds already.
    pub code_min_candidates: usize,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            approximate: false,
            exact_max_candidates: EXACT_CHEAP_CANDIDATES,
            hnsw_min_fraction: 0.3,
            hnsw_oversample: 4,
            stale_min_similarity: 0.0,
            partitioned: true,
            partition_probe_share: PARTITION_PROBE_SHARE,
            calibrated_probes: true,
            partition_probe_max_members: PARTITION_PROBE_MAX_MEMBERS,
            partition_min_vectors: PARTITION_MIN_VECTORS,
            code_min_candidates: CODE_MIN_CANDIDATES,
            graphs: true,
            graph_min_vectors: GRAPH_MIN_VECTORS,
            graph_ef: GRAPH_EF,
            calibrated_graphs: true,
            graph_min_share: GRAPH_MIN_SHARE,
        }
    }
}

impl RecallConfig {
    /// Sets the share of partition lists every probe reads, which must lie in (0, 1], in
    /// place of the measured one, and lets the planner use partitions.
    pub fn partition(&mut self, probe_share: f64) -> anyhow::Result<()> {
        anyhow::ensure!(
            probe_share > 0.0 && probe_share <= 1.0,
            "--partition-probe-share must lie in (0, 1]"
        );
        self.partitioned = true;
        self.partition_probe_share = probe_share;
        self.calibrated_probes = false;
        Ok(())
    }
}

impl RecallConfig {
    /// Every answer exact: no partitions and no HNSW graphs are built or read.
    pub fn exact_only(&mut self) {
        self.partitioned = false;
        self.graphs = false;
        self.approximate = false;
    }
}
