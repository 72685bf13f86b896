//! Code bounds: large candidate sets are first bounded from the vectors' 8-bit codes, and
//! only the candidates that could still rank are scored from their full vectors.
//!
//! Invariant: the result equals scoring every candidate in full (same scores, same code,
//! same order); bounds are used only for rankings monotone in the cosine.

use rayon::prelude::*;

use super::score::{Inputs, RankCtx, GATHER_CHUNK};
use crate::index::vector::{code_bounds, exact_scores, top_k, QueryCode, VectorStore};
use crate::rank::RankConfig;

/// The code bounds of `ids` (ascending): from `known` (ascending) where it has them, the
/// others from the store.
pub(super) fn bounds_of(
    vectors: &VectorStore,
    code: &QueryCode,
    ids: &[u32],
    known: &[(u32, (f32, f32))],
) -> Vec<(f32, f32)> {
    if known.is_empty() {
        return code_bounds(vectors, code, ids);
    }
    let mut out = vec![(f32::NEG_INFINITY, f32::NEG_INFINITY); ids.len()];
    let mut missing = (Vec::new(), Vec::new());
    let mut next = known.iter().peekable();
    for (i, &d) in ids.iter().enumerate() {
        while next.next_if(|(k, _)| *k < d).is_some() {}
        match next.next_if(|(k, _)| *k == d) {
            Some(&(_, b)) => out[i] = b,
            None => {
                missing.0.push(i);
                missing.1.push(d);
            }
        }
    }
    let read = code_bounds(vectors, code, &missing.1);
    for (i, b) in missing.0.into_iter().zip(read) {
        out[i] = b;
    }
    out
}

/// Below this many candidates every one is scored from its full vector.
pub const CODE_MIN_CANDIDATES: usize = 4096;

/// The coded query when a set of `n` candidates is worth bounding from the 8-bit codes:
/// large enough, a query of the store's dimension, and a ranking whose score never falls
/// when a cosine rises (so bounds on cosines bound the score).
pub(super) fn bounded_code(
    ctx: &RankCtx<'_>,
    vectors: &VectorStore,
    n: usize,
) -> Option<QueryCode> {
    let w = ctx.rank.weights;
    let monotone = w.relevance >= 0.0
        && (0.0..=1.0).contains(&ctx.rank.lexical_share)
        && ctx.rank.context_weight >= 0.0
        && ctx.rank.episode_weight >= 0.0;
    // Bounds a probe read in memory order cost far less than those gathered by id.
    let min = if ctx.known.len() * 2 >= n {
        ctx.code_min_candidates / 8
    } else {
        ctx.code_min_candidates
    };
    let wanted = n >= min && monotone && ctx.query.len() == vectors.dim();
    wanted.then(|| QueryCode::new(ctx.query)).flatten()
}

/// Positions of the candidates whose score could reach the k-th best lower bound.
///
/// Every score is bounded from the cosine intervals of the event, of its episode neighbours
/// and of the rest of its episode (the score is non-decreasing in each). Let `T` be the k-th largest lower bound:
/// the k candidates achieving it all score at least `T`, so a candidate whose upper bound is
/// below `T` cannot be in the top k, ties included.
///
/// `floors` are the episodes' best lower matches ([`Inputs::episode_bests`] of the lower
/// bounds; empty when the episode signal is off).
pub(super) fn survivors(
    ctx: &RankCtx<'_>,
    inputs: &Inputs<'_>,
    bounds: &[(f32, f32)],
    floors: &[f32],
    k: usize,
) -> Vec<u32> {
    let rank = ctx.rank;
    let n = bounds.len();
    // The score is `base + α·cosine⁺ + β·context + γ·episode`, where `base` holds everything
    // that does not depend on a cosine (lexical, actor, date, question, recency, trust,
    // confidence).
    let w = rank.weights.relevance;
    let (alpha, beta) = (w * (1.0 - rank.lexical_share), w * rank.context_weight);
    let gamma = w * rank.episode_weight;
    let matched_low = |j: usize| rank.matched(bounds[j].0, inputs.lexical[j]);
    let matched_high = |j: usize| rank.matched(bounds[j].1, inputs.lexical[j]);
    let ceilings = inputs.episode_bests(rank, |j| bounds[j].1);
    let (low_total, high_total): (Vec<f32>, Vec<f32>) = (0..n)
        .into_par_iter()
        .with_min_len(GATHER_CHUNK)
        .map(|i| {
            let named = (inputs.lexical[i], inputs.actor[i], inputs.date[i]);
            let base = rank.base(named, &inputs.priors[i], ctx.now_ms);
            let (lo, hi) = bounds[i];
            let e = inputs.episodes;
            let low = base
                + alpha * lo.max(0.0)
                + beta * e.context_of(i, matched_low)
                + gamma * e.best_of(i, floors);
            let high = base
                + alpha * hi.max(0.0)
                + beta * e.context_of(i, matched_high)
                + gamma * e.best_of(i, &ceilings);
            // Rounding: these sums are not computed in the order `RankConfig::score` uses.
            let slack = 1e-5 * (1.0 + base.abs() + alpha + beta + gamma);
            (low - slack, high + slack)
        })
        .unzip();
    let positions: Vec<u32> = (0..n as u32).collect();
    let best = top_k(&positions, &low_total, k);
    let threshold = match best.last() {
        Some(&(_, t)) if best.len() == k => t,
        _ => return positions,
    };
    positions
        .into_par_iter()
        .with_min_len(GATHER_CHUNK)
        .filter(|&i| high_total[i as usize] >= threshold)
        .collect()
}

