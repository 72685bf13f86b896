//! Proving at start-up that nothing acknowledged is missing, and the operator's explicit
//! step when something is.
//!
//! Three records outlive the event log's own tail and say how far it reached: the scope
//! index's commit mark (the log and audit sequences it reflected), the HNSW snapshot's
//! sequence, and the audit trail, whose entries for writes, deletions and reviews carry the
//! event-log sequence they audit (`logSeq`) and are made durable before any reply. Each of
//! them is written only after the log records it names were fsynced.
//!
//! Invariants:
//! - start-up refuses when any witness names an event-log sequence beyond the log's last
//!   record, or when the scope index recorded an audit sequence beyond the trail's last: the
//!   error names the file, the last sequence it holds and the one that was expected. Only a
//!   torn tail, which no witness names and so was never acknowledged, is dropped silently;
//! - logged records the trail lacks (the writer died between the log's fsync and the
//!   trail's) get their entries at start-up, derived from the records and marked
//!   `recovered`, so every logged write, deletion and review is audited;
//! - [`recover`] is the only way past a refusal, and it keeps deletion winning: every id the
//!   trail saw deleted is deleted again (or reserved by a tombstone when the log lost the
//!   event too), new records never reuse a lost sequence, the losses are audited per tenant,
//!   and the derived indexes are removed to be rebuilt.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use serde_json::json;

use super::logged;
use super::shared::{lock_data_dir, Paths, ALL_TENANTS};
use super::EngineConfig;
use crate::audit::{AuditAction, AuditAppender, AuditEntry, Keyed};
use crate::index::scope::{CommitMark, ScopeIndex};
use crate::index::vector::HnswIndex;
use crate::model::Timestamp;
use crate::store::record::{decode, encode, DeleteReason, DeleteRecord, Record, TombstoneRecord};
use crate::store::{self, EventLog};

/// A record that says how far a log reached: what it is, and the sequence it names.
#[derive(Debug, Clone)]
pub(super) struct Witness {
    /// What says so (for the error message).
    pub what: String,
    /// The sequence it names.
    pub seq: u64,
}

/// Acknowledged records are missing from a log.
#[derive(Debug, thiserror::Error)]
#[error(
    "{file} ends at sequence {held} but {witness} shows that sequence {expected} was \
     acknowledged: acknowledged records are missing (the file was truncated or restored \
     from an older copy). Start refused. `episodic recover --accept-loss --data-dir {dir}` \
     starts from what the files hold; events known to be deleted stay deleted"
)]
pub struct DataLoss {
    /// The file that lost records.
    pub file: String,
    /// The last sequence it holds (0: none).
    pub held: u64,
    /// The sequence a witness proves was acknowledged.
    pub expected: u64,
    /// Which witness.
    pub witness: String,
    /// The data directory.
    pub dir: String,
}

/// The highest sequence any witness names, and which one names it.
fn highest(witnesses: &[Witness]) -> Option<&Witness> {
    witnesses.iter().max_by_key(|w| w.seq)
}

/// Refuses when a witness names a sequence beyond `held` (the last one `file` holds).
pub(super) fn check(
    file: &Path,
    held: Option<u64>,
    witnesses: &[Witness],
    dir: &Path,
) -> Result<(), DataLoss> {
    let held = held.unwrap_or(0);
    match highest(witnesses) {
        Some(w) if w.seq > held => Err(DataLoss {
            file: file.display().to_string(),
            held,
            expected: w.seq,
            witness: w.what.clone(),
            dir: dir.display().to_string(),
        }),
        Some(_) | None => Ok(()),
    }
}

/// The witnesses of the event log and of the audit trail kept outside them.
pub(super) fn index_witnesses(
    mark: Option<CommitMark>,
    hnsw: Option<u64>,
) -> (Vec<Witness>, Vec<Witness>) {
    let mut log = Vec::new();
    let mut audit = Vec::new();
    if let Some(m) = mark {
        log.push(Witness {
            what: "the scope index's last commit".into(),
            seq: m.last_seq,
        });
        if let Some(a) = m.audit_seq {
            audit.push(Witness {
                what: "the scope index's last commit".into(),
                seq: a,
            });
        }
    }
    if let Some(seq) = hnsw {
        log.push(Witness {
            what: "the HNSW snapshot".into(),
            seq,
        });
    }
    (log, audit)
}

