//! Retrieval metrics: recall@k, recall_all@k and hit@k, accumulated per group.
//!
//! Role: pure scoring of ranked id lists against gold id sets, with no I/O.
//!
//! Invariants:
//! - for a query with gold set G and ranking R, `recall@k = |G ∩ R[..k]| / |G|`,
//!   `recall_all@k = 1` iff `G ⊆ R[..k]`, `hit@k = 1` iff `G ∩ R[..k] ≠ ∅`;
//! - queries with an empty gold set are never scored (the caller counts them as skipped);
//! - duplicate ids in a ranking count once (the first occurrence);
//! - a group's figures are plain means over its queries, and the `overall` group holds
//!   every scored query exactly once, so figures do not depend on query order; a query may
//!   also belong to several named groups (its category and its half, say);
//! - `recall_ci95` is the half-width of a 95% bootstrap interval of a group's mean recall@k
//!   (1,000 resamples of its queries with replacement, from a fixed seed, so a run repeats
//!   it exactly): the noise a difference between two rankings must clear.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

/// Name of the group that holds every scored query.
pub const OVERALL: &str = "overall";

/// Per-query figures at each cut-off, in the order of the cut-offs given.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryScore {
    /// recall@k per cut-off.
    pub recall: Vec<f64>,
    /// recall_all@k per cut-off (0 or 1).
    pub all: Vec<f64>,
    /// hit@k per cut-off (0 or 1).
    pub hit: Vec<f64>,
}

/// Scores one ranking against a non-empty gold set at each cut-off in `ks`.
///
/// Returns `None` when `gold` is empty (such a query cannot be scored).
pub fn score_query(gold: &HashSet<String>, ranked: &[String], ks: &[usize]) -> Option<QueryScore> {
    if gold.is_empty() {
        return None;
    }
    // Rank (1-based) at which each gold id first appears.
    let mut seen: HashSet<&str> = HashSet::new();
    let mut gold_ranks: Vec<usize> = Vec::new();
    for (i, id) in ranked.iter().enumerate() {
        if seen.insert(id.as_str()) && gold.contains(id) {
            gold_ranks.push(i + 1);
        }
    }
    let n = gold.len() as f64;
    let mut out = QueryScore {
        recall: Vec::with_capacity(ks.len()),
        all: Vec::with_capacity(ks.len()),
        hit: Vec::with_capacity(ks.len()),
    };
    for &k in ks {
        let found = gold_ranks.iter().filter(|&&r| r <= k).count();
        out.recall.push(found as f64 / n);
        out.all.push(if found == gold.len() { 1.0 } else { 0.0 });
        out.hit.push(if found > 0 { 1.0 } else { 0.0 });
    }
    Some(out)
}

/// Mean figures of one group of queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupReport {
    /// Number of scored queries.
    pub queries: usize,
    /// Mean recall@k, keyed by k.
    pub recall: BTreeMap<usize, f64>,
    /// Mean recall_all@k, keyed by k.
    pub recall_all: BTreeMap<usize, f64>,
    /// Mean hit@k, keyed by k.
    pub hit: BTreeMap<usize, f64>,
    /// Half-width of the 95% bootstrap interval of mean recall@k, keyed by k.
    pub recall_ci95: BTreeMap<usize, f64>,
    /// Each query's recall at each cut-off (in the cut-offs' order), in the order queries
    /// were added: two rankings of the same queries line up for a paired comparison.
    #[serde(skip)]
    pub per_query: Vec<Vec<f64>>,
}

/// The mean difference `a - b` of recall at cut-off position `at` between two rankings of
/// the same queries, and the half-width of its 95% bootstrap interval (resampling queries,
/// so each query's two rankings stay paired). `None` unless both hold the same number of
/// queries.
pub fn paired_difference(a: &GroupReport, b: &GroupReport, at: usize) -> Option<(f64, f64)> {
    if a.per_query.len() != b.per_query.len() || a.per_query.is_empty() {
        return None;
    }
    let diffs: Vec<f64> = a
        .per_query
        .iter()
        .zip(&b.per_query)
        .map(|(x, y)| x.get(at).copied().unwrap_or(0.0) - y.get(at).copied().unwrap_or(0.0))
        .collect();
    let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
    Some((mean, bootstrap_ci95(&diffs)))
}

/// Bootstrap resamples behind [`GroupReport::recall_ci95`].
const BOOTSTRAP_RESAMPLES: usize = 1_000;

/// The half-width of the 95% bootstrap interval of the mean of `values` (0 for fewer than
/// two): half the distance between the 2.5th and 97.5th percentiles of the means of
/// [`BOOTSTRAP_RESAMPLES`] resamples drawn with replacement by a fixed-seed generator.
pub fn bootstrap_ci95(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    // xorshift64*: small, seeded, and the same on every machine.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut means: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let sum: f64 = (0..n).map(|_| values[(next() % n as u64) as usize]).sum();
            sum / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((means.len() - 1) as f64 * q).round() as usize];
    (at(0.975) - at(0.025)) / 2.0
}

#[derive(Debug, Clone, Default)]
struct Sums {
    queries: usize,
    recall: Vec<f64>,
    all: Vec<f64>,
    hit: Vec<f64>,
    /// Each query's recall at each cut-off, for the bootstrap.
    per_query: Vec<Vec<f64>>,
}

impl Sums {
    fn add(&mut self, s: &QueryScore) {
        if self.recall.is_empty() {
            self.recall = vec![0.0; s.recall.len()];
            self.all = vec![0.0; s.all.len()];
            self.hit = vec![0.0; s.hit.len()];
        }
        self.queries += 1;
        self.per_query.push(s.recall.clone());
        for (acc, v) in self.recall.iter_mut().zip(&s.recall) {
            *acc += v;
        }
        for (acc, v) in self.all.iter_mut().zip(&s.all) {
            *acc += v;
        }
        for (acc, v) in self.hit.iter_mut().zip(&s.hit) {
            *acc += v;
        }
    }
}

