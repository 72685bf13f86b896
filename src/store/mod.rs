//! Durable storage: the append-only, checksummed event log (the source of truth) and the
//! encoding of its records.
//!
//! Invariants: a write is acknowledged only after its record is fsynced; every index is
//! derived from these records and can be rebuilt from them; records are validated before
//! they are appended, so replaying the log never fails on content.

pub mod log;
pub mod record;
