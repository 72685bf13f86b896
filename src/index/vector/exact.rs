//! Exact (brute-force) scoring: the reference path, and the fast path for
//! small candidate sets.
//!
//! # Invariants
//!
//! * `exact_scores(..)[i]` is the dot product of the query with the vector of
//!   `candidates[i]` (cosine for normalised vectors); ids the store does not
//!   know score `f32::NEG_INFINITY`.
//! * [`top_k`] orders by score descending, ties by id ascending; NaN scores
//!   rank as `NEG_INFINITY`. The result is deterministic and independent of
//!   thread scheduling.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use pulp::{Simd, WithSimd};

use super::quant::{CodeBlock, CodeRef, QueryCode};
use super::store::{Reader, VectorStore};

/// Candidates scored per rayon task (≈ 0.1 ms of work at dim 384).
const SCORE_CHUNK: usize = 1024;
/// Candidates bounded per rayon task (8-bit codes: a quarter of the memory per candidate).
const CODE_CHUNK: usize = 4096;
/// Below this many scores `top_k` stays on the calling thread.
const PAR_TOP_K_MIN: usize = 1 << 16;
/// Scores per rayon task in `top_k`.
const TOP_K_CHUNK: usize = 1 << 14;
/// Independent accumulators in [`dot`], so LLVM can vectorise the loop.
const LANES: usize = 16;

/// Cosine (dot) of `query` with every candidate, in candidate order, computed
/// in parallel with rayon. Unknown ids get `f32::NEG_INFINITY`; a `query` of
/// the wrong dimension scores every candidate `f32::NEG_INFINITY`.
pub fn exact_scores(store: &VectorStore, query: &[f32], candidates: &[u32]) -> Vec<f32> {
    let mut out = vec![f32::NEG_INFINITY; candidates.len()];
    if query.len() != store.dim() {
        tracing::warn!(
            expected = store.dim(),
            got = query.len(),
            "query dimension mismatch"
        );
        return out;
    }
    let snap = store.snapshot();
    let arch = pulp::Arch::new();
    let score_chunk = |(ids, scores): (&[u32], &mut [f32])| {
        let reader = snap.reader();
        arch.dispatch(ScoreChunk {
            reader: &reader,
            query,
            ids,
            scores,
        });
    };
    if candidates.len() <= SCORE_CHUNK {
        score_chunk((candidates, &mut out));
    } else {
        candidates
            .par_chunks(SCORE_CHUNK)
            .zip(out.par_chunks_mut(SCORE_CHUNK))
            .for_each(score_chunk);
    }
    out
}

/// The interval `(low, high)` that holds the cosine of `query` with each candidate, from
/// the 8-bit codes ([`super::quant`]), in candidate order and in parallel. A vector without
/// a code yet gets its exact cosine as both ends; unknown ids get
/// `(NEG_INFINITY, NEG_INFINITY)`, like [`exact_scores`]. `query` must have the store's
/// dimension (checked by the caller: every interval would be meaningless otherwise).
pub fn code_bounds(store: &VectorStore, query: &QueryCode, candidates: &[u32]) -> Vec<(f32, f32)> {
    let unknown = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    let mut out = vec![unknown; candidates.len()];
    let snap = store.snapshot();
    let arch = pulp::Arch::new();
    let bound_chunk = |(ids, bounds): (&[u32], &mut [(f32, f32)])| {
        let reader = snap.reader();
        arch.dispatch(BoundChunk {
            reader: &reader,
            query,
            ids,
            bounds,
        });
    };
    candidates
        .par_chunks(CODE_CHUNK)
        .zip(out.par_chunks_mut(CODE_CHUNK))
        .for_each(bound_chunk);
    out
}

/// One chunk of [`exact_scores`]: a `pulp` operation, so that the loop (and the inlined
/// [`dot`]) is compiled for the widest vector unit the CPU has, chosen at run time.
struct ScoreChunk<'r, 'a> {
    reader: &'r Reader<'a>,
    query: &'r [f32],
    ids: &'r [u32],
    scores: &'r mut [f32],
}

