//! HTTP load benchmark against the real `episodic serve` binary on loopback, with the real
//! embedding model (so every recall includes embedding its query text, and every write its
//! summary).
//!
//! Run: `cargo bench --bench http_load` (cargo builds the `episodic` binary with the bench
//! profile first; `HTTP_LOAD_BIN` points at another build, e.g. `target/release/episodic`
//! after `cargo build --release`). Needs the model files: `bash models/fetch.sh`.
//!
//! Steps: a temporary data directory is filled with `HTTP_LOAD_PRELOAD` events (default
//! 3000) through the `import` subcommand (validation, policy, batched embedding, group
//! commit), timed; the server is started on it and timed until `/readyz` answers 200
//! (restart to ready: model load, log replay, index open); a key is provisioned through
//! `POST /v1/admin/keys` with the admin key the server wrote into the data directory; then,
//! for each operation (`recall`, `write`) and each concurrency (`1,8,32`), closed-loop clients
//! send requests back to back for `HTTP_LOAD_SECS` seconds (default 10) after a one-second
//! warm-up. Recalls are text queries (`POST /v1/recall`), half of them scoped to an actor;
//! writes are new events (`POST /v1/events`, acknowledged after fsync).
//!
//! Reported per cell: requests, non-2xx responses and transport errors (both expected 0),
//! throughput, p50/p90/p99 latency and the server's CPU time per request (from
//! `/proc/<pid>/stat`; steadier than latency on a shared machine). Results go to stdout as a
//! table and to `$CARGO_TARGET_DIR/http_load.json` (or `target/http_load.json`).
//!
//! Environment: `HTTP_LOAD_SECS`, `HTTP_LOAD_CONCURRENCY` (comma list), `HTTP_LOAD_OPS`
//! (`recall,write`; also `batch`: `POST /v1/events:batch` of `HTTP_LOAD_BATCH` new events,
//! default 64, counted only when answered 201, reported with `eventsPerSecond`), `HTTP_LOAD_PRELOAD`, `HTTP_LOAD_BIN`, `HTTP_LOAD_MODEL_DIR`,
//! `HTTP_LOAD_OUT` (JSON path), `HTTP_LOAD_KEEP` (keep the data directory and print it).
//! `HTTP_LOAD_DATA_DIR` serves an existing data directory in place instead of a preloaded
//! one (the write cells add to it; for instance a copy of the grid bench's ingested 1M
//! engine, `GRID_ENGINE_DIR`), with `HTTP_LOAD_TENANT` (default `load`) and
//! `HTTP_LOAD_ACTOR_PREFIX` (default `actor-`; the grid's actors are `a0`..`a19`) naming its
//! tenant and actors. The server reads its own `EPISODIC_*` settings from the environment;
//! with `EPISODIC_PARTITIONED_RECALL` set (partitions are on by default: the variable only
//! asks the load to wait for them), the load starts once a tenant-wide recall takes
//! the partition path (the partitions are built in the background after ready).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use common::{
    dir_bytes, status_kib, ACTORS, CHANNELS, PROJECTS, QUESTIONS, SUBJECTS, TYPES, VERBS,
};

/// The tenant the key is for: `HTTP_LOAD_TENANT`, default `load`.
fn tenant() -> String {
    std::env::var("HTTP_LOAD_TENANT").unwrap_or_else(|_| "load".into())
}

/// Actor `i`'s id: `HTTP_LOAD_ACTOR_PREFIX` (default `actor-`, read once) then `i`.
fn actor(i: usize) -> String {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        std::env::var("HTTP_LOAD_ACTOR_PREFIX").unwrap_or_else(|_| "actor-".into())
    });
    format!("{prefix}{i}")
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// The server binary: `HTTP_LOAD_BIN`, else the one cargo built for this bench, else
/// `<target>/release/episodic`.
fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("HTTP_LOAD_BIN") {
        return PathBuf::from(p);
    }
    if let Some(p) = option_env!("CARGO_BIN_EXE_episodic") {
        if Path::new(p).is_file() {
            return PathBuf::from(p);
        }
    }
    target_dir().join("release").join("episodic")
}

