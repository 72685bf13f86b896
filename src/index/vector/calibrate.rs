//! Calibration: how wide a graph search and how many partition lists a recall needs to
//! find the exact top 10, measured on the structure's own vectors rather than assumed.
//!
//! A sample of the stored vectors stands in for queries (for a partition, topped up so that
//! every density bucket a tenant fills whole has [`MIN_BUCKET_QUERIES`] of them). For each,
//! the exact nearest [`K`] among its tenant's vectors (itself excluded) are found by scoring
//! every one of them, within the whole tenant and within nested random subsets of it (a
//! scope of a half, a quarter, … of the tenant: [`in_subset`]). Then:
//! - for a partition ([`ProbeCurve`]), the rank of each neighbour's list in the query's
//!   list order tells how many lists a probe must read to find it, so the share of lists
//!   that finds [`RECALL_TARGET`] of the neighbours is read off directly, per scope
//!   density (in-scope events over all partitioned ones);
//! - for a tenant graph ([`GraphTuning`]), searches at widening widths tell the narrowest
//!   that finds [`RECALL_TARGET`] of them (and keep a step or two wider), for a plain walk over the whole tenant and for a
//!   walk within a sixteenth of it. Each search holds the query's own node out of the graph
//!   ([`FrozenGraph::search_held_out`]): a point's own links lead straight to its
//!   neighbours, which made a width that found 0.995 of a point's neighbours find only 0.95
//!   of a fresh query's. A partition needs no such care: its lists are not built around
//!   any one point.
//!
//! Invariants: a calibration only ever reads vectors and the structure it measures; it is
//! deterministic for the same vectors, ids and structure (fixed sample seed, ties broken by
//! id); a measured setting is one at which the sample's recall@10 reached the target, and
//! where none did it says so (`None`), never a guess.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rayon::prelude::*;

use super::exact::dispatched_dot;
use super::hnsw::FrozenGraph;
use super::partition::Partition;
use super::store::VectorStore;

/// The recall@10 against exact a measured setting must reach on the sample. Above the 0.99
/// recall promises so that the sample's noise (about 0.002 with 200 queries) and queries
/// unlike stored events still leave 0.99.
pub const RECALL_TARGET: f64 = 0.995;

/// Sampled queries per calibration.
pub const SAMPLE: usize = 200;

/// A partition's calibration measures at least this many queries (when its tenants hold
/// them) in every density bucket a tenant fills whole.
pub const MIN_BUCKET_QUERIES: usize = 100;

/// Neighbours per query (recall@10).
pub const K: usize = 10;

/// The fewest in-scope events calibrated (half the planner's default exact floor: narrower
/// scopes are scored exactly anyway).
pub const MIN_SCOPE: usize = 1_024;

/// The nested subsets measured: a scope of `1 / 2^i` of its tenant for `i` in `0..LEVELS`.
const LEVELS: usize = 12;

/// A density bucket is trusted only with this many queries measured in it.
const MIN_QUERIES: usize = 20;

/// Graph search widths tried, narrowest first.
pub const GRAPH_WIDTHS: [usize; 14] = [
    16, 24, 32, 48, 64, 96, 128, 160, 224, 320, 448, 640, 896, 1280,
];

/// A walk within a scope is calibrated on a scope of `1 / 2^WITHIN_LEVEL` of its tenant: a
/// sixteenth, near the narrowest walked within (a twentieth), since a narrower scope needs
/// a wider walk. Measured at an eighth, the width found recall@10 0.990 on a tenth.
const WITHIN_LEVEL: usize = 4;

/// Steps of [`GRAPH_WIDTHS`] a plain search is kept wider than the narrowest that reached
/// [`RECALL_TARGET`] on the sample: a margin for queries the sample does not resemble. On
/// real-model embeddings, where real questions are the queries, the narrowest width found
/// 0.994 of their top 10 over a whole tenant of 160,000; one step wider, 0.995.
const PLAIN_MARGIN: usize = 1;

/// The same margin for a walk within a scope, which needs more: on the clustered grid
/// tenant of 100,000, the width one step above the narrowest found 0.990 of fresh queries'
/// top 10 within a tenth of it, and on real-model embeddings 0.987 at the narrowest.
const WITHIN_MARGIN: usize = 2;

/// The fixed seed of every sample.
const SEED: u64 = 0x5eed_ca1b;

/// Whether `id` lies in the nested random subset of share `share` (a hash of the id below
/// `share`): the subset of a smaller share lies inside that of a larger one.
pub fn in_subset(id: u32, share: f64) -> bool {
    let mut x = u64::from(id).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x as f64) < share * u64::MAX as f64
}

