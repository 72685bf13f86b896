//! 8-bit codes of the stored vectors, with a proven error bound, so that broad scopes read a
//! quarter of the memory and rescore exactly only the candidates that could still rank.
//!
//! A vector `v` is kept as codes `c` (i8) and a scale `s` with `v = s·c + r`; its code also
//! records `‖c‖` and `‖r‖`. For a query `q`, `q·v = s·(q·c) + q·r`, so by Cauchy–Schwarz
//! `|q·v − s·(q·c)| ≤ ‖q‖·‖r‖`. The query is coded too, in 16 bits: `q = t·d + e`, so
//! `s·(q·c) = s·t·(d·c) + s·(e·c)` with `|s·(e·c)| ≤ ‖e‖·‖s·c‖`. `d·c` is a sum of integer
//! products, exact in `i32` (the query's codes are kept small enough that no sum of a row can
//! overflow), in a plain loop the compiler vectorises into multiply-add pairs (no
//! CPU-specific code, no `unsafe`): half the vector work of converting every code to `f32`,
//! and the same sum on every CPU.
//!
//! # Invariants
//!
//! * [`QueryCode::bounds`] returns an interval that contains the `f32` value
//!   [`dot`](super::dot) computes for the same pair: the norms are rounded up and a relative
//!   margin covers `f32` rounding in both computations.

/// Per-vector bound terms stored next to the codes: scale, `‖r‖`, `‖c‖`.
const META: usize = 3;

/// Largest code of a stored vector component.
const CODE_MAX: f32 = 127.0;
/// Relative margin for `f32` rounding (about a thousand times the worst case at dim 384).
const MARGIN: f32 = 1e-4;

/// `1.5 · 2²³`: adding it to an `f32` of magnitude below 2²² rounds it to an integer that
/// the low mantissa bits then hold (minus [`MAGIC_BITS`]).
const MAGIC: f32 = 12_582_912.0;
const MAGIC_BITS: i32 = 0x4B40_0000;

/// Appends the codes of `v` to `out` and returns its bound terms. Written as plain lane-wise loops (a max,
/// rounding by [`MAGIC`], sums in eight partial sums) so that the compiler vectorises them.
pub fn encode_into(v: &[f32], out: &mut Vec<i8>) -> [f32; META] {
    let mut lanes = [0.0f32; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for xs in chunks {
        for i in 0..8 {
            let a = xs[i].abs();
            lanes[i] = if a > lanes[i] { a } else { lanes[i] };
        }
    }
    let max = rest
        .iter()
        .chain(&lanes)
        .fold(0.0f32, |m, x| if x.abs() > m { x.abs() } else { m });
    let start = out.len();
    if max == 0.0 {
        out.resize(start + v.len(), 0);
        return [0.0; META];
    }
    let scale = max / CODE_MAX;
    let inv = CODE_MAX / max;
    out.extend(v.iter().map(|x| {
        let y = (x * inv).clamp(-CODE_MAX, CODE_MAX);
        ((y + MAGIC).to_bits() as i32 - MAGIC_BITS) as i8
    }));
    let codes = &out[start..];
    let scale64 = f64::from(scale);
    let squares = |(x, c): (&f32, &i8)| {
        let c = f64::from(*c);
        let r = f64::from(*x) - scale64 * c;
        (r * r, c * c)
    };
    let (mut residual, mut code_sq) = ([0.0f64; 8], [0.0f64; 8]);
    let (cv, cc) = (v.chunks_exact(8), codes.chunks_exact(8));
    let tail = cv.remainder().iter().zip(cc.remainder()).map(squares);
    for (xs, cs) in cv.zip(cc) {
        for i in 0..8 {
            let (r, c) = squares((&xs[i], &cs[i]));
            residual[i] += r;
            code_sq[i] += c;
        }
    }
    let (tail_r, tail_c) = tail.fold((0.0, 0.0), |(a, b), (r, c)| (a + r, b + c));
    let residual = residual.iter().sum::<f64>() + tail_r;
    let code_sq = code_sq.iter().sum::<f64>() + tail_c;
    [scale, up(residual.sqrt()), up(code_sq.sqrt())]
}

/// `x` rounded to an `f32` no smaller than it.
fn up(x: f64) -> f32 {
    (x as f32).next_up()
}

/// The codes of one sealed chunk of vectors (row `i` codes vector `i` of the chunk).
#[derive(Debug)]
pub struct CodeBlock {
    dim: usize,
    codes: Box<[i8]>,
    meta: Box<[f32]>,
}

impl CodeBlock {
    /// Codes every `dim`-component row of `vectors`.
    pub fn encode(vectors: &[f32], dim: usize) -> Self {
        let rows = vectors.len() / dim.max(1);
        let mut block = CodeRows::new(dim, rows);
        vectors
            .chunks_exact(dim.max(1))
            .for_each(|v| block.push_vector(v));
        block.finish()
    }

    /// The code of row `row`, `None` past the end.
    #[inline(always)]
    pub fn code(&self, row: usize) -> Option<CodeRef<'_>> {
        let codes = self.codes.get(row * self.dim..(row + 1) * self.dim)?;
        let meta = self.meta.get(row * META..(row + 1) * META)?;
        Some(CodeRef { codes, meta })
    }
}

