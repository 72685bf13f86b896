//! Vector partitions: an inverted-file layout for approximate recall over broad scopes.
//!
//! Spherical k-means (seeded by k-means++ with a fixed seed) over a fixed-stride sample of
//! the stored vectors (in an order of their content, not of their ids) gives `lists`
//! centroids; every vector below `upto` is assigned to its nearest centroid, and each list
//! keeps its members grouped by tenant (by tenant number, then id), so that a probe reads
//! one tenant's members of a list as one contiguous run of ids. Each list also holds a copy
//! of its members' 8-bit codes in that order, so that a probe reads their bounds as one
//! run of memory instead of gathering them by id from the store.
//!
//! # Invariants
//!
//! * Every id below [`Partition::upto`] whose tenant was known at build time is in exactly
//!   one list; no id at or above `upto` is in any (callers look at those separately).
//! * A partition only decides which ids a recall looks at: callers check every member's
//!   head (scope, grant, visibility) as for any candidate, so a partition built before a
//!   deletion, expiry or supersession never shows what the head no longer allows.
//! * A list's code row `i` is the code of its member `docs[i]`, equal to the store's code
//!   of that vector (vectors are never rewritten), so bounds read from either agree.
//! * A partition is immutable; it is replaced whole, never patched.
//! * A build is deterministic: the same vectors and tenants give the same partition, and
//!   the same vectors under other ids give the same lists of vectors.

use std::ops::Range;

use pulp::{Simd, WithSimd};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::exact::dot;
use super::quant::{CodeBlock, CodeRows};
use super::store::{Snapshot, VectorStore};

/// Sampled vectors per list for training.
const SAMPLE_PER_LIST: usize = 64;

/// k-means rounds over the sample.
const ROUNDS: usize = 8;

/// Vectors per rayon task when assigning.
const ASSIGN_CHUNK: usize = 2048;

/// The tenant of a slot no list may hold (empty or deleted).
const NO_TENANT: u32 = u32::MAX;

/// The list of an id no list holds.
const NO_LIST: u16 = u16::MAX;

/// At most this many lists, so that a list number fits `list_of`'s 16 bits.
const MAX_LISTS: usize = 1024;

/// One list's members, grouped by tenant.
#[derive(Debug)]
struct List {
    /// Tenant numbers, ascending.
    tenants: Vec<u32>,
    /// Where each tenant's run starts in `docs` (one more entry: the end).
    starts: Vec<u32>,
    /// Member ids, by tenant, then ascending.
    docs: Vec<u32>,
    /// The 8-bit code of each member, in `docs` order.
    codes: CodeBlock,
}

impl List {
    /// Where `tenant`'s members lie in `docs`.
    fn run(&self, tenant: u32) -> Range<usize> {
        match self.tenants.binary_search(&tenant) {
            Ok(i) => self.starts[i] as usize..self.starts[i + 1] as usize,
            Err(_) => 0..0,
        }
    }

    /// Builds a list from `(tenant, doc)` pairs, copying each member's code from the store
    /// (or coding its vector, when its chunk has no code yet).
    fn from_pairs(mut pairs: Vec<(u32, u32)>, snap: &Snapshot, dim: usize) -> Self {
        pairs.sort_unstable();
        let mut tenants = Vec::new();
        let mut starts = Vec::new();
        let mut docs = Vec::with_capacity(pairs.len());
        for (i, &(tenant, doc)) in pairs.iter().enumerate() {
            if tenants.last() != Some(&tenant) {
                tenants.push(tenant);
                starts.push(i as u32);
            }
            docs.push(doc);
        }
        starts.push(pairs.len() as u32);
        let mut codes = CodeRows::new(dim, docs.len());
        let reader = snap.reader();
        // Members lie below `upto`, so every one has a vector; a zero row would keep row `i`
        // coding `docs[i]` even if one did not.
        let zero = vec![0.0; dim];
        for &doc in &docs {
            match reader.code(doc) {
                Some(code) => codes.push_code(code),
                None => codes.push_vector(reader.vector(doc).unwrap_or(&zero)),
            }
        }
        List {
            tenants,
            starts,
            docs,
            codes: codes.finish(),
        }
    }
}

