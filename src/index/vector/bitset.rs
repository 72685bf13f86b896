//! A fixed-universe bitset over `u32` ids, used as the HNSW candidate filter.
//!
//! # Invariants
//!
//! * `words.len() == universe.div_ceil(64)`; no bit at or above `universe` is set.
//! * `count` equals the number of set bits.

/// Set of `u32` ids backed by one bit per id of `0..universe`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdSet {
    words: Vec<u64>,
    universe: usize,
    count: usize,
}

impl IdSet {
    /// An empty set able to hold ids `0..universe`.
    pub fn new(universe: usize) -> Self {
        Self {
            words: vec![0; universe.div_ceil(64)],
            universe,
            count: 0,
        }
    }

    /// Builds the set of `ids` (normally sorted, as produced by the scope
    /// query; order and duplicates do not matter). The universe is widened to
    /// `max(ids) + 1` if needed, so no id is ever dropped.
    pub fn from_sorted(ids: &[u32], universe: usize) -> Self {
        let needed = ids.iter().map(|&id| id as usize + 1).max().unwrap_or(0);
        let mut set = Self::new(universe.max(needed));
        for &id in ids {
            set.insert(id);
        }
        set
    }

    /// Adds `id`, widening the universe if needed; returns true if it was new.
    pub fn insert(&mut self, id: u32) -> bool {
        let i = id as usize;
        if i >= self.universe {
            self.universe = i + 1;
            self.words.resize(self.universe.div_ceil(64), 0);
        }
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        self.count += usize::from(fresh);
        fresh
    }

    /// True if `id` is in the set.
    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        let i = id as usize;
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True if the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Ids `0..universe` the set can hold without growing.
    pub fn universe(&self) -> usize {
        self.universe
    }

    /// The ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let base = w as u64 * 64;
            BitIter(word).map(move |b| (base + b) as u32)
        })
    }
}

/// Iterates the positions of set bits of one word, lowest first.
struct BitIter(u64);

impl Iterator for BitIter {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros();
        self.0 &= self.0 - 1;
        Some(u64::from(b))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn basics() {
        let set = IdSet::from_sorted(&[1, 3, 64, 64, 200], 100);
        assert_eq!(set.len(), 4);
        assert_eq!(set.universe(), 201);
        for id in [1, 3, 64, 200] {
            assert!(set.contains(id));
        }
        for id in [0, 2, 63, 65, 199, 201, u32::MAX] {
            assert!(!set.contains(id));
        }
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![1, 3, 64, 200]);
        let empty = IdSet::new(10);
        assert!(empty.is_empty());
        assert!(!empty.contains(3));
    }

    #[test]
    fn insert_reports_fresh() {
        let mut set = IdSet::new(0);
        assert!(set.insert(70));
        assert!(!set.insert(70));
        assert_eq!(set.len(), 1);
        assert!(set.contains(70));
    }

    proptest! {
        #[test]
        fn matches_btreeset(ids in proptest::collection::vec(0u32..5000, 0..300)) {
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            let set = IdSet::from_sorted(&sorted, 1000);
            let reference: std::collections::BTreeSet<u32> = ids.iter().copied().collect();
            prop_assert_eq!(set.len(), reference.len());
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), reference.iter().copied().collect::<Vec<_>>());
            for probe in 0..5100u32 {
                prop_assert_eq!(set.contains(probe), reference.contains(&probe));
            }
        }
    }
}
