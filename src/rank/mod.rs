//! Pure ranking: combines relevance (semantic, lexical, episode context, a named actor and a
//! named date), recency, source trust and confidence into one score with an explanation.
//!
//! Relevance is `w_rel · ((1 − s)·cosine⁺ + s·lexical + c·context + e·episode + a·actor +
//! d·date)` where `s` is the lexical share, `lexical` is the event's BM25 score divided by the
//! best BM25 score among the scored candidates, `context` is the mean match
//! (`(1 − s)·cosine⁺ + s·lexical`) of the event's episode neighbours, `episode` the best match
//! of any event of its episode, itself included (see `retrieve`), `actor` is 1 when the query
//! names the event's actor and `date` is 1 when the event occurred on a date the query names
//! ([`dates`]).
//!
//! One part is a penalty: an event whose text ends in a question ([`asks`]) loses
//! `w_rel · q` (`q` = [`RankConfig::question_penalty`]). A question names its topic, so it
//! matches queries about the topic, but it asks rather than tells: in a conversation the
//! answer is in the turns that state something.
//!
//! Invariants: no I/O, no clock (the caller passes `now`); every signal lies in [0, 1]
//! before weighting (cosine is clamped at 0); `score` is exactly the sum of the weighted
//! components reported in the breakdown, so a hit can always be explained; the question
//! part is the only one that is never positive, and it depends on the event alone (it is
//! part of the [`Prior`]), so every bound that counts the priors counts it.

pub mod dates;

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

/// Queries of at most this many words are short ([`RankConfig::short_lexical_share`]); from
/// twice as many on they are long ([`RankConfig::lexical_share`]).
pub const SHORT_QUERY_WORDS: usize = 32;

/// Ranking configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RankConfig {
    /// Component weights.
    pub weights: Weights,
    /// Recency halves every this many days of age (by `occurredAt`).
    pub half_life_days: f64,
    /// Trust value per source, indexed like [`SourceTrust::ALL`].
    pub trust_values: [f32; 6],
    /// Value per confidence, indexed like [`Confidence::ALL`].
    pub confidence_values: [f32; 3],
    /// Share of the match that comes from BM25 (0: cosine only, 1: BM25 only), for queries
    /// of at least twice [`SHORT_QUERY_WORDS`] words.
    pub lexical_share: f32,
    /// BM25's share for queries of at most [`SHORT_QUERY_WORDS`] words; between that and
    /// twice as many, the share moves linearly to `lexical_share` ([`RankConfig::for_query`]).
    pub short_lexical_share: f32,
    /// Weight of the episode neighbours' mean match, relative to the event's own.
    pub context_weight: f32,
    /// Weight of the best match in the event's episode (itself included), relative to the
    /// event's own: the evidence a question asks for tends to sit in the conversation or
    /// session that matches it best, next to the turn that matches it best.
    pub episode_weight: f32,
    /// Bonus (relative to a full match) when the query names the event's actor.
    pub actor_boost: f32,
    /// Bonus (relative to a full match) when the event occurred on a date the query names.
    pub date_boost: f32,
    /// Penalty (relative to a full match) when the event's text ends in a question ([`asks`]).
    pub question_penalty: f32,
    /// Events of one project at most this far apart (by `occurredAt`) are episode neighbours.
    pub episode_gap_ms: i64,
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
            trust_values: [0.7, 0.8, 0.9, 1.0, 0.3, 0.5],
            confidence_values: [0.4, 0.7, 1.0],
            lexical_share: 0.1,
            short_lexical_share: 0.35,
            context_weight: 0.5,
            episode_weight: 0.5,
            actor_boost: 0.2,
            date_boost: 0.2,
            question_penalty: 0.1,
            episode_gap_ms: 30 * 60 * 1000,
        }
    }
}

