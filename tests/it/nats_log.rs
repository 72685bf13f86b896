//! The event log on a NATS JetStream stream (`store::nats`), against a real 3-node cluster:
//! the log contract, fencing of a second writer, refused in-place changes, physical erasure,
//! and a stream leader killed with SIGKILL in the middle of appends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use episodic::store::contract::{check_core, check_rewrite, Opener};
use episodic::store::nats::{Generations, NatsConnection, NatsLog, WriteLease};
use episodic::store::{EventLog, LogError, LogRecord};

use crate::nats_cluster::{shared, unique_stream, NatsCluster};

fn connect(cluster: &NatsCluster) -> NatsConnection {
    NatsConnection::connect(&cluster.urls).expect("connect to the NATS cluster")
}

fn all(log: &dyn EventLog) -> Vec<(u64, Vec<u8>)> {
    log.read_from(0)
        .expect("read")
        .map(|r| r.map(|r| (r.seq, r.payload)))
        .collect::<Result<_, LogError>>()
        .expect("records")
}

#[test]
fn a_stream_keeps_the_event_log_contract() {
    let conn = connect(shared());
    let fresh = || -> Opener {
        let (conn, name) = (conn.clone(), unique_stream("CONTRACT"));
        Box::new(move || Box::new(NatsLog::open(&conn, &name, 3).expect("open the stream")))
    };
    check_core(&fresh);
}

/// The generation record of one test log, in memory: what the cluster's catalog is to a
/// shard.
#[derive(Debug)]
struct MemGenerations {
    base: String,
    current: std::sync::Mutex<u64>,
}

impl MemGenerations {
    fn name(&self, generation: u64) -> String {
        format!("{}_G{generation}", self.base)
    }
    fn current_name(&self) -> String {
        self.name(*self.current.lock().expect("lock"))
    }
}

impl Generations for MemGenerations {
    fn next_name(&self, current: &str) -> String {
        let generation: u64 = current
            .rsplit_once("_G")
            .expect("a generation")
            .1
            .parse()
            .expect("n");
        self.name(generation + 1)
    }
    fn commit(&self, current: &str, next: &str) -> Result<(), String> {
        let mut now = self.current.lock().expect("lock");
        if self.name(*now) != current {
            return Err(format!("the log is {} now", self.name(*now)));
        }
        assert_eq!(next, self.name(*now + 1));
        *now += 1;
        Ok(())
    }
}

#[test]
fn a_rotating_stream_keeps_the_rewrite_contract() {
    let conn = connect(shared());
    let fresh = || -> Opener {
        let conn = conn.clone();
        let generations = Arc::new(MemGenerations {
            base: unique_stream("ROTATE"),
            current: std::sync::Mutex::new(1),
        });
        Box::new(move || {
            let mut log = NatsLog::open(&conn, &generations.current_name(), 3).expect("open");
            log.set_generations(Some(generations.clone() as Arc<dyn Generations>));
            Box::new(log)
        })
    };
    check_rewrite(&fresh);
}

#[test]
fn a_rotation_drops_the_old_generation_and_appends_go_on() {
    let conn = connect(shared());
    let generations = Arc::new(MemGenerations {
        base: unique_stream("ROTATED"),
        current: std::sync::Mutex::new(1),
    });
    let mut log = NatsLog::open(&conn, &generations.current_name(), 3).expect("open");
    log.set_generations(Some(generations.clone() as Arc<dyn Generations>));
    let first = generations.current_name();
    for payload in [&b"one"[..], b"secret canary", b"three", b"four"] {
        log.append_batch(&[payload]).expect("append");
    }
    let kept: Vec<LogRecord> = all(&log)
        .into_iter()
        .filter(|(seq, _)| *seq != 2)
        .map(|(seq, payload)| LogRecord { seq, payload })
        .collect();
    log.rewrite(&kept).expect("rotate");
    assert_eq!(
        generations.current_name(),
        format!("{}_G2", generations.base)
    );
    assert!(
        conn.stream_health(&first).expect("health").is_none(),
        "the old generation is gone"
    );
    assert_eq!(log.append_batch(&[b"five"]).expect("append after"), vec![5]);
    // Erasure by log sequence still finds the record in the rotated stream.
    log.erase(&[3]).expect("erase");
    let reopened = NatsLog::open(&conn, &generations.current_name(), 3).expect("reopen");
    assert_eq!(reopened.next_seq(), 6);
    let seqs: Vec<u64> = all(&reopened).into_iter().map(|(seq, _)| seq).collect();
    assert_eq!(seqs, vec![1, 4, 5]);
    assert_eq!(
        all(&reopened)
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| *s >= 4)
            .count(),
        2
    );
    let from_four: Vec<u64> = reopened
        .read_from(4)
        .expect("read")
        .map(|r| r.expect("record").seq)
        .collect();
    assert_eq!(from_four, vec![4, 5]);
    let _ = conn.delete_stream(&generations.current_name());
}

