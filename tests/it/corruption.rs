//! Torn and corrupted files, in process: a torn tail of records that were never
//! acknowledged is cut back to the last complete record, a cut into acknowledged records
//! refuses start-up, a damaged middle record refuses start-up naming the log, damaged
//! derived indexes (tantivy scope index, HNSW snapshot) are rebuilt from the log, and a
//! torn audit tail is cut and completed from the log. Opening never panics.
//!
//! Each case copies a pristine data dir written once, damages the copy, opens an
//! [`Engine`] over it (with the deterministic hashing embedder: retrieval quality is not
//! under test) and checks what it holds.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::json;

use episodic::audit::AuditQuery;
use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig};
use episodic::retrieve::{RecallRequest, TimelineQuery};

use crate::common::{event, rt};

const EVENTS: usize = 12;
const TENANT: &str = "acme";

fn grant() -> TenantGrant {
    TenantGrant::internal(TENANT, "corruption-test")
}

fn open(dir: &Path) -> Result<anyhow::Result<Engine>, String> {
    let mut cfg = EngineConfig::new(dir.to_path_buf());
    // The HNSW graph and its snapshot exist only with approximate recall.
    cfg.recall.approximate = true;
    catch_unwind(AssertUnwindSafe(|| {
        Engine::open(cfg, Arc::new(HashingEmbedder::new()))
    }))
    .map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

fn id(i: usize) -> String {
    format!("ev-{i:02}")
}

/// A data dir holding `EVENTS` events (event `i` by `actor-i`), cleanly shut down, so it has
/// a committed scope index, an HNSW snapshot and an audit trail. Written once.
fn pristine() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| written(EVENTS)).path()
}

/// Like [`pristine`] with two more events: its log's last two records stand for writes
/// that were never acknowledged when laid over [`pristine`]'s indexes and trail.
fn pristine_plus() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| written(EVENTS + 2)).path()
}

fn written(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    let rt = rt();
    let engine = open(dir.path()).expect("no panic").expect("opens");
    for i in 0..n {
        let summary = format!("event number {i} about topic{i} and subject{i}");
        let mut body = event(&format!("actor-{i}"), &summary, "2026-01-01T00:00:00Z");
        body["eventId"] = json!(id(i));
        body["occurredAt"] = json!(format!("2026-01-01T00:{i:02}:00Z"));
        rt.block_on(engine.write(&grant(), crate::common::input(&body), false))
            .expect("write");
    }
    rt.block_on(engine.shutdown());
    dir
}

/// [`pristine`]'s indexes and audit trail with [`pristine_plus`]'s event log: the log holds
/// two records no index, snapshot or audit entry names (the server died after writing
/// them, before any reply).
fn unwitnessed_tail_copy() -> tempfile::TempDir {
    let dir = fresh_copy();
    std::fs::copy(log_path(pristine_plus()), log_path(dir.path())).expect("copy log");
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn fresh_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    copy_dir(pristine(), dir.path());
    dir
}

/// Byte offsets of each frame of a log, then its end.
fn frame_offsets(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).expect("read log");
    let mut offs = Vec::new();
    let mut o = 8usize;
    while o + 16 <= bytes.len() {
        offs.push(o as u64);
        let len = u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes")) as usize;
        o += 16 + len;
    }
    assert_eq!(o, bytes.len(), "pristine log ends on a frame boundary");
    offs.push(o as u64);
    offs
}

fn truncate(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    f.set_len(len).expect("truncate");
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[at as usize] ^= 0x5a;
    std::fs::write(path, bytes).expect("write");
}