/// Why a hit scored what it did: weighted contributions that sum to `score`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Breakdown {
    /// Weighted semantic (cosine) contribution.
    pub relevance: f32,
    /// Weighted lexical (BM25) contribution.
    pub lexical: f32,
    /// Weighted contribution of the episode neighbours' match.
    pub context: f32,
    /// Weighted contribution of the best match in the event's episode.
    pub episode: f32,
    /// Weighted contribution of the query naming the event's actor.
    pub actor: f32,
    /// Weighted contribution of the query naming the date the event occurred on.
    pub date: f32,
    /// Weighted penalty of an event whose text ends in a question (0 or negative).
    pub question: f32,
    /// Weighted recency contribution.
    pub recency: f32,
    /// Weighted trust contribution.
    pub trust: f32,
    /// Weighted confidence contribution.
    pub confidence: f32,
    /// The raw cosine similarity between query and event.
    pub cosine: f32,
    /// The raw BM25 score of the event's summary for the query (0 when no term matches).
    pub bm25: f32,
}

impl Breakdown {
    /// The total score.
    pub fn score(&self) -> f32 {
        self.relevance
            + self.lexical
            + self.context
            + self.episode
            + self.actor
            + self.date
            + self.question
            + self.recency
            + self.trust
            + self.confidence
    }
}

/// The query-dependent signals of one event.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Signals {
    /// Cosine similarity between query and event.
    pub cosine: f32,
    /// Raw BM25 score (0 when no term matches).
    pub bm25: f32,
    /// BM25 divided by the best BM25 among the scored candidates, in [0, 1].
    pub lexical: f32,
    /// Mean match of the episode neighbours, in [0, 1] (0 without neighbours).
    pub context: f32,
    /// Best match of the events of its episode, itself included, in [0, 1].
    pub episode: f32,
    /// Whether the query names the event's actor.
    pub actor: bool,
    /// Whether the event occurred on a date the query names.
    pub date: bool,
}

impl Signals {
    /// Cosine alone (no lexical, context or actor signal).
    pub fn cosine(cosine: f32) -> Self {
        Signals {
            cosine,
            ..Signals::default()
        }
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
    /// Whether the event's text ends in a question ([`asks`]).
    pub asks: bool,
}

/// Whether `text` ends in a question: its last non-blank character is a question mark (ASCII,
/// full-width or Arabic). A question that closes a turn ("Nice! What's your best camping
/// memory?") is what the turn is about, whatever came before it.
pub fn asks(text: &str) -> bool {
    text.trim_end().ends_with(['?', '\u{ff1f}', '\u{061f}'])
}

impl RankConfig {
    /// Recency in [0, 1]: 1 for now or the future, halving every `half_life_days`.
    pub fn recency(&self, occurred_ms: i64, now_ms: i64) -> f32 {
        let age_days = (now_ms - occurred_ms).max(0) as f64 / 86_400_000.0;
        if self.half_life_days <= 0.0 {
            return 1.0;
        }
        (-age_days / self.half_life_days).exp2() as f32
    }

    fn trust_value(&self, t: SourceTrust) -> f32 {
        let i = SourceTrust::ALL.iter().position(|x| *x == t).unwrap_or(0);
        self.trust_values[i]
    }

    fn confidence_value(&self, c: Confidence) -> f32 {
        let i = Confidence::ALL.iter().position(|x| *x == c).unwrap_or(0);
        self.confidence_values[i]
    }

    /// This configuration with the BM25 share that fits `query`'s length: a short question's
    /// words are mostly the ones that matter, while a long, chatty query (a whole dialogue)
    /// carries many incidental words that make BM25 noisy.
    pub fn for_query(&self, query: &str) -> RankConfig {
        let words = query.split_whitespace().count();
        let past_short = words
            .saturating_sub(SHORT_QUERY_WORDS)
            .min(SHORT_QUERY_WORDS);
        let t = past_short as f32 / SHORT_QUERY_WORDS as f32;
        RankConfig {
            // Exact at both ends: a long query gets the configured share, not a rounding of it.
            lexical_share: (1.0 - t) * self.short_lexical_share + t * self.lexical_share,
            ..self.clone()
        }
    }

    /// The event's own match in [0, 1]: cosine and lexical mixed by `lexical_share`.
    pub fn matched(&self, cosine: f32, lexical: f32) -> f32 {
        (1.0 - self.lexical_share) * cosine.max(0.0) + self.lexical_share * lexical
    }

