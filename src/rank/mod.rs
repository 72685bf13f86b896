//! Pure ranking: combines relevance, recency, source trust and confidence into one score
//! with an explanation.
//!
//! Invariants: no I/O, no clock (the caller passes `now`); every component lies in [0, 1]
//! before weighting (relevance is cosine clamped at 0); `score` is exactly the sum of the
//! weighted components reported in the breakdown, so a hit can always be explained.

use serde::Serialize;

use crate::model::{Confidence, SourceTrust};

/// Weights of the four components.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Weight of cosine relevance.
    pub relevance: f32,
    /// Weight of recency.
    pub recency: f32,
    /// Weight of source trust.
    pub trust: f32,
    /// Weight of confidence.
    pub confidence: f32,
}

/// Ranking configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RankConfig {
    /// Component weights.
    pub weights: Weights,
    /// Recency halves every this many days of age (by `occurredAt`).
    pub half_life_days: f64,
    /// Trust value per source, indexed like [`SourceTrust::ALL`].
    pub trust_values: [f32; 5],
    /// Value per confidence, indexed like [`Confidence::ALL`].
    pub confidence_values: [f32; 3],
}

impl Default for RankConfig {
    fn default() -> Self {
        RankConfig {
            weights: Weights {
                relevance: 0.70,
                recency: 0.10,
                trust: 0.10,
                confidence: 0.10,
            },
            half_life_days: 180.0,
            trust_values: [0.7, 0.8, 0.9, 1.0, 0.3],
            confidence_values: [0.4, 0.7, 1.0],
        }
    }
}

/// Why a hit scored what it did: weighted contributions that sum to `score`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Breakdown {
    /// Weighted relevance contribution.
    pub relevance: f32,
    /// Weighted recency contribution.
    pub recency: f32,
    /// Weighted trust contribution.
    pub trust: f32,
    /// Weighted confidence contribution.
    pub confidence: f32,
    /// The raw cosine similarity between query and event.
    pub cosine: f32,
}

impl Breakdown {
    /// The total score.
    pub fn score(&self) -> f32 {
        self.relevance + self.recency + self.trust + self.confidence
    }
}

/// The per-event inputs to ranking (everything except the cosine).
#[derive(Debug, Clone, Copy)]
pub struct Prior {
    /// `occurredAt` in unix milliseconds.
    pub occurred_ms: i64,
    /// Source trust.
    pub trust: SourceTrust,
    /// Confidence.
    pub confidence: Confidence,
}

impl RankConfig {
    /// Recency in [0, 1]: 1 for now or the future, halving every `half_life_days`.
    pub fn recency(&self, occurred_ms: i64, now_ms: i64) -> f32 {
        let age_days = (now_ms - occurred_ms).max(0) as f64 / 86_400_000.0;
        if self.half_life_days <= 0.0 {
            return 1.0;
        }
        (0.5f64).powf(age_days / self.half_life_days) as f32
    }

    fn trust_value(&self, t: SourceTrust) -> f32 {
        let i = SourceTrust::ALL.iter().position(|x| *x == t).unwrap_or(0);
        self.trust_values[i]
    }

    fn confidence_value(&self, c: Confidence) -> f32 {
        let i = Confidence::ALL.iter().position(|x| *x == c).unwrap_or(0);
        self.confidence_values[i]
    }

    /// The score contributed by everything but relevance.
    pub fn prior_score(&self, prior: &Prior, now_ms: i64) -> f32 {
        let w = &self.weights;
        w.recency * self.recency(prior.occurred_ms, now_ms)
            + w.trust * self.trust_value(prior.trust)
            + w.confidence * self.confidence_value(prior.confidence)
    }

    /// An upper bound on `prior_score` for any event.
    pub fn max_prior_score(&self) -> f32 {
        let w = &self.weights;
        let max_trust = self.trust_values.iter().copied().fold(0.0, f32::max);
        let max_conf = self.confidence_values.iter().copied().fold(0.0, f32::max);
        w.recency + w.trust * max_trust + w.confidence * max_conf
    }

    /// Full explanation for one hit.
    pub fn explain(&self, cosine: f32, prior: &Prior, now_ms: i64) -> Breakdown {
        let w = &self.weights;
        Breakdown {
            relevance: w.relevance * cosine.max(0.0),
            recency: w.recency * self.recency(prior.occurred_ms, now_ms),
            trust: w.trust * self.trust_value(prior.trust),
            confidence: w.confidence * self.confidence_value(prior.confidence),
            cosine,
        }
    }

    /// The total score (same value as `explain(..).score()`).
    pub fn score(&self, cosine: f32, prior: &Prior, now_ms: i64) -> f32 {
        self.weights.relevance * cosine.max(0.0) + self.prior_score(prior, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    fn prior(days_ago: i64, trust: SourceTrust) -> Prior {
        Prior {
            occurred_ms: 1_000 * DAY - days_ago * DAY,
            trust,
            confidence: Confidence::High,
        }
    }

    #[test]
    fn recency_halves_each_half_life() {
        let cfg = RankConfig::default();
        let now = 1_000 * DAY;
        assert!((cfg.recency(now, now) - 1.0).abs() < 1e-6);
        assert!((cfg.recency(now - 180 * DAY, now) - 0.5).abs() < 1e-4);
        assert!((cfg.recency(now + DAY, now) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn newer_and_more_trusted_win_ties_on_relevance() {
        let cfg = RankConfig::default();
        let now = 1_000 * DAY;
        let old = cfg.score(0.8, &prior(300, SourceTrust::UserProvided), now);
        let new = cfg.score(0.8, &prior(1, SourceTrust::UserProvided), now);
        assert!(new > old);
        let untrusted = cfg.score(0.8, &prior(1, SourceTrust::UntrustedContent), now);
        let operator = cfg.score(0.8, &prior(1, SourceTrust::OperatorEntered), now);
        assert!(operator > untrusted);
    }

    #[test]
    fn breakdown_sums_to_score_and_bound_holds() {
        let cfg = RankConfig::default();
        let now = 1_000 * DAY;
        for (cos, days) in [(0.9f32, 0i64), (0.1, 50), (-0.3, 400)] {
            let p = prior(days, SourceTrust::ToolResult);
            let b = cfg.explain(cos, &p, now);
            assert!((b.score() - cfg.score(cos, &p, now)).abs() < 1e-6);
            assert!(cfg.prior_score(&p, now) <= cfg.max_prior_score() + 1e-6);
        }
    }
}