/// The share of level `level`.
fn level_share(level: usize) -> f64 {
    1.0 / (1u64 << level) as f64
}

/// The best `K` as `(score, id)`, best first, ties by id.
#[derive(Clone, Default)]
struct Best(Vec<(f32, u32)>);

impl Best {
    fn offer(&mut self, score: f32, id: u32) {
        let better = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if self.0.len() == K {
            let worst = self.0[K - 1];
            if better(&worst, &(score, id)).is_le() {
                return;
            }
            self.0.pop();
        }
        let at = self.0.partition_point(|e| better(e, &(score, id)).is_lt());
        self.0.insert(at, (score, id));
    }

    fn merge(mut self, other: Best) -> Best {
        for (s, id) in other.0 {
            self.offer(s, id);
        }
        self
    }

    fn ids(&self) -> Vec<u32> {
        self.0.iter().map(|e| e.1).collect()
    }
}

/// For each query `(own id, vector)`, the exact nearest [`K`] among `ids` other than its
/// own, per level (`levels` nested subsets, [`in_subset`]): `result[q][level]`.
pub fn nearest(
    store: &VectorStore,
    queries: &[(u32, Vec<f32>)],
    ids: &[u32],
    levels: usize,
) -> Vec<Vec<Vec<u32>>> {
    let snap = store.snapshot();
    let empty = || vec![vec![Best::default(); levels]; queries.len()];
    let best = ids
        .par_chunks(4_096)
        .map(|chunk| {
            let mut best = empty();
            let reader = snap.reader();
            for &id in chunk {
                let Some(v) = reader.vector(id) else { continue };
                let depth = (0..levels)
                    .take_while(|&l| in_subset(id, level_share(l)))
                    .count();
                for (q, (own, query)) in queries.iter().enumerate() {
                    if *own == id {
                        continue;
                    }
                    let score = dispatched_dot(query, v);
                    for slot in &mut best[q][..depth] {
                        slot.offer(score, id);
                    }
                }
            }
            best
        })
        .reduce(empty, |a, b| {
            a.into_iter()
                .zip(b)
                .map(|(x, y)| x.into_iter().zip(y).map(|(p, q)| p.merge(q)).collect())
                .collect()
        });
    best.iter()
        .map(|levels| levels.iter().map(Best::ids).collect())
        .collect()
}

/// `n` of `pool`, drawn with the fixed seed, in pool order.
fn sample(pool: &[u32], n: usize) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut picked: Vec<u32> = pool.choose_multiple(&mut rng, n).copied().collect();
    picked.sort_unstable();
    picked
}

/// `picked` (a sample of every measured tenant's ids), with more queries drawn from the
/// tenants of each density bucket (a tenant's events over `total`) that holds fewer than
/// [`MIN_BUCKET_QUERIES`] of them: a sample spread over many tenants gives a large tenant
/// alone in its bucket few queries (20 for a tenant of a tenth of the events), too few to
/// tell the share that finds 0.995 of their neighbours (measured so on a tenth of 1,000,000
/// clustered events, the grid's queries found 0.988).
fn topped_up(
    mut picked: Vec<u32>,
    by_tenant: &HashMap<u32, Vec<u32>>,
    (tenants, total): (&[u32], usize),
) -> Vec<u32> {
    let bucket = |n: usize| (n as f64 / total.max(1) as f64).log2().floor() as i32;
    let mut per_bucket: HashMap<i32, (usize, Vec<u32>)> = HashMap::new();
    for (&tenant, ids) in by_tenant {
        per_bucket
            .entry(bucket(ids.len()))
            .or_default()
            .1
            .push(tenant);
    }
    for &d in &picked {
        if let Some(ids) = by_tenant.get(&tenants[d as usize]) {
            per_bucket.entry(bucket(ids.len())).or_default().0 += 1;
        }
    }
    let mut buckets: Vec<_> = per_bucket.into_iter().collect();
    buckets.sort_unstable_by_key(|b| b.0);
    for (_, (had, mut of_bucket)) in buckets {
        if had >= MIN_BUCKET_QUERIES {
            continue;
        }
        of_bucket.sort_unstable();
        let mut pool: Vec<u32> = of_bucket
            .iter()
            .flat_map(|t| by_tenant[t].iter().copied())
            .collect();
        pool.sort_unstable();
        pool.retain(|d| picked.binary_search(d).is_err());
        let more = sample(&pool, MIN_BUCKET_QUERIES - had);
        picked.extend(more);
        picked.sort_unstable();
    }
    picked
}