    /// Full explanation for one hit.
    pub fn explain(&self, sig: &Signals, prior: &Prior, now_ms: i64) -> Breakdown {
        let w = &self.weights;
        Breakdown {
            relevance: w.relevance * (1.0 - self.lexical_share) * sig.cosine.max(0.0),
            lexical: w.relevance * self.lexical_share * sig.lexical,
            context: w.relevance * self.context_weight * sig.context,
            episode: w.relevance * self.episode_weight * sig.episode,
            actor: w.relevance * if sig.actor { self.actor_boost } else { 0.0 },
            date: w.relevance * if sig.date { self.date_boost } else { 0.0 },
            question: if prior.asks {
                // `0 - x`, not `-x`: a zero penalty shows as 0, not -0.
                0.0 - w.relevance * self.question_penalty
            } else {
                0.0
            },
            // Not computed at weight 0 (an exp2 per scored event).
            recency: if w.recency == 0.0 {
                0.0
            } else {
                w.recency * self.recency(prior.occurred_ms, now_ms)
            },
            trust: w.trust * self.trust_value(prior.trust),
            confidence: w.confidence * self.confidence_value(prior.confidence),
            cosine: sig.cosine,
            bm25: sig.bm25,
        }
    }

    /// The total score (same value as `explain(..).score()`).
    pub fn score(&self, sig: &Signals, prior: &Prior, now_ms: i64) -> f32 {
        self.explain(sig, prior, now_ms).score()
    }

    /// The score of an event whose cosine, context and episode match are 0: every part that
    /// does not depend on a cosine. The same value as [`RankConfig::score`] of such signals,
    /// to the bit: the same terms in the same order, less the zero ones (adding 0 changes no
    /// finite sum). Bounding a large candidate set calls it once per candidate, so it builds
    /// no [`Signals`] or [`Breakdown`].
    #[inline]
    pub fn base(
        &self,
        (lexical, actor, date): (f32, bool, bool),
        prior: &Prior,
        now_ms: i64,
    ) -> f32 {
        let w = &self.weights;
        let mut sum = w.relevance * self.lexical_share * lexical;
        sum += w.relevance * if actor { self.actor_boost } else { 0.0 };
        sum += w.relevance * if date { self.date_boost } else { 0.0 };
        if prior.asks {
            sum += 0.0 - w.relevance * self.question_penalty;
        }
        if w.recency != 0.0 {
            sum += w.recency * self.recency(prior.occurred_ms, now_ms);
        }
        sum += w.trust * self.trust_value(prior.trust);
        sum + w.confidence * self.confidence_value(prior.confidence)
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
            asks: false,
        }
    }

