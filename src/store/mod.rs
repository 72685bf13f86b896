//! Durable storage: the append-only, checksummed event log (the source of truth), the seam
//! the engine reaches it through ([`EventLog`]), its NATS JetStream implementation for
//! cluster mode ([`nats`]) and the encoding of its records.
//!
//! Invariants: a write is acknowledged only after its record is fsynced; every index is
//! derived from these records and can be rebuilt from them; records are validated before
//! they are appended, so catching up with the log never fails on content; the engine reaches the
//! event log only through [`EventLog`] (the audit trail, whose index points at byte offsets,
//! keeps its own [`log::Log`]).

#[doc(hidden)]
pub mod contract;
pub mod event_log;
pub mod log;
pub mod nats;
pub mod record;

pub use event_log::{open_local, EventLog, LogLocation, Records};
pub use log::{LogError, LogRecord, Recovered};