/// A [`CodeBlock`] being filled row by row, from codes already made or from vectors.
#[derive(Debug)]
pub struct CodeRows {
    dim: usize,
    codes: Vec<i8>,
    meta: Vec<f32>,
}

impl CodeRows {
    /// Room for `rows` rows of `dim` components.
    pub fn new(dim: usize, rows: usize) -> Self {
        CodeRows {
            dim,
            codes: Vec::with_capacity(rows * dim),
            meta: Vec::with_capacity(rows * META),
        }
    }

    /// Appends a copy of `code` (of this block's dimension).
    pub fn push_code(&mut self, code: CodeRef<'_>) {
        debug_assert_eq!(code.codes.len(), self.dim);
        self.codes.extend_from_slice(code.codes);
        self.meta.extend_from_slice(code.meta);
    }

    /// Appends the code of `v` (of this block's dimension).
    pub fn push_vector(&mut self, v: &[f32]) {
        debug_assert_eq!(v.len(), self.dim);
        let meta = encode_into(v, &mut self.codes);
        self.meta.extend(meta);
    }

    /// The block, row `i` coding the `i`-th row pushed.
    pub fn finish(self) -> CodeBlock {
        CodeBlock {
            dim: self.dim,
            codes: self.codes.into_boxed_slice(),
            meta: self.meta.into_boxed_slice(),
        }
    }
}

/// A stored vector's code, as read from the store.
#[derive(Clone, Copy, Debug)]
pub struct CodeRef<'a> {
    codes: &'a [i8],
    meta: &'a [f32],
}

#[cfg(test)]
impl<'a> CodeRef<'a> {
    fn new(codes: &'a [i8], meta: &'a [f32]) -> Self {
        CodeRef { codes, meta }
    }
}

/// A query prepared for [`QueryCode::bounds`].
#[derive(Clone, Debug)]
pub struct QueryCode {
    query: Vec<f32>,
    /// `‖q‖`, rounded up.
    norm: f32,
    /// The query's codes `d`.
    codes: Vec<i16>,
    /// Their step `t`.
    step: f32,
    /// `‖q − t·d‖`, rounded up.
    error: f32,
}

impl QueryCode {
    /// Prepares `q`; `None` when a component is not finite.
    pub fn new(q: &[f32]) -> Option<Self> {
        if q.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let norm = up(q.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt());
        let max = q.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let top = query_code_max(q.len());
        let step = if max > 0.0 { max / top } else { 0.0 };
        let codes: Vec<i16> = q
            .iter()
            .map(|x| {
                if step > 0.0 {
                    (x / step).round().clamp(-top, top) as i16
                } else {
                    0
                }
            })
            .collect();
        let error = q
            .iter()
            .zip(&codes)
            .map(|(x, d)| (f64::from(*x) - f64::from(step) * f64::from(*d)).powi(2))
            .sum::<f64>()
            .sqrt();
        Some(QueryCode {
            query: q.to_vec(),
            norm,
            codes,
            step,
            error: up(error),
        })
    }

    /// The query as given.
    pub fn raw(&self) -> &[f32] {
        &self.query
    }

    /// `(estimate, radius)`: the query's dot product with the coded vector lies within
    /// `estimate ± radius`. The codes must have the query's dimension.
    #[inline(always)]
    pub fn bounds(&self, code: CodeRef<'_>) -> (f32, f32) {
        let [scale, residual, code_norm] = [code.meta[0], code.meta[1], code.meta[2]];
        let estimate = scale * (self.step * code_dot(&self.codes, code.codes) as f32);
        // `‖s·c‖`, which the query's own coding error is measured against.
        let coded = scale * code_norm;
        let size = self.norm * (coded + residual);
        (
            estimate,
            self.norm * residual + self.error * coded + MARGIN * size + f32::MIN_POSITIVE,
        )
    }
}

/// The largest query code for vectors of `dim` components: 16 bits, or fewer where a row's
/// sum of `dim` products with codes up to [`CODE_MAX`] could leave `i32`.
fn query_code_max(dim: usize) -> f32 {
    let fits = i32::MAX as f64 / (dim.max(1) as f64 * f64::from(CODE_MAX));
    fits.floor().clamp(1.0, f64::from(i16::MAX)) as f32
}