/// The vectors of `ids` (those the store holds).
fn vectors_of(store: &VectorStore, ids: &[u32]) -> Vec<(u32, Vec<f32>)> {
    ids.iter()
        .filter_map(|&id| store.get(id).map(|v| (id, v)))
        .collect()
}

/// How many partition lists a probe needs for recall@10 of [`RECALL_TARGET`], by scope
/// density (in-scope events over the partition's events), measured on the partition's own
/// vectors (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeCurve {
    /// `(density bucket, share of lists)`: a bucket `b` holds densities in `[2^b, 2^(b+1))`;
    /// densest first, the share never smaller than a denser bucket's.
    buckets: Vec<(i32, f64)>,
    /// The partitioned events densities are shares of.
    events: usize,
}

impl ProbeCurve {
    /// Measures `partition` over `store`, whose id `d` belongs to tenant `tenants[d]`
    /// (`u32::MAX`: none). Empty when no tenant holds [`MIN_SCOPE`] partitioned events.
    pub fn measure(store: &VectorStore, partition: &Partition, tenants: &[u32]) -> ProbeCurve {
        let upto = (partition.upto() as usize).min(tenants.len());
        let listed = |d: usize| tenants[d] != u32::MAX && partition.list_of(d as u32).is_some();
        // Counted first, so that only tenants large enough to measure have their ids kept.
        let mut counts: HashMap<u32, usize> = HashMap::new();
        for d in (0..upto).filter(|&d| listed(d)) {
            *counts.entry(tenants[d]).or_default() += 1;
        }
        let mut by_tenant: HashMap<u32, Vec<u32>> = counts
            .iter()
            .filter(|(_, &n)| n >= MIN_SCOPE)
            .map(|(&t, &n)| (t, Vec::with_capacity(n)))
            .collect();
        for d in (0..upto).filter(|&d| listed(d)) {
            if let Some(ids) = by_tenant.get_mut(&tenants[d]) {
                ids.push(d as u32);
            }
        }
        let total: usize = counts.values().sum();
        let mut pool: Vec<u32> = by_tenant.values().flatten().copied().collect();
        pool.sort_unstable();
        let picked = topped_up(sample(&pool, SAMPLE), &by_tenant, (tenants, total));
        let mut of_tenant: HashMap<u32, Vec<u32>> = HashMap::new();
        for &d in &picked {
            of_tenant.entry(tenants[d as usize]).or_default().push(d);
        }
        // Per density bucket: each measured neighbour's list rank, and the queries measured.
        let mut ranks: HashMap<i32, (Vec<u32>, usize)> = HashMap::new();
        let mut tenants_sampled: Vec<_> = of_tenant.into_iter().collect();
        tenants_sampled.sort_unstable();
        for (tenant, queries) in tenants_sampled {
            let ids = &by_tenant[&tenant];
            let levels = (0..LEVELS)
                .take_while(|&l| ids.len() as f64 * level_share(l) >= MIN_SCOPE as f64)
                .count();
            let queries = vectors_of(store, &queries);
            let found = nearest(store, &queries, ids, levels);
            for ((_, query), per_level) in queries.iter().zip(found) {
                let order = partition.order(query);
                let mut rank_of = vec![0u32; order.len()];
                for (rank, &list) in order.iter().enumerate() {
                    rank_of[list as usize] = rank as u32;
                }
                for (level, near) in per_level.iter().enumerate() {
                    let density = ids.len() as f64 * level_share(level) / total.max(1) as f64;
                    let entry = ranks.entry(density.log2().floor() as i32).or_default();
                    entry.1 += 1;
                    entry.0.extend(
                        near.iter()
                            .filter_map(|&n| partition.list_of(n))
                            .map(|l| rank_of[l as usize]),
                    );
                }
            }
        }
        let lists = partition.lists().max(1) as f64;
        let mut buckets: Vec<(i32, f64)> = ranks
            .into_iter()
            .filter(|(_, (r, queries))| *queries >= MIN_QUERIES && !r.is_empty())
            .map(|(bucket, (mut r, _))| {
                r.sort_unstable();
                let needed = ((RECALL_TARGET * r.len() as f64).ceil() as usize).clamp(1, r.len());
                (bucket, f64::from(r[needed - 1] + 1) / lists)
            })
            .collect();
        buckets.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
        let mut widest: f64 = 0.0;
        for b in &mut buckets {
            widest = widest.max(b.1);
            b.1 = widest;
        }
        ProbeCurve {
            buckets,
            events: total,
        }
    }

