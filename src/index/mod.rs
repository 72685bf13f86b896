//! Derived indexes: `scope` (tantivy, the scope filter and BM25) and `vector` (vector store,
//! exact scoring, HNSW).
//!
//! Invariants: both are rebuildable from the log; each records the last log sequence it
//! applied; neither is consulted before the tenant filter.

pub mod scope;
pub mod vector;
