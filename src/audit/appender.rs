//! The one way entries reach the audit log: [`AuditAppender`], owned by the writer thread
//! (and by `episodic recover`, offline). It opens the audit log and indexes it at start-up,
//! queues entries, and appends a queue as one batch with one fsync before indexing it for
//! readers ([`AuditTrail`]).
//!
//! Invariants:
//! - an entry is indexed (visible to `GET /v1/audit`) only after the batch holding it was
//!   fsynced, at the offsets it was written at;
//! - a failed flush indexes nothing and keeps its entries queued, with the numbers they were
//!   given, for the next flush: an entry is never lost to a transient failure and never
//!   numbered twice differently;
//! - when an entry must be durable (a write's before its reply) is the caller's decision:
//!   the writer flushes a batch's entries before answering any request of that batch, and
//!   queues read entries after the reply, to be flushed with its next batch;
//! - with a mirror (cluster mode: the shard's audit stream, replicated), the mirror is the
//!   trail's source of truth and the file a copy of it: a batch is durable once the mirror
//!   acknowledged it, and only then written to the file; the file catches up from the
//!   mirror when opened and before every batch, so entries are numbered against the whole
//!   trail; the file's frame sequence equals the mirror's sequence, and a file that is
//!   ahead of its mirror (a directory from another cluster) is rebuilt from the mirror.

use std::path::Path;
use std::sync::Arc;

use super::trail::{frame_offsets, placements, Placed, FRAME_HEADER_LEN};
use super::{AuditEntry, AuditStamp, AuditTrail};
use crate::store::log::{Log, LogError};
use crate::store::EventLog;

/// What the audit trail can fail with.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The audit log could not be opened (or holds damage that is not a torn tail).
    #[error("opening audit log {path}")]
    Open {
        /// The audit log.
        path: String,
        /// Why.
        #[source]
        source: LogError,
    },
    /// A record of the audit log is not an audit entry.
    #[error("audit log {path} record {seq}")]
    Decode {
        /// The audit log.
        path: String,
        /// The record's frame sequence.
        seq: u64,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The records read at start-up end before the file does.
    #[error("audit log {path}: recovered records do not cover the file")]
    Uncovered {
        /// The audit log.
        path: String,
    },
    /// Appending (or its fsync) failed; nothing of the batch was indexed.
    #[error(transparent)]
    Append(#[from] LogError),
    /// Reading the audit log back failed.
    #[error("reading {path}")]
    Read {
        /// The audit log.
        path: String,
        /// Why.
        #[source]
        source: LogError,
    },
    /// An entry read back does not decode.
    #[error("audit record seq {seq}")]
    Entry {
        /// The record's frame sequence.
        seq: u64,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// What start-up needs to know of the trail besides its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrailFacts {
    /// Records in the trail.
    pub entries: u64,
    /// The highest event-log sequence an entry audits.
    pub max_log_seq: Option<u64>,
}

/// The writer's end of the audit trail: the audit log, the queue of entries not yet
/// durable, and the readers' index it keeps up to date.
pub struct AuditAppender {
    log: Log,
    trail: Arc<AuditTrail>,
    pending: Vec<AuditEntry>,
    /// The replicated copy that is the source of truth, in cluster mode.
    mirror: Option<Box<dyn EventLog>>,
    /// The highest event-log sequence an entry of the trail audits.
    max_log_seq: Option<u64>,
}

impl std::fmt::Debug for AuditAppender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditAppender")
            .field("path", &self.log.path())
            .field("pending", &self.pending.len())
            .field("mirrored", &self.mirror.is_some())
            .finish()
    }
}

