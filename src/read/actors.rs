//! Numbered names and each tenant's actors, filed by word so that the actors a query names
//! are found from its words: by their ids, and by the names events give them
//! (`actorNames`).
//!
//! Invariants: a name gets a number once, never reused, so equal numbers mean equal names;
//! an actor is never forgotten (like its name), and it is counted per live event and privacy
//! class so that only actors with an event a grant can see are named; a name an event gives
//! its actor is counted the same way, per live event carrying it and class, so a name names
//! the actor only for a grant that can see such an event (out of reach, it is an ordinary
//! word, as an unknown name is).

use ahash::RandomState;

use super::head::class_index;
use super::words::{words, ActorNames};
use super::Map;
use crate::model::PrivacyClass;

/// Strings numbered in order of first sight.
#[derive(Debug, Default)]
pub(super) struct Names {
    pub(super) numbers: Map<Box<str>, u32>,
    pub(super) names: Vec<Box<str>>,
}

impl Names {
    pub(super) fn number(&mut self, name: &str) -> u32 {
        if let Some(n) = self.numbers.get(name) {
            return *n;
        }
        let n = self.names.len() as u32;
        self.numbers.insert(name.into(), n);
        self.names.push(name.into());
        n
    }
}

/// One tenant's number and event ids.
#[derive(Debug, Default)]
pub(super) struct TenantIds {
    pub(super) number: u32,
    pub(super) ids: Map<Box<str>, u32>,
    /// The values of `ids`, ascending (a small tenant's scope is listed from them).
    pub(super) docs: Vec<u32>,
    /// The actors of the tenant's events (never forgotten, like the names).
    pub(super) actors: TenantActors,
}

/// A tenant's actors, each filed under one word of its id, so that the actors a query names
/// are found from the query's words instead of by reading every actor of the tenant.
///
/// An actor is named only when every word of its id occurs in the query
/// ([`ActorNames::names`]), so any one of its words finds it. The word is chosen when the
/// actor is first seen: the one with the fewest actors filed under it then, the longer on a
/// tie, then the first ("user-42" after "user-7" goes under "42", not "user"), so a word that
/// many ids share rarely holds them all. An id without a word is never named and not filed.
#[derive(Debug, Default)]
pub(super) struct TenantActors {
    pub(super) known: std::collections::HashSet<u32, RandomState>,
    pub(super) by_word: Map<Box<str>, Vec<Filed>>,
    /// Live events per actor and privacy class (in [`PrivacyClass::ALL`] order): which
    /// actors a grant can see an event of, so that only their names count in a query.
    pub(super) live: Map<u32, [u32; 4]>,
    /// Live events per (actor, given name) and privacy class.
    pub(super) given: Map<(u32, u32), [u32; 4]>,
}

/// What is filed under a word: an actor, by its id or by a name an event gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Filed {
    /// The actor's number.
    pub(super) actor: u32,
    /// The given name's number, or [`BY_ID`].
    pub(super) name: u32,
}

/// [`Filed::name`] of an actor filed by its id.
pub(super) const BY_ID: u32 = u32::MAX;

impl TenantActors {
    /// Files actor `n` (id `id`) unless it is known already.
    pub(super) fn add(&mut self, n: u32, id: &str) {
        if !self.known.insert(n) {
            return;
        }
        self.file(
            Filed {
                actor: n,
                name: BY_ID,
            },
            id,
        );
    }

    /// Files name `m` (text `name`) of actor `n` unless it is filed already.
    pub(super) fn add_given(&mut self, n: u32, m: u32, name: &str) {
        if self.given.contains_key(&(n, m)) {
            return;
        }
        self.given.insert((n, m), [0; 4]);
        self.file(Filed { actor: n, name: m }, name);
    }

    /// Files `what` under the word of `text` with the fewest entries (see the type's docs).
    fn file(&mut self, what: Filed, text: &str) {
        let filed = |w: &str| self.by_word.get(w).map_or(0, Vec::len);
        let key = words(text).map(str::to_lowercase).min_by(|a, b| {
            let rank = |w: &str| (filed(w), std::cmp::Reverse(w.chars().count()));
            rank(a).cmp(&rank(b))
        });
        if let Some(key) = key {
            self.by_word.entry(key.into()).or_default().push(what);
        }
    }

    /// Counts one live event of actor `n`, giving it the names `given`, of class `class`, in
    /// (`+1`) or out (`-1`).
    pub(super) fn count_event(&mut self, n: u32, given: &[u32], class: PrivacyClass, delta: i32) {
        self.count(n, class, delta);
        for &m in given {
            let counts = self.given.entry((n, m)).or_default();
            let slot = &mut counts[class_index(class)];
            *slot = slot.saturating_add_signed(delta);
        }
    }

    /// Whether `filed` is in reach of a grant of privacy ceiling `ceiling`: its actor has a
    /// live event up to it, or, for a given name, an event up to it gives the name.
    pub(super) fn in_reach(&self, filed: Filed, ceiling: PrivacyClass) -> bool {
        if filed.name == BY_ID {
            return self.has_live_up_to(filed.actor, ceiling);
        }
        self.given
            .get(&(filed.actor, filed.name))
            .is_some_and(|c| c[..=class_index(ceiling)].iter().any(|&k| k > 0))
    }

    /// Counts one live event of actor `n` and class `class` in (`+1`) or out (`-1`).
    fn count(&mut self, n: u32, class: PrivacyClass, delta: i32) {
        let counts = self.live.entry(n).or_default();
        let slot = &mut counts[class_index(class)];
        *slot = slot.saturating_add_signed(delta);
    }

    /// Whether actor `n` has a live event of class `ceiling` or below.
    pub(super) fn has_live_up_to(&self, n: u32, ceiling: PrivacyClass) -> bool {
        self.live
            .get(&n)
            .is_some_and(|c| c[..=class_index(ceiling)].iter().any(|&k| k > 0))
    }

    /// What is filed under a word of `names`' query (each actor's id, and each name, at
    /// most once: each is filed under one word).
    pub(super) fn filed_under<'a>(
        &'a self,
        names: &'a ActorNames,
    ) -> impl Iterator<Item = Filed> + 'a {
        names
            .query_words()
            .iter()
            .filter_map(|w| self.by_word.get(w.as_str()))
            .flatten()
            .copied()
    }
}
