//! Scoring a candidate set: every signal of every candidate (cosine, BM25, actor names,
//! named dates, episode context and best, priors) and the exact top k.

use rayon::prelude::*;

use super::codes::{bounded_code, bounds_of, rescore, survivors};
use super::episodes::Episodes;
use super::lexical::{lexical_scores, Bm25};
use super::query::QueryRead;
use super::scope::SearchError;
use crate::index::vector::{exact_scores, top_k};
use crate::rank::dates::{named_dates, on_any};
use crate::rank::{Prior, RankConfig, Signals};
use crate::read::{Head, Snapshot};

/// What every scoring path needs.
pub(super) struct RankCtx<'a> {
    pub(super) snap: &'a Snapshot<'a>,
    pub(super) rank: &'a RankConfig,
    /// The unit query vector.
    pub(super) query: &'a [f32],
    /// The query text (named dates).
    pub(super) text: &'a str,
    /// The actors it names.
    pub(super) read: &'a QueryRead,
    /// The query's BM25 matches in scope.
    pub(super) bm25: &'a Bm25<'a>,
    /// Code bounds the candidate path read already.
    pub(super) known: &'a [(u32, (f32, f32))],
    pub(super) now_ms: i64,
    /// See [`RecallConfig::code_min_candidates`].
    pub(super) code_min_candidates: usize,
}

/// One ranked candidate: internal id, total score and the signals behind it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ranked {
    pub(super) doc: u32,
    pub(super) score: f32,
    pub(super) signals: Signals,
}

/// Candidates per rayon task when gathering ids and priors.
pub(super) const GATHER_CHUNK: usize = 4096;

/// Scores `set` (cosine via the vector store, BM25 via the scope index, actor names, episode
/// context, priors) in parallel and returns its top k. Large sets are first bounded from the
/// 8-bit codes ([`code_bounds`]); only the candidates that could still rank (with their
/// episode neighbours and their episodes' [`episode_contenders`]) are then scored from their
/// full vectors. Either way the result is
/// the exact top k: the same scores, computed by the same code, in the same order.
pub(super) fn rank_set(
    ctx: &RankCtx<'_>,
    set: &[Head],
    k: usize,
) -> Result<Vec<Ranked>, SearchError> {
    if set.is_empty() {
        return Ok(Vec::new());
    }
    let (ids, priors): (Vec<u32>, Vec<Prior>) = set.iter().map(|h| (h.doc, h.prior())).unzip();
    let bm25 = lexical_scores(ctx, set)?;
    let best_bm25 = bm25.iter().copied().fold(0.0f32, f32::max);
    let lexical: Vec<f32> = bm25
        .iter()
        .map(|b| if best_bm25 > 0.0 { b / best_bm25 } else { 0.0 })
        .collect();
    let episodes = Episodes::new(ctx.rank, set);
    let actor = named_actors(ctx, set);
    let date = on_named_dates(ctx, &priors);
    let inputs = Inputs {
        ids: &ids,
        priors: &priors,
        bm25: &bm25,
        lexical: &lexical,
        actor: &actor,
        date: &date,
        episodes: &episodes,
    };
    let vectors = &ctx.snap.vectors;
    let (pool, cosines) = match bounded_code(ctx, vectors, set.len()) {
        Some(code) => {
            let bounds = bounds_of(vectors, &code, &ids, ctx.known);
            let floors = inputs.episode_bests(ctx.rank, |j| bounds[j].0);
            let pool = survivors(ctx, &inputs, &bounds, &floors, k);
            let cosines = rescore(ctx, vectors, &inputs, (&bounds, &floors), &pool);
            (pool, cosines)
        }
        None => (
            (0..set.len() as u32).collect(),
            exact_scores(vectors, ctx.query, &ids),
        ),
    };
    let bests = if cosines.is_empty() {
        Vec::new()
    } else {
        inputs.episode_bests(ctx.rank, |j| cosines[j])
    };
    let signal = |&i: &u32| inputs.signals(ctx.rank, i as usize, &cosines, &bests);
    let total = |(&i, sig): (&u32, &Signals)| ctx.rank.score(sig, &priors[i as usize], ctx.now_ms);
    // Small pools stay on this thread, outside rayon: waking the pool, or even splitting
    // the work into one piece, costs more than they do.
    let (signals, totals): (Vec<Signals>, Vec<f32>) = if pool.len() <= GATHER_CHUNK {
        let signals: Vec<Signals> = pool.iter().map(signal).collect();
        let totals = pool.iter().zip(&signals).map(total).collect();
        (signals, totals)
    } else {
        let signals: Vec<Signals> = pool
            .par_iter()
            .with_min_len(GATHER_CHUNK)
            .map(signal)
            .collect();
        let totals = pool
            .par_iter()
            .zip(signals.par_iter())
            .with_min_len(GATHER_CHUNK)
            .map(total)
            .collect();
        (signals, totals)
    };
    // The pool is in position order (every position, or the survivors of the bounds in
    // order), so a winner's slot in it is found by search.
    debug_assert!(
        pool.windows(2).all(|w| w[0] < w[1]),
        "pool in position order"
    );
    Ok(top_k(&pool, &totals, k)
        .into_iter()
        .map(|(i, score)| Ranked {
            doc: ids[i as usize],
            score,
            signals: signals[pool.binary_search(&i).expect("a winner is in the pool")],
        })
        .collect())
}