/// One tenant's members of one list: their ids, ascending, and their codes, row
/// `rows.start + i` coding `docs[i]`.
#[derive(Debug, Clone)]
pub struct Members<'a> {
    /// Member ids, ascending.
    pub docs: &'a [u32],
    /// The list's codes.
    pub codes: &'a CodeBlock,
    /// The rows of `codes` that code `docs`.
    pub rows: Range<usize>,
}

/// Centroids and their member lists over the vectors below `upto`.
#[derive(Debug)]
pub struct Partition {
    dim: usize,
    /// `lists × dim`, each row unit length (or zero).
    centroids: Vec<f32>,
    lists: Vec<List>,
    /// The list of each id below `upto` (`NO_LIST`: none), for scopes read by id.
    list_of: Vec<u16>,
    upto: u32,
}

impl Partition {
    /// The number of lists for `n` vectors: about `√n / 2`, at least 16, at most 1024.
    pub fn lists_for(n: usize) -> usize {
        ((n as f64).sqrt() / 2.0)
            .round()
            .clamp(16.0, MAX_LISTS as f64) as usize
    }

    /// Partitions the vectors of `store` below `tenants.len()` whose tenant is not
    /// `u32::MAX` into `lists` lists; `None` when there are fewer such vectors than lists.
    pub fn build(store: &VectorStore, tenants: &[u32], lists: usize) -> Option<Partition> {
        let snap = store.snapshot();
        let dim = store.dim();
        let upto = tenants.len().min(snap.len());
        let docs: Vec<u32> = (0..upto as u32)
            .filter(|&d| tenants[d as usize] != NO_TENANT)
            .collect();
        if lists == 0 || lists > MAX_LISTS || docs.len() < lists {
            return None;
        }
        let stride = (docs.len() / (lists * SAMPLE_PER_LIST)).max(1);
        // A reader may hold the store's open chunk: never keep one while others are taken
        // (a waiting appender would block them), so this one ends with the sample.
        let sample: Vec<f32> = {
            let reader = snap.reader();
            let vector = |d: u32| reader.vector(d).unwrap_or(&[]);
            let mut keyed: Vec<(u64, u32)> =
                docs.iter().map(|&d| (content_key(vector(d)), d)).collect();
            keyed.sort_unstable();
            keyed
                .iter()
                .step_by(stride)
                .flat_map(|&(_, d)| vector(d).iter().copied())
                .collect()
        };
        let centroids = train(&sample, dim, lists);
        let nearest = assign(&centroids, dim, &docs, &snap);
        let mut pairs: Vec<Vec<(u32, u32)>> = (0..lists).map(|_| Vec::new()).collect();
        let mut list_of = vec![NO_LIST; upto];
        for (&doc, &list) in docs.iter().zip(&nearest) {
            pairs[list as usize].push((tenants[doc as usize], doc));
            list_of[doc as usize] = list as u16;
        }
        Some(Partition {
            dim,
            centroids,
            lists: pairs
                .into_par_iter()
                .map(|p| List::from_pairs(p, &snap, dim))
                .collect(),
            list_of,
            upto: upto as u32,
        })
    }

    /// The list `doc` was assigned to; `None` at or above [`Partition::upto`] and for ids
    /// no list holds.
    pub fn list_of(&self, doc: u32) -> Option<u32> {
        self.list_of
            .get(doc as usize)
            .filter(|&&l| l != NO_LIST)
            .map(|&l| u32::from(l))
    }

    /// Ids below this were assigned to lists.
    pub fn upto(&self) -> u32 {
        self.upto
    }

    /// Number of lists.
    pub fn lists(&self) -> usize {
        self.lists.len()
    }

    /// List numbers, the list whose centroid is closest to `query` (by cosine) first, ties
    /// by number. Empty when `query` does not have the partition's dimension.
    pub fn order(&self, query: &[f32]) -> Vec<u32> {
        if query.len() != self.dim {
            return Vec::new();
        }
        let scores: Vec<f32> = self
            .centroids
            .chunks_exact(self.dim)
            .map(|c| dot(query, c))
            .collect();
        let mut order: Vec<u32> = (0..self.lists.len() as u32).collect();
        order.sort_by(|&a, &b| {
            scores[b as usize]
                .total_cmp(&scores[a as usize])
                .then(a.cmp(&b))
        });
        order
    }

