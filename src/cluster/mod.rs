//! Cluster mode's coordination, kept in NATS JetStream next to the event logs: which shard
//! a tenant lives on ([`shards`]), which node owns a shard, by lease ([`lease`]), and a node
//! that holds its share of the shards with an engine per shard ([`node`]).
//!
//! Invariants: a tenant never spans shards (its shard is a pure function of its id and the
//! shard count, unless a pin moves all of it); at most one node holds a shard's lease at a
//! time, and a lease is taken or renewed only by compare-and-set on the coordination
//! bucket, never by reading and then writing; ownership alone never makes a write safe: the
//! owner's appends are also fenced by the stream ([`crate::store::nats`]), so a node that
//! lost its lease without knowing cannot write.

pub mod catalog;
pub mod lease;
pub mod node;
pub mod pins;
pub mod shards;

pub use catalog::Catalog;
pub use lease::{Lease, LeaseError, Leases};
pub use node::{Node, NodeConfig};
pub use shards::{shard_of, stream_name};
