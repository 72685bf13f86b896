//! Catch-up at open: the whole event log read back through [`EventLog::read_from`] and
//! applied to the read model with the same functions live writes use ([`super::apply`]),
//! while each derived index is given only what it lacks.
//!
//! Invariants: records are applied in log order, as they are read, so memory at start-up
//! stays what the table and vectors need, never a copy of the log; the table and vectors are
//! rebuilt from every record, the scope index only from records after the sequence its last
//! commit recorded; nothing here re-embeds text or writes to the log; the first error on
//! either side (reading and decoding, or applying) stops both and is the one reported.

use std::fmt::Display;
use std::sync::mpsc;

use anyhow::Context;

use super::{apply_delete, apply_put, apply_requeue, apply_review, apply_tombstone};
use crate::engine::logged::Reconciled;
use crate::engine::shared::Shared;
use crate::store::record::{decode, Record};
use crate::store::EventLog;

/// Decoded records handed from the reading thread to the applying one at a time.
const CATCH_UP_BATCH: usize = 512;

/// Batches in flight between the two catch-up threads (bounds the memory a catch-up holds
/// beyond the table: a few thousand decoded records).
const CATCH_UP_QUEUE: usize = 4;

/// Reads and decodes `log` on this thread while another applies the decoded records in log
/// order, so the two halves of a restart use both cores. The scope index is given the
/// records after `scope_seq`; `reconciled` derives the audit entries of the records the
/// trail lacks on the way. Read errors name `log_name`.
pub(crate) fn catch_up(
    shared: &Shared,
    log: &dyn EventLog,
    log_name: impl Display,
    scope_seq: Option<u64>,
    reconciled: &mut Reconciled,
) -> anyhow::Result<()> {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::sync_channel::<Vec<(u64, Record)>>(CATCH_UP_QUEUE);
        // Unnamed: the global rayon pool may start from this thread and would inherit a name.
        let applier = std::thread::Builder::new()
            .spawn_scoped(s, move || apply_batches(shared, &rx, scope_seq, reconciled))
            .context("spawning the catch-up thread")?;
        let read = read_batches(log, &tx);
        drop(tx);
        applier
            .join()
            .map_err(|_| anyhow::anyhow!("the catch-up thread panicked"))??;
        read.with_context(|| format!("opening log {log_name}"))
    })
}

/// The reading half of [`catch_up`]: decodes every record and sends them on in batches.
fn read_batches(
    log: &dyn EventLog,
    tx: &mpsc::SyncSender<Vec<(u64, Record)>>,
) -> anyhow::Result<()> {
    let mut batch = Vec::with_capacity(CATCH_UP_BATCH);
    for rec in log.read_from(0)? {
        let rec = rec?;
        let record = decode(&rec.payload).with_context(|| format!("log record seq {}", rec.seq))?;
        batch.push((rec.seq, record));
        if batch.len() == CATCH_UP_BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(CATCH_UP_BATCH));
            // A closed channel means the applier failed; its error is reported instead.
            tx.send(full)
                .map_err(|_| anyhow::anyhow!("catch-up stopped"))?;
        }
    }
    if !batch.is_empty() {
        let _ = tx.send(batch);
    }
    Ok(())
}

/// The applying half of [`catch_up`]: every batch, in order, until the reader is done.
fn apply_batches(
    shared: &Shared,
    rx: &mpsc::Receiver<Vec<(u64, Record)>>,
    scope_seq: Option<u64>,
    reconciled: &mut Reconciled,
) -> anyhow::Result<()> {
    for batch in rx {
        for (seq, record) in batch {
            reconciled.see(seq, &record, &shared.keyed);
            apply_logged(shared, seq, record, scope_seq)?;
        }
    }
    Ok(())
}

/// Applies one decoded record to the table and vectors; the scope index gets it when it
/// lacks it (records after `scope_seq`). The HNSW graph catches up once the log is read.
fn apply_logged(
    shared: &Shared,
    seq: u64,
    record: Record,
    scope_seq: Option<u64>,
) -> anyhow::Result<()> {
    let needs_scope = scope_seq.is_none_or(|s| seq > s);
    match record {
        Record::Put(put) => {
            let doc = put.doc;
            apply_put(shared, seq, put, false)?;
            if needs_scope {
                add_to_scope(shared, doc)?;
            }
        }
        Record::Delete(d) => {
            for entry in apply_delete(shared, &d, false) {
                if needs_scope {
                    shared.scope.delete(entry.doc)?;
                }
            }
        }
        Record::Tombstone(t) => apply_tombstone(shared, seq, t)?,
        Record::Marker => {}
        Record::Review(r) => apply_review(shared, &r, needs_scope),
        Record::Requeue(r) => apply_requeue(shared, &r),
    }
    Ok(())
}

fn add_to_scope(shared: &Shared, doc: u32) -> anyhow::Result<()> {
    let table = shared.table.read();
    if let Some(entry) = table.get(doc) {
        shared.scope.add(&entry.scope_doc())?;
    }
    Ok(())
}