fn model_dir() -> PathBuf {
    std::env::var_os("HTTP_LOAD_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
}

/// A realistic one-sentence event summary.
fn summary(rng: &mut StdRng, actor: usize, i: usize) -> String {
    format!(
        "User actor-{actor} {} {} {} (note {i}).",
        VERBS[rng.gen_range(0..VERBS.len())],
        SUBJECTS[rng.gen_range(0..SUBJECTS.len())],
        CHANNELS[rng.gen_range(0..CHANNELS.len())],
    )
}

fn event_body(rng: &mut StdRng, i: usize, tag: &str) -> Value {
    let actor_n = rng.gen_range(0..ACTORS);
    let day = rng.gen_range(1..28);
    let month = rng.gen_range(1..13);
    json!({
        "eventType": TYPES[rng.gen_range(0..TYPES.len())],
        "occurredAt": format!("2025-{month:02}-{day:02}T{:02}:00:00Z", rng.gen_range(0..24)),
        "actorId": actor(actor_n),
        "projectId": format!("project-{}", rng.gen_range(0..PROJECTS)),
        "resourceRefs": [format!("res-{}", rng.gen_range(0..200))],
        "summary": summary(rng, actor_n, i),
        "sourceRefs": [format!("{tag}-{i}")],
        "sourceTrust": "user_provided",
        "confidence": "high",
        "privacyClass": "internal",
        "retention": {"deleteOnRequest": true}
    })
}

fn recall_body(rng: &mut StdRng) -> Value {
    let subject = SUBJECTS[rng.gen_range(0..SUBJECTS.len())];
    let query = QUESTIONS[rng.gen_range(0..QUESTIONS.len())].replace("{}", subject);
    if rng.gen_bool(0.5) {
        json!({"query": query, "limit": 10,
               "scope": {"actorIds": [actor(rng.gen_range(0..ACTORS))]}})
    } else {
        json!({"query": query, "limit": 10})
    }
}

/// Server process, killed (SIGTERM, then SIGKILL) on drop.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn base_command(bin: &Path, data: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env("EPISODIC_DATA_DIR", data)
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env_remove("EPISODIC_CONFIG")
        .env_remove("EPISODIC_ADMIN_KEY")
        .env_remove("EPISODIC_LISTEN")
        .env("RUST_LOG", "warn");
    cmd
}

/// Starts `serve` and waits for `/readyz`; returns the server and the time to ready.
async fn start(bin: &Path, data: &Path, client: &reqwest::Client) -> (Server, f64) {
    let port = free_port();
    let log = std::fs::File::create(data.with_extension("server.log")).expect("server log");
    let started = Instant::now();
    let child = base_command(bin, data)
        .arg("serve")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let mut server = Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    loop {
        if let Ok(r) = client.get(format!("{}/readyz", server.base)).send().await {
            if r.status().is_success() {
                break;
            }
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "server exited with {status}; see {}",
                data.with_extension("server.log").display()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "server not ready in 300 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready = started.elapsed().as_secs_f64();
    (server, ready)
}

/// User + system CPU seconds of process `pid` so far.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // `rest` starts at field 3 (state), so field n is at index n - 3.
    (ticks(11) + ticks(12)) / clock_ticks()
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(&pid.to_string(), "VmRSS")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Recall,
    Write,
    /// `POST /v1/events:batch` of [`batch_size`] new events.
    Batch,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Recall => "recall",
            Op::Write => "write",
            Op::Batch => "batch",
        }
    }

    /// Events one request writes.
    fn events(self) -> usize {
        match self {
            Op::Recall => 0,
            Op::Write => 1,
            Op::Batch => batch_size(),
        }
    }
}