/// The audit trail's witness of the event log: its highest `logSeq`.
pub(super) fn trail_witness(max_log_seq: Option<u64>) -> Option<Witness> {
    max_log_seq.map(|seq| Witness {
        what: "the audit trail".into(),
        seq,
    })
}

/// Which logged records need their audit entries derived at start-up: those after the
/// trail's highest `logSeq`; all of them when the trail is empty; none when the trail was
/// written by a version that recorded no `logSeq` (it cannot say what it covers).
pub(super) fn reconcile_from(max_log_seq: Option<u64>, trail_entries: u64) -> Option<u64> {
    match (max_log_seq, trail_entries) {
        (Some(seq), _) => Some(seq),
        (None, 0) => Some(0),
        (None, _) => None,
    }
}

/// What [`recover`] found, and did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryReport {
    /// Whether the files held everything their witnesses name.
    pub nothing_lost: bool,
    /// Whether the changes below were written (`--accept-loss`).
    pub applied: bool,
    /// The event log's last sequence before recovery (0: empty).
    pub log_held: u64,
    /// The highest event-log sequence a witness names.
    pub log_expected: u64,
    /// The audit log's last sequence before recovery (0: empty).
    pub audit_held: u64,
    /// The highest audit sequence a witness names.
    pub audit_expected: u64,
    /// Per tenant: what was lost and what recovery did.
    pub tenants: BTreeMap<String, TenantRecovery>,
}

/// One tenant's part of a recovery.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantRecovery {
    /// Events the trail saw written whose records are lost.
    pub lost_event_ids: BTreeSet<String>,
    /// Events the trail saw deleted that the log held as live: deleted again.
    pub redeleted_event_ids: BTreeSet<String>,
    /// Events the trail saw deleted that the log lost entirely: their ids stay reserved.
    pub reserved_event_ids: BTreeSet<String>,
}

/// An event as the surviving log leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    Live,
    Deleted,
}

/// What the surviving event log holds.
#[derive(Debug, Default)]
struct LogImage {
    last_seq: Option<u64>,
    next_doc: u32,
    events: HashMap<(String, String), Left>,
}

impl LogImage {
    fn read(path: &Path) -> anyhow::Result<(Box<dyn EventLog>, LogImage)> {
        let reading = || format!("reading {}", path.display());
        let (log, found) = store::open_local(path).with_context(reading)?;
        let mut image = LogImage {
            last_seq: found.last_seq,
            ..LogImage::default()
        };
        for rec in log.read_from(0).with_context(reading)? {
            let rec = rec.with_context(reading)?;
            let record = decode(&rec.payload)
                .with_context(|| format!("log record seq {}", rec.seq))
                .with_context(reading)?;
            image.see(record);
        }
        Ok((log, image))
    }

    fn see(&mut self, record: Record) {
        match record {
            Record::Put(p) => {
                self.next_doc = self.next_doc.max(p.doc + 1);
                self.events
                    .insert((p.event.tenant_id, p.event.event_id), Left::Live);
            }
            Record::Tombstone(t) => {
                self.next_doc = self.next_doc.max(t.doc + 1);
                self.events.insert((t.tenant_id, t.event_id), Left::Deleted);
            }
            Record::Delete(d) => {
                for id in d.event_ids {
                    self.events.insert((d.tenant_id.clone(), id), Left::Deleted);
                }
            }
            Record::Review(r) if !r.approved => {
                self.events.insert((r.tenant_id, r.event_id), Left::Deleted);
            }
            Record::Review(_) | Record::Requeue(_) | Record::Marker => {}
        }
    }
}

/// What the audit trail says about deletions and lost writes.
#[derive(Debug, Default)]
struct TrailImage {
    last_seq: Option<u64>,
    max_log_seq: Option<u64>,
    /// (tenant, id) → the deletion's reason, as the trail saw it last.
    deleted: BTreeMap<(String, String), DeleteReason>,
    /// (tenant, id, logSeq) of every audited write.
    written: Vec<(String, String, u64)>,
}