/// Everything the engine holds agrees with "exactly events 0..n": get, stats, timeline, and
/// each event recallable by its actor scope.
fn check_holds(engine: &Engine, rt: &tokio::runtime::Runtime, n: usize, what: &str) {
    let g = grant();
    for i in 0..EVENTS {
        let got = engine.get(&g, &id(i));
        assert_eq!(got.is_ok(), i < n, "{what}: event {i} presence");
    }
    let stats = engine.stats();
    assert_eq!(
        (stats.events, stats.hnsw_len, stats.scope_docs),
        (n, n, n as u64),
        "{what}: counts"
    );
    let mut params = HashMap::new();
    params.insert("limit".to_string(), "500".to_string());
    let q = TimelineQuery::parse(&params).expect("timeline query");
    let page = rt.block_on(engine.timeline(&g, q)).expect("timeline");
    assert_eq!(page.events.len(), n, "{what}: timeline");
    for i in 0..n {
        let req = RecallRequest::parse(&json!({
            "query": format!("topic{i} subject{i}"),
            "scope": {"actorIds": [format!("actor-{i}")]},
        }))
        .expect("recall request");
        let resp = rt.block_on(engine.recall(&g, req)).expect("recall");
        let ids: Vec<&str> = resp
            .results
            .iter()
            .map(|h| h.event.event_id.as_str())
            .collect();
        assert_eq!(ids, vec![id(i).as_str()], "{what}: recall of event {i}");
    }
    // A global recall ranks the matching event first (the vectors are intact).
    let req = RecallRequest::parse(&json!({"query": "topic3 subject3", "limit": 3}))
        .expect("recall request");
    if n > 3 {
        let resp = rt.block_on(engine.recall(&g, req)).expect("recall");
        assert_eq!(
            resp.results[0].event.event_id,
            id(3),
            "{what}: global recall"
        );
    }
}

/// Opens (must not panic, must succeed), checks, shuts down.
fn open_and_check(dir: &Path, n: usize, what: &str) {
    let rt = rt();
    let engine = open(dir)
        .unwrap_or_else(|p| panic!("{what}: Engine::open panicked: {p}"))
        .unwrap_or_else(|e| panic!("{what}: Engine::open failed: {e:#}"));
    check_holds(&engine, &rt, n, what);
    rt.block_on(engine.shutdown());
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("log/events.log")
}

/// Cut points inside the last two records: every offset when `EPISODIC_CORRUPTION_FULL` is
/// set; otherwise every offset of each frame header and of the first and last 24 payload
/// bytes, plus every 37th offset in between (a record carries a 1.5 KB vector).
fn cut_points(offs: &[u64]) -> Vec<u64> {
    let full = std::env::var_os("EPISODIC_CORRUPTION_FULL").is_some();
    let n = offs.len() - 1;
    let mut cuts = Vec::new();
    for r in n - 2..n {
        let (start, end) = (offs[r], offs[r + 1]);
        for c in start..end {
            let near = c < start + 16 + 24 || c + 24 >= end;
            if full || near || (c - start) % 37 == 0 {
                cuts.push(c);
            }
        }
    }
    cuts.push(offs[n]);
    cuts
}

/// A torn tail that no witness names (never acknowledged) is cut back to the last
/// complete record, silently, and the indexes agree with what is left.
#[test]
fn torn_unacknowledged_log_tail_keeps_exactly_the_complete_records() {
    let offs = frame_offsets(&log_path(pristine_plus()));
    assert_eq!(offs.len(), EVENTS + 3);
    let cuts = cut_points(&offs);
    for cut in &cuts {
        let dir = unwitnessed_tail_copy();
        truncate(&log_path(dir.path()), *cut);
        let complete = offs.iter().filter(|&&o| o <= *cut).count() - 1;
        let rt = rt();
        let engine = open(dir.path())
            .unwrap_or_else(|p| panic!("cut {cut}: Engine::open panicked: {p}"))
            .unwrap_or_else(|e| panic!("cut {cut}: Engine::open failed: {e:#}"));
        let g = grant();
        for i in 0..EVENTS + 2 {
            assert_eq!(engine.get(&g, &id(i)).is_ok(), i < complete, "cut {cut}");
        }
        let stats = engine.stats();
        assert_eq!(
            (stats.events, stats.hnsw_len, stats.scope_docs),
            (complete, complete, complete as u64),
            "cut {cut}: the indexes caught up with the log"
        );
        assert_eq!(
            std::fs::metadata(log_path(dir.path())).expect("log").len(),
            offs[complete],
            "cut {cut}: the torn tail was cut off"
        );
        // Every record left is audited: the two the trail lacked got recovered entries.
        assert_eq!(audit_entries(&engine, &rt), complete, "cut {cut}");
        // The cut events can be written again and survive another restart.
        let mut body = event(
            "actor-x",
            "written after a torn tail",
            "2026-01-02T00:00:00Z",
        );
        body["eventId"] = json!(id(complete));
        rt.block_on(engine.write(&g, crate::common::input(&body), false))
            .unwrap_or_else(|e| panic!("cut {cut}: write after recovery: {e:?}"));
        rt.block_on(engine.shutdown());
        let engine = open(dir.path()).expect("no panic").expect("reopens");
        assert_eq!(engine.stats().events, complete + 1, "cut {cut}");
        rt.block_on(engine.shutdown());
    }
    eprintln!(
        "torn log: {} cut points in the last two (unacknowledged) records, each recovered exactly",
        cuts.len()
    );
}

