//! Queries over the durable audit log, with memory bounded independently of its length. Entries
//! are appended (and indexed here) only by [`super::AuditAppender`].
//!
//! The audit log file (`audit/audit.log`, the framed format of [`crate::store::log`]) is the
//! only copy of the trail. Memory holds a sparse index over it: the log is cut into blocks
//! of [`BLOCK_ENTRIES`] consecutive records, and each block keeps its byte range, its
//! sequence range, its `at` range and the (interned) tenants it contains — about 64 bytes
//! per block, i.e. well under one byte per audit entry, and nothing per request beyond that.
//! A query picks the blocks that can hold matching entries (right tenant, past `afterSeq`,
//! overlapping `[from, to)`), reads just those byte ranges from the file and filters them.
//!
//! Invariants:
//! - the index covers exactly the records that are durable in the file: the appender indexes
//!   a batch only after its `append_batch` (and fsync) returned, with the frame offsets that
//!   batch was written at, and readers never read past the indexed end;
//! - the audit log is append-only (compaction never rewrites it), so indexed offsets stay
//!   valid for the life of the process;
//! - blocks are in sequence order and never overlap, so a query reads entries in sequence
//!   order and a page (`afterSeq` + `limit`) is exactly what a full scan would return;
//! - block pruning is conservative: a block is skipped only when no entry in it can match
//!   (tenant absent, every seq ≤ `afterSeq`, or its millisecond `at` range lies wholly outside
//!   the query's);
//! - every frame read is checked (length, checksum, expected sequence) and a mismatch is an
//!   error, never a silently shortened answer.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use parking_lot::RwLock;

use super::{AuditEntry, AuditQuery};
use crate::store::log::{LogRecord, MAGIC, MAX_PAYLOAD};

/// Records per index block. Larger blocks mean less memory and coarser pruning.
pub const BLOCK_ENTRIES: u32 = 1024;

/// `[u32 len][u32 crc][u64 seq]` before every payload (see [`crate::store::log`]).
pub(super) const FRAME_HEADER_LEN: u64 = 16;

/// Where one durable record sits, and what the index needs to know about it.
#[derive(Debug, Clone)]
pub(super) struct Placed<'a> {
    /// Its frame's sequence number in the audit log (global, never shown).
    pub seq: u64,
    /// Its entry's `seq`: the tenant's own sequence (entries of older versions hold the
    /// global one, which also grows along the tenant's entries).
    pub tenant_seq: u64,
    /// Byte offset of its frame.
    pub offset: u64,
    /// Payload length.
    pub payload_len: u64,
    /// Its entry's tenant.
    pub tenant: &'a str,
    /// Its entry's `at`, unix milliseconds.
    pub at_ms: i64,
}