impl TrailImage {
    /// Reads the trail (already opened and indexed by [`AuditAppender::open`], so its torn
    /// tail is gone and its last sequence is known).
    fn read(audit: &AuditAppender) -> anyhow::Result<TrailImage> {
        let mut image = TrailImage {
            last_seq: audit.last_seq(),
            ..TrailImage::default()
        };
        for entry in audit.read_all()? {
            image.see(&entry?);
        }
        Ok(image)
    }

    fn see(&mut self, e: &AuditEntry) {
        if let Some(seq) = e.log_seq {
            self.max_log_seq = Some(self.max_log_seq.map_or(seq, |m| m.max(seq)));
        }
        let reason = match e.action {
            AuditAction::Deleted => Some(DeleteReason::Deleted),
            AuditAction::Erased => Some(DeleteReason::Erased),
            AuditAction::Expired => Some(DeleteReason::Expired),
            AuditAction::Rejected | AuditAction::Reject => Some(DeleteReason::Rejected),
            AuditAction::PolicyDenied => Some(DeleteReason::PolicyDenied),
            AuditAction::Write
            | AuditAction::Correct
            | AuditAction::Deny
            | AuditAction::Get
            | AuditAction::Recall
            | AuditAction::Timeline
            | AuditAction::History
            | AuditAction::Approve
            | AuditAction::Requeue
            | AuditAction::Compact
            | AuditAction::Export
            | AuditAction::Backup
            | AuditAction::Recovered => None,
        };
        if let Some(reason) = reason {
            for id in &e.event_ids {
                self.deleted
                    .insert((e.tenant_id.clone(), id.clone()), reason);
            }
            return;
        }
        if let (Some(seq), AuditAction::Write | AuditAction::Correct) = (e.log_seq, e.action) {
            if let Some(id) = e.event_ids.first() {
                self.written.push((e.tenant_id.clone(), id.clone(), seq));
            }
        }
    }
}

/// Checks every witness against the files under `config.data_dir` (the server stopped)
/// and, with `accept_loss`, makes the files consistent again: see the module docs.
pub fn recover(config: &EngineConfig, accept_loss: bool) -> anyhow::Result<RecoveryReport> {
    let paths = Paths::new(&config.data_dir);
    let _lock = lock_data_dir(&config.data_dir)?;
    let (mut log, image) = LogImage::read(&paths.log)?;
    let (mut audit, _) = AuditAppender::open(&paths.audit)?;
    let trail = TrailImage::read(&audit)?;
    let mark = match ScopeIndex::open(&paths.scope) {
        Ok((index, _)) => index.commit_mark().ok().flatten(),
        Err(_) => None,
    };
    let hnsw = HnswIndex::snapshot_seq(&paths.hnsw).ok().flatten();
    let (mut log_witnesses, audit_witnesses) = index_witnesses(mark, hnsw);
    log_witnesses.extend(trail_witness(trail.max_log_seq));
    let log_held = image.last_seq.unwrap_or(0);
    let audit_held = trail.last_seq.unwrap_or(0);
    let log_expected = highest(&log_witnesses).map_or(0, |w| w.seq).max(log_held);
    let audit_expected = highest(&audit_witnesses)
        .map_or(0, |w| w.seq)
        .max(audit_held);
    let mut report = RecoveryReport {
        nothing_lost: log_expected == log_held && audit_expected == audit_held,
        applied: false,
        log_held,
        log_expected,
        audit_held,
        audit_expected,
        tenants: BTreeMap::new(),
    };
    let records = plan(&image, &trail, &mut report);
    if !accept_loss || report.nothing_lost {
        return Ok(report);
    }
    apply(&paths, log.as_mut(), &mut audit, records, &mut report)?;
    report.applied = true;
    Ok(report)
}

