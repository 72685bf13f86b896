//! Episodes within a scored set: runs of events of one source and project, close in time.
//!
//! Invariant: only events of the scored set count, so nothing out of scope or invisible
//! lends an event relevance.

use rayon::prelude::*;

use super::score::GATHER_CHUNK;
use crate::rank::RankConfig;
use crate::read::{Head, NONE, NO_SOURCE};

/// Each event's episode within the scored set: the events chained to it by neighbours just
/// before and after (by `occurredAt`, then id) with the same project and the same source
/// (first `sourceRefs` entry: the conversation, session or document it came from, compared by
/// its 64-bit hash, [`Head::source`]), no more than `episode_gap_ms` apart. An event without
/// a source is an episode of its own. Only events of the set count, so nothing out of scope
/// or invisible (deleted, expired, pending review) lends an event relevance.
pub(super) struct Episodes {
    /// `[before, after]` position per event, [`NONE`] when absent; empty when both the
    /// context and the episode signal are off.
    pub(super) near: Vec<[u32; 2]>,
    /// Episode number per position (numbered in `occurredAt` order; empty like `near`).
    pub(super) episode: Vec<u32>,
    /// Positions of each episode's events: those of episode `e` are
    /// `members[start[e]..start[e + 1]]`.
    pub(super) members: Vec<u32>,
    pub(super) start: Vec<u32>,
}

impl Episodes {
    pub(super) fn new(rank: &RankConfig, set: &[Head]) -> Self {
        let off = Episodes {
            near: Vec::new(),
            episode: Vec::new(),
            members: Vec::new(),
            start: vec![0],
        };
        if (rank.context_weight <= 0.0 && rank.episode_weight <= 0.0) || set.is_empty() {
            return off;
        }
        let key = |i: usize| {
            let h = &set[i];
            (h.project, h.source, h.occurred_ms, h.doc)
        };
        let mut order: Vec<usize> = (0..set.len()).collect();
        order.par_sort_unstable_by_key(|i| key(*i));
        let close = |a: usize, b: usize| {
            let ((pa, sa, ta, _), (pb, sb, tb, _)) = (key(a), key(b));
            pa == pb && sa != NO_SOURCE && sa == sb && (ta - tb).abs() <= rank.episode_gap_ms
        };
        let mut near = vec![[NONE; 2]; set.len()];
        let mut episode = vec![0u32; set.len()];
        let mut start = Vec::new();
        for (p, &i) in order.iter().enumerate() {
            let before = p.checked_sub(1).map(|q| order[q]).filter(|&j| close(i, j));
            let after = order.get(p + 1).copied().filter(|&j| close(i, j));
            near[i] = [before, after].map(|j| j.map_or(NONE, |j| j as u32));
            if before.is_none() {
                start.push(p as u32);
            }
            episode[i] = start.len() as u32 - 1;
        }
        start.push(set.len() as u32);
        Episodes {
            near,
            episode,
            members: order.into_iter().map(|i| i as u32).collect(),
            start,
        }
    }

    /// The episode number of position `i` (none when episodes are off).
    pub(super) fn episode_of(&self, i: usize) -> Option<usize> {
        self.episode.get(i).map(|&e| e as usize)
    }

    /// The positions of the events of episode `e`.
    pub(super) fn members_in(&self, e: usize) -> &[u32] {
        &self.members[self.start[e] as usize..self.start[e + 1] as usize]
    }

    /// The best `matched` of each episode, by episode number (empty when episodes are off).
    /// Each episode is read whole: for an episode whose best is used, `matched` must be exact
    /// for every member that could hold the best and no more than exact for the others
    /// ([`episode_contenders`]).
    pub(super) fn bests(&self, matched: impl Fn(usize) -> f32 + Sync) -> Vec<f32> {
        (0..self.start.len() - 1)
            .into_par_iter()
            .with_min_len(GATHER_CHUNK)
            .map(|e| {
                self.members_in(e)
                    .iter()
                    .map(|&j| matched(j as usize))
                    .fold(0.0f32, f32::max)
            })
            .collect()
    }

    /// The best of `i`'s episode in `bests` (from [`Episodes::bests`]), 0 when off.
    pub(super) fn best_of(&self, i: usize, bests: &[f32]) -> f32 {
        self.episode_of(i)
            .and_then(|e| bests.get(e))
            .copied()
            .unwrap_or(0.0)
    }

    /// The neighbours of position `i` (before, after).
    pub(super) fn neighbours(&self, i: usize) -> [Option<usize>; 2] {
        match self.near.get(i) {
            Some(pair) => pair.map(|j| (j != NONE).then_some(j as usize)),
            None => [None, None],
        }
    }

    /// The mean `matched` of the neighbours of `i` (0 without neighbours).
    pub(super) fn context_of(&self, i: usize, matched: impl Fn(usize) -> f32) -> f32 {
        let (sum, n) = self
            .neighbours(i)
            .into_iter()
            .flatten()
            .fold((0.0, 0u8), |(sum, n), j| (sum + matched(j), n + 1));
        if n > 0 {
            sum / f32::from(n)
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{ev, World};
    use super::*;
    use crate::read::SubjectRule;

    #[test]
    fn episodes_chain_close_events_of_one_source_and_project() {
        let mut w = World::new(SubjectRule::OFF);
        for (id, source, at) in [
            ("a", "s1", "2026-06-01T10:00:00Z"),
            ("b", "s1", "2026-06-01T10:05:00Z"),
            ("c", "s2", "2026-06-01T10:06:00Z"),
            ("d", "s1", "2026-06-01T10:10:00Z"),
        ] {
            w.add(ev(id, "ann", source, at, "turn"), [1.0, 0.0, 0.0, 0.0]);
        }
        w.commit();
        let snap = w.snapshot();
        let set: Vec<Head> = (0..4).map(|d| snap.table.head(d)).collect();
        let e = Episodes::new(&RankConfig::default(), &set);
        assert_eq!(e.neighbours(0), [None, Some(1)]);
        assert_eq!(
            e.neighbours(1),
            [Some(0), Some(3)],
            "s2's event is not in s1's chain"
        );
        assert_eq!(e.neighbours(2), [None, None]);
        assert_eq!(e.episode_of(0), e.episode_of(3));
        assert_ne!(e.episode_of(0), e.episode_of(2));
        let matched = |i: usize| [0.2, 0.6, 0.9, 0.4][i];
        assert!(
            (e.context_of(1, matched) - 0.3).abs() < 1e-6,
            "mean of a and d"
        );
        let bests = e.bests(matched);
        assert_eq!(e.best_of(0, &bests), 0.6, "the best of s1's episode");
        assert_eq!(e.best_of(2, &bests), 0.9);
        let off = RankConfig {
            context_weight: 0.0,
            episode_weight: 0.0,
            ..RankConfig::default()
        };
        assert_eq!(Episodes::new(&off, &set).neighbours(1), [None, None]);
    }
}