/// Per-candidate inputs to ranking other than the cosine, by position in the scored set.
pub(super) struct Inputs<'a> {
    pub(super) ids: &'a [u32],
    pub(super) priors: &'a [Prior],
    pub(super) bm25: &'a [f32],
    pub(super) lexical: &'a [f32],
    pub(super) actor: &'a [bool],
    pub(super) date: &'a [bool],
    pub(super) episodes: &'a Episodes,
}

impl Inputs<'_> {
    /// The best match of each episode ([`Episodes::bests`]) from each position's cosine (an
    /// exact one, or a bound: the best is then the same bound on the best); none when the
    /// episode signal is off.
    pub(super) fn episode_bests(
        &self,
        rank: &RankConfig,
        cosine: impl Fn(usize) -> f32 + Sync,
    ) -> Vec<f32> {
        if rank.episode_weight <= 0.0 {
            return Vec::new();
        }
        self.episodes
            .bests(|j| rank.matched(cosine(j), self.lexical[j]))
    }

    /// The signals of candidate `i`, given the cosines of it and of the events of its
    /// episode and the episodes' bests from them (cosine, context and episode 0 when
    /// `cosines` is empty).
    pub(super) fn signals(
        &self,
        rank: &RankConfig,
        i: usize,
        cosines: &[f32],
        bests: &[f32],
    ) -> Signals {
        let matched = |j: usize| rank.matched(cosines[j], self.lexical[j]);
        let known = !cosines.is_empty();
        Signals {
            cosine: if known { cosines[i] } else { 0.0 },
            bm25: self.bm25[i],
            lexical: self.lexical[i],
            context: if known {
                self.episodes.context_of(i, matched)
            } else {
                0.0
            },
            episode: self.episodes.best_of(i, bests),
            actor: self.actor[i],
            date: self.date[i],
        }
    }
}

/// Whether each candidate occurred on a date the query names (all false without a date
/// boost or a named date).
pub(super) fn on_named_dates(ctx: &RankCtx<'_>, priors: &[Prior]) -> Vec<bool> {
    let dates = if ctx.rank.date_boost > 0.0 {
        named_dates(ctx.text)
    } else {
        Vec::new()
    };
    if dates.is_empty() {
        return vec![false; priors.len()];
    }
    priors
        .par_iter()
        .with_min_len(GATHER_CHUNK)
        .map(|p| on_any(&dates, p.occurred_ms))
        .collect()
}

/// Whether the query names each candidate's actor ([`QueryRead::named`]).
pub(super) fn named_actors(ctx: &RankCtx<'_>, set: &[Head]) -> Vec<bool> {
    set.iter()
        .map(|h| ctx.read.named.binary_search(&h.actor).is_ok())
        .collect()
}