    /// Every member of `list` (by tenant, then ascending): the order of the rows of
    /// [`Members::rows`].
    pub fn list_docs(&self, list: u32) -> &[u32] {
        self.lists.get(list as usize).map_or(&[], |l| &l.docs)
    }

    /// The members of `list` with tenant number `tenant`, ascending.
    pub fn members(&self, list: u32, tenant: u32) -> &[u32] {
        self.coded_members(list, tenant).map_or(&[], |m| m.docs)
    }

    /// The members of `list` with tenant number `tenant` and their codes; `None` when there
    /// is no such list.
    pub fn coded_members(&self, list: u32, tenant: u32) -> Option<Members<'_>> {
        let l = self.lists.get(list as usize)?;
        let rows = l.run(tenant);
        Some(Members {
            docs: &l.docs[rows.clone()],
            codes: &l.codes,
            rows,
        })
    }
}

/// Components of a vector its sampling key reads.
const KEY_COMPONENTS: usize = 8;

/// A key from a vector's leading components: the training sample is taken in key order, so
/// that a partition depends on which vectors are stored, not on the order concurrent
/// writers happened to store them in (ids break ties, between vectors that begin alike).
fn content_key(vector: &[f32]) -> u64 {
    vector
        .iter()
        .take(KEY_COMPONENTS)
        .fold(0xcbf2_9ce4_8422_2325, |h, x| {
            (h ^ u64::from(x.to_bits())).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

/// Seed of the k-means++ draws: builds are reproducible.
const SEED: u64 = 0x5eed_9a27;

/// k-means++ seeding: `lists` rows of `sample`, each drawn with probability proportional to
/// its squared distance from the nearest row drawn before, so that no well-separated group
/// of vectors starts without a centroid of its own.
fn seed_centroids(sample: &[f32], dim: usize, lists: usize) -> Vec<f32> {
    let rows = sample.len() / dim;
    let row = |i: usize| &sample[i * dim..(i + 1) * dim];
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut centroids = Vec::with_capacity(lists * dim);
    let mut far = vec![f32::INFINITY; rows];
    let mut next = rng.gen_range(0..rows);
    for _ in 0..lists {
        let chosen = row(next);
        centroids.extend_from_slice(chosen);
        far.par_chunks_mut(ASSIGN_CHUNK)
            .enumerate()
            .for_each(|(c, part)| {
                for (j, f) in part.iter_mut().enumerate() {
                    let d = (2.0 - 2.0 * dot(row(c * ASSIGN_CHUNK + j), chosen)).max(0.0);
                    *f = f.min(d);
                }
            });
        let total: f64 = far.iter().map(|&f| f64::from(f)).sum();
        next = if total > 0.0 {
            draw(&far, rng.gen::<f64>() * total)
        } else {
            (next + 1) % rows
        };
    }
    centroids
}

/// The index where the running sum of `weights` first exceeds `target` (the last index
/// with a positive weight when rounding leaves it short).
fn draw(weights: &[f32], target: f64) -> usize {
    let mut sum = 0.0f64;
    let mut last = 0;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            last = i;
            sum += f64::from(w);
            if sum > target {
                return i;
            }
        }
    }
    last
}

/// Spherical k-means: `lists` unit centroids of the `dim`-component rows of `sample`,
/// seeded by k-means++. A list left empty by a round keeps its centroid.
fn train(sample: &[f32], dim: usize, lists: usize) -> Vec<f32> {
    let mut centroids = seed_centroids(sample, dim, lists);
    for _ in 0..ROUNDS {
        let nearest = nearest_rows(&centroids, dim, sample);
        let mut sums = vec![0.0f32; lists * dim];
        for (row, &list) in sample.chunks_exact(dim).zip(&nearest) {
            let sum = &mut sums[list as usize * dim..(list as usize + 1) * dim];
            sum.iter_mut().zip(row).for_each(|(s, x)| *s += x);
        }
        for (sum, centroid) in sums.chunks_exact(dim).zip(centroids.chunks_exact_mut(dim)) {
            let norm = dot(sum, sum).sqrt();
            if norm > 0.0 {
                centroid
                    .iter_mut()
                    .zip(sum)
                    .for_each(|(c, s)| *c = s / norm);
            }
        }
    }
    centroids
}

/// The nearest centroid of each `dim`-component row of `rows`, in parallel.
fn nearest_rows(centroids: &[f32], dim: usize, rows: &[f32]) -> Vec<u32> {
    let arch = pulp::Arch::new();
    rows.par_chunks(ASSIGN_CHUNK * dim)
        .flat_map_iter(|chunk| {
            let vectors: Vec<&[f32]> = chunk.chunks_exact(dim).collect();
            arch.dispatch(Nearest {
                centroids,
                dim,
                vectors: &vectors,
            })
        })
        .collect()
}

/// The nearest centroid of the stored vector of each of `docs`, in parallel.
fn assign(centroids: &[f32], dim: usize, docs: &[u32], snap: &Snapshot) -> Vec<u32> {
    let arch = pulp::Arch::new();
    docs.par_chunks(ASSIGN_CHUNK)
        .flat_map_iter(|chunk| {
            let reader = snap.reader();
            let vectors: Vec<&[f32]> = chunk
                .iter()
                .map(|&d| reader.vector(d).unwrap_or(&[]))
                .collect();
            arch.dispatch(Nearest {
                centroids,
                dim,
                vectors: &vectors,
            })
        })
        .collect()
}

/// Vectors scored against every centroid before the next ones are read: a tile stays in the
/// core's cache while the centroids stream past it once, instead of every vector streaming
/// all centroids (0.77 MB at 500 lists, more than a core's L2) from the shared cache.
const TILE: usize = 32;

/// Nearest centroid by dot product (ties to the lower number), compiled for the widest
/// vector unit the CPU has.
struct Nearest<'a> {
    centroids: &'a [f32],
    dim: usize,
    vectors: &'a [&'a [f32]],
}