/// Where each entry of a batch landed, given the payloads were appended back to back from
/// byte `start` as frames `seqs`.
pub(super) fn placements<'a>(
    entries: &'a [AuditEntry],
    payloads: &[Vec<u8>],
    seqs: &[u64],
    start: u64,
) -> Vec<Placed<'a>> {
    let mut offset = start;
    entries
        .iter()
        .zip(payloads)
        .zip(seqs)
        .map(|((e, p), seq)| {
            let here = offset;
            offset += FRAME_HEADER_LEN + p.len() as u64;
            Placed {
                seq: *seq,
                tenant_seq: e.seq,
                offset: here,
                payload_len: p.len() as u64,
                tenant: &e.tenant_id,
                at_ms: e.at.unix_millis(),
            }
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Block {
    /// Offset of the first frame.
    start: u64,
    /// Offset just past the last frame.
    end: u64,
    first_seq: u64,
    last_seq: u64,
    count: u32,
    min_at_ms: i64,
    max_at_ms: i64,
    /// Interned tenant ids present, sorted, each with its last entry `seq` in the block.
    tenants: Vec<(u32, u64)>,
}

impl Block {
    fn may_match(&self, tenant: u32, q: &AuditQuery) -> bool {
        let Ok(i) = self.tenants.binary_search_by_key(&tenant, |(t, _)| *t) else {
            return false;
        };
        q.after_seq.is_none_or(|s| self.tenants[i].1 > s)
            && q.from.is_none_or(|f| self.max_at_ms >= f.unix_millis())
            && q.to.is_none_or(|t| self.min_at_ms <= t.unix_millis())
    }
}

#[derive(Debug, Default)]
struct Index {
    blocks: Vec<Block>,
    tenant_ids: HashMap<String, u32>,
    /// Each tenant's last entry `seq`.
    last_tenant_seq: HashMap<u32, u64>,
}

impl Index {
    fn intern(&mut self, tenant: &str) -> u32 {
        if let Some(id) = self.tenant_ids.get(tenant) {
            return *id;
        }
        let id = self.tenant_ids.len() as u32;
        self.tenant_ids.insert(tenant.to_string(), id);
        id
    }

    fn add(&mut self, p: &Placed<'_>) {
        let tenant = self.intern(p.tenant);
        let last = self.last_tenant_seq.entry(tenant).or_default();
        *last = (*last).max(p.tenant_seq);
        let end = p.offset + FRAME_HEADER_LEN + p.payload_len;
        let open = self
            .blocks
            .last_mut()
            .filter(|b| b.count < BLOCK_ENTRIES && b.end == p.offset);
        match open {
            Some(b) => {
                b.end = end;
                b.last_seq = p.seq;
                b.count += 1;
                b.min_at_ms = b.min_at_ms.min(p.at_ms);
                b.max_at_ms = b.max_at_ms.max(p.at_ms);
                match b.tenants.binary_search_by_key(&tenant, |(t, _)| *t) {
                    Ok(i) => b.tenants[i].1 = b.tenants[i].1.max(p.tenant_seq),
                    Err(i) => b.tenants.insert(i, (tenant, p.tenant_seq)),
                }
            }
            None => self.blocks.push(Block {
                start: p.offset,
                end,
                first_seq: p.seq,
                last_seq: p.seq,
                count: 1,
                min_at_ms: p.at_ms,
                max_at_ms: p.at_ms,
                tenants: vec![(tenant, p.tenant_seq)],
            }),
        }
    }
}

/// The queryable audit trail: the log file plus its sparse in-memory index.
#[derive(Debug)]
pub struct AuditTrail {
    path: PathBuf,
    index: RwLock<Index>,
}

/// Frame offsets of records read back-to-back from the start of a log file.
pub(super) fn frame_offsets(records: &[LogRecord]) -> impl Iterator<Item = (u64, &LogRecord)> {
    let mut at = MAGIC.len() as u64;
    records.iter().map(move |r| {
        let here = at;
        at += FRAME_HEADER_LEN + r.payload.len() as u64;
        (here, r)
    })
}

impl AuditTrail {
    /// An empty index over the log at `path`.
    pub fn new(path: &Path) -> Self {
        AuditTrail {
            path: path.to_path_buf(),
            index: RwLock::new(Index::default()),
        }
    }

    /// Records that these durable frames exist (in sequence order, after any indexed before).
    pub(super) fn indexed(&self, placed: &[Placed<'_>]) {
        let mut index = self.index.write();
        for p in placed {
            index.add(p);
        }
    }

    /// Gives each entry its tenant's next sequence number after those indexed (one tenant
    /// never learns how many entries others have); numbering the same unindexed entries
    /// again gives the same numbers.
    pub(super) fn number(&self, entries: &mut [AuditEntry]) {
        let index = self.index.read();
        let mut next: HashMap<&str, u64> = HashMap::new();
        for e in entries.iter_mut() {
            let n = next.entry(&e.tenant_id).or_insert_with(|| {
                index
                    .tenant_ids
                    .get(&e.tenant_id)
                    .and_then(|t| index.last_tenant_seq.get(t))
                    .copied()
                    .unwrap_or(0)
            });
            *n += 1;
            e.seq = *n;
        }
    }

    /// Index blocks held (for tests and the memory bound).
    pub fn blocks(&self) -> usize {
        self.index.read().blocks.len()
    }

    /// Up to `q.limit` entries of `tenant` matching `q`, in sequence order. Blocking (reads
    /// the file): call off async threads.
    pub fn query(&self, tenant: &str, q: &AuditQuery) -> io::Result<Vec<AuditEntry>> {
        self.query_kept(tenant, q, Some)
    }

    /// Like [`AuditTrail::query`], each matching entry passed through `keep` (which may
    /// drop or redact it) before it counts towards `q.limit`: a page holds `q.limit` kept
    /// entries whenever that many exist.
    pub fn query_kept(
        &self,
        tenant: &str,
        q: &AuditQuery,
        mut keep: impl FnMut(AuditEntry) -> Option<AuditEntry>,
    ) -> io::Result<Vec<AuditEntry>> {
        let candidates: Vec<Block> = {
            let index = self.index.read();
            let Some(&tenant_id) = index.tenant_ids.get(tenant) else {
                return Ok(Vec::new());
            };
            index
                .blocks
                .iter()
                .filter(|b| b.may_match(tenant_id, q))
                .cloned()
                .collect()
        };
        let mut out = Vec::new();
        if candidates.is_empty() || q.limit == 0 {
            return Ok(out);
        }
        let mut file = File::open(&self.path)?;
        let prefilter = q.event_id.as_deref().and_then(needle);
        for block in candidates {
            file.seek(SeekFrom::Start(block.start))?;
            let mut reader =
                BufReader::with_capacity(64 * 1024, (&mut file).take(block.end - block.start));
            for expected in 0..block.count {
                let (seq, payload) = read_frame(&mut reader, &self.path)?;
                if expected == 0 && seq != block.first_seq {
                    return Err(corrupt(&self.path, block.start, "unexpected sequence"));
                }
                if prefilter
                    .as_ref()
                    .is_some_and(|n| !contains(&payload, n.as_bytes()))
                {
                    continue;
                }
                let entry: AuditEntry = serde_json::from_slice(&payload)
                    .map_err(|e| corrupt(&self.path, block.start, &e.to_string()))?;
                if entry.tenant_id != tenant || !q.matches(&entry) {
                    continue;
                }
                if let Some(kept) = keep(entry) {
                    out.push(kept);
                    if out.len() >= q.limit {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The JSON string form of an id, when it can be searched for verbatim in a payload.
fn needle(id: &str) -> Option<String> {
    let plain = id.chars().all(|c| c != '"' && c != '\\' && !c.is_control());
    plain.then(|| format!("\"{id}\""))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

fn read_frame(r: &mut impl Read, path: &Path) -> io::Result<(u64, Vec<u8>)> {
    let mut hdr = [0u8; FRAME_HEADER_LEN as usize];
    r.read_exact(&mut hdr)?;
    let [l0, l1, l2, l3, c0, c1, c2, c3, s0, s1, s2, s3, s4, s5, s6, s7] = hdr;
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    let seq = u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]);
    if len > MAX_PAYLOAD {
        return Err(corrupt(path, 0, "declared length too large"));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&payload);
    if h.finalize() != crc {
        return Err(corrupt(path, 0, "checksum mismatch"));
    }
    Ok((seq, payload))
}

fn corrupt(path: &Path, block: u64, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "audit log {} damaged in the block at byte {block}: {why}",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditAppender;
    use crate::model::Timestamp;
    use serde_json::Value;
    use std::sync::Arc;

    /// Appends entries like the writer does and indexes them.
    fn append(appender: &mut AuditAppender, entries: &mut [AuditEntry]) {
        appender.append_batch(entries).expect("append");
    }

    fn entry(i: usize) -> AuditEntry {
        let tenant = ["a", "b", "c"][i % 3];
        let action = if i.is_multiple_of(2) {
            super::super::AuditAction::Recall
        } else {
            super::super::AuditAction::Get
        };
        let mut e = AuditEntry::new(
            tenant,
            "k",
            action,
            vec![format!("ev-{}", i % 50)],
            Value::Null,
        );
        e.at = Timestamp::from_unix_millis(1_700_000_000_000 + i as i64).expect("ts");
        e
    }

    #[test]
    fn pages_match_a_full_scan_and_memory_is_per_block() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("audit.log");
        let (mut appender, _) = AuditAppender::open(&path).expect("open");
        let trail = Arc::clone(appender.trail());
        let n = 3 * BLOCK_ENTRIES as usize + 17;
        let mut all: Vec<AuditEntry> = (0..n).map(entry).collect();
        for chunk in all.chunks_mut(100) {
            append(&mut appender, chunk);
        }
        assert_eq!(trail.blocks(), 4);
        let queries = [
            AuditQuery {
                limit: 7,
                ..AuditQuery::default()
            },
            AuditQuery {
                limit: 5000,
                event_id: Some("ev-7".into()),
                ..AuditQuery::default()
            },
            AuditQuery {
                limit: 3,
                action: Some(super::super::AuditAction::Get),
                after_seq: Some(500),
                ..AuditQuery::default()
            },
            AuditQuery {
                limit: 100,
                from: Timestamp::from_unix_millis(1_700_000_001_000),
                to: Timestamp::from_unix_millis(1_700_000_002_100),
                ..AuditQuery::default()
            },
        ];
        for tenant in ["a", "b", "c", "zz"] {
            for q in &queries {
                // Walk every page with the cursor, as a client would.
                let first = q;
                let mut q = q.clone();
                let mut got = Vec::new();
                loop {
                    let page = trail.query(tenant, &q).expect("query");
                    let full = page.len() == q.limit;
                    q.after_seq = page.last().map(|e| e.seq).or(q.after_seq);
                    got.extend(page);
                    if !full || q.limit > 1000 {
                        break;
                    }
                }
                let start = AuditQuery {
                    limit: usize::MAX,
                    ..first.clone()
                };
                let want: Vec<&AuditEntry> = all
                    .iter()
                    .filter(|e| e.tenant_id == tenant && start.matches(e))
                    .collect();
                let got: Vec<&AuditEntry> = got.iter().collect();
                assert!(
                    got == want,
                    "tenant {tenant} query {first:?}: {} entries, want {}",
                    got.len(),
                    want.len()
                );
            }
        }
    }

    #[test]
    fn damage_is_an_error_not_a_short_answer() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("audit.log");
        let (mut appender, _) = AuditAppender::open(&path).expect("open");
        let trail = Arc::clone(appender.trail());
        let mut all: Vec<AuditEntry> = (0..10).map(entry).collect();
        append(&mut appender, &mut all);
        let mut bytes = std::fs::read(&path).expect("read");
        let at = bytes.len() / 2;
        bytes[at] ^= 0x55;
        std::fs::write(&path, &bytes).expect("write");
        let q = AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        };
        assert!(trail.query("a", &q).is_err());
    }
}