impl AuditAppender {
    /// Opens (or creates) the audit log at `path` and indexes every record, which must
    /// decode; a torn, unacknowledged tail is cut. The entries themselves are not kept:
    /// queries read them back from the file.
    pub fn open(path: &Path) -> Result<(AuditAppender, TrailFacts), AuditError> {
        let shown = || path.display().to_string();
        let (log, recovery) = Log::open(path).map_err(|source| AuditError::Open {
            path: shown(),
            source,
        })?;
        if recovery.truncated_bytes > 0 {
            tracing::warn!(
                bytes = recovery.truncated_bytes,
                path = %path.display(),
                "dropped a torn, unacknowledged audit tail"
            );
        }
        let trail = AuditTrail::new(path);
        let mut facts = TrailFacts {
            entries: 0,
            max_log_seq: None,
        };
        for (offset, rec) in frame_offsets(&recovery.records) {
            let entry: AuditStamp<'_> =
                serde_json::from_slice(&rec.payload).map_err(|source| AuditError::Decode {
                    path: shown(),
                    seq: rec.seq,
                    source,
                })?;
            facts.entries += 1;
            if let Some(seq) = entry.log_seq {
                facts.max_log_seq = Some(facts.max_log_seq.map_or(seq, |m| m.max(seq)));
            }
            trail.indexed(&[Placed {
                seq: rec.seq,
                tenant_seq: entry.seq,
                offset,
                payload_len: rec.payload.len() as u64,
                tenant: &entry.tenant_id,
                at_ms: entry.at.unix_millis(),
            }]);
        }
        let covered = frame_offsets(&recovery.records)
            .last()
            .is_none_or(|(o, r)| o + FRAME_HEADER_LEN + r.payload.len() as u64 == log.len_bytes());
        if !covered {
            return Err(AuditError::Uncovered { path: shown() });
        }
        let appender = AuditAppender {
            log,
            trail: Arc::new(trail),
            pending: Vec::new(),
            mirror: None,
            max_log_seq: facts.max_log_seq,
        };
        Ok((appender, facts))
    }

    /// Opens the audit log at `path` as a copy of `mirror` (cluster mode): the file catches
    /// up from the mirror, or is rebuilt from it when it holds frames the mirror lacks.
    pub fn open_mirrored(
        path: &Path,
        mirror: Box<dyn EventLog>,
    ) -> Result<(AuditAppender, TrailFacts), AuditError> {
        let (mut appender, mut facts) = AuditAppender::open(path)?;
        let local_next = appender.log.next_seq().max(1);
        if local_next > mirror.next_seq() {
            tracing::warn!(
                path = %path.display(),
                "the audit file holds entries its stream lacks: rebuilding it from the stream"
            );
            drop(appender);
            std::fs::remove_file(path).map_err(|source| AuditError::Open {
                path: path.display().to_string(),
                source: LogError::Io {
                    path: path.display().to_string(),
                    source,
                },
            })?;
            (appender, facts) = AuditAppender::open(path)?;
        }
        appender.mirror = Some(mirror);
        let copied = appender.catch_up()?;
        for entry in &copied {
            facts.entries += 1;
            if let Some(seq) = entry.log_seq {
                facts.max_log_seq = Some(facts.max_log_seq.map_or(seq, |m| m.max(seq)));
            }
        }
        Ok((appender, facts))
    }

    /// Copies the mirror's entries the file lacks into it, in order, and indexes them;
    /// returns them. A no-op without a mirror or when the file is caught up.
    pub fn catch_up(&mut self) -> Result<Vec<AuditEntry>, AuditError> {
        let Some(mirror) = &self.mirror else {
            return Ok(Vec::new());
        };
        let from = self.log.next_seq().max(1);
        if from >= mirror.next_seq() {
            return Ok(Vec::new());
        }
        let shown = || self.log.path().display().to_string();
        let mut copied = Vec::new();
        let mut payloads = Vec::new();
        for rec in mirror.read_from(from).map_err(|source| AuditError::Read {
            path: shown(),
            source,
        })? {
            let rec = rec.map_err(|source| AuditError::Read {
                path: shown(),
                source,
            })?;
            let entry: AuditEntry =
                serde_json::from_slice(&rec.payload).map_err(|source| AuditError::Entry {
                    seq: rec.seq,
                    source,
                })?;
            copied.push(entry);
            payloads.push(rec.payload);
        }
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let start = self.log.len_bytes();
        let seqs = self.log.append_batch(&refs)?;
        self.trail
            .indexed(&placements(&copied, &payloads, &seqs, start));
        self.note_log_seqs(&copied);
        Ok(copied)
    }