/// `d·c` in integers: exact, so its order of summation is free and the compiler vectorises
/// it (pairs of 16-bit products added into 32-bit lanes). A plain loop, inlined into the
/// caller's dispatch: an iterator adaptor's `fold` would be compiled apart from it, without
/// the wide vector unit.
#[inline(always)]
fn code_dot(query: &[i16], codes: &[i8]) -> i32 {
    let n = query.len().min(codes.len());
    let (query, codes) = (&query[..n], &codes[..n]);
    let mut acc = 0i32;
    for i in 0..n {
        acc += i32::from(query[i]) * i32::from(codes[i]);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::vector::dot;
    use proptest::prelude::*;

    fn encode(v: &[f32]) -> (Vec<i8>, [f32; META]) {
        let mut codes = Vec::new();
        let meta = encode_into(v, &mut codes);
        (codes, meta)
    }

    #[test]
    fn codes_round_to_the_nearest_step() {
        let (codes, meta) = encode(&[1.0, -1.0, 0.5, -0.25, 0.004, 0.0]);
        assert_eq!(codes, vec![127, -127, 64, -32, 1, 0]);
        assert_eq!(meta[0], 1.0 / 127.0);
    }

    fn check(q: &[f32], v: &[f32]) -> Result<(), TestCaseError> {
        let (codes, meta) = encode(v);
        let query = QueryCode::new(q).expect("finite");
        let (est, radius) = query.bounds(CodeRef::new(&codes, &meta));
        let exact = dot(q, v);
        prop_assert!(
            (exact - est).abs() <= radius,
            "dot {exact} outside {est} ± {radius}"
        );
        Ok(())
    }

    proptest! {
        #[test]
        fn the_interval_holds_the_exact_dot(
            pairs in proptest::collection::vec((-1.0f32..1.0, -1.0f32..1.0), 1..700),
            qs in 0.0f32..3.0,
            vs in 0.0f32..3.0,
        ) {
            let q: Vec<f32> = pairs.iter().map(|p| p.0 * qs).collect();
            let v: Vec<f32> = pairs.iter().map(|p| p.1 * vs).collect();
            check(&q, &v)?;
        }

        #[test]
        fn spiky_vectors_keep_the_bound(
            dim in 1usize..600,
            at in 0usize..600,
            spike in -50.0f32..50.0,
        ) {
            let mut v = vec![1e-3f32; dim];
            v[at % dim] = spike;
            let q: Vec<f32> = (0..dim).map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0).collect();
            check(&q, &v)?;
            // A spiky query: a coarse step, so its own coding error dominates the radius.
            check(&v, &q)?;
        }
    }

    #[test]
    fn unit_vectors_get_a_tight_interval() {
        let dim = 384;
        let unit = |seed: u32| {
            let raw: Vec<f32> = (0..dim as u32)
                .map(|i| {
                    let h = (i + 1).wrapping_mul(seed + 7).wrapping_mul(2_654_435_761);
                    (h >> 8) as f32 / 16_777_216.0 - 0.5
                })
                .collect();
            let n = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
            raw.iter().map(|x| x / n).collect::<Vec<f32>>()
        };
        let (q, v) = (unit(1), unit(2));
        let (codes, meta) = encode(&v);
        let (est, radius) = QueryCode::new(&q)
            .unwrap()
            .bounds(CodeRef::new(&codes, &meta));
        assert!((dot(&q, &v) - est).abs() <= radius);
        assert!(radius < 0.02, "radius {radius}");
    }

    #[test]
    fn a_row_sum_of_query_and_vector_codes_fits_i32() {
        for dim in [1, 8, 384, 768, 1024, 4096, 65_536] {
            let top = query_code_max(dim);
            assert!(top >= 1.0 && top <= f32::from(i16::MAX));
            let worst = dim as f64 * f64::from(CODE_MAX) * f64::from(top);
            assert!(worst <= f64::from(i32::MAX), "dim {dim}");
        }
        assert_eq!(query_code_max(384), f32::from(i16::MAX));
        let dim = 4096;
        let q = QueryCode::new(&vec![-1.0; dim]).unwrap();
        let (codes, meta) = encode(&vec![1.0; dim]);
        let (est, radius) = q.bounds(CodeRef::new(&codes, &meta));
        assert!((est + dim as f32).abs() <= radius, "{est} ± {radius}");
    }

    #[test]
    fn zero_and_non_finite_inputs() {
        let (codes, meta) = encode(&[0.0; 8]);
        let q = QueryCode::new(&[1.0; 8]).unwrap();
        assert_eq!(q.bounds(CodeRef::new(&codes, &meta)).0, 0.0);
        assert!(QueryCode::new(&[f32::NAN, 1.0]).is_none());
    }
}