/// Events per batch request: `HTTP_LOAD_BATCH`, default 64.
fn batch_size() -> usize {
    std::env::var("HTTP_LOAD_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

#[derive(Default)]
struct Tally {
    lat_ms: Vec<f64>,
    non_2xx: usize,
    transport_errors: usize,
    first_error: Option<String>,
}

/// One closed-loop client: sends requests back to back until `until`; latencies are kept
/// only after `measure_from`.
async fn client_loop(
    client: reqwest::Client,
    url: String,
    key: Arc<String>,
    op: Op,
    seed: u64,
    measure_from: Instant,
    until: Instant,
) -> Tally {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let mut i = 0usize;
    while Instant::now() < until {
        let body = match op {
            Op::Recall => recall_body(&mut rng),
            Op::Write => event_body(&mut rng, i, &format!("load-{seed}")),
            Op::Batch => {
                let events: Vec<Value> = (0..batch_size())
                    .map(|j| event_body(&mut rng, i * batch_size() + j, &format!("load-{seed}")))
                    .collect();
                json!({ "events": events })
            }
        };
        i += 1;
        let t = Instant::now();
        let sent = client
            .post(&url)
            .bearer_auth(key.as_str())
            .json(&body)
            .send()
            .await;
        let outcome = match sent {
            Ok(r) => {
                let status = r.status();
                let text = r.bytes().await;
                match text {
                    // A batch counts only when every item was stored (201, not 207).
                    Ok(_) if status.is_success() && (op != Op::Batch || status.as_u16() == 201) => {
                        Ok(())
                    }
                    Ok(b) => Err((
                        false,
                        format!(
                            "{status}: {}",
                            String::from_utf8_lossy(&b[..b.len().min(300)])
                        ),
                    )),
                    Err(e) => Err((true, e.to_string())),
                }
            }
            Err(e) => Err((true, e.to_string())),
        };
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if t < measure_from {
            continue;
        }
        match outcome {
            Ok(()) => tally.lat_ms.push(ms),
            Err((transport, msg)) => {
                if transport {
                    tally.transport_errors += 1;
                } else {
                    tally.non_2xx += 1;
                }
                tally.first_error.get_or_insert(msg);
            }
        }
    }
    tally
}

struct Cell {
    op: Op,
    concurrency: usize,
    requests: usize,
    non_2xx: usize,
    transport_errors: usize,
    secs: f64,
    rps: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    cpu_ms_per_req: f64,
}

async fn run_cell(
    server: &Server,
    key: &Arc<String>,
    op: Op,
    concurrency: usize,
    secs: f64,
) -> Cell {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    let url = match op {
        Op::Recall => format!("{}/v1/recall", server.base),
        Op::Write => format!("{}/v1/events", server.base),
        Op::Batch => format!("{}/v1/events:batch", server.base),
    };
    let warmup = Duration::from_secs(1);
    let start = Instant::now();
    let measure_from = start + warmup;
    let until = measure_from + Duration::from_secs_f64(secs);
    let pid = server.child.id();
    let mut handles = Vec::new();
    for c in 0..concurrency {
        handles.push(tokio::spawn(client_loop(
            client.clone(),
            url.clone(),
            Arc::clone(key),
            op,
            (concurrency * 1000 + c) as u64
                + match op {
                    Op::Recall => 0,
                    Op::Write => 1 << 20,
                    Op::Batch => 1 << 21,
                },
            measure_from,
            until,
        )));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu0 = cpu_seconds(pid);
    let mut all = Tally::default();
    for h in handles {
        let t = h.await.expect("client task");
        all.lat_ms.extend(t.lat_ms);
        all.non_2xx += t.non_2xx;
        all.transport_errors += t.transport_errors;
        if all.first_error.is_none() {
            all.first_error = t.first_error;
        }
    }
    // The measured window is [measure_from, until]; the last requests finish a little later.
    let wall = measure_from.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu0;
    if let Some(e) = &all.first_error {
        eprintln!("  first error ({} c={concurrency}): {e}", op.name());
    }
    let mut lat = all.lat_ms;
    lat.sort_by(f64::total_cmp);
    let requests = lat.len() + all.non_2xx + all.transport_errors;
    Cell {
        op,
        concurrency,
        requests,
        non_2xx: all.non_2xx,
        transport_errors: all.transport_errors,
        secs: wall,
        rps: lat.len() as f64 / wall,
        p50: percentile(&lat, 0.5),
        p90: percentile(&lat, 0.9),
        p99: percentile(&lat, 0.99),
        max: lat.last().copied().unwrap_or(f64::NAN),
        cpu_ms_per_req: cpu * 1e3 / requests.max(1) as f64,
    }
}

async fn provision_key(client: &reqwest::Client, server: &Server, data: &Path) -> String {
    let admin = std::fs::read_to_string(data.join("admin.key")).expect("admin.key in data dir");
    let resp = client
        .post(format!("{}/v1/admin/keys", server.base))
        .bearer_auth(admin.trim())
        .json(&json!({"tenantId": tenant(), "roles": ["writer", "reader"]}))
        .send()
        .await
        .expect("admin keys");
    assert!(resp.status().is_success(), "key: {}", resp.status());
    let v: Value = resp.json().await.expect("key json");
    v["key"].as_str().expect("key").to_string()
}

/// With partitioned recall configured, waits (up to 300 s) until a tenant-wide recall takes
/// the partition path, so that the load does not measure the build.
async fn wait_for_partitions(client: &reqwest::Client, server: &Server, key: &str) {
    let on = std::env::var("EPISODIC_PARTITIONED_RECALL")
        .is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if !on {
        return;
    }
    let started = Instant::now();
    loop {
        let resp = client
            .post(format!("{}/v1/recall", server.base))
            .bearer_auth(key)
            .json(&json!({"query": "weekly status update", "limit": 10}))
            .send()
            .await
            .expect("recall");
        assert!(resp.status().is_success(), "recall: {}", resp.status());
        let v: Value = resp.json().await.expect("recall json");
        if v["stats"]["path"] == "partition" {
            eprintln!(
                "partitions answer tenant-wide recalls {:.1} s after the key",
                started.elapsed().as_secs_f64()
            );
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no partition path within 300 s (last path {})",
            v["stats"]["path"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn preload(bin: &Path, data: &Path, n: usize) -> (f64, Value) {
    let file = data.with_extension("preload.jsonl");
    let mut rng = StdRng::seed_from_u64(2026);
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&event_body(&mut rng, i, "preload").to_string());
        text.push('\n');
    }
    std::fs::write(&file, text).expect("preload file");
    let started = Instant::now();
    let out = base_command(bin, data)
        .arg("import")
        .arg("--tenant")
        .arg(tenant())
        .arg("--file")
        .arg(&file)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run import");
    let secs = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "import failed: {}", out.status);
    let summary: Value = serde_json::from_slice(&out.stdout).expect("import summary json");
    assert_eq!(
        summary["allowed"].as_u64(),
        Some(n as u64),
        "every preload event allowed: {summary}"
    );
    (secs, summary)
}

fn main() {
    // cargo passes `--bench`; there are no other arguments.
    let secs: f64 = env_or("HTTP_LOAD_SECS", 10.0);
    let n: usize = env_or("HTTP_LOAD_PRELOAD", 3000);
    let concurrency: Vec<usize> = std::env::var("HTTP_LOAD_CONCURRENCY")
        .unwrap_or_else(|_| "1,8,32".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let ops: Vec<Op> = std::env::var("HTTP_LOAD_OPS")
        .unwrap_or_else(|_| "recall,write".into())
        .split(',')
        .filter_map(|s| match s.trim() {
            "recall" => Some(Op::Recall),
            "write" => Some(Op::Write),
            "batch" => Some(Op::Batch),
            _ => None,
        })
        .collect();
    let bin = server_bin();
    assert!(
        bin.is_file(),
        "no server binary at {} (run `cargo build --release` or set HTTP_LOAD_BIN)",
        bin.display()
    );
    assert!(
        model_dir().join("files").join("model.onnx").is_file(),
        "no model in {} (run `bash models/fetch.sh`)",
        model_dir().display()
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let existing = std::env::var_os("HTTP_LOAD_DATA_DIR").map(PathBuf::from);
    let data = existing.clone().unwrap_or_else(|| tmp.path().join("data"));
    eprintln!("server {}, data {}", bin.display(), data.display());

    let import_s = match existing {
        Some(_) => {
            eprintln!("serving the existing directory: nothing preloaded");
            None
        }
        None => {
            let (import_s, _) = preload(&bin, &data, n);
            eprintln!(
                "preloaded {n} events through `import` in {import_s:.1} s ({:.0} events/s, real model)",
                n as f64 / import_s
            );
            Some(import_s)
        }
    };
    let n = if import_s.is_some() { n } else { 0 };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let (server, ready_s) = rt.block_on(start(&bin, &data, &probe));
    let pid = server.child.id();
    let rss_ready = rss_kib(pid);
    let disk = dir_bytes(&data);
    eprintln!(
        "ready in {ready_s:.2} s ({}); server VmRSS {:.1} MiB, data dir {:.1} MiB",
        if import_s.is_some() {
            format!("{n} events")
        } else {
            "existing directory".into()
        },
        rss_ready as f64 / 1024.0,
        disk as f64 / 1048576.0
    );
    let key = Arc::new(rt.block_on(provision_key(&probe, &server, &data)));
    rt.block_on(wait_for_partitions(&probe, &server, &key));

    println!(
        "{:<7} {:>5} {:>8} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "op",
        "conc",
        "requests",
        "non2xx",
        "neterr",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "cpu ms/req"
    );
    let mut cells = Vec::new();
    for op in &ops {
        for c in &concurrency {
            let cell = rt.block_on(run_cell(&server, &key, *op, *c, secs));
            println!(
                "{:<7} {:>5} {:>8} {:>6} {:>7} {:>9.1} {:>9.2} {:>9.2} {:>9.2} {:>10.2}",
                cell.op.name(),
                cell.concurrency,
                cell.requests,
                cell.non_2xx,
                cell.transport_errors,
                cell.rps,
                cell.p50,
                cell.p90,
                cell.p99,
                cell.cpu_ms_per_req
            );
            cells.push(cell);
        }
    }
    let rss_end = rss_kib(pid);
    let events_end = n + cells
        .iter()
        .map(|c| (c.requests - c.non_2xx - c.transport_errors) * c.op.events())
        .sum::<usize>();
    eprintln!(
        "server VmRSS {:.1} MiB at the end (~{events_end}+ events)",
        rss_end as f64 / 1024.0
    );
    drop(server);

    let report = json!({
        "preloadEvents": n,
        "importSeconds": import_s,
        "importEventsPerSecond": import_s.map(|s| n as f64 / s),
        "dataDir": if import_s.is_some() { Value::Null } else { json!(data.display().to_string()) },
        "readySeconds": ready_s,
        "rssReadyKiB": rss_ready,
        "rssEndKiB": rss_end,
        "dataDirBytes": disk,
        "secondsPerCell": secs,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cells": cells.iter().map(|c| json!({
            "op": c.op.name(), "concurrency": c.concurrency, "requests": c.requests,
            "non2xx": c.non_2xx, "transportErrors": c.transport_errors, "seconds": c.secs,
            "requestsPerSecond": c.rps, "eventsPerSecond": c.rps * c.op.events() as f64, "p50Ms": c.p50, "p90Ms": c.p90, "p99Ms": c.p99,
            "maxMs": c.max, "serverCpuMsPerRequest": c.cpu_ms_per_req,
        })).collect::<Vec<_>>(),
    });
    let out = std::env::var_os("HTTP_LOAD_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("http_load.json"));
    if let Some(parent) = out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    std::fs::write(&out, serde_json::to_string_pretty(&report).expect("json")).expect("write");
    eprintln!("written {}", out.display());
    if std::env::var_os("HTTP_LOAD_KEEP").is_some() {
        let kept = tmp.keep();
        eprintln!("kept {}", kept.display());
    }
    let errors: usize = cells.iter().map(|c| c.non_2xx + c.transport_errors).sum();
    if errors > 0 {
        eprintln!("{errors} failed requests (see the first error of each cell above)");
        std::process::exit(1);
    }
}
