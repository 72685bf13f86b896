//! A standby's writer: it follows a log another node writes (cluster mode), applying each new
//! record as a live write applies it, and becomes the writer when promoted.
//!
//! Invariants: while following, the writer appends nothing to the log or the audit trail
//! (no sweeps, no audit of its own; the node never hands a standby's engine a request), but
//! keeps the derived indexes (vector partitions, tenant graphs) as the owner does; a
//! step applies the records after the last one applied, in log order, each exactly once;
//! promotion follows to the end first (the former owner can no longer append: its lease
//! lapsed and the stream's fence holds), then audits the records the trail lacks (a former
//! owner that died between appending a record and its audit entry), exactly as opening the
//! log does, and only then accepts writes.

use anyhow::Context;

use super::{apply_delete, apply_put, apply_requeue, apply_review, apply_tombstone, Writer};
use crate::engine::logged::Reconciled;
use crate::store::record::{decode, Record};

impl Writer {
    /// Applies what the log and the audit trail gained since the last step; the log's next
    /// sequence after it.
    pub(super) fn follow(&mut self) -> anyhow::Result<u64> {
        let from = self.log.next_seq();
        self.log.refresh().context("reading the log's end")?;
        if self.log.next_seq() > from {
            let mut records = Vec::new();
            for rec in self.log.read_from(from)? {
                let rec = rec?;
                let record =
                    decode(&rec.payload).with_context(|| format!("log record seq {}", rec.seq))?;
                records.push((rec.seq, record));
            }
            for (seq, record) in records {
                self.apply_followed(seq, record)?;
            }
        }
        self.audit.follow().context("following the audit trail")?;
        Ok(self.log.next_seq())
    }

    fn apply_followed(&mut self, seq: u64, record: Record) -> anyhow::Result<()> {
        match record {
            Record::Put(put) => {
                apply_put(&self.shared, seq, put, true)?;
                self.unsaved_hnsw += 1;
            }
            Record::Delete(d) => {
                apply_delete(&self.shared, &d, true);
            }
            Record::Tombstone(t) => apply_tombstone(&self.shared, seq, t)?,
            Record::Marker => {}
            Record::Review(r) => apply_review(&self.shared, &r, true),
            Record::Requeue(r) => apply_requeue(&self.shared, &r),
        }
        Ok(())
    }

    /// Follows to the end, audits what the trail lacks, and becomes the writer.
    pub(super) fn promote(&mut self) -> anyhow::Result<u64> {
        let next = self.follow()?;
        let mut reconciled = Reconciled {
            after: Some(self.audit.max_log_seq().unwrap_or(0)),
            entries: Vec::new(),
        };
        let from = reconciled.after.unwrap_or(0) + 1;
        for rec in self.log.read_from(from)? {
            let rec = rec?;
            let record =
                decode(&rec.payload).with_context(|| format!("log record seq {}", rec.seq))?;
            reconciled.see(rec.seq, &record, &self.shared.keyed);
        }
        if !reconciled.entries.is_empty() {
            tracing::warn!(
                entries = reconciled.entries.len(),
                "audited logged records the trail lacked (their writer stopped before auditing them)"
            );
            self.audit
                .append_batch(&mut reconciled.entries)
                .context("appending the missing audit entries")?;
        }
        self.commit_scope();
        self.following = false;
        Ok(next)
    }
}