impl WithSimd for ScoreChunk<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        // Four rows at a time: one row's partial sums form chains of dependent additions,
        // so four independent rows keep the vector unit busy.
        let mut ids = self.ids.chunks_exact(ROWS);
        let mut scores = self.scores.chunks_exact_mut(ROWS);
        for (four, out) in (&mut ids).zip(&mut scores) {
            let rows = [0, 1, 2, 3].map(|j| self.reader.vector(four[j]));
            if let [Some(a), Some(b), Some(c), Some(d)] = rows {
                out.copy_from_slice(&rows_dot(simd, self.query, [a, b, c, d]));
                continue;
            }
            for (row, score) in rows.iter().zip(out.iter_mut()) {
                if let Some(v) = row {
                    *score = dot(self.query, v);
                }
            }
        }
        let rest = ids.remainder().iter().zip(scores.into_remainder());
        for (id, score) in rest {
            if let Some(v) = self.reader.vector(*id) {
                *score = dot(self.query, v);
            }
        }
    }
}

/// Rows [`ScoreChunk`] scores together.
const ROWS: usize = 4;

/// [`dot`] of `a` with each of `rows`, each summed exactly as [`lane_dot`] sums it: lane
/// `i` of the `LANES` partial sums gathers elements `i`, `i + LANES`, ... (a vector register
/// holds consecutive lanes, each lane multiplied, then added, as the plain loop does), the
/// lanes are then summed in order and the remainder added, so each result equals
/// `dot(a, row)` bit for bit. Rows of another length than `a` take [`dot`] itself.
#[inline(always)]
fn rows_dot<S: Simd>(simd: S, a: &[f32], rows: [&[f32]; ROWS]) -> [f32; ROWS] {
    let n = a.len();
    if rows.iter().any(|r| r.len() != n) || !LANES.is_multiple_of(S::F32_LANES) {
        return rows.map(|r| dot(a, r));
    }
    let whole = n - n % LANES;
    // Registers per `LANES` partial sums (2 with AVX2).
    let per = LANES / S::F32_LANES;
    let (xs, _) = S::as_simd_f32s(&a[..whole]);
    let ys = rows.map(|r| S::as_simd_f32s(&r[..whole]).0);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [[zero; LANES]; ROWS];
    let chunks = xs
        .chunks_exact(per)
        .zip(ys[0].chunks_exact(per))
        .zip(ys[1].chunks_exact(per))
        .zip(ys[2].chunks_exact(per))
        .zip(ys[3].chunks_exact(per));
    for ((((x, y0), y1), y2), y3) in chunks {
        for j in 0..per {
            acc[0][j] = simd.add_f32s(acc[0][j], simd.mul_f32s(x[j], y0[j]));
            acc[1][j] = simd.add_f32s(acc[1][j], simd.mul_f32s(x[j], y1[j]));
            acc[2][j] = simd.add_f32s(acc[2][j], simd.mul_f32s(x[j], y2[j]));
            acc[3][j] = simd.add_f32s(acc[3][j], simd.mul_f32s(x[j], y3[j]));
        }
    }
    let mut out = [0.0f32; ROWS];
    for ((out, acc), row) in out.iter_mut().zip(&acc).zip(rows) {
        let lanes: &[f32] = pulp::bytemuck::cast_slice(&acc[..per]);
        let tail: f32 = a[whole..]
            .iter()
            .zip(&row[whole..])
            .map(|(x, y)| x * y)
            .sum();
        *out = lanes.iter().sum::<f32>() + tail;
    }
    out
}

/// The intervals of [`code_bounds`] for rows `rows` (ascending, for memory order) of
/// `block` (a partition list's own copy of its members' codes, read in order rather than
/// gathered by id); rows past its end get `(NEG_INFINITY, NEG_INFINITY)`.
pub fn block_bounds(query: &QueryCode, block: &CodeBlock, rows: &[u32]) -> Vec<(f32, f32)> {
    pulp::Arch::new().dispatch(BlockRun { query, block, rows })
}

/// [`block_bounds`], dispatched like [`ScoreChunk`].
struct BlockRun<'r> {
    query: &'r QueryCode,
    block: &'r CodeBlock,
    rows: &'r [u32],
}

impl WithSimd for BlockRun<'_> {
    type Output = Vec<(f32, f32)>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) -> Vec<(f32, f32)> {
        // A plain loop: an iterator adaptor's `fold` would be compiled apart from this
        // dispatch, without the wide vector unit.
        let unknown = (f32::NEG_INFINITY, f32::NEG_INFINITY);
        let mut out = Vec::with_capacity(self.rows.len());
        for &row in self.rows {
            let code = self.block.code(row as usize);
            out.push(code.map_or(unknown, |code| interval(self.query, code)));
        }
        out
    }
}