    /// The share of lists a scope of `in_scope` events needs: that of the nearest measured
    /// density bucket at or below its own (a sparser scope needs at least as many lists);
    /// `None` when the scope is sparser than any measured.
    pub fn share(&self, in_scope: usize) -> Option<f64> {
        let density = in_scope as f64 / self.events.max(1) as f64;
        let bucket = density.log2().floor() as i32;
        self.buckets
            .iter()
            .find(|(b, _)| *b <= bucket)
            .map(|(_, share)| *share)
    }

    /// `(density bucket, share)` pairs measured, densest first.
    pub fn buckets(&self) -> &[(i32, f64)] {
        &self.buckets
    }
}

/// The widths at which a tenant graph's searches reach [`RECALL_TARGET`], measured on the
/// graph's own points (see the module docs), with a margin ([`PLAIN_MARGIN`],
/// [`WITHIN_MARGIN`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphTuning {
    /// Points in the graph when it was measured.
    pub points: usize,
    /// A plain search over the whole tenant; `None`: no width of [`GRAPH_WIDTHS`] did.
    pub plain: Option<usize>,
    /// A walk within a random sixteenth of the tenant, `fanout` in-scope neighbours taken
    /// per point; `None`: no width did, or a sixteenth is under [`MIN_SCOPE`] points.
    pub within: Option<usize>,
}

impl GraphTuning {
    /// Measures `graph`, whose points' vectors `store` holds; walks within a scope take
    /// `fanout` in-scope neighbours per point.
    pub fn measure(store: &VectorStore, graph: &FrozenGraph, fanout: usize) -> GraphTuning {
        let ids = graph.ids();
        let sampled = Sampled::of(store, graph);
        let plain = sampled.width((0, PLAIN_MARGIN), |q, node, w| {
            graph.search_held_out(q, w, w, node)
        });
        let share = level_share(WITHIN_LEVEL);
        let within = (ids.len() as f64 * share >= MIN_SCOPE as f64)
            .then(|| {
                sampled.width((WITHIN_LEVEL, WITHIN_MARGIN), |q, node, w| {
                    graph.search_within_held_out(q, (w, w, fanout), node, |n| {
                        in_subset(ids[n as usize], share)
                    })
                })
            })
            .flatten();
        GraphTuning {
            points: ids.len(),
            plain,
            within,
        }
    }
}

/// A graph's sampled points as queries: each one's node, vector and exact neighbours.
struct Sampled {
    /// The node of each query.
    nodes: Vec<u32>,
    /// `(id, vector)` of each query.
    queries: Vec<(u32, Vec<f32>)>,
    /// `found[q][level]`: the exact neighbours of query `q` ([`nearest`]).
    found: Vec<Vec<Vec<u32>>>,
}

impl Sampled {
    /// [`SAMPLE`] of `graph`'s points (by node, so that each query's own node can be held
    /// out of its searches) and their neighbours up to [`WITHIN_LEVEL`].
    fn of(store: &VectorStore, graph: &FrozenGraph) -> Sampled {
        let ids = graph.ids();
        let sampled = sample(&(0..ids.len() as u32).collect::<Vec<_>>(), SAMPLE);
        let (nodes, queries): (Vec<u32>, Vec<(u32, Vec<f32>)>) = sampled
            .iter()
            .filter_map(|&n| {
                let id = ids[n as usize];
                store.get(id).map(|v| (n, (id, v)))
            })
            .unzip();
        let found = nearest(store, &queries, ids, WITHIN_LEVEL + 1);
        Sampled {
            nodes,
            queries,
            found,
        }
    }

    /// The share of the queries' neighbours at `level` that `search(query, own node)` finds.
    fn recall(&self, level: usize, search: impl Fn(&[f32], u32) -> Vec<(u32, f32)>) -> f64 {
        let (mut hit, mut all) = (0usize, 0usize);
        let queries = self.nodes.iter().zip(&self.queries).zip(&self.found);
        for ((node, (own, query)), near) in queries {
            let got: Vec<u32> = search(query, *node)
                .into_iter()
                .map(|(d, _)| d)
                .filter(|d| d != own)
                .collect();
            all += near[level].len();
            hit += near[level].iter().filter(|n| got.contains(n)).count();
        }
        if all == 0 {
            0.0
        } else {
            hit as f64 / all as f64
        }
    }