/// Accumulates query scores per group (plus [`OVERALL`]).
#[derive(Debug, Clone)]
pub struct Accumulator {
    ks: Vec<usize>,
    groups: BTreeMap<String, Sums>,
}

impl Accumulator {
    /// An empty accumulator for the cut-offs `ks`.
    pub fn new(ks: &[usize]) -> Self {
        Accumulator {
            ks: ks.to_vec(),
            groups: BTreeMap::new(),
        }
    }

    /// The cut-offs.
    pub fn ks(&self) -> &[usize] {
        &self.ks
    }

    /// Scores `ranked` against `gold` and adds it to each of `groups` and to [`OVERALL`].
    /// Returns whether the query was scored (non-empty gold).
    pub fn add(&mut self, groups: &[&str], gold: &HashSet<String>, ranked: &[String]) -> bool {
        let Some(score) = score_query(gold, ranked, &self.ks) else {
            return false;
        };
        self.groups
            .entry(OVERALL.to_string())
            .or_default()
            .add(&score);
        for g in groups {
            self.groups.entry((*g).to_string()).or_default().add(&score);
        }
        true
    }

    /// Means per group, keyed by group name.
    pub fn report(&self) -> BTreeMap<String, GroupReport> {
        self.groups
            .iter()
            .map(|(name, s)| {
                let mean = |v: &[f64]| -> BTreeMap<usize, f64> {
                    self.ks
                        .iter()
                        .zip(v)
                        .map(|(&k, sum)| (k, sum / s.queries.max(1) as f64))
                        .collect()
                };
                let recall_ci95 = self
                    .ks
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| {
                        let values: Vec<f64> = s.per_query.iter().map(|q| q[i]).collect();
                        (k, bootstrap_ci95(&values))
                    })
                    .collect();
                let report = GroupReport {
                    queries: s.queries,
                    recall: mean(&s.recall),
                    recall_all: mean(&s.all),
                    hit: mean(&s.hit),
                    recall_ci95,
                    per_query: s.per_query.clone(),
                };
                (name.clone(), report)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn list(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn recall_all_and_hit_at_cutoffs() {
        let gold = set(&["a", "c"]);
        let ranked = list(&["a", "b", "a", "c"]);
        let s = score_query(&gold, &ranked, &[1, 2, 4]).unwrap();
        assert_eq!(s.recall, vec![0.5, 0.5, 1.0]);
        assert_eq!(s.all, vec![0.0, 0.0, 1.0]);
        assert_eq!(s.hit, vec![1.0, 1.0, 1.0]);
        assert!(score_query(&set(&[]), &ranked, &[1]).is_none());
    }

    #[test]
    fn accumulator_means_per_group_and_overall() {
        let mut acc = Accumulator::new(&[1]);
        assert!(acc.add(&["x", "dev"], &set(&["a"]), &list(&["a"])));
        assert!(acc.add(&["y", "dev"], &set(&["a"]), &list(&["b"])));
        assert!(!acc.add(&["y"], &set(&[]), &list(&["b"])));
        let r = acc.report();
        assert_eq!(r[OVERALL].queries, 2);
        assert_eq!(r[OVERALL].recall[&1], 0.5);
        assert_eq!(r["x"].recall[&1], 1.0);
        assert_eq!(r["y"].recall[&1], 0.0);
        assert_eq!(r["dev"].queries, 2, "a query counts in each of its groups");
        assert_eq!(r["dev"].recall[&1], 0.5);
    }

    #[test]
    fn the_bootstrap_interval_shrinks_with_more_queries_and_is_zero_without_spread() {
        assert_eq!(bootstrap_ci95(&[1.0; 50]), 0.0);
        assert_eq!(bootstrap_ci95(&[0.3]), 0.0);
        let half: Vec<f64> = (0..100).map(|i| f64::from(i % 2)).collect();
        let ci = bootstrap_ci95(&half);
        // Binomial: 1.96 * sqrt(0.25 / 100) = 0.098.
        assert!((0.08..0.12).contains(&ci), "{ci}");
        let more: Vec<f64> = (0..1600).map(|i| f64::from(i % 2)).collect();
        let narrow = bootstrap_ci95(&more);
        assert!(narrow < ci / 3.0, "{narrow} against {ci}");
        assert_eq!(ci, bootstrap_ci95(&half), "the same every run");
    }

    #[test]
    fn a_paired_difference_is_narrower_than_the_groups_own_intervals() {
        // Two rankings that agree on most queries and differ on one in ten.
        let (mut a, mut b) = (Accumulator::new(&[1]), Accumulator::new(&[1]));
        for i in 0..200 {
            let gold = set(&["g"]);
            let hit = list(&["g"]);
            let miss = list(&["x"]);
            let shared = if i % 2 == 0 { &hit } else { &miss };
            a.add(&[], &gold, if i % 10 == 1 { &hit } else { shared });
            b.add(&[], &gold, shared);
        }
        let (ra, rb) = (a.report(), b.report());
        let (mean, ci) = paired_difference(&ra[OVERALL], &rb[OVERALL], 0).expect("paired");
        assert!((mean - 0.1).abs() < 1e-9, "{mean}");
        assert!(ci > 0.0 && ci < ra[OVERALL].recall_ci95[&1], "{ci}");
        assert!(
            mean > ci,
            "a lift of one in ten queries clears its noise here"
        );
    }
}