/// Cosines from the full vectors for `pool`, its episode neighbours and, with the episode
/// signal on, the members of their episodes that could hold its best match
/// ([`episode_contenders`]); NaN elsewhere: no other position is read.
pub(super) fn rescore(
    ctx: &RankCtx<'_>,
    vectors: &VectorStore,
    inputs: &Inputs<'_>,
    (bounds, floors): (&[(f32, f32)], &[f32]),
    pool: &[u32],
) -> Vec<f32> {
    let mut needed: Vec<u32> = pool
        .iter()
        .flat_map(|&i| {
            let near = inputs.episodes.neighbours(i as usize);
            std::iter::once(i).chain(near.into_iter().flatten().map(|j| j as u32))
        })
        .collect();
    if ctx.rank.episode_weight > 0.0 {
        needed.extend(episode_contenders(ctx.rank, inputs, (bounds, floors), pool));
    }
    needed.sort_unstable();
    needed.dedup();
    let docs: Vec<u32> = needed.iter().map(|&i| inputs.ids[i as usize]).collect();
    let scores = exact_scores(vectors, ctx.query, &docs);
    let mut cosines = vec![f32::NAN; inputs.ids.len()];
    for (&i, score) in needed.iter().zip(scores) {
        cosines[i as usize] = score;
    }
    cosines
}

/// The members of `pool`'s episodes whose match could be their episode's best: those whose
/// upper match reaches the episode's best lower match (its floor in `floors`). Any other member's match is below
/// that, and the member holding it is a contender whose exact match is at least that, so
/// the best over the contenders alone is the episode's exact best (a member left unscored
/// counts its lexical part alone, lower still). Each episode is read once however many of
/// its events survived, so a long episode costs its length, not its length times theirs.
pub(super) fn episode_contenders(
    rank: &RankConfig,
    inputs: &Inputs<'_>,
    (bounds, floors): (&[(f32, f32)], &[f32]),
    pool: &[u32],
) -> Vec<u32> {
    let e = inputs.episodes;
    let mut episodes: Vec<usize> = pool
        .iter()
        .filter_map(|&i| e.episode_of(i as usize))
        .collect();
    episodes.sort_unstable();
    episodes.dedup();
    let high = |j: u32| rank.matched(bounds[j as usize].1, inputs.lexical[j as usize]);
    episodes
        .par_iter()
        .flat_map_iter(|&ep| {
            let floor = floors[ep];
            e.members_in(ep)
                .iter()
                .copied()
                .filter(move |&j| high(j) >= floor)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::super::fixture::{ev, whole, World};
    use super::super::lexical::Bm25;
    use super::super::query::QueryRead;
    use super::super::scope::scope_filter;
    use super::super::score::rank_set;
    use super::*;
    use crate::read::Head;
    use crate::read::SubjectRule;
    use crate::retrieve::Scope;

    #[test]
    fn bounding_from_codes_ranks_exactly_as_scoring_every_candidate() {
        let mut w = World::new(SubjectRule::OFF);
        let mut rng = StdRng::seed_from_u64(11);
        for i in 0..600 {
            let source = format!("s{}", i / 6);
            let at = format!("2026-06-{:02}T{:02}:{:02}:00Z", 1 + i % 28, i % 24, i % 60);
            let text = if i % 7 == 0 {
                "invoice format"
            } else {
                "weather"
            };
            let v = [(); 4].map(|_| rng.gen_range(-1.0f32..1.0));
            w.add(ev(&format!("e{i}"), "ann", &source, &at, text), v);
        }
        w.commit();
        let snap = w.snapshot();
        let grant = whole();
        let rank = RankConfig::default();
        let text = "what invoice format did ann want";
        let read = QueryRead::new(&snap.table, &grant, text, &rank);
        let filter = scope_filter("acme", &Scope::default());
        let bm25 = Bm25::new(&snap, &filter, &read.words.lexical);
        let set: Vec<Head> = (0..600).map(|d| snap.table.head(d)).collect();
        let query = {
            let q = [0.3f32, -0.5, 0.7, 0.1];
            let n = q.iter().map(|x| x * x).sum::<f32>().sqrt();
            q.map(|x| x / n)
        };
        let ranked = |code_min_candidates: usize| {
            let ctx = RankCtx {
                snap: &snap,
                rank: &rank,
                query: &query,
                text,
                read: &read,
                bm25: &bm25,
                known: &[],
                now_ms: 1_790_000_000_000,
                code_min_candidates,
            };
            rank_set(&ctx, &set, 10)
                .unwrap()
                .iter()
                .map(|r| (r.doc, r.score.to_bits()))
                .collect::<Vec<_>>()
        };
        let bounded = ranked(1);
        assert_eq!(bounded.len(), 10);
        assert_eq!(
            bounded,
            ranked(usize::MAX),
            "same ids, same scores to the bit"
        );
    }
}