/// `(low, high)` around the query's dot product with a coded vector.
#[inline(always)]
fn interval(query: &QueryCode, code: CodeRef<'_>) -> (f32, f32) {
    let (estimate, radius) = query.bounds(code);
    (estimate - radius, estimate + radius)
}

/// One chunk of [`code_bounds`], dispatched like [`ScoreChunk`].
struct BoundChunk<'r, 'a> {
    reader: &'r Reader<'a>,
    query: &'r QueryCode,
    ids: &'r [u32],
    bounds: &'r mut [(f32, f32)],
}

impl WithSimd for BoundChunk<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        for (id, slot) in self.ids.iter().zip(self.bounds.iter_mut()) {
            if let Some(code) = self.reader.code(*id) {
                *slot = interval(self.query, code);
            } else if let Some(v) = self.reader.vector(*id) {
                let exact = dot(self.query.raw(), v);
                *slot = (exact, exact);
            }
        }
    }
}

/// Dot product with `LANES` independent partial sums (vectorisable). The summation order is
/// fixed by the code, so the result is the same bit for bit whatever vector width the
/// compiler uses (callers may run it inside a `pulp` dispatch compiled for AVX2).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    lane_dot(a, b)
}

/// [`dot`] compiled for the widest vector unit the CPU has, chosen at run time: for callers
/// outside a `pulp` dispatch that score one pair at a time (the HNSW graph's distance). The
/// summation order is [`dot`]'s, so the result is the same bit for bit.
#[inline]
pub fn dispatched_dot(a: &[f32], b: &[f32]) -> f32 {
    arch().dispatch(PairDot { a, b })
}

/// `a · c` for 8-bit codes `c` (widened to `f32`), as [`dispatched_dot`] computes a dot.
#[inline]
pub fn dispatched_code_dot(a: &[f32], c: &[i8]) -> f32 {
    arch().dispatch(PairDot { a, b: c })
}

fn arch() -> &'static pulp::Arch {
    static ARCH: std::sync::OnceLock<pulp::Arch> = std::sync::OnceLock::new();
    ARCH.get_or_init(pulp::Arch::new)
}

/// One pair's [`lane_dot`] as a `pulp` operation.
struct PairDot<'a, T> {
    a: &'a [f32],
    b: &'a [T],
}

impl<T: Copy + Into<f32>> WithSimd for PairDot<'_, T> {
    type Output = f32;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) -> f32 {
        lane_dot(self.a, self.b)
    }
}

/// `a · b` over the shorter length, `b`'s elements widened to `f32`, summed in `LANES`
/// independent partial sums and then the remainder: [`dot`] for stored vectors and the
/// graph's 8-bit code distance ([`dispatched_code_dot`]) share this one loop and its
/// summation order (code bounds sum integers instead: [`super::quant`]).
#[inline(always)]
fn lane_dot<T: Copy + Into<f32>>(a: &[f32], b: &[T]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i].into();
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * (*y).into()).sum();
    acc.iter().sum::<f32>() + tail
}

/// A scored id ordered so that `Less` means "ranks first".
#[derive(Clone, Copy, Debug)]
struct Ranked {
    score: f32,
    id: u32,
}