/// A cut into acknowledged records (the scope index, the HNSW snapshot and the audit
/// trail all name them) refuses start-up, naming the log and both sequences, and changes
/// nothing but the torn partial frame.
#[test]
fn a_cut_into_acknowledged_log_records_refuses_to_start() {
    let offs = frame_offsets(&log_path(pristine()));
    let cuts = cut_points(&offs);
    let mut refused = 0;
    for cut in cuts.iter().filter(|c| **c < offs[EVENTS]) {
        let dir = fresh_copy();
        truncate(&log_path(dir.path()), *cut);
        let complete = offs.iter().filter(|&&o| o <= *cut).count() - 1;
        let opened = open(dir.path()).unwrap_or_else(|p| panic!("cut {cut}: panicked: {p}"));
        let Err(err) = opened else {
            panic!("cut {cut}: started over a log missing acknowledged records")
        };
        let loss = err
            .downcast_ref::<episodic::engine::DataLoss>()
            .unwrap_or_else(|| panic!("cut {cut}: not a data-loss refusal: {err:#}"));
        assert!(loss.file.ends_with("events.log"), "cut {cut}: {err}");
        assert_eq!(
            (loss.held, loss.expected),
            (complete as u64, EVENTS as u64),
            "cut {cut}"
        );
        refused += 1;
    }
    assert!(refused > 0);
}