/// The records recovery appends, and each tenant's part of the report.
fn plan(image: &LogImage, trail: &TrailImage, report: &mut RecoveryReport) -> Vec<Record> {
    for (tenant, id, seq) in &trail.written {
        if *seq > report.log_held && !image.events.contains_key(&(tenant.clone(), id.clone())) {
            let t = report.tenants.entry(tenant.clone()).or_default();
            t.lost_event_ids.insert(id.clone());
        }
    }
    let now = Timestamp::now();
    let mut by_tenant: BTreeMap<(String, DeleteReason), Vec<String>> = BTreeMap::new();
    let mut reserved = Vec::new();
    let mut next_doc = image.next_doc;
    for ((tenant, id), reason) in &trail.deleted {
        let key = (tenant.clone(), id.clone());
        match image.events.get(&key) {
            Some(Left::Deleted) => {}
            Some(Left::Live) => {
                by_tenant
                    .entry((tenant.clone(), *reason))
                    .or_default()
                    .push(id.clone());
                let t = report.tenants.entry(tenant.clone()).or_default();
                t.redeleted_event_ids.insert(id.clone());
            }
            None => {
                reserved.push(Record::Tombstone(TombstoneRecord {
                    doc: next_doc,
                    tenant_id: tenant.clone(),
                    event_id: id.clone(),
                    deleted_at: now,
                    audience: None,
                    writer: None,
                }));
                next_doc += 1;
                let t = report.tenants.entry(tenant.clone()).or_default();
                t.reserved_event_ids.insert(id.clone());
            }
        }
    }
    let mut records: Vec<Record> = by_tenant
        .into_iter()
        .map(|((tenant, reason), ids)| {
            Record::Delete(DeleteRecord {
                tenant_id: tenant,
                event_ids: ids,
                deleted_at: now,
                reason,
                key_id: RECOVERY_KEY.to_string(),
                actor_id: None,
            })
        })
        .collect();
    records.extend(reserved);
    records
}

/// The acting key of recovery's records and entries.
const RECOVERY_KEY: &str = "recovery";

/// Writes the planned records after every lost sequence, audits them and the losses, and
/// removes the derived indexes.
fn apply(
    paths: &Paths,
    log: &mut dyn EventLog,
    audit: &mut AuditAppender,
    mut records: Vec<Record>,
    report: &mut RecoveryReport,
) -> anyhow::Result<()> {
    if records.is_empty() {
        records.push(Record::Marker);
    }
    log.advance_to(report.log_expected + 1)?;
    let payloads: Vec<Vec<u8>> = records.iter().map(encode).collect();
    let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    let seqs = log
        .append_batch(&refs)
        .with_context(|| format!("appending to {}", paths.log.display()))?;
    let keyed = Keyed::open_or_create(&paths.hash_key)?;
    let mut entries: Vec<AuditEntry> = records
        .iter()
        .zip(&seqs)
        .filter_map(|(r, seq)| logged::audit_entry(*seq, r, &keyed))
        .map(logged::recovered)
        .collect();
    for (tenant, t) in &report.tenants {
        let detail = json!({
            "lostLogSeqs": {"from": report.log_held + 1, "to": report.log_expected},
            "redeleted": t.redeleted_event_ids,
            "reserved": t.reserved_event_ids,
        });
        let ids = t.lost_event_ids.iter().cloned().collect();
        entries.push(AuditEntry::new(
            tenant,
            RECOVERY_KEY,
            AuditAction::Recovered,
            ids,
            detail,
        ));
    }
    let detail = json!({
        "logHeld": report.log_held,
        "logExpected": report.log_expected,
        "auditHeld": report.audit_held,
        "auditExpected": report.audit_expected,
    });
    entries.push(AuditEntry::new(
        ALL_TENANTS,
        RECOVERY_KEY,
        AuditAction::Recovered,
        Vec::new(),
        detail,
    ));
    audit.advance_to(report.audit_expected + 1);
    audit
        .append_batch(&mut entries)
        .with_context(|| format!("appending to {}", paths.audit.display()))?;
    for dir in [&paths.scope, &paths.hnsw] {
        remove_derived(dir)?;
    }
    Ok(())
}

fn remove_derived(dir: &PathBuf) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}