impl WithSimd for Nearest<'_> {
    type Output = Vec<u32>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) -> Vec<u32> {
        let mut best = vec![(f32::NEG_INFINITY, 0u32); self.vectors.len()];
        for (tile, slots) in self.vectors.chunks(TILE).zip(best.chunks_mut(TILE)) {
            for (i, c) in self.centroids.chunks_exact(self.dim).enumerate() {
                for (v, slot) in tile.iter().zip(slots.iter_mut()) {
                    let s = dot(v, c);
                    if s > slot.0 {
                        *slot = (s, i as u32);
                    }
                }
            }
        }
        best.into_iter().map(|(_, list)| list).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::vector::store::CHUNK_VECTORS;

    fn unit(mut v: Vec<f32>) -> Vec<f32> {
        let n = dot(&v, &v).sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    /// `n` vectors around `clusters` random centres; tenant of id `i` is `i % tenants`.
    fn corpus(n: usize, clusters: usize, dim: usize) -> (VectorStore, Vec<Vec<f32>>) {
        let mut rng = StdRng::seed_from_u64(7);
        let centres: Vec<Vec<f32>> = (0..clusters)
            .map(|_| unit((0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect()))
            .collect();
        let store = VectorStore::new(dim);
        for id in 0..n {
            let c = &centres[id % clusters];
            let v = unit(c.iter().map(|x| x + rng.gen_range(-0.1..0.1)).collect());
            store.push(id as u32, &v).expect("push");
        }
        (store, centres)
    }

    #[test]
    fn every_tenanted_id_below_upto_is_in_exactly_one_list_of_its_tenant() {
        let (store, _) = corpus(3000, 12, 16);
        let mut tenants: Vec<u32> = (0..2900u32).map(|i| i % 3).collect();
        tenants[17] = NO_TENANT;
        let p = Partition::build(&store, &tenants, 20).expect("built");
        assert_eq!(p.upto(), 2900);
        assert_eq!(p.lists(), 20);
        let mut seen = vec![0u32; 3000];
        for list in 0..20 {
            for tenant in 0..3 {
                let m = p.members(list, tenant);
                assert!(m.windows(2).all(|w| w[0] < w[1]), "ascending");
                for &d in m {
                    assert_eq!(tenants[d as usize], tenant);
                    seen[d as usize] += 1;
                }
            }
            assert!(p.members(list, 9).is_empty());
        }
        for (d, n) in seen.iter().enumerate() {
            let want = u32::from(d < 2900 && d != 17);
            assert_eq!(*n, want, "id {d}");
            if let Some(list) = p.list_of(d as u32) {
                assert!(p
                    .members(list, tenants[d])
                    .binary_search(&(d as u32))
                    .is_ok());
            } else {
                assert_eq!(want, 0, "id {d} has no list");
            }
        }
        // Ids 0..2900 by i % 3, less id 17 (tenant 2), which has none.
        let tenant_size = |t: u32| (0..20).map(|l| p.members(l, t).len()).sum::<usize>();
        assert_eq!(tenant_size(0), 967);
        assert_eq!(tenant_size(1), 967);
        assert_eq!(tenant_size(2), 965);
        assert_eq!(tenant_size(3), 0);
    }

    #[test]
    fn a_query_near_a_cluster_probes_that_clusters_list_first() {
        // Twice as many lists as clusters, as in use (lists grow as √n, clusters do not).
        let (store, centres) = corpus(4000, 16, 32);
        let tenants = vec![0u32; 4000];
        let p = Partition::build(&store, &tenants, 32).expect("built");
        for (c, centre) in centres.iter().enumerate() {
            let first = p.order(centre)[0];
            let members = p.members(first, 0);
            let own = members.iter().filter(|&&d| d as usize % 16 == c).count();
            assert!(
                own * 2 > members.len() && own > 0,
                "cluster {c}: {own} of {} members in its first list",
                members.len()
            );
        }
        assert!(p.order(&[1.0]).is_empty(), "wrong dimension");
    }

    #[test]
    fn lists_hold_their_members_codes_in_member_order() {
        use crate::index::vector::{block_bounds, code_bounds, QueryCode};
        // One sealed chunk (coded in the background) and an open tail (never coded).
        let (store, centres) = corpus(5000, 6, 16);
        let started = std::time::Instant::now();
        while !store.coded() {
            assert!(started.elapsed().as_secs() < 60, "chunk never coded");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let tenants: Vec<u32> = (0..5000u32).map(|i| i % 2).collect();
        let p = Partition::build(&store, &tenants, 16).expect("built");
        let query = QueryCode::new(&centres[1]).expect("finite");
        let snap = store.snapshot();
        let reader = snap.reader();
        let mut checked = 0;
        for list in 0..16 {
            for tenant in 0..2 {
                let m = p.coded_members(list, tenant).expect("list");
                let rows: Vec<u32> = m.rows.clone().map(|r| r as u32).collect();
                let own = block_bounds(&query, m.codes, &rows);
                let stored = code_bounds(&store, &query, m.docs);
                for ((&d, o), s) in m.docs.iter().zip(&own).zip(&stored) {
                    let exact = dot(&centres[1], reader.vector(d).expect("stored"));
                    assert!(
                        o.0 <= exact && exact <= o.1,
                        "id {d}: {exact} outside {o:?}"
                    );
                    if (d as usize) < CHUNK_VECTORS {
                        assert_eq!(o, s, "id {d}: the store's code, copied");
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 5000);
        assert!(p.coded_members(16, 0).is_none());
    }

    #[test]
    fn builds_are_deterministic_and_need_enough_vectors() {
        let (store, _) = corpus(1000, 5, 8);
        let tenants = vec![1u32; 1000];
        let a = Partition::build(&store, &tenants, 16).expect("a");
        let b = Partition::build(&store, &tenants, 16).expect("b");
        assert_eq!(a.centroids, b.centroids);
        for l in 0..16 {
            assert_eq!(a.members(l, 1), b.members(l, 1));
        }
        assert!(Partition::build(&store, &tenants[..10], 16).is_none());

        // The same vectors stored in reverse order: the same centroids, the same lists.
        let snap = store.snapshot();
        let reader = snap.reader();
        let reversed = VectorStore::new(8);
        for id in 0..1000u32 {
            let v = reader.vector(999 - id).expect("stored");
            reversed.push(id, v).expect("push");
        }
        let r = Partition::build(&reversed, &tenants, 16).expect("reversed");
        assert_eq!(a.centroids, r.centroids);
        for l in 0..16 {
            let mut mapped: Vec<u32> = r.members(l, 1).iter().map(|d| 999 - d).collect();
            mapped.sort_unstable();
            assert_eq!(a.members(l, 1), mapped, "list {l}");
        }
        assert_eq!(Partition::lists_for(1_000_000), 500);
        assert_eq!(Partition::lists_for(100), 16);
        assert_eq!(Partition::lists_for(1 << 30), 1024);
    }
}