/// Two handles at the same position, the second one stale once the first appends; `before`
/// records are in the stream first (0: the stream's first record is the contested one).
fn fence_case(conn: &NatsConnection, before: usize) {
    let name = unique_stream("FENCE");
    let mut first = NatsLog::open(conn, &name, 3).expect("open");
    let earlier: Vec<Vec<u8>> = (0..before).map(|i| format!("x{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = earlier.iter().map(Vec::as_slice).collect();
    first.append_batch(&refs).expect("append");
    let mut second = NatsLog::open(conn, &name, 3).expect("open again");
    let at = before as u64 + 1;
    assert_eq!(first.append_batch(&[b"a"]).expect("append"), vec![at]);
    // A longer batch than what the first handle wrote since: none of it may land.
    match second.append_batch(&[b"b", b"c", b"d"]) {
        Err(LogError::Fenced {
            expected, found, ..
        }) => assert_eq!((expected, found), (at - 1, at)),
        other => panic!("a stale writer must be fenced, got {other:?}"),
    }
    assert!(
        second.append_batch(&[b"e"]).is_err(),
        "a fenced handle appends nothing more"
    );
    assert_eq!(first.append_batch(&[b"f"]).expect("append"), vec![at + 1]);
    let mut want: Vec<(u64, Vec<u8>)> = earlier.into_iter().zip(1..).map(|(p, s)| (s, p)).collect();
    want.push((at, b"a".to_vec()));
    want.push((at + 1, b"f".to_vec()));
    assert_eq!(all(&first), want, "nothing of the fenced batch is stored");
    conn.delete_stream(&name).expect("delete");
}

#[test]
fn a_second_writer_is_fenced_and_stops() {
    let conn = connect(shared());
    fence_case(&conn, 0);
    fence_case(&conn, 3);
}

#[test]
fn a_writer_whose_lease_lapsed_appends_nothing() {
    let conn = connect(shared());
    let name = unique_stream("LEASED");
    let mut log = NatsLog::open(&conn, &name, 3).expect("open");
    let lease = WriteLease::until(Instant::now() + Duration::from_secs(60));
    log.set_lease(Some(lease.clone()));
    assert_eq!(
        log.append_batch(&[b"first"]).expect("within the lease"),
        vec![1]
    );
    lease.revoke();
    let refused = log.append_batch(&[b"second"]).expect_err("after the lease");
    assert!(refused.to_string().contains("lease"), "{refused}");
    // Renewed (a lease is extended, never shortened), appends go on from where they were.
    lease.extend_to(Instant::now() + Duration::from_secs(60));
    assert_eq!(log.append_batch(&[b"third"]).expect("renewed"), vec![2]);
    assert_eq!(all(&log).len(), 2);
    let _ = conn.delete_stream(&name);
}

#[test]
fn in_place_changes_are_refused_and_change_nothing() {
    let conn = connect(shared());
    let name = unique_stream("INPLACE");
    let mut log = NatsLog::open(&conn, &name, 3).expect("open");
    log.append_batch(&[b"a", b"b"]).expect("append");
    let record = episodic::store::LogRecord {
        seq: 2,
        payload: b"B".to_vec(),
    };
    assert!(matches!(
        log.rewrite(&[record]),
        Err(LogError::Unsupported { .. })
    ));
    assert!(matches!(
        log.advance_to(10),
        Err(LogError::Unsupported { .. })
    ));
    log.advance_to(3)
        .expect("not past the end: nothing to skip");
    assert_eq!(all(&log), vec![(1, b"a".to_vec()), (2, b"b".to_vec())]);
    assert_eq!(log.next_seq(), 3);
    conn.delete_stream(&name).expect("delete");
}

#[test]
fn an_erased_record_leaves_no_trace_in_the_stream_files() {
    let cluster = shared();
    let conn = connect(cluster);
    let name = unique_stream("ERASE");
    let mut log = NatsLog::open(&conn, &name, 3).expect("open");
    let canary = format!("canary-{name}-payload");
    log.append_batch(&[b"before", canary.as_bytes(), b"after"])
        .expect("append");
    log.erase(&[2]).expect("erase");
    assert_eq!(
        all(&log),
        vec![(1, b"before".to_vec()), (3, b"after".to_vec())]
    );
    // Every replica's copy of the stream is overwritten as it applies the erase (its copy in the
    // replication log goes with the stream's next snapshot: docs/security.md). A replica
    // writes its files as it applies the records: wait until each holds the last one.
    let stream_files = |node: usize| -> Vec<std::path::PathBuf> {
        cluster
            .store_files(node)
            .into_iter()
            .filter(|f| {
                f.components()
                    .any(|c| c.as_os_str() == std::ffi::OsStr::new(&name))
            })
            .collect()
    };
    let holds = |files: &[std::path::PathBuf], needle: &[u8]| {
        files.iter().any(|f| {
            let bytes = std::fs::read(f).unwrap_or_default();
            bytes.windows(needle.len()).any(|w| w == needle)
        })
    };
    let started = Instant::now();
    for node in 1..=3 {
        while !holds(&stream_files(node), b"after") {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "node {node} never wrote the stream's records"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // The erase follows the record in the replication order: each replica applies it
        // right after.
        while holds(&stream_files(node), canary.as_bytes()) {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the erased payload is still in node {node}'s stream files"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    conn.delete_stream(&name).expect("delete");
}

/// Opens the stream again, waiting out an election.
fn reopen(conn: &NatsConnection, name: &str) -> NatsLog {
    let started = Instant::now();
    loop {
        match NatsLog::open(conn, name, 3) {
            Ok(log) => return log,
            Err(e) if started.elapsed() < Duration::from_secs(30) => {
                eprintln!("reopening: {e}");
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(e) => panic!("the stream did not come back: {e}"),
        }
    }
}

/// The leader of a stream is killed with SIGKILL while a writer appends batches: every
/// acknowledged record is stored once, at its sequence, and appends go on after the
/// election (the retries are absorbed, none is stored twice).
#[test]
fn a_killed_stream_leader_loses_nothing_acknowledged() {
    let cluster = NatsCluster::private();
    let conn = connect(&cluster);
    let name = unique_stream("LEADER");
    let mut log = NatsLog::open(&conn, &name, 3).expect("open");
    let leader = log.leader().expect("info").expect("a leader");
    let node: usize = leader
        .trim_start_matches('n')
        .parse()
        .expect("node name n<i>");
    let mut acked: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let started = Instant::now();
    let mut killed_at = None;
    let mut failures = 0;
    let mut acked_after_kill = 0;
    let mut batch_no = 0u64;
    while started.elapsed() < Duration::from_secs(16) {
        if killed_at.is_none() && started.elapsed() > Duration::from_secs(2) {
            cluster.kill9(node);
            killed_at = Some(Instant::now());
        }
        let payloads: Vec<Vec<u8>> = (0..8)
            .map(|i| format!("batch {batch_no} record {i}").into_bytes())
            .collect();
        batch_no += 1;
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        match log.append_batch(&refs) {
            Ok(seqs) => {
                acked_after_kill += usize::from(killed_at.is_some());
                for (seq, p) in seqs.into_iter().zip(payloads) {
                    acked.insert(seq, p);
                }
            }
            Err(e) => {
                failures += 1;
                eprintln!("append failed ({e}); reopening");
                log = reopen(&conn, &name);
            }
        }
    }
    cluster.restart(node);
    let stored: BTreeMap<u64, Vec<u8>> = all(&log).into_iter().collect();
    for (seq, payload) in &acked {
        assert_eq!(
            stored.get(seq),
            Some(payload),
            "acknowledged record {seq} is missing or changed"
        );
    }
    let mut payloads: Vec<&Vec<u8>> = stored.values().collect();
    payloads.sort();
    payloads.dedup();
    assert_eq!(payloads.len(), stored.len(), "no record is stored twice");
    assert!(
        acked_after_kill > 0,
        "appends went on after the election ({} acknowledged, {failures} failures)",
        acked.len()
    );
    eprintln!(
        "{} records acknowledged, {} stored, {failures} failed appends",
        acked.len(),
        stored.len()
    );
}