impl Ranked {
    fn new(id: u32, score: f32) -> Self {
        let score = if score.is_nan() {
            f32::NEG_INFINITY
        } else {
            score
        };
        Self { score, id }
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.id.cmp(&other.id))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

/// Top `k` `(id, score)` pairs of the parallel slices `ids`/`scores`, best
/// first (score descending, ties by id ascending). Extra elements of the
/// longer slice are ignored. Up to [`SELECT_TOP_K_MAX`] scores, one selection
/// and a sort of the k; beyond, bounded heaps, O(n log k), parallel for large
/// inputs.
pub fn top_k(ids: &[u32], scores: &[f32], k: usize) -> Vec<(u32, f32)> {
    let n = ids.len().min(scores.len());
    let (ids, scores) = (&ids[..n], &scores[..n]);
    if k == 0 || n == 0 {
        return Vec::new();
    }
    let heap = if n < PAR_TOP_K_MIN {
        if n <= SELECT_TOP_K_MAX {
            return select_top_k(ids, scores, k);
        }
        heap_top_k(ids.iter().zip(scores), k)
    } else {
        ids.par_chunks(TOP_K_CHUNK)
            .zip(scores.par_chunks(TOP_K_CHUNK))
            .map(|(i, s)| heap_top_k(i.iter().zip(s), k))
            .reduce(BinaryHeap::new, |a, b| merge_heaps(a, b, k))
    };
    heap.into_sorted_vec()
        .into_iter()
        .map(|r| (r.id, r.score))
        .collect()
}

/// Up to this many scores, `top_k` selects instead of keeping a heap.
const SELECT_TOP_K_MAX: usize = 4096;

/// [`top_k`] of a few scores: the best `k` selected in one linear pass, then sorted. Its
/// cost does not depend on the order of the scores, where a heap (or a sorted array) does
/// more work the more often a later score beats the worst kept, as in a set in time order
/// ranked with a recency signal.
fn select_top_k(ids: &[u32], scores: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut all: Vec<Ranked> = ids
        .iter()
        .zip(scores)
        .map(|(&id, &score)| Ranked::new(id, score))
        .collect();
    if k < all.len() {
        all.select_nth_unstable(k - 1);
        all.truncate(k);
    }
    all.sort_unstable();
    all.into_iter().map(|r| (r.id, r.score)).collect()
}

/// Bounded heap of the best `k`; its maximum is the worst kept element.
fn heap_top_k<'a>(items: impl Iterator<Item = (&'a u32, &'a f32)>, k: usize) -> BinaryHeap<Ranked> {
    let mut heap = BinaryHeap::with_capacity(k + 1);
    for (&id, &score) in items {
        offer(&mut heap, Ranked::new(id, score), k);
    }
    heap
}

/// Keeps `r` if it ranks among the best `k` seen so far: a score below the worst kept one
/// is turned away on one comparison (a lower score ranks after whatever the ids), and a
/// better one replaces the worst in place (one sift instead of a pop and a push).
#[inline]
fn offer(heap: &mut BinaryHeap<Ranked>, r: Ranked, k: usize) {
    if heap.len() < k {
        heap.push(r);
        return;
    }
    if let Some(mut worst) = heap.peek_mut() {
        if r.score >= worst.score && r < *worst {
            *worst = r;
        }
    }
}