    /// `margin` steps of [`GRAPH_WIDTHS`] wider than the narrowest at which `search(query,
    /// own node, width)` reaches [`RECALL_TARGET`] at `level` (at most the widest).
    fn width(
        &self,
        (level, margin): (usize, usize),
        search: impl Fn(&[f32], u32, usize) -> Vec<(u32, f32)>,
    ) -> Option<usize> {
        let reached = GRAPH_WIDTHS
            .iter()
            .position(|&w| self.recall(level, |q, node| search(q, node, w)) >= RECALL_TARGET)?;
        Some(GRAPH_WIDTHS[(reached + margin).min(GRAPH_WIDTHS.len() - 1)])
    }
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::super::hnsw::{HnswIndex, HnswParams};
    use super::*;

    #[test]
    fn a_tenant_alone_in_its_density_bucket_gets_enough_queries() {
        // Tenant 0 holds 5,000 ids; 200 tenants hold 1,100 each, all in one sparser bucket.
        let mut tenants = vec![0u32; 5_000];
        for t in 1..=200u32 {
            tenants.extend(std::iter::repeat_n(t, 1_100));
        }
        let mut by_tenant: HashMap<u32, Vec<u32>> = HashMap::new();
        for (d, &t) in tenants.iter().enumerate() {
            by_tenant.entry(t).or_default().push(d as u32);
        }
        let pool: Vec<u32> = (0..tenants.len() as u32).collect();
        let first = sample(&pool, SAMPLE);
        let of_zero = |p: &[u32]| p.iter().filter(|&&d| tenants[d as usize] == 0).count();
        assert!(
            of_zero(&first) < 20,
            "the plain sample gives tenant 0 a few"
        );
        let picked = topped_up(first.clone(), &by_tenant, (&tenants, tenants.len()));
        assert_eq!(of_zero(&picked), MIN_BUCKET_QUERIES);
        assert_eq!(
            picked.len() - of_zero(&picked),
            first.len() - of_zero(&first),
            "a bucket holding enough is left as sampled"
        );
        assert!(
            picked.windows(2).all(|w| w[0] < w[1]),
            "sorted, each id once"
        );
        let again = topped_up(first, &by_tenant, (&tenants, tenants.len()));
        assert_eq!(picked, again, "deterministic");
    }

    const DIM: usize = 48;

    fn unit(mut v: Vec<f32>) -> Vec<f32> {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }

