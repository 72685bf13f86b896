//! The engine's half of moving a tenant out of its log (cluster mode: pinning a tenant to a
//! shard of its own). The caller freezes the tenant, copies [`Engine::tenant_records`] to
//! the new log, then evicts it here, or thaws it if the copy was abandoned.
//!
//! Invariants: between freeze and evict (or thaw) nothing of the tenant changes in this
//! engine, so the records read in chunks form one consistent copy; reads of the tenant are
//! not refused here (the cluster stops routing them first).

use tokio::sync::oneshot;

use super::writer::{self, Command, CompactReport};
use super::{Engine, Error};
use crate::store::LogRecord;

/// One chunk of a tenant's records ([`Engine::tenant_records`]).
#[derive(Debug)]
pub struct TenantChunk {
    /// Records in log order, each at its log sequence, internal ids renumbered densely.
    pub records: Vec<LogRecord>,
    /// Where the next chunk starts (`None`: this was the last).
    pub next: Option<u32>,
}

impl Engine {
    /// Refuses every change to `tenant` from now on (writes, deletions, erasures, reviews;
    /// the expiry sweep passes it by), once every change queued before has been applied.
    /// Answers the log's next sequence at that point.
    pub async fn freeze_tenant(&self, tenant: &str) -> Result<u64, Error> {
        self.ask(|reply| Command::Freeze {
            tenant: tenant.to_string(),
            reply,
        })
        .await
    }

    /// Accepts changes to a frozen `tenant` again.
    pub async fn thaw_tenant(&self, tenant: &str) -> Result<(), Error> {
        self.ask(|reply: oneshot::Sender<()>| Command::Thaw {
            tenant: tenant.to_string(),
            reply,
        })
        .await
    }

    /// Removes the frozen `tenant` from this engine: from the read model at once, and from
    /// the log by a compaction (on a stream, a rotation) that keeps none of its records.
    pub async fn evict_tenant(&self, tenant: &str, key_id: &str) -> Result<CompactReport, Error> {
        self.ask(|reply| Command::Evict {
            tenant: tenant.to_string(),
            key_id: key_id.to_string(),
            reply,
        })
        .await?
        .map_err(Error::from)
    }

    /// Up to `limit` of `tenant`'s records in compacted form (live events as they are now,
    /// with their vectors; tombstones), from internal id `from` on, with internal ids
    /// renumbered from `next_doc`, which advances. Blocking (reads the table under its lock
    /// in one pass); call off async threads.
    pub fn tenant_records(
        &self,
        tenant: &str,
        from: u32,
        limit: usize,
        next_doc: &mut u32,
    ) -> Result<TenantChunk, Error> {
        let (records, next) = writer::tenant_records(&self.shared, tenant, from, limit, next_doc)
            .map_err(Error::from)?;
        Ok(TenantChunk { records, next })
    }
}