fn merge_heaps(a: BinaryHeap<Ranked>, b: BinaryHeap<Ranked>, k: usize) -> BinaryHeap<Ranked> {
    let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    for r in small {
        offer(&mut big, r, k);
    }
    big
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive_dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn reference_top_k(ids: &[u32], scores: &[f32], k: usize) -> Vec<(u32, f32)> {
        let mut all: Vec<Ranked> = ids
            .iter()
            .zip(scores)
            .map(|(&i, &s)| Ranked::new(i, s))
            .collect();
        all.sort();
        all.into_iter().take(k).map(|r| (r.id, r.score)).collect()
    }

    fn store_of(vectors: &[Vec<f32>], dim: usize) -> VectorStore {
        let store = VectorStore::new(dim);
        for (id, v) in vectors.iter().enumerate() {
            store.push(id as u32, v).unwrap();
        }
        store
    }

    #[test]
    fn dot_handles_remainders() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.5).collect();
        assert!((dot(&a, &b) - naive_dot(&a, &b)).abs() < 1e-2);
    }

    #[test]
    fn unknown_ids_and_bad_query() {
        let store = store_of(&[vec![1.0, 0.0], vec![0.0, 1.0]], 2);
        let s = exact_scores(&store, &[1.0, 0.0], &[1, 0, 9]);
        assert_eq!(s, vec![0.0, 1.0, f32::NEG_INFINITY]);
        let bad = exact_scores(&store, &[1.0], &[0]);
        assert_eq!(bad, vec![f32::NEG_INFINITY]);
    }

    #[test]
    fn top_k_orders_nan_and_signed_zeros_like_the_sort() {
        let scores = [0.0, -0.0, f32::NAN, 1.0, -0.0, 0.0, f32::NAN, -1.0, 1.0];
        let ids: Vec<u32> = (0..scores.len() as u32).rev().collect();
        for k in 0..=scores.len() + 1 {
            let want = reference_top_k(&ids, &scores, k);
            let got = top_k(&ids, &scores, k);
            let bits =
                |v: &[(u32, f32)]| v.iter().map(|(i, s)| (*i, s.to_bits())).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "k = {k}");
            let heap: Vec<(u32, f32)> = heap_top_k(ids.iter().zip(&scores), k)
                .into_sorted_vec()
                .into_iter()
                .map(|r| (r.id, r.score))
                .collect();
            assert_eq!(bits(&heap), bits(&want), "heap, k = {k}");
        }
    }

    #[test]
    fn top_k_large_parallel_matches_sort() {
        // Selected, kept in one heap, and kept in heaps merged across threads.
        for n in [
            SELECT_TOP_K_MAX,
            SELECT_TOP_K_MAX + 1,
            PAR_TOP_K_MIN * 2 + 17,
        ] {
            let ids: Vec<u32> = (0..n as u32).collect();
            let scores: Vec<f32> = ids.iter().map(|&i| ((i * 7919) % 1000) as f32).collect();
            for k in [1, 50, 5000] {
                assert_eq!(
                    top_k(&ids, &scores, k),
                    reference_top_k(&ids, &scores, k),
                    "{n} {k}"
                );
            }
            // Ascending scores: every later score beats the worst kept.
            let rising: Vec<f32> = ids.iter().map(|&i| i as f32 / 8.0).collect();
            assert_eq!(
                top_k(&ids, &rising, 50),
                reference_top_k(&ids, &rising, 50),
                "{n}"
            );
        }
    }

    #[test]
    fn rows_scored_together_equal_dot_bit_for_bit() {
        for dim in [1usize, 15, 16, 17, 384, 390] {
            let row = |seed: u32| -> Vec<f32> {
                (0..dim as u32)
                    .map(|i| {
                        let h = (i.wrapping_mul(2654435761) ^ seed).wrapping_mul(40503);
                        (h % 2001) as f32 / 1000.0 - 1.0
                    })
                    .collect()
            };
            let q = row(7);
            let rows = [row(1), row(2), row(3), row(4)];
            let refs = [&rows[0][..], &rows[1][..], &rows[2][..], &rows[3][..]];
            let got = pulp::Arch::new().dispatch(|| rows_dot(pulp::Scalar::new(), &q, refs));
            let wide = arch().dispatch(RowsRun { a: &q, rows: refs });
            for ((g, w), r) in got.iter().zip(&wide).zip(&rows) {
                assert_eq!(g.to_bits(), dot(&q, r).to_bits(), "dim {dim}");
                assert_eq!(w.to_bits(), dot(&q, r).to_bits(), "dim {dim}, wide");
            }
        }
    }

    /// [`rows_dot`] on the widest vector unit.
    struct RowsRun<'a> {
        a: &'a [f32],
        rows: [&'a [f32]; ROWS],
    }

    impl WithSimd for RowsRun<'_> {
        type Output = [f32; ROWS];

        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> [f32; ROWS] {
            rows_dot(simd, self.a, self.rows)
        }
    }

    proptest! {
        #[test]
        fn exact_matches_naive(
            dim in 1usize..40,
            seed_vecs in proptest::collection::vec(proptest::collection::vec(-1.0f32..1.0, 40), 1..60),
            query in proptest::collection::vec(-1.0f32..1.0, 40),
            picks in proptest::collection::vec(0u32..80, 0..3000),
        ) {
            let vectors: Vec<Vec<f32>> = seed_vecs.iter().map(|v| v[..dim].to_vec()).collect();
            let store = store_of(&vectors, dim);
            let q = &query[..dim];
            let got = exact_scores(&store, q, &picks);
            prop_assert_eq!(got.len(), picks.len());
            for (id, s) in picks.iter().zip(&got) {
                match vectors.get(*id as usize) {
                    Some(v) => prop_assert!((s - naive_dot(q, v)).abs() < 1e-4),
                    None => prop_assert_eq!(*s, f32::NEG_INFINITY),
                }
            }
        }

        #[test]
        fn top_k_matches_sort(
            pairs in proptest::collection::vec((0u32..500, 0u8..20), 0..400),
            k in 0usize..450,
        ) {
            // Small score alphabet forces many ties.
            let ids: Vec<u32> = pairs.iter().map(|p| p.0).collect();
            let scores: Vec<f32> = pairs.iter().map(|p| f32::from(p.1) / 4.0 - 2.0).collect();
            prop_assert_eq!(top_k(&ids, &scores, k), reference_top_k(&ids, &scores, k));
        }
    }
}
