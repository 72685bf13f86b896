//! The vector partitions of partitioned recall as recall reads them: a
//! [`crate::index::vector::Partition`] plus each list's copy of its members' heads, so that a
//! broad recall reads them in list order rather than one scattered table line per member.
//! The table marks every head that changes after the copy ([`Changed`]), and a marked
//! member's head is read from the table.
//!
//! Invariant: a list's copy of a head is used only while the table has not marked it
//! changed, so it always equals the table's.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::head::{Changed, Head};
use super::table::Table;
use crate::index::vector::calibrate::ProbeCurve;
use crate::index::vector::Partition;

/// A partition and its lists' copies of their members' heads.
#[derive(Debug)]
pub struct Partitioned {
    /// Centroids, lists, members and their codes.
    pub index: Partition,
    /// Per list, its members' heads at the copy, in member order.
    heads: Vec<Vec<Head>>,
    /// Members whose heads changed since the copy.
    changed: Arc<Changed>,
    /// The lists a probe needs, measured on the partition's own vectors.
    curve: ProbeCurve,
}

impl Partitioned {
    /// Partitions the vectors of the heads' live slots, keeps the lists' heads and, with
    /// `measure`, measures how many lists a probe needs ([`ProbeCurve`]; without it the
    /// curve is empty and probes read the configured share); `None` when there are too few
    /// vectors.
    pub fn build(
        vectors: &crate::index::vector::VectorStore,
        (heads, changed): (Vec<Head>, Arc<Changed>),
        (lists, measure): (usize, bool),
    ) -> Option<Self> {
        let tenants: Vec<u32> = heads.iter().map(|h| h.tenant).collect();
        let index = Partition::build(vectors, &tenants, lists)?;
        let heads = (0..index.lists() as u32)
            .into_par_iter()
            .map(|l| {
                let docs = index.list_docs(l);
                docs.iter().map(|&d| heads[d as usize]).collect()
            })
            .collect();
        let curve = if measure {
            ProbeCurve::measure(vectors, &index, &tenants)
        } else {
            ProbeCurve::default()
        };
        Some(Partitioned {
            index,
            heads,
            changed,
            curve,
        })
    }

    /// How many lists a probe needs for a scope's size, as measured.
    pub fn curve(&self) -> &ProbeCurve {
        &self.curve
    }

    /// The current heads of the members at `rows` of `list`, in row order, `table` locked
    /// by the caller for reading: each the list's copy, or the table's when it changed since
    /// the copy. Read in place: nothing is copied but the head handed out.
    pub fn heads<'a>(
        &'a self,
        table: &'a Table,
        list: u32,
        rows: Range<usize>,
    ) -> impl Iterator<Item = Head> + 'a {
        self.heads[list as usize][rows]
            .iter()
            .map(move |h| self.current(table, h))
    }

    /// The current head of the member at `row` of `list` (see [`Partitioned::heads`]).
    pub fn head(&self, table: &Table, list: u32, row: u32) -> Head {
        self.current(table, &self.heads[list as usize][row as usize])
    }

    fn current(&self, table: &Table, copy: &Head) -> Head {
        if self.changed.has(copy.doc) {
            table.head(copy.doc)
        } else {
            *copy
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::tests::{entry, event};
    use super::super::SubjectRule;
    use super::*;
    use crate::index::vector::VectorStore;
    use crate::model::Timestamp;

    /// A table of `n` events of one tenant and their vectors, spread over a circle.
    fn corpus(n: u32) -> (Table, VectorStore) {
        let mut table = Table::new(SubjectRule::OFF);
        let vectors = VectorStore::new(2);
        for doc in 0..n {
            table.push(entry(doc, event(&format!("e{doc}"), "Caroline", "s")));
            let angle = doc as f32 * 0.1;
            vectors
                .push(doc, &[angle.cos(), angle.sin()])
                .expect("push");
        }
        (table, vectors)
    }

    #[test]
    fn a_list_reads_every_head_as_the_table_has_it_now() {
        let (mut table, vectors) = corpus(200);
        let p = Partitioned::build(&vectors, table.watched_heads(), (16, false)).expect("built");
        let at = Timestamp::parse("2026-06-18T00:00:00Z").unwrap();
        assert!(table.mark_superseded("acme", "e0", "e1", at));
        table.delete("acme", "e7", at).expect("deleted");
        let mut seen = 0;
        for list in 0..p.index.lists() as u32 {
            let docs = p.index.list_docs(list);
            let heads = p.heads(&table, list, 0..docs.len());
            for (row, (&doc, h)) in docs.iter().zip(heads).enumerate() {
                let now = table.head(doc);
                assert_eq!((h.doc, h.tenant, h.status), (doc, now.tenant, now.status));
                assert_eq!(h.superseded_ns, now.superseded_ns);
                let one = p.head(&table, list, row as u32);
                assert_eq!((one.doc, one.status), (h.doc, h.status), "row by row alike");
                seen += 1;
            }
        }
        assert_eq!(seen, 200, "every event is in one list");
    }
}