    /// A standby's step: learns what the mirror's writer (another node) appended, and copies
    /// it into the file.
    pub fn follow(&mut self) -> Result<Vec<AuditEntry>, AuditError> {
        if let Some(mirror) = &mut self.mirror {
            mirror.refresh()?;
        }
        self.catch_up()
    }

    fn note_log_seqs(&mut self, entries: &[AuditEntry]) {
        for seq in entries.iter().filter_map(|e| e.log_seq) {
            self.max_log_seq = Some(self.max_log_seq.map_or(seq, |m| m.max(seq)));
        }
    }

    /// The highest event-log sequence an entry of the trail audits.
    pub fn max_log_seq(&self) -> Option<u64> {
        self.max_log_seq
    }

    /// The readers' view of the trail, kept up to date by this appender.
    pub fn trail(&self) -> &Arc<AuditTrail> {
        &self.trail
    }

    /// Queues `entry`; it becomes durable with the next [`AuditAppender::flush`].
    pub fn record(&mut self, entry: AuditEntry) {
        self.pending.push(entry);
    }

    /// Appends every queued entry as one batch (one fsync) and indexes it; on failure the
    /// entries stay queued for the next flush.
    pub fn flush(&mut self) -> Result<(), AuditError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut entries = std::mem::take(&mut self.pending);
        let appended = self.append_batch(&mut entries);
        if appended.is_err() {
            self.pending = entries;
        }
        appended
    }

    /// Appends `entries` durably now (one fsync) and indexes them. Each entry's `seq` becomes
    /// its tenant's next sequence number (one tenant never learns how many entries others
    /// have); the log frame keeps a global sequence of its own. On failure nothing is
    /// indexed and the entries may be appended again (they get the same numbers).
    pub fn append_batch(&mut self, entries: &mut [AuditEntry]) -> Result<(), AuditError> {
        self.catch_up()?;
        self.trail.number(entries);
        let payloads: Vec<Vec<u8>> = entries
            .iter()
            .map(|e| serde_json::to_vec(e).unwrap_or_default())
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        if let Some(mirror) = &mut self.mirror {
            mirror.append_batch(&refs)?;
        }
        self.note_log_seqs(entries);
        let start = self.log.len_bytes();
        let seqs = match self.log.append_batch(&refs) {
            Ok(seqs) => seqs,
            // Durable in the mirror already: the file catches up before the next batch.
            Err(e) if self.mirror.is_some() => {
                tracing::warn!(error = %e, "the audit file is behind its stream; it catches up with the next batch");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        self.trail
            .indexed(&placements(entries, &payloads, &seqs, start));
        Ok(())
    }

    /// Every durable entry as a file prefix that stays as it is while the trail grows
    /// (a backup copies it; queued entries are not in it: flush first).
    pub fn frozen(&self) -> Result<crate::store::log::Frozen, LogError> {
        self.log.frozen()
    }

    /// The last frame sequence of the audit log, `None` while it is empty.
    pub fn last_seq(&self) -> Option<u64> {
        self.log.next_seq().checked_sub(1).filter(|s| *s > 0)
    }

    /// Makes the next frame's sequence at least `seq` (recovery: frames lost from the file
    /// are never numbered again).
    pub fn advance_to(&mut self, seq: u64) {
        self.log.advance_to(seq);
    }

    /// Every durable entry, in log order (offline recovery reads the whole trail).
    pub fn read_all(
        &self,
    ) -> Result<impl Iterator<Item = Result<AuditEntry, AuditError>> + '_, AuditError> {
        let path = || self.log.path().display().to_string();
        let records = self.log.read_from(0).map_err(|source| AuditError::Read {
            path: path(),
            source,
        })?;
        Ok(records.map(move |rec| {
            let rec = rec.map_err(|source| AuditError::Read {
                path: path(),
                source,
            })?;
            serde_json::from_slice(&rec.payload).map_err(|source| AuditError::Entry {
                seq: rec.seq,
                source,
            })
        }))
    }
}
