//! The read model: what the engine knows about every event, in memory, and the one
//! consistent view of it that a read takes.
//!
//! - [`Table`]: every logged event by internal id ([`Slot`]: a live [`Entry`], a
//!   [`Tombstone`] or nothing), with its [`Head`] in a dense array, per-tenant ids, subjects
//!   ([`SubjectRule`]) and named actors. Rebuilt from the log on start; only the engine's
//!   writer changes it.
//! - [`Access`] and [`Visible`]: the grant filter at two levels, heads (recall's candidates)
//!   and entries (what is presented). Every path that returns events, ids, counts or audit
//!   entries goes through one of them, and the two agree.
//! - [`Partitioned`]: the vector partitions of partitioned recall, with their copies of heads.
//! - [`TenantGraphs`]: the per-tenant HNSW graphs of graph recall.
//! - [`Snapshot`]: everything one read consults, taken once.
//!
//! Invariants:
//! - a read takes one [`Snapshot`] and reads nothing else: the table (under its read lock,
//!   held for the read), the scope index's searcher, the watermark below which that searcher
//!   holds every event, and the vector structures;
//! - the snapshot is taken in the order watermark, searcher, table, vectors, so every id
//!   below the watermark is in the searcher, every id the searcher holds is in the table, and
//!   every id in the table has its vector (the writer applies in the opposite order);
//! - while a snapshot lives, nothing on its thread locks the table again (the writer may be
//!   waiting for the lock, and a second read lock would then wait behind it).

mod access;
mod actors;
mod entry;
mod graphs;
mod head;
mod partitioned;
mod subject;
pub(crate) mod table;
mod visible;
pub mod words;

use std::sync::Arc;

use parking_lot::RwLockReadGuard;

pub use access::{Access, View, Visibility};
pub use entry::{Entry, Lookup, Slot, Tombstone};
pub use graphs::{GraphKeys, NodeSet, TenantGraphs};
pub use head::{Changed, Head, HeadFilter, Marks, NONE, NO_SOURCE};
pub use partitioned::Partitioned;
pub use subject::SubjectRule;
pub use table::Table;
pub use visible::{stored_id, Seen, Visible, NAMESPACE_MARK};

use crate::audit::Keyed;
use crate::index::scope::ScopeView;
use crate::index::vector::{HnswIndex, VectorStore};

/// Hash maps of the read model: keyed by caller-chosen ids, so hashed with a randomly seeded
/// (collision-resistant) hasher, which is also several times faster than SipHash on replay.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;

/// Everything one read consults, taken once (see the module invariants).
pub struct Snapshot<'a> {
    /// The table, read-locked for the snapshot's life.
    pub table: RwLockReadGuard<'a, Table>,
    /// The scope index at one commit.
    pub scope: ScopeView<'a>,
    /// Internal ids below this are in `scope`; those at or above it are matched in memory.
    pub watermark: usize,
    /// All vectors, by internal id.
    pub vectors: Arc<VectorStore>,
    /// The HNSW graph (empty unless approximate recall is on).
    pub hnsw: Arc<HnswIndex>,
    /// The vector partitions, when built.
    pub partition: Option<Arc<Partitioned>>,
    /// The per-tenant graphs (empty until a tenant is large enough for one).
    pub graphs: Arc<TenantGraphs>,
    /// The data directory's hashing secret (keyed ids of what is presented).
    pub keyed: &'a Keyed,
}