    #[test]
    fn the_base_is_the_score_without_a_cosine() {
        let cfg = RankConfig {
            half_life_days: 30.0,
            weights: Weights {
                recency: 0.1,
                ..RankConfig::default().weights
            },
            ..RankConfig::default()
        };
        let now = 1_000 * DAY;
        for (i, trust) in SourceTrust::ALL.into_iter().enumerate() {
            for (j, confidence) in Confidence::ALL.into_iter().enumerate() {
                for flags in 0..8u8 {
                    let (actor, date, asks) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
                    let lexical = (i * 3 + j) as f32 / 17.0;
                    let prior = Prior {
                        occurred_ms: now - (i * 7 + j) as i64 * DAY / 3,
                        trust,
                        confidence,
                        asks,
                    };
                    let sig = Signals {
                        bm25: 2.5,
                        lexical,
                        actor,
                        date,
                        ..Signals::default()
                    };
                    for cfg in [&cfg, &RankConfig::default()] {
                        assert_eq!(
                            cfg.base((lexical, actor, date), &prior, now).to_bits(),
                            cfg.score(&sig, &prior, now).to_bits()
                        );
                    }
                }
            }
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
        let sig = Signals::cosine(0.8);
        let old = cfg.score(&sig, &prior(300, SourceTrust::UserProvided), now);
        let new = cfg.score(&sig, &prior(1, SourceTrust::UserProvided), now);
        assert!(new > old);
        let untrusted = cfg.score(&sig, &prior(1, SourceTrust::UntrustedContent), now);
        let operator = cfg.score(&sig, &prior(1, SourceTrust::OperatorEntered), now);
        assert!(operator > untrusted);
    }

    #[test]
    fn a_text_asks_when_it_ends_in_a_question() {
        assert!(asks("Nice! What's your best camping memory?"));
        assert!(asks("Where did you go?  \n"));
        assert!(asks("\u{4f60}\u{53bb}\u{54ea}\u{513f}\u{4e86}\u{ff1f}"));
        assert!(!asks("Did you go? We went to the beach."));
        assert!(!asks("We went camping [shares a photo]"));
        assert!(!asks(""));
    }

    #[test]
    fn a_question_ranks_below_the_same_match_stated() {
        let cfg = RankConfig::default();
        let now = 1_000 * DAY;
        let sig = Signals::cosine(0.6);
        let tells = prior(3, SourceTrust::UserProvided);
        let asks = Prior {
            asks: true,
            ..tells
        };
        let b = cfg.explain(&sig, &asks, now);
        let penalty = cfg.weights.relevance * cfg.question_penalty;
        assert!((b.question + penalty).abs() < 1e-6);
        assert_eq!(
            cfg.explain(&sig, &tells, now).question.to_bits(),
            0.0f32.to_bits()
        );
        assert!((cfg.score(&sig, &tells, now) - b.score() - penalty).abs() < 1e-6);
        let off = RankConfig {
            question_penalty: 0.0,
            ..cfg.clone()
        };
        assert_eq!(
            off.explain(&sig, &asks, now).question.to_bits(),
            0.0f32.to_bits()
        );
    }

    #[test]
    fn breakdown_sums_to_score() {
        let cfg = RankConfig::default();
        let now = 1_000 * DAY;
        for (cos, days) in [(0.9f32, 0i64), (0.1, 50), (-0.3, 400)] {
            let p = Prior {
                asks: days == 400,
                ..prior(days, SourceTrust::ToolResult)
            };
            let sig = Signals {
                cosine: cos,
                bm25: 3.0,
                lexical: 0.5,
                context: 0.25,
                episode: 0.6,
                actor: days == 0,
                date: days == 50,
            };
            let b = cfg.explain(&sig, &p, now);
            assert_eq!(b.question < 0.0, days == 400);
            let parts = b.relevance + b.lexical + b.context + b.episode + b.actor + b.date;
            let parts = parts + b.question;
            let parts = parts + b.recency + b.trust + b.confidence;
            assert!((b.score() - parts).abs() < 1e-6);
            assert!((b.score() - cfg.score(&sig, &p, now)).abs() < 1e-6);
        }
    }

    #[test]
    fn the_bm25_share_falls_from_short_to_long_queries() {
        let cfg = RankConfig::default();
        let words = |n: usize| vec!["w"; n].join(" ");
        let share = |n: usize| cfg.for_query(&words(n)).lexical_share;
        assert_eq!(share(0), cfg.short_lexical_share);
        assert_eq!(share(SHORT_QUERY_WORDS), cfg.short_lexical_share);
        let mid = (cfg.short_lexical_share + cfg.lexical_share) / 2.0;
        assert!((share(SHORT_QUERY_WORDS * 3 / 2) - mid).abs() < 1e-6);
        assert_eq!(share(SHORT_QUERY_WORDS * 2), cfg.lexical_share);
        assert_eq!(share(SHORT_QUERY_WORDS * 9), cfg.lexical_share);
        assert_eq!(cfg.for_query("x").context_weight, cfg.context_weight);
    }

    #[test]
    fn lexical_share_mixes_cosine_and_bm25() {
        let mut cfg = RankConfig {
            lexical_share: 0.0,
            ..RankConfig::default()
        };
        assert!((cfg.matched(0.6, 1.0) - 0.6).abs() < 1e-6);
        cfg.lexical_share = 1.0;
        assert!((cfg.matched(0.6, 0.2) - 0.2).abs() < 1e-6);
        cfg.lexical_share = 0.5;
        assert!((cfg.matched(-0.4, 0.2) - 0.1).abs() < 1e-6);
    }

    #[test]
    fn a_named_actor_and_a_relevant_episode_lift_a_hit() {
        let cfg = RankConfig::default();
        let now = 1_000 * DAY;
        let p = prior(10, SourceTrust::UserProvided);
        let plain = Signals::cosine(0.5);
        let named = Signals {
            actor: true,
            ..plain
        };
        let in_context = Signals {
            context: 0.8,
            ..plain
        };
        assert!(cfg.score(&named, &p, now) > cfg.score(&plain, &p, now));
        assert!(cfg.score(&in_context, &p, now) > cfg.score(&plain, &p, now));
    }
}
