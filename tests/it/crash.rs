//! Crash safety of the real `episodic serve` binary: concurrent writes, deletes and
//! corrections over loopback, then SIGKILL at a random moment, restart, and check that the
//! recovered state agrees with every answer the server gave before it died.
//!
//! Rules checked after each restart:
//! - every acknowledged write (`201`/`202`) is present with exactly the content sent (unless
//!   it was acknowledged-deleted: then `GET` is `404` and `DELETE` returns its receipt);
//! - a write whose request errored is either absent or present and complete;
//! - a write refused with an explicit error status is absent;
//! - an acknowledged correction leaves its target `superseded` by it, and a present
//!   correction always has its target superseded (one log record);
//! - the timeline (all pages) lists exactly the live, active events; recall over an actor
//!   returns only live events of that actor (all of them when they fit in one page).
//!
//! `EPISODIC_CRASH_CYCLES` sets the number of kill/restart cycles (default 3, for CI); the
//! seed is `EPISODIC_CRASH_SEED` (default fixed). A summary line goes to stderr.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::blocking::Client;
use serde_json::{json, Value};

use crate::common::{all_pages, model_dir};

const ADMIN_KEY: &str = "crash-admin-Vb7Lq2Xz9Pw4Km8Rt3Nc6Hd1Jy";
const WORKERS: usize = 4;
const ACTORS: usize = 12;
const WORDS: &[&str] = &[
    "invoice",
    "renewal",
    "contract",
    "ticket",
    "escalated",
    "email",
    "staging",
    "production",
    "deploy",
    "refund",
    "meeting",
    "approval",
    "budget",
    "migration",
    "outage",
    "reminder",
];

/// How a request ended, as far as the client knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// A success status was received.
    Acked,
    /// The request errored (connection reset, refused, timeout): outcome unknown.
    Uncertain,
    /// An explicit error status was received: nothing may have been stored.
    Rejected,
}

#[derive(Debug, Clone)]
struct Tracked {
    body: Value,
    actor: String,
    write: Fate,
    deleted: Option<Fate>,
    /// The correction naming this event, and how that write ended.
    superseded_by: Option<(String, Fate)>,
    /// This event is a correction of that one.
    corrects: Option<String>,
    /// Last cycle in which a request concerned this event.
    touched: usize,
}

impl Tracked {
    fn usable(&self) -> bool {
        self.write == Fate::Acked && self.deleted.is_none()
    }
}

/// The events one worker owns (workers never touch each other's events, so each pool's
/// history is sequential and the expectation is exact).
#[derive(Debug, Default)]
struct Pool {
    events: BTreeMap<String, Tracked>,
}

#[derive(Debug, Default)]
struct Totals {
    acked_writes: usize,
    acked_corrections: usize,
    acked_deletes: usize,
    rejected: usize,
    uncertain_writes: usize,
    uncertain_present: usize,
    uncertain_deletes: usize,
    lost: usize,
    resurrected: usize,
    half_present: usize,
    other_violations: usize,
    unaudited: usize,
    max_timeline: usize,
}

/// The server child process; SIGKILLed when dropped (a failing test leaves no orphan).
struct Server {
    child: Option<Child>,
    base: String,
}