#[test]
fn flipped_byte_in_a_middle_log_record_refuses_to_open_naming_the_log() {
    let offs = frame_offsets(&log_path(pristine()));
    let mid = offs[EVENTS / 2];
    // Length, checksum, seq and payload bytes of a middle frame.
    for at in [
        mid + 1,
        mid + 5,
        mid + 9,
        mid + 16,
        mid + 100,
        offs[EVENTS / 2 + 1] - 1,
    ] {
        let dir = fresh_copy();
        let log = log_path(dir.path());
        flip(&log, at);
        let before = std::fs::read(&log).expect("read");
        let err = match open(dir.path()).unwrap_or_else(|p| panic!("flip at {at}: panicked: {p}")) {
            Ok(_) => panic!("flip at {at}: a corrupt log opened"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            err.contains(&log.display().to_string()),
            "flip at {at}: error names the log: {err}"
        );
        assert_eq!(
            std::fs::read(&log).expect("read"),
            before,
            "flip at {at}: refusing to open leaves the log untouched"
        );
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip,
    Truncate,
    Delete,
}

fn damage(path: &Path, how: Damage) {
    let len = std::fs::metadata(path).expect("meta").len();
    match how {
        Damage::Flip if len > 0 => flip(path, len / 2),
        Damage::Flip => {}
        Damage::Truncate => truncate(path, len / 2),
        Damage::Delete => std::fs::remove_file(path).expect("remove"),
    }
}

fn damaged_index_files_are_rebuilt(sub: &str) {
    let files = files_under(&pristine().join(sub));
    assert!(!files.is_empty(), "{sub} has files");
    let mut cases = 0;
    for file in &files {
        let rel = file.strip_prefix(pristine()).expect("relative");
        if rel.ends_with(".tantivy-meta.lock") || rel.ends_with(".tantivy-writer.lock") {
            continue;
        }
        for how in [Damage::Flip, Damage::Truncate, Damage::Delete] {
            let dir = fresh_copy();
            damage(&dir.path().join(rel), how);
            open_and_check(dir.path(), EVENTS, &format!("{how:?} {}", rel.display()));
            cases += 1;
        }
    }
    let dir = fresh_copy();
    std::fs::remove_dir_all(dir.path().join(sub)).expect("remove");
    open_and_check(dir.path(), EVENTS, &format!("deleted {sub}"));
    eprintln!("{sub}: {cases} damaged-file cases, each rebuilt from the log");
}

#[test]
fn damaged_scope_index_files_are_rebuilt_from_the_log() {
    damaged_index_files_are_rebuilt("index/scope");
}

#[test]
fn damaged_hnsw_snapshot_files_are_rebuilt_from_the_log() {
    damaged_index_files_are_rebuilt("index/hnsw");
}

/// The trail's `write` entries.
fn audit_entries(engine: &Engine, rt: &tokio::runtime::Runtime) -> usize {
    let q = AuditQuery {
        action: Some(episodic::audit::AuditAction::Write),
        limit: usize::MAX,
        ..AuditQuery::default()
    };
    rt.block_on(engine.audit_page(&grant(), &q))
        .expect("audit")
        .len()
}

/// A torn audit tail that no witness names is cut, and the entries of the logged records
/// it held are derived again from the log (marked recovered): the trail stays complete.
#[test]
fn torn_unacknowledged_audit_tail_is_cut_and_the_trail_completed() {
    let audit = pristine_plus().join("audit/audit.log");
    let offs = frame_offsets(&audit);
    let n = offs.len() - 1;
    assert_eq!(n, EVENTS + 2, "one audit entry per write");
    for cut in offs[n - 2]..=offs[n] {
        let dir = unwitnessed_tail_copy();
        std::fs::copy(&audit, dir.path().join("audit/audit.log")).expect("copy audit");
        truncate(&dir.path().join("audit/audit.log"), cut);
        let rt = rt();
        let engine = open(dir.path())
            .unwrap_or_else(|p| panic!("audit cut {cut}: panicked: {p}"))
            .unwrap_or_else(|e| panic!("audit cut {cut}: failed: {e:#}"));
        assert_eq!(
            engine.stats().events,
            EVENTS + 2,
            "audit cut {cut}: events intact"
        );
        assert_eq!(audit_entries(&engine, &rt), EVENTS + 2, "audit cut {cut}");
        // The trail continues: the next audited action lands after the cut.
        let mut body = event("actor-y", "after a torn audit tail", "2026-01-02T00:00:00Z");
        body["eventId"] = json!("after-audit-cut");
        rt.block_on(engine.write(&grant(), crate::common::input(&body), false))
            .expect("write");
        assert_eq!(audit_entries(&engine, &rt), EVENTS + 3, "audit cut {cut}");
        rt.block_on(engine.shutdown());
    }
}

/// A cut into audit entries the scope index's last commit names refuses start-up.
#[test]
fn a_cut_into_acknowledged_audit_entries_refuses_to_start() {
    let audit = pristine().join("audit/audit.log");
    let offs = frame_offsets(&audit);
    let n = offs.len() - 1;
    for cut in [offs[n - 1], offs[n - 1] + 20, offs[n] - 1] {
        let dir = fresh_copy();
        truncate(&dir.path().join("audit/audit.log"), cut);
        let opened = open(dir.path()).unwrap_or_else(|p| panic!("cut {cut}: panicked: {p}"));
        let Err(err) = opened else {
            panic!("audit cut {cut}: started over a trail missing entries")
        };
        let loss = err
            .downcast_ref::<episodic::engine::DataLoss>()
            .unwrap_or_else(|| panic!("cut {cut}: not a data-loss refusal: {err:#}"));
        assert!(loss.file.ends_with("audit.log"), "cut {cut}: {err}");
    }
}
