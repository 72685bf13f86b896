//! The writer's part of an online backup: a barrier between two batches at which the log
//! and the audit trail are taken as they stand ([`Barrier`]), so that the copy holds one
//! log position, with every audit entry of what it holds.
//!
//! Invariants: the barrier is taken on the writer thread, between batches, after the audit
//! queue is flushed, so every acknowledged write up to the log's last sequence is in the
//! log part and its audit entry in the trail part, and nothing else is; it copies nothing
//! itself (the engine copies the frozen prefixes while writes go on), so writes wait only
//! for two file opens.

use super::{Writer, WriterError};
use crate::store::log::Frozen;

/// The store at one log position, ready to be copied.
#[derive(Debug)]
pub struct Barrier {
    /// The event log's acknowledged prefix.
    pub log: Frozen,
    /// The audit trail's durable prefix.
    pub audit: Frozen,
    /// Live events at that position, every tenant's.
    pub events: usize,
}

impl Writer {
    /// Takes the barrier (see the module's invariants).
    pub(super) fn backup_barrier(&mut self) -> Result<Barrier, WriterError> {
        self.audit
            .flush()
            .map_err(|e| WriterError::Audit(std::sync::Arc::new(e)))?;
        let log = self.log.frozen()?;
        let audit = self.audit.frozen()?;
        let events = self.shared.table.read().live();
        Ok(Barrier { log, audit, events })
    }
}