impl Server {
    fn start(data: &Path, logs: &Path, cycle: usize) -> Server {
        let port = free_port();
        let log = File::create(logs.join(format!("server-{cycle}.log"))).expect("server log");
        let child = Command::new(env!("CARGO_BIN_EXE_episodic"))
            .arg("serve")
            .env("EPISODIC_DATA_DIR", data)
            .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
            .env("EPISODIC_MODEL_DIR", model_dir())
            .env("EPISODIC_ADMIN_KEY", ADMIN_KEY)
            .env("EPISODIC_REFRESH_MS", "200")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn episodic");
        Server {
            child: Some(child),
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn wait_ready(&mut self, client: &Client, logs: &Path, cycle: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = std::fs::read_to_string(logs.join(format!("server-{cycle}.log")))
                        .unwrap_or_default();
                    panic!("cycle {cycle}: server exited before ready ({status}):\n{log}");
                }
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.base)).send() {
                if r.status().is_success() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("cycle {cycle}: server not ready in 60 s");
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("client")
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn new_body(rng: &mut StdRng, id: &str, n: usize) -> (Value, String) {
    let actor = format!("actor-{}", rng.gen_range(0..ACTORS));
    let words: Vec<&str> = (0..4)
        .map(|_| WORDS[rng.gen_range(0..WORDS.len())])
        .collect();
    let minute = n % 60;
    let hour = (n / 60) % 24;
    let day = 1 + (n / 1440) % 28;
    let body = json!({
        "eventId": id,
        "eventType": "user_preference_stated",
        "occurredAt": format!("2025-03-{day:02}T{hour:02}:{minute:02}:00Z"),
        "actorId": actor,
        "resourceRefs": [format!("res-{}", rng.gen_range(0..5))],
        "summary": format!("{id}: {}", words.join(" ")),
        "sourceRefs": [format!("ticket-{}", rng.gen_range(0..1000))],
        "sourceTrust": "user_provided",
        "confidence": "high",
        "privacyClass": "internal",
        "retention": {"deleteOnRequest": true}
    });
    (body, actor)
}

/// Outcome of a POST/DELETE: acknowledged, refused with a status, or unknown.
fn fate_of(resp: reqwest::Result<reqwest::blocking::Response>, ok: &[u16]) -> Fate {
    match resp {
        Ok(r) if ok.contains(&r.status().as_u16()) => {
            // Even if the body then fails to arrive, the server acknowledged the request.
            let _ = r.bytes();
            Fate::Acked
        }
        Ok(_) => Fate::Rejected,
        Err(_) => Fate::Uncertain,
    }
}

/// One worker: writes, corrections and deletes on its own pool until `stop`.
fn work(
    base: &str,
    key: &str,
    worker: usize,
    cycle: usize,
    seed: u64,
    mut pool: Pool,
    stop: &AtomicBool,
) -> Pool {
    let http = client();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let roll = rng.gen_range(0..100);
        let usable: Vec<String> = pool
            .events
            .iter()
            .filter(|(_, t)| t.usable())
            .map(|(id, _)| id.clone())
            .collect();
        if roll < 15 && !usable.is_empty() {
            let id = usable[rng.gen_range(0..usable.len())].clone();
            let resp = http
                .delete(format!("{base}/v1/events/{id}"))
                .bearer_auth(key)
                .send();
            let fate = fate_of(resp, &[200]);
            let t = pool.events.get_mut(&id).expect("tracked");
            t.touched = cycle;
            t.deleted = match fate {
                Fate::Rejected => None,
                other => Some(other),
            };
            if fate == Fate::Uncertain {
                break; // the server is gone: this was the worker's in-flight request
            }
            continue;
        }
        let id = format!("w{worker}-c{cycle}-{n}");
        let (mut body, actor) = new_body(&mut rng, &id, cycle * 10_000 + n);
        let target = if roll < 30 {
            let open: Vec<&String> = usable
                .iter()
                .filter(|u| pool.events[*u].superseded_by.is_none())
                .collect();
            (!open.is_empty()).then(|| open[rng.gen_range(0..open.len())].clone())
        } else {
            None
        };
        if let Some(old) = &target {
            body["supersedesEventIds"] = json!([old]);
        }
        let resp = http
            .post(format!("{base}/v1/events"))
            .bearer_auth(key)
            .json(&body)
            .send();
        let fate = fate_of(resp, &[201, 202]);
        if let Some(old) = &target {
            if fate != Fate::Rejected {
                let t = pool.events.get_mut(old).expect("tracked");
                t.superseded_by = Some((id.clone(), fate));
                t.touched = cycle;
            }
        }
        pool.events.insert(
            id,
            Tracked {
                body,
                actor,
                write: fate,
                deleted: None,
                superseded_by: None,
                corrects: target,
                touched: cycle,
            },
        );
        if fate == Fate::Uncertain {
            break; // the server is gone: this was the worker's in-flight request
        }
    }
    pool
}

/// What the restarted server says about one event.
#[derive(Debug, Clone)]
enum Seen {
    Absent,
    Present(Value),
}

fn get_event(http: &Client, base: &str, key: &str, id: &str) -> Seen {
    let r = http
        .get(format!("{base}/v1/events/{id}"))
        .bearer_auth(key)
        .send()
        .expect("GET after restart");
    match r.status().as_u16() {
        404 => Seen::Absent,
        200 => Seen::Present(r.json().expect("event json")),
        s => panic!("GET {id}: unexpected status {s}"),
    }
}

/// The stored event equals what was sent (every sent field, as sent).
fn same_content(sent: &Value, stored: &Value) -> bool {
    let event = stored.get("event").unwrap_or(stored);
    sent.as_object()
        .expect("object body")
        .iter()
        .all(|(k, v)| event.get(k) == Some(v))
}

fn status_of(stored: &Value) -> String {
    let event = stored.get("event").unwrap_or(stored);
    event["status"].as_str().unwrap_or("").to_string()
}

fn timeline_all(http: &Client, base: &str, key: &str) -> Vec<Value> {
    all_pages(http, &format!("{base}/v1/timeline"), key, "events", 500)
}

/// Checks the restarted server against the pools, resolving uncertain outcomes.
fn verify(
    http: &Client,
    base: &str,
    key: &str,
    pools: &mut [Pool],
    cycle: usize,
    rng: &mut StdRng,
    totals: &mut Totals,
) -> Vec<String> {
    let mut bad = Vec::new();
    let timeline = timeline_all(http, base, key);
    let mut listed: HashMap<String, Value> = HashMap::new();
    for e in &timeline {
        let id = e["eventId"].as_str().expect("eventId").to_string();
        if listed.insert(id.clone(), e.clone()).is_some() {
            bad.push(format!("timeline lists {id} twice"));
        }
    }
    totals.max_timeline = totals.max_timeline.max(timeline.len());
    // Observe: timeline entries are active and present; everything else that concerns
    // this cycle, is uncertain, or is sampled is fetched individually.
    let mut seen: HashMap<String, Seen> = HashMap::new();
    for pool in pools.iter() {
        for (id, t) in &pool.events {
            if let Some(e) = listed.get(id) {
                seen.insert(id.clone(), Seen::Present(e.clone()));
                continue;
            }
            let uncertain = t.write == Fate::Uncertain
                || t.deleted == Some(Fate::Uncertain)
                || matches!(t.superseded_by, Some((_, Fate::Uncertain)));
            let expected_listed = t.usable() && t.superseded_by.is_none();
            if uncertain || expected_listed || t.touched == cycle || rng.gen_bool(0.1) {
                seen.insert(id.clone(), get_event(http, base, key, id));
            }
        }
    }
    // Writes and deletes.
    for pool in pools.iter_mut() {
        for (id, t) in pool.events.iter_mut() {
            let Some(s) = seen.get(id) else { continue };
            match (t.write, t.deleted, s) {
                (Fate::Rejected, _, Seen::Present(_)) => {
                    bad.push(format!("{id}: refused write is present"));
                    totals.other_violations += 1;
                }
                (Fate::Rejected, _, Seen::Absent) => {}
                (Fate::Uncertain, _, Seen::Absent) => t.write = Fate::Rejected,
                (Fate::Uncertain, _, Seen::Present(v)) => {
                    totals.uncertain_present += 1;
                    if !same_content(&t.body, v) {
                        bad.push(format!("{id}: unacknowledged write half-present: {v}"));
                        totals.half_present += 1;
                    }
                    t.write = Fate::Acked;
                    if t.deleted == Some(Fate::Uncertain) {
                        t.deleted = None;
                    }
                }
                (Fate::Acked, None, Seen::Absent) => {
                    bad.push(format!("{id}: acknowledged write lost"));
                    totals.lost += 1;
                }
                (Fate::Acked, Some(Fate::Acked), Seen::Present(_)) => {
                    bad.push(format!("{id}: acknowledged delete undone"));
                    totals.resurrected += 1;
                }
                (Fate::Acked, Some(Fate::Acked), Seen::Absent) => {
                    if t.touched == cycle {
                        check_receipt(http, base, key, id, &mut bad);
                    }
                }
                (Fate::Acked, Some(_), Seen::Absent) => {
                    t.deleted = Some(Fate::Acked);
                    check_receipt(http, base, key, id, &mut bad);
                }
                (Fate::Acked, Some(_), Seen::Present(v))
                | (Fate::Acked, None, Seen::Present(v)) => {
                    t.deleted = None;
                    if !same_content(&t.body, v) {
                        bad.push(format!("{id}: stored content differs: {v}"));
                        totals.other_violations += 1;
                    }
                }
            }
        }
    }
    // Corrections: resolve from the correction's own fate, then check the target.
    for pool in pools.iter_mut() {
        let fates: HashMap<String, Fate> = pool
            .events
            .iter()
            .map(|(id, t)| (id.clone(), t.write))
            .collect();
        for (id, t) in pool.events.iter_mut() {
            if let Some((by, _)) = t.superseded_by.clone() {
                match fates.get(&by) {
                    Some(Fate::Acked) => t.superseded_by = Some((by.clone(), Fate::Acked)),
                    Some(Fate::Rejected) => t.superseded_by = None,
                    _ => {}
                }
            }
            let Some(Seen::Present(v)) = seen.get(id) else {
                continue;
            };
            let status = status_of(v);
            let want = match &t.superseded_by {
                Some((_, Fate::Acked)) => "superseded",
                Some(_) => continue,
                None => "active",
            };
            if status != want {
                bad.push(format!("{id}: status {status}, expected {want}: {v}"));
                totals.other_violations += 1;
            }
            if let Some((by, Fate::Acked)) = &t.superseded_by {
                let event = v.get("event").unwrap_or(v);
                if event["supersededBy"].as_str() != Some(by.as_str()) {
                    bad.push(format!("{id}: supersededBy is not {by}: {v}"));
                    totals.other_violations += 1;
                }
            }
        }
    }
    // The timeline lists exactly the live active events.
    let expected: HashSet<&String> = pools
        .iter()
        .flat_map(|p| p.events.iter())
        .filter(|(_, t)| t.usable() && t.superseded_by.is_none())
        .map(|(id, _)| id)
        .collect();
    let listed_ids: HashSet<&String> = listed.keys().collect();
    for id in expected.difference(&listed_ids) {
        bad.push(format!(
            "{id}: live and active but missing from the timeline"
        ));
        totals.other_violations += 1;
    }
    for id in listed_ids.difference(&expected) {
        bad.push(format!("{id}: in the timeline but not live and active"));
        totals.other_violations += 1;
    }
    // The audit trail names every acknowledged write and deletion (no reply went out
    // before its entry was durable).
    let audited = audit_all(http, base, key);
    for pool in pools.iter() {
        for (id, t) in &pool.events {
            if t.write == Fate::Acked && !audited.contains(&("written", id.clone())) {
                bad.push(format!("{id}: acknowledged write has no audit entry"));
                totals.unaudited += 1;
            }
            if t.deleted == Some(Fate::Acked) && !audited.contains(&("deleted", id.clone())) {
                bad.push(format!("{id}: acknowledged delete has no audit entry"));
                totals.unaudited += 1;
            }
        }
    }
    // Recall agrees with the log for a sample of actors.
    for _ in 0..3 {
        let actor = format!("actor-{}", rng.gen_range(0..ACTORS));
        let want: HashSet<&String> = pools
            .iter()
            .flat_map(|p| p.events.iter())
            .filter(|(_, t)| t.usable() && t.superseded_by.is_none() && t.actor == actor)
            .map(|(id, _)| id)
            .collect();
        let resp: Value = http
            .post(format!("{base}/v1/recall"))
            .bearer_auth(key)
            .json(&json!({
                "query": "renewal contract invoice",
                "scope": {"actorIds": [actor]},
                "limit": 100,
                "includeStale": true
            }))
            .send()
            .expect("recall")
            .json()
            .expect("json");
        let got: HashSet<String> = resp["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|h| h["event"]["eventId"].as_str().expect("id").to_string())
            .collect();
        for id in &got {
            if !want.contains(id) {
                bad.push(format!(
                    "recall({actor}) returned {id}, not live and active"
                ));
                totals.other_violations += 1;
            }
        }
        if want.len() <= 100 && got.len() != want.len() {
            bad.push(format!(
                "recall({actor}) returned {} events, {} are live and active",
                got.len(),
                want.len()
            ));
            totals.other_violations += 1;
        }
    }
    bad
}

/// `("written", id)` for every write or correction entry and `("deleted", id)` for every
/// deletion entry of the key's tenant.
fn audit_all(http: &Client, base: &str, key: &str) -> HashSet<(&'static str, String)> {
    all_pages(http, &format!("{base}/v1/audit"), key, "entries", 1000)
        .iter()
        .filter_map(|e| {
            let kind = match e["action"].as_str() {
                Some("write" | "correct") if e["detail"]["replayed"] != true => "written",
                Some("deleted") => "deleted",
                _ => return None,
            };
            Some((kind, e["eventIds"][0].as_str()?.to_string()))
        })
        .collect()
}

fn check_receipt(http: &Client, base: &str, key: &str, id: &str, bad: &mut Vec<String>) {
    let r = http
        .delete(format!("{base}/v1/events/{id}"))
        .bearer_auth(key)
        .send()
        .expect("DELETE after restart");
    let status = r.status().as_u16();
    let v: Value = r.json().unwrap_or(Value::Null);
    if status != 200 || v["eventId"].as_str() != Some(id) {
        bad.push(format!("{id}: deleted, but DELETE answers {status} {v}"));
    }
}

fn create_key(http: &Client, base: &str) -> String {
    let v: Value = http
        .post(format!("{base}/v1/admin/keys"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({"tenantId": "crash", "roles": ["writer", "reader", "operator"]}))
        .send()
        .expect("create key")
        .json()
        .expect("json");
    v["key"].as_str().expect("key").to_string()
}

fn tally(pools: &[Pool], totals: &mut Totals, cycle: usize) {
    for t in pools.iter().flat_map(|p| p.events.values()) {
        if t.touched != cycle {
            continue;
        }
        if t.body["eventId"]
            .as_str()
            .is_some_and(|id| id.contains(&format!("-c{cycle}-")))
        {
            match t.write {
                Fate::Acked => {
                    totals.acked_writes += 1;
                    if t.corrects.is_some() {
                        totals.acked_corrections += 1;
                    }
                }
                Fate::Uncertain => totals.uncertain_writes += 1,
                Fate::Rejected => totals.rejected += 1,
            }
        }
        match t.deleted {
            Some(Fate::Acked) => totals.acked_deletes += 1,
            Some(Fate::Uncertain) => totals.uncertain_deletes += 1,
            _ => {}
        }
    }
}

#[test]
fn sigkill_never_loses_an_acknowledged_write() {
    let cycles = env_u64("EPISODIC_CRASH_CYCLES", 3) as usize;
    let seed = env_u64("EPISODIC_CRASH_SEED", 0x5eed_c0de);
    let dir = tempfile::tempdir().expect("tmp");
    let data: PathBuf = dir.path().join("data");
    let logs: PathBuf = dir.path().join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let mut rng = StdRng::seed_from_u64(seed);
    let http = client();
    let mut pools: Vec<Pool> = (0..WORKERS).map(|_| Pool::default()).collect();
    let mut totals = Totals::default();
    let mut key = String::new();
    let started = Instant::now();
    for cycle in 0..=cycles {
        let mut server = Server::start(&data, &logs, cycle);
        server.wait_ready(&http, &logs, cycle);
        if cycle == 0 {
            key = create_key(&http, &server.base);
        } else {
            let bad = verify(
                &http,
                &server.base,
                &key,
                &mut pools,
                cycle - 1,
                &mut rng,
                &mut totals,
            );
            assert!(
                bad.is_empty(),
                "after kill {cycle} (seed {seed}, logs {}):\n{}",
                logs.display(),
                bad.join("\n")
            );
        }
        if cycle == cycles {
            break;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = std::mem::take(&mut pools)
            .into_iter()
            .enumerate()
            .map(|(w, pool)| {
                let base = server.base.clone();
                let key = key.clone();
                let stop = Arc::clone(&stop);
                let wseed = rng.gen::<u64>();
                std::thread::spawn(move || work(&base, &key, w, cycle, wseed, pool, &stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..1200)));
        server.kill();
        stop.store(true, Ordering::SeqCst);
        pools = handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect();
        tally(&pools, &mut totals, cycle);
    }
    let t = &totals;
    eprintln!(
        "crash safety: {cycles} SIGKILL cycles in {:.1} s (seed {seed}): {} acknowledged writes \
         ({} corrections), {} acknowledged deletes, {} writes and {} deletes in flight at the \
         kill ({} of those writes survived, all complete), {} refused; largest timeline {} \
         events; acknowledged writes lost: {}, deleted events back: {}, half-present: {}, \
         acknowledged operations without an audit entry: {}, other violations: {}",
        started.elapsed().as_secs_f64(),
        t.acked_writes,
        t.acked_corrections,
        t.acked_deletes,
        t.uncertain_writes,
        t.uncertain_deletes,
        t.uncertain_present,
        t.rejected,
        t.max_timeline,
        t.lost,
        t.resurrected,
        t.half_present,
        t.unaudited,
        t.other_violations,
    );
    assert_eq!(t.lost, 0);
    assert!(t.acked_writes > 0, "the harness acknowledged no write");
}