    /// `n` vectors around `centres` random centres, each `noise` from its centre.
    fn clustered(n: usize, centres: usize, noise: f32, seed: u64) -> Vec<Vec<f32>> {
        let mut fixed = StdRng::seed_from_u64(5);
        let centres: Vec<Vec<f32>> = (0..centres)
            .map(|_| unit((0..DIM).map(|_| fixed.gen_range(-1.0..1.0)).collect()))
            .collect();
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let c = &centres[rng.gen_range(0..centres.len())];
                unit(
                    c.iter()
                        .map(|x| x + noise * rng.gen_range(-1.0..1.0))
                        .collect(),
                )
            })
            .collect()
    }

    fn store_of(vectors: &[Vec<f32>]) -> VectorStore {
        let store = VectorStore::new(DIM);
        for (id, v) in vectors.iter().enumerate() {
            store.push(id as u32, v).expect("push");
        }
        store
    }

    /// The exact top K of `query` among `ids`.
    fn truth(vectors: &[Vec<f32>], ids: &[u32], query: &[f32]) -> Vec<u32> {
        let mut best = Best::default();
        for &id in ids {
            best.offer(dispatched_dot(query, &vectors[id as usize]), id);
        }
        best.ids()
    }

    #[test]
    fn a_measured_probe_share_reaches_the_target_on_queries_it_never_saw() {
        let n = 20_000;
        let vectors = clustered(n, 40, 0.35, 1);
        let store = store_of(&vectors);
        // Two tenants: the larger measured at its whole and at nested halves, the smaller
        // (under the floor) never.
        let tenants: Vec<u32> = (0..n as u32).map(|d| u32::from(d % 40 == 0)).collect();
        let partition = Partition::build(&store, &tenants, 64).expect("built");
        let curve = ProbeCurve::measure(&store, &partition, &tenants);
        let buckets = curve.buckets();
        assert!(buckets.len() >= 3, "{buckets:?}");
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 > w[1].0 && w[0].1 <= w[1].1));
        let whole: Vec<u32> = (0..n as u32)
            .filter(|d| tenants[*d as usize] == 0)
            .collect();
        let share = curve.share(whole.len()).expect("measured");
        assert!(share < 0.5, "clustered vectors need few lists: {share}");
        assert_eq!(curve.share(100), None, "sparser than anything measured");
        // Queries drawn afresh: the measured share finds at least 0.98 of their top 10.
        let probes = (partition.lists() as f64 * share).ceil() as usize;
        let (mut hit, mut all) = (0, 0);
        for query in clustered(100, 40, 0.35, 2) {
            let order = partition.order(&query);
            let probed = &order[..probes];
            for id in truth(&vectors, &whole, &query) {
                all += 1;
                hit += usize::from(probed.contains(&partition.list_of(id).expect("listed")));
            }
        }
        let recall = hit as f64 / all as f64;
        assert!(recall >= 0.98, "recall@10 {recall} at share {share}");
    }

    #[test]
    fn a_measured_graph_width_reaches_the_target_on_queries_it_never_saw() {
        let n = 18_000;
        let vectors = clustered(n, 20, 0.6, 3);
        let store = store_of(&vectors);
        let index = HnswIndex::new(HnswParams {
            m: 16,
            ef_construction: 100,
            ef_search: 100,
            max_elements: n,
        });
        let items: Vec<(u32, &[f32])> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u32, v.as_slice()))
            .collect();
        index.insert_batch(&items).expect("insert");
        let graph = index.freeze();
        let tuning = GraphTuning::measure(&store, &graph, 64);
        assert_eq!(tuning.points, n);
        let width = tuning.plain.expect("some width reaches the target");
        let within = tuning.within.expect("a sixteenth holds 1,125 points");
        let ids: Vec<u32> = (0..n as u32).collect();
        let share = level_share(WITHIN_LEVEL);
        let scope: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&d| in_subset(d, share))
            .collect();
        let (mut hit, mut all) = ([0; 2], [0; 2]);
        for query in clustered(100, 20, 0.6, 4) {
            let plain = graph.search(&query, width, width);
            let walked = graph.search_within_nodes(&query, (within, within, 64), |node| {
                in_subset(graph.ids()[node as usize], share)
            });
            for (i, (got, ids)) in [(plain, &ids), (walked, &scope)].iter().enumerate() {
                for id in truth(&vectors, ids, &query) {
                    all[i] += 1;
                    hit[i] += usize::from(got.iter().any(|h| h.0 == id));
                }
            }
        }
        let recall = |i: usize| hit[i] as f64 / all[i] as f64;
        assert!(
            recall(0) >= 0.98,
            "recall@10 {} at width {width}",
            recall(0)
        );
        assert!(recall(1) >= 0.98, "within: {} at width {within}", recall(1));
    }

    #[test]
    fn nearest_excludes_the_query_and_keeps_nested_subsets_apart() {
        let vectors = clustered(3_000, 5, 0.5, 6);
        let store = store_of(&vectors);
        let ids: Vec<u32> = (0..3_000).collect();
        let queries = vec![(7u32, vectors[7].clone())];
        let found = nearest(&store, &queries, &ids, 3);
        let others: Vec<u32> = ids.iter().copied().filter(|&d| d != 7).collect();
        assert_eq!(found[0][0], truth(&vectors, &others, &vectors[7]));
        let quarter: Vec<u32> = others
            .iter()
            .copied()
            .filter(|&d| in_subset(d, 0.25))
            .collect();
        assert_eq!(found[0][2], truth(&vectors, &quarter, &vectors[7]));
    }

    #[test]
    fn subsets_are_nested_and_about_their_share() {
        let n = 100_000u32;
        for share in [0.5, 0.1, 0.01] {
            let count = (0..n).filter(|&d| in_subset(d, share)).count() as f64;
            assert!(
                (count / f64::from(n) - share).abs() < share * 0.1,
                "{share}"
            );
        }
        assert!((0..n)
            .filter(|&d| in_subset(d, 0.01))
            .all(|d| in_subset(d, 0.1) && in_subset(d, 1.0)));
    }

    #[test]
    fn best_keeps_the_top_k_best_first_ties_by_id() {
        let mut b = Best::default();
        for (i, s) in [
            0.1f32, 0.9, 0.5, 0.9, 0.3, 0.7, 0.2, 0.8, 0.6, 0.4, 0.05, 0.95,
        ]
        .iter()
        .enumerate()
        {
            b.offer(*s, i as u32);
        }
        assert_eq!(b.ids(), vec![11, 1, 3, 7, 5, 8, 2, 9, 4, 6]);
    }
}
