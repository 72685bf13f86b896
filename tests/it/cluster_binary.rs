//! The real `episodic serve` binary in cluster mode, 2 nodes on a real 3-node NATS cluster:
//! any node answers for any tenant exactly as the owner does, tenants stay apart across
//! nodes, keys made on one node work on the other, the owner's death (`kill -9`) costs a
//! lease TTL plus a replay and loses no acknowledged event or pending review, and an owner
//! paused past its lease (SIGSTOP, then SIGCONT) has its next write refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{json, Value};

use crate::common::{event, model_dir};
use crate::nats_cluster::{shared, unique_stream};
use crate::server_binary::{free_port, wait_ready};

/// The tests of this file run one at a time: each runs several servers, which on a small
/// machine would otherwise starve each other's lease renewals.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The admin key every node is given.
const ADMIN: &str = "cluster-admin-Key-7f3a9c2e51b84d06a2e9f4c7b1d3e8a5";
const SHARDS: u32 = 4;
const TTL_MS: u64 = 3000;

/// One `episodic serve` process of a cluster.
pub struct EpisodicNode {
    pub id: String,
    pub base: String,
    port: u16,
    dir: PathBuf,
    cluster: String,
    nats: String,
    ttl_ms: u64,
    child: Option<Child>,
}

impl EpisodicNode {
    /// Starts node `id` of `cluster` with its data under `root/<id>`. The first node is
    /// configured by flags, the others by environment variables (both are the contract).
    pub fn start(root: &Path, cluster: &str, nats: &str, id: &str) -> EpisodicNode {
        Self::start_with_ttl(root, cluster, nats, id, TTL_MS)
    }

    /// As [`EpisodicNode::start`], with a lease TTL of `ttl_ms`.
    pub fn start_with_ttl(
        root: &Path,
        cluster: &str,
        nats: &str,
        id: &str,
        ttl_ms: u64,
    ) -> EpisodicNode {
        let port = free_port();
        let mut node = EpisodicNode {
            id: id.to_string(),
            base: format!("http://127.0.0.1:{port}"),
            port,
            dir: root.join(id),
            cluster: cluster.to_string(),
            nats: nats.to_string(),
            ttl_ms,
            child: None,
        };
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        std::fs::create_dir_all(&self.dir).expect("node dir");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_episodic"));
        cmd.arg("serve");
        if self.id == "n1" {
            cmd.args(["--cluster-nats", &self.nats, "--node-id", &self.id])
                .args(["--advertise-url", &self.base]);
        } else {
            cmd.env("EPISODIC_CLUSTER_NATS", &self.nats)
                .env("EPISODIC_NODE_ID", &self.id)
                .env("EPISODIC_ADVERTISE_URL", &self.base);
        }
        let child = cmd
            .args(["--cluster-shards", &SHARDS.to_string()])
            .env("EPISODIC_CLUSTER_NAME", &self.cluster)
            .env("EPISODIC_CLUSTER_LEASE_TTL_MS", self.ttl_ms.to_string())
            .env("EPISODIC_ADMIN_KEY", ADMIN)
            .env("EPISODIC_DATA_DIR", &self.dir)
            .env("EPISODIC_LISTEN", format!("127.0.0.1:{}", self.port))
            .env("EPISODIC_MODEL_DIR", model_dir())
            .env("EPISODIC_CPU_THREADS", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn episodic");
        self.child = Some(child);
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `signal` (`-KILL`, `-STOP`, `-CONT`, `-TERM`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// `kill -9`, and waits for the process to be gone.
    pub fn kill9(&mut self) {
        self.signal("-KILL");
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Stops the node with SIGTERM and checks that it exits cleanly (status 0, no panic).
    pub fn terminate(&mut self) {
        self.signal("-TERM");
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                let all =
                    std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default();
                assert!(
                    status.success() && !all.contains("panicked"),
                    "node {} did not stop cleanly ({status}):\n{}",
                    self.id,
                    self.log()
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {} ignored SIGTERM",
                self.id
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the node's stderr, warnings and errors only (for failure messages).
    pub fn log(&self) -> String {
        let all = std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default();
        let lines: Vec<&str> = all
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .filter(|l| !l.contains("/readyz"))
            .collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for EpisodicNode {
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

pub fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(90))
        .build()
        .expect("client")
}

/// The cluster as `node` reports it (admin), retrying while NATS cannot answer (an
/// election).
pub fn cluster_status(client: &Client, node: &EpisodicNode, tenant: Option<&str>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut req = client
            .get(format!("{}/v1/admin/cluster", node.base))
            .bearer_auth(ADMIN);
        if let Some(t) = tenant {
            req = req.query(&[("tenant", t)]);
        }
        let resp = req.send().expect("cluster status");
        let status = resp.status().as_u16();
        let body: Value = resp.json().expect("json");
        if status == 200 {
            return body;
        }
        assert!(
            status == 503 && Instant::now() < deadline,
            "cluster status {status}: {body}\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits until every shard is held and each of `nodes` holds its even share.
pub fn wait_balanced(client: &Client, nodes: &[&EpisodicNode], within: Duration) {
    let started = Instant::now();
    let fair = (SHARDS as usize).div_ceil(nodes.len());
    loop {
        let status = cluster_status(client, nodes[0], None);
        let owners: Vec<Option<String>> = status["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .map(|s| s["owner"].as_str().map(str::to_string))
            .collect();
        let balanced = owners.iter().all(Option::is_some)
            && nodes.iter().all(|n| {
                owners
                    .iter()
                    .filter(|o| o.as_deref() == Some(n.id.as_str()))
                    .count()
                    == fair
            });
        if balanced && nodes.iter().all(|n| ready(client, n)) {
            return;
        }
        assert!(
            started.elapsed() < within,
            "not balanced after {within:?}: {owners:?}\n{}",
            nodes[0].log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ready(client: &Client, node: &EpisodicNode) -> bool {
    client
        .get(format!("{}/readyz", node.base))
        .send()
        .is_ok_and(|r| r.status().is_success())
}

/// A tenant whose shard `owner` holds now.
pub fn tenant_owned_by(client: &Client, via: &EpisodicNode, owner: &str, prefix: &str) -> String {
    (0..200)
        .map(|i| format!("{prefix}-{i}"))
        .find(|t| cluster_status(client, via, Some(t))["tenant"]["owner"] == owner)
        .unwrap_or_else(|| panic!("no tenant on a shard of {owner}"))
}

/// A key for `tenant` with `roles` (and every privacy class), made on `node`.
pub fn make_key(client: &Client, node: &EpisodicNode, tenant: &str, roles: &[&str]) -> String {
    let resp = client
        .post(format!("{}/v1/admin/keys", node.base))
        .bearer_auth(ADMIN)
        .json(&json!({"tenantId": tenant, "roles": roles, "maxPrivacyClass": "sensitive"}))
        .send()
        .expect("create key");
    assert_eq!(resp.status().as_u16(), 201, "{}", node.log());
    let body: Value = resp.json().expect("json");
    body["key"].as_str().expect("key").to_string()
}

/// Checks that `node` accepts `key` at once, although another node made it moments ago
/// (a node reads a key it has not learnt yet through from the replicated key bucket).
pub fn known_at_once(client: &Client, node: &EpisodicNode, key: &str) {
    let status = client
        .get(format!("{}/v1/timeline", node.base))
        .bearer_auth(key)
        .query(&[("limit", "1")])
        .send()
        .expect("timeline")
        .status()
        .as_u16();
    assert_ne!(
        status, 401,
        "node {} refused a key made on another node",
        node.id
    );
}

/// Writes `body` through `node` until it is acknowledged, retrying what the cluster calls
/// retryable (503, or no answer) with the same body; the final status.
pub fn write_until_acked(client: &Client, node: &EpisodicNode, key: &str, body: &Value) -> u16 {
    post_until_acked(client, &node.base, key, body)
}

/// [`write_until_acked`] through the node at `base`.
fn post_until_acked(client: &Client, base: &str, key: &str, body: &Value) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let resp = client
            .post(format!("{base}/v1/events"))
            .bearer_auth(key)
            .json(body)
            .send();
        match resp {
            Ok(r) if r.status().as_u16() != 503 => return r.status().as_u16(),
            _ => {
                assert!(Instant::now() < deadline, "no acknowledgement in 120 s");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// `count` writer threads, writer `w` through `bases[w % bases.len()]`, each writing events
/// `evt-<w>-<i>` (summary `summary(w, i)`) one after another until `stop`, each retried
/// with its own id until acknowledged (a 201 is required), then pushed to `acked`.
fn spawn_writers(
    count: usize,
    bases: &[String],
    key: &str,
    acked: &Arc<Mutex<Vec<String>>>,
    stop: &Arc<AtomicBool>,
    summary: fn(usize, usize) -> String,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..count)
        .map(|w| {
            let (acked, stop, key) = (Arc::clone(acked), Arc::clone(stop), key.to_string());
            let base = bases[w % bases.len()].clone();
            std::thread::spawn(move || {
                let client = self::client();
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let id = format!("evt-{w}-{i}");
                    let mut body = event("user:dana", &summary(w, i), "2026-06-11T09:00:00Z");
                    body["eventId"] = json!(id);
                    let status = post_until_acked(&client, &base, &key, &body);
                    assert_eq!(status, 201, "write {id}");
                    acked.lock().expect("acked").push(id);
                    i += 1;
                }
            })
        })
        .collect()
}

/// Every event id `key`'s tenant has, read through `node` page by page.
pub fn timeline_ids(client: &Client, node: &EpisodicNode, key: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut req = client
            .get(format!("{}/v1/timeline", node.base))
            .bearer_auth(key)
            .query(&[("limit", "500")]);
        if let Some(c) = &cursor {
            req = req.query(&[("cursor", c.as_str())]);
        }
        let page: Value = req.send().expect("timeline").json().expect("json");
        for e in page["events"].as_array().expect("events") {
            ids.push(e["eventId"].as_str().expect("id").to_string());
        }
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return ids,
        }
    }
}

/// Every audit entry of `key`'s tenant, read through `node`.
pub fn audit_entries(client: &Client, node: &EpisodicNode, key: &str) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut req = client
            .get(format!("{}/v1/audit", node.base))
            .bearer_auth(key)
            .query(&[("limit", "1000")]);
        if let Some(c) = &cursor {
            req = req.query(&[("cursor", c.as_str())]);
        }
        let resp = req.send().expect("audit");
        assert_eq!(
            resp.status().as_u16(),
            200,
            "{}",
            resp.text().unwrap_or_default()
        );
        let page: Value = resp.json().expect("json");
        entries.extend(page["entries"].as_array().expect("entries").iter().cloned());
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return entries,
        }
    }
}

/// Two nodes of a fresh cluster on the shared NATS cluster, balanced.
fn two_nodes(root: &Path, prefix: &str) -> (Client, EpisodicNode, EpisodicNode) {
    let cluster = unique_stream(prefix);
    let client = client();
    let n1 = EpisodicNode::start(root, &cluster, &shared().urls, "n1");
    wait_ready(&client, &n1.base);
    let n2 = EpisodicNode::start(root, &cluster, &shared().urls, "n2");
    wait_ready(&client, &n2.base);
    wait_balanced(&client, &[&n1, &n2], Duration::from_secs(90));
    (client, n1, n2)
}

#[test]
fn a_compaction_covers_every_shard_or_is_refused() {
    let _serial = serial();
    let root = tempfile::tempdir().expect("tmp");
    let (client, n1, _n2) = two_nodes(root.path(), "BINCOVER");
    let status = cluster_status(&client, &n1, None);
    let elsewhere = status["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .position(|s| s["owner"] == "n2")
        .expect("a shard n2 holds");
    // As n2 would ask n1 when its view put a shard on n1 that n1 does not serve: refused,
    // before n1 compacts anything, rather than answered for the shards n1 has.
    let path = format!("/v1/admin/compact?shards={elsewhere}");
    let uri: axum::http::Uri = path.parse().expect("uri");
    let mut request = client.post(format!("{}{path}", n1.base)).bearer_auth(ADMIN);
    for (name, value) in
        episodic::api::forward::Forwarder::new("n2", ADMIN).mark(&axum::http::Method::POST, &uri)
    {
        request = request.header(name, value);
    }
    let resp = request.send().expect("compact");
    assert_eq!(resp.status().as_u16(), 503);
    let body: Value = resp.json().expect("json");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("does not serve shard {elsewhere}"))),
        "{body}"
    );
    // Asked plainly, n1 asks n2 for its shards and answers for every one.
    let (status, report) = compacted(&client, &n1.base);
    assert_eq!(status, 200, "{report}");
}

#[test]
fn any_node_answers_for_any_tenant_as_the_owner_does() {
    let _serial = serial();
    let root = tempfile::tempdir().expect("tmp");
    let (client, n1, n2) = two_nodes(root.path(), "BINSAME");
    let on_n1 = tenant_owned_by(&client, &n1, "n1", "same");
    let on_n2 = tenant_owned_by(&client, &n1, "n2", "other");
    // Keys made on one node authenticate on the other (the replicated key bucket).
    let key1 = make_key(&client, &n2, &on_n1, &["writer", "reader"]);
    let key2 = make_key(&client, &n1, &on_n2, &["writer", "reader"]);
    known_at_once(&client, &n1, &key1);
    known_at_once(&client, &n2, &key2);
    let mut ids1 = Vec::new();
    for (i, (node, text)) in [
        (&n2, "The customer asked for renewal notices by email"),
        (&n1, "The customer moved the renewal meeting to Thursday"),
        (&n2, "Billing confirmed the invoice address change"),
    ]
    .into_iter()
    .enumerate()
    {
        let body = event("user:dana", text, &format!("2026-06-1{}T09:20:00Z", i + 1));
        let resp = client
            .post(format!("{}/v1/events?refresh=wait_for", node.base))
            .bearer_auth(&key1)
            .json(&body)
            .send()
            .expect("write");
        assert_eq!(resp.status().as_u16(), 201, "{}", n1.log());
        let body: Value = resp.json().expect("json");
        ids1.push(body["eventId"].as_str().expect("id").to_string());
    }
    let canary = "zebracanary";
    let resp = client
        .post(format!("{}/v1/events?refresh=wait_for", n1.base))
        .bearer_auth(&key2)
        .json(&event(
            "user:eve",
            &format!("Eve's {canary} renewal note"),
            "2026-06-12T10:00:00Z",
        ))
        .send()
        .expect("write other");
    assert_eq!(resp.status().as_u16(), 201, "{}", n2.log());
    let other_id: String = resp.json::<Value>().expect("json")["eventId"]
        .as_str()
        .expect("id")
        .to_string();

    // The same recall, timeline and get through either node: the same answer (the writes
    // waited for the scope index, so both recalls read the same committed state).
    // A fixed read time makes the two answers comparable byte for byte.
    let as_of = (time::OffsetDateTime::now_utc() + time::Duration::hours(1))
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format");
    let recall = json!({"query": format!("renewal {canary} email"), "limit": 10, "includeStale": true, "asOf": as_of});
    let answers: Vec<Value> = [&n1, &n2]
        .iter()
        .map(|node| {
            let resp = client
                .post(format!("{}/v1/recall", node.base))
                .bearer_auth(&key1)
                .json(&recall)
                .send()
                .expect("recall");
            assert_eq!(resp.status().as_u16(), 200);
            resp.json().expect("json")
        })
        .collect();
    assert_eq!(
        answers[0], answers[1],
        "owner and forwarding node answer alike"
    );
    let text = answers[0].to_string();
    assert!(
        !text.contains(canary),
        "another tenant's event leaked: {text}"
    );
    assert_eq!(answers[0]["results"].as_array().expect("results").len(), 3);
    let mut t1 = timeline_ids(&client, &n1, &key1);
    let mut t2 = timeline_ids(&client, &n2, &key1);
    assert_eq!(t1, t2);
    t1.sort();
    t2.clone_from(&ids1);
    t2.sort();
    assert_eq!(
        t1, t2,
        "exactly the three events written, through both nodes"
    );
    for node in [&n1, &n2] {
        // Another tenant's event is absent, not forbidden, from every node.
        let resp = client
            .get(format!("{}/v1/events/{other_id}", node.base))
            .bearer_auth(&key1)
            .send()
            .expect("get");
        assert_eq!(resp.status().as_u16(), 404);
        let resp = client
            .get(format!("{}/v1/events/{}", node.base, ids1[0]))
            .bearer_auth(&key1)
            .send()
            .expect("get");
        assert_eq!(resp.status().as_u16(), 200);
        // A bad key gets the same answer everywhere.
        let resp = client
            .get(format!("{}/v1/timeline", node.base))
            .bearer_auth("not-a-key")
            .send()
            .expect("timeline");
        assert_eq!(resp.status().as_u16(), 401);
    }
    // n2 stands by for n1's shards: its standby of the tenant's shard follows the stream.
    let shard = cluster_status(&client, &n2, Some(&on_n1))["tenant"]["shard"]
        .as_u64()
        .expect("shard") as usize;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = cluster_status(&client, &n2, None);
        let standby = &status["shards"][shard]["standby"];
        if standby["node"] == "n2"
            && standby["lag"] == 0
            && standby["appliedThrough"].as_u64() >= Some(3)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no caught-up standby: {}",
            status["shards"][shard]
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // MCP through the node that does not own the tenant: the tools see the owner's data.
    let mcp_answer = crate::common::rt().block_on(async {
        let mcp = crate::mcp::connect(&format!("{}/mcp", n2.base), &key1)
            .await
            .expect("MCP through the forwarding node");
        let recalled = crate::mcp::call(
            &mcp,
            "recall",
            json!({"query": "renewal meeting Thursday", "limit": 3, "includeStale": true}),
        )
        .await;
        crate::mcp::text(&recalled)
    });
    assert!(
        mcp_answer.contains("renewal meeting to Thursday") && !mcp_answer.contains(canary),
        "{mcp_answer}"
    );
    // A forged node-to-node mark is refused.
    let resp = client
        .get(format!("{}/v1/timeline", n1.base))
        .bearer_auth(&key1)
        .header("x-episodic-forwarded-by", "n2")
        .header("x-episodic-forwarded-at", "1")
        .header("x-episodic-forward-signature", "00")
        .send()
        .expect("forged");
    assert_eq!(resp.status().as_u16(), 403);
    // Revoked on one node, refused on both.
    let keys: Value = client
        .get(format!("{}/v1/admin/keys", n1.base))
        .bearer_auth(ADMIN)
        .send()
        .expect("keys")
        .json()
        .expect("json");
    let key_id = keys["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["tenantId"] == on_n2.as_str())
        .expect("the key")["keyId"]
        .as_str()
        .expect("id")
        .to_string();
    let resp = client
        .delete(format!("{}/v1/admin/keys/{key_id}", n1.base))
        .bearer_auth(ADMIN)
        .send()
        .expect("revoke");
    assert_eq!(resp.status().as_u16(), 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = client
            .get(format!("{}/v1/timeline", n2.base))
            .bearer_auth(&key2)
            .send()
            .expect("timeline")
            .status()
            .as_u16();
        if status == 401 {
            break;
        }
        assert!(Instant::now() < deadline, "the revocation did not reach n2");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn killing_the_owner_mid_writes_loses_no_acknowledged_event() {
    let _serial = serial();
    let root = tempfile::tempdir().expect("tmp");
    let (client, mut n1, n2) = two_nodes(root.path(), "BINKILL");
    let tenant = tenant_owned_by(&client, &n2, "n1", "kill");
    // Made on the node that dies: the key lives in the replicated bucket, not on n1.
    let key = make_key(
        &client,
        &n1,
        &tenant,
        &["writer", "reader", "memory_reviewer", "operator"],
    );
    // A write held for review (untrusted content) before the owner dies.
    let mut held = event(
        "user:dana",
        "A pasted web page claims Dana quit",
        "2026-06-10T08:00:00Z",
    );
    held["sourceTrust"] = json!("untrusted_content");
    known_at_once(&client, &n2, &key);
    assert_eq!(write_until_acked(&client, &n2, &key, &held), 202);
    let audit_before = audit_entries(&client, &n1, &key);
    assert!(!audit_before.is_empty());
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_writers(
        4,
        std::slice::from_ref(&n2.base),
        &key,
        &acked,
        &stop,
        |w, i| format!("Writer {w} noted renewal item {i}"),
    );
    std::thread::sleep(Duration::from_secs(3));
    let before = acked.lock().expect("acked").len();
    n1.kill9();
    let killed = Instant::now();
    // Wait for the first write acknowledged after the kill.
    while acked.lock().expect("acked").len() <= before + 4 {
        assert!(
            killed.elapsed() < Duration::from_secs(90),
            "no write after the kill\n{}",
            n2.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let failover = killed.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().expect("writer");
    }
    let acked = acked.lock().expect("acked").clone();
    eprintln!(
        "owner killed after {before} acknowledged writes; writes resumed after {failover:?}; {} acknowledged in all",
        acked.len()
    );
    let ids = timeline_ids(&client, &n2, &key);
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in &ids {
        *counts.entry(id.as_str()).or_default() += 1;
    }
    for id in &acked {
        assert_eq!(
            counts.get(id.as_str()),
            Some(&1),
            "{id} present exactly once"
        );
    }
    // Recallable, through the survivor.
    let recall: Value = client
        .post(format!("{}/v1/recall", n2.base))
        .bearer_auth(&key)
        .json(&json!({"query": "Writer 0 noted renewal item 0", "limit": 5}))
        .send()
        .expect("recall")
        .json()
        .expect("json");
    assert!(recall["results"]
        .as_array()
        .expect("results")
        .iter()
        .any(|r| r["event"]["eventId"] == "evt-0-0" || r["eventId"] == "evt-0-0"));
    // The review held before the kill is still pending.
    let reviews: Value = client
        .get(format!("{}/v1/reviews", n2.base))
        .bearer_auth(&key)
        .send()
        .expect("reviews")
        .json()
        .expect("json");
    assert_eq!(reviews["reviews"].as_array().expect("reviews").len(), 1);
    // The audit trail the dead owner kept is whole on the survivor (its shard's audit
    // stream), entry for entry, and audits every acknowledged write.
    let audit_after = audit_entries(&client, &n2, &key);
    for entry in &audit_before {
        assert!(audit_after.contains(entry), "lost audit entry {entry}");
    }
    let written: Vec<&str> = audit_after
        .iter()
        .filter(|e| e["action"] == "write")
        .flat_map(|e| e["eventIds"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    for id in &acked {
        assert!(written.contains(&id.as_str()), "no audit entry for {id}");
    }
    let status = cluster_status(&client, &n2, None);
    assert!(status["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .all(|s| s["owner"] == "n2"));
}

#[test]
fn an_owner_paused_past_its_lease_cannot_write() {
    let _serial = serial();
    let root = tempfile::tempdir().expect("tmp");
    let (client, n1, n2) = two_nodes(root.path(), "BINZOMBIE");
    let tenant = tenant_owned_by(&client, &n2, "n1", "zombie");
    let key = make_key(&client, &n2, &tenant, &["writer", "reader"]);
    known_at_once(&client, &n1, &key);
    let first = event("user:dana", "Before the pause", "2026-06-10T08:00:00Z");
    assert_eq!(write_until_acked(&client, &n1, &key, &first), 201);
    n1.signal("-STOP");
    // The lease lapses and n2 takes the shard over; a write through n2 lands.
    let during = event("user:dana", "While n1 was paused", "2026-06-10T09:00:00Z");
    assert_eq!(write_until_acked(&client, &n2, &key, &during), 201);
    n1.signal("-CONT");
    // n1 still believes it holds the shard for a moment: its write must be refused, never
    // appended beside n2's.
    let zombie = event("user:dana", "Written by the zombie", "2026-06-10T10:00:00Z");
    let resp = client
        .post(format!("{}/v1/events", n1.base))
        .bearer_auth(&key)
        .json(&zombie)
        .send()
        .expect("zombie write");
    let status = resp.status().as_u16();
    let body = resp.text().unwrap_or_default();
    eprintln!("the resumed owner answered its first write with {status}: {body}");
    let ids = timeline_ids(&client, &n2, &key);
    assert_eq!(ids.len(), 2 + usize::from(status == 201));
    if status == 201 {
        // Only if n1 had already learnt it lost the shard and forwarded the write to n2.
        let log = n1.log();
        assert!(
            log.contains("lost the lease"),
            "accepted by a zombie: {body}\n{log}"
        );
    } else {
        assert_eq!(status, 503, "{body}");
    }
    // Nothing either node acknowledged is lost, and n1 is usable again (forwarding).
    assert_eq!(write_until_acked(&client, &n1, &key, &zombie), 201);
    assert_eq!(
        timeline_ids(&client, &n1, &key).len(),
        3 + usize::from(status == 201)
    );
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
        {
            found.push(path);
        }
    }
    found
}

/// Sends a request until its answer is not a retryable 503 (60 s at most); the status and
/// body of the last answer.
fn retried(send: impl Fn() -> reqwest::blocking::Response) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let resp = send();
        let status = resp.status().as_u16();
        let body: Value = resp.json().unwrap_or_default();
        if status != 503 || Instant::now() > deadline {
            return (status, body);
        }
        eprintln!("retrying after 503: {body}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A cluster compaction asked of the node at `base`, retried while it answers 503.
fn compacted(client: &Client, base: &str) -> (u16, Value) {
    retried(|| {
        client
            .post(format!("{base}/v1/admin/compact"))
            .bearer_auth(ADMIN)
            .send()
            .expect("compact")
    })
}

#[test]
fn erasure_and_rotation_leave_no_trace_even_with_a_nats_node_down() {
    let _serial = serial();
    let nats = crate::nats_cluster::NatsCluster::private();
    let root = tempfile::tempdir().expect("tmp");
    let cluster = unique_stream("BINERASE");
    let client = client();
    // The canary is written while n1 holds every shard, on a shard n1 then gives to n2, so
    // n1 keeps a stale copy of it that the rotation must clear too.
    // A lease outlasts a NATS server's death (its elections), as in production.
    let ttl = 15_000;
    let n1 = EpisodicNode::start_with_ttl(root.path(), &cluster, &nats.urls, "n1", ttl);
    wait_ready(&client, &n1.base);
    wait_balanced(&client, &[&n1], Duration::from_secs(90));
    let tenant = (0..200)
        .map(|i| format!("erase-{i}"))
        .find(|t| cluster_status(&client, &n1, Some(t))["tenant"]["shard"].as_u64() >= Some(2))
        .expect("a tenant on shard 2 or 3");
    let key = make_key(&client, &n1, &tenant, &["writer", "reader", "operator"]);
    let canary = "quixoticcanary";
    let mut ids = Vec::new();
    for (actor, text) in [
        (
            "user:gone",
            format!("Gone's {canary} address is 12 Elm Street"),
        ),
        ("user:gone", format!("Gone asked about {canary} invoices")),
        ("user:stay", "Stay renewed the contract".to_string()),
    ] {
        let body = event(actor, &text, "2026-06-10T08:00:00Z");
        let resp = client
            .post(format!("{}/v1/events", n1.base))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .expect("write");
        assert_eq!(resp.status().as_u16(), 201);
        ids.push(
            resp.json::<Value>().expect("json")["eventId"]
                .as_str()
                .expect("id")
                .to_string(),
        );
    }
    let n2 = EpisodicNode::start_with_ttl(root.path(), &cluster, &nats.urls, "n2", ttl);
    wait_ready(&client, &n2.base);
    wait_balanced(&client, &[&n1, &n2], Duration::from_secs(90));
    assert_eq!(
        cluster_status(&client, &n1, Some(&tenant))["tenant"]["owner"],
        "n2",
        "the canary's shard moved to n2"
    );
    let shard = cluster_status(&client, &n1, Some(&tenant))["tenant"]["shard"]
        .as_u64()
        .expect("shard");
    let stale = n1.dir.join("shards").join(shard.to_string());
    assert!(
        stale.exists(),
        "n1 keeps a copy of the shard from before (what the rotation must clear too)"
    );

    // The scan below can see the canary: every NATS server holds it now.
    let holds_canary = |i: usize| {
        nats.store_files(i).iter().any(|f| {
            std::fs::read(f).is_ok_and(|b| b.windows(canary.len()).any(|w| w == canary.as_bytes()))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(1..=3).all(holds_canary) {
        assert!(
            Instant::now() < deadline,
            "the canary never reached every NATS server's files"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // One NATS server is down during the erasure and the rotation.
    nats.kill9(3);
    let (status, receipt) = retried(|| {
        client
            .post(format!("{}/v1/erasure", n1.base))
            .bearer_auth(&key)
            .json(&json!({"actorId": "user:gone"}))
            .send()
            .expect("erase")
    });
    assert_eq!(status, 200, "{receipt}\n{}", n2.log());
    assert_eq!(receipt["purged"], false, "not purged before the rotation");
    let (status, report) = compacted(&client, &n1.base);
    assert_eq!(status, 200, "{report}");
    let purged: Vec<&str> = report["purgedEventIds"]
        .as_array()
        .expect("purged")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        purged.contains(&ids[0].as_str()) && purged.contains(&ids[1].as_str()),
        "{report}\nn1:\n{}\nn2:\n{}",
        n1.log(),
        n2.log()
    );
    // The tenant's trail proves the purge with the ids.
    let trail: Value = client
        .get(format!("{}/v1/audit?action=compact", n1.base))
        .bearer_auth(&key)
        .send()
        .expect("audit")
        .json()
        .expect("json");
    let named: Vec<&str> = trail["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .flat_map(|e| e["eventIds"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        named.contains(&ids[0].as_str()) && named.contains(&ids[1].as_str()),
        "{trail}"
    );
    // A receipt says purged only now.
    let resp = client
        .delete(format!("{}/v1/events/{}", n1.base, ids[0]))
        .bearer_auth(&key)
        .send()
        .expect("delete again");
    assert_eq!(resp.status().as_u16(), 200);
    let receipt: Value = resp.json().expect("json");
    assert_eq!(receipt["purged"], true, "{receipt}");
    nats.restart(3);

    // The survivor answers from the new generation; the erased events are gone, the other
    // stays.
    let left = timeline_ids(&client, &n1, &key);
    assert_eq!(left, vec![ids[2].clone()]);
    let status = cluster_status(&client, &n1, Some(&tenant));
    assert_eq!(
        status["shards"][shard as usize]["generation"], 2,
        "{status}"
    );

    // No trace anywhere: every file of the three NATS servers (the restarted one drops the
    // deleted generation when it rejoins) and of both Episodic nodes.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut traces: Vec<PathBuf> = (1..=3)
            .flat_map(|i| nats.store_files(i))
            .filter(|f| {
                std::fs::read(f)
                    .is_ok_and(|b| b.windows(canary.len()).any(|w| w == canary.as_bytes()))
            })
            .collect();
        traces.extend(files_holding(&n1.dir, canary.as_bytes()));
        traces.extend(files_holding(&n2.dir, canary.as_bytes()));
        // n1's copy of the shard is gone, or rebuilt from the new generation (n1 stands by
        // for n2's shards).
        let marker = std::fs::read_to_string(stale.join("STREAM")).unwrap_or_default();
        if stale.exists() && !marker.ends_with("_G2") {
            traces.push(stale.clone());
        }
        if traces.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the canary is still in {traces:#?}\n{}",
            n1.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The NATS server (1..=3) leading `stream`, as a node's cluster status reports it.
fn stream_leader(client: &Client, node: &EpisodicNode, shard: u64) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = cluster_status(client, node, None);
        if let Some(leader) = status["shards"][shard as usize]["stream"]["leader"].as_str() {
            return leader.trim_start_matches('n').parse().expect("nN");
        }
        assert!(Instant::now() < deadline, "the stream has no leader");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_killed_stream_leader_and_a_lagging_nats_server_lose_nothing() {
    let _serial = serial();
    let nats = crate::nats_cluster::NatsCluster::private();
    let root = tempfile::tempdir().expect("tmp");
    let cluster = unique_stream("BINLEADER");
    let client = client();
    let ttl = 15_000;
    let n1 = EpisodicNode::start_with_ttl(root.path(), &cluster, &nats.urls, "n1", ttl);
    wait_ready(&client, &n1.base);
    let n2 = EpisodicNode::start_with_ttl(root.path(), &cluster, &nats.urls, "n2", ttl);
    wait_ready(&client, &n2.base);
    wait_balanced(&client, &[&n1, &n2], Duration::from_secs(90));
    let tenant = tenant_owned_by(&client, &n1, "n1", "leader");
    let key = make_key(&client, &n1, &tenant, &["writer", "reader"]);
    known_at_once(&client, &n2, &key);
    let shard = cluster_status(&client, &n1, Some(&tenant))["tenant"]["shard"]
        .as_u64()
        .expect("shard");

    // Writers through both nodes (n2 forwards), each retrying a write with its own
    // eventId until it is acknowledged.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let bases = [n1.base.clone(), n2.base.clone()];
    let writers = spawn_writers(4, &bases, &key, &acked, &stop, |w, i| {
        format!("Writer {w} logged shipment {i}")
    });
    let count = || acked.lock().expect("acked").len();
    let wait_for_more = |more: usize, what: &str| {
        let target = count() + more;
        let deadline = Instant::now() + Duration::from_secs(90);
        while count() < target {
            assert!(
                Instant::now() < deadline,
                "no progress {what}\n{}",
                n1.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for_more(100, "before the kill");
    let leader = stream_leader(&client, &n1, shard);
    nats.kill9(leader);
    let killed_at = count();
    wait_for_more(100, "after the stream leader's death");
    eprintln!("stream leader n{leader} killed after {killed_at} writes; writes went on");
    // The dead server comes back having missed those writes, and catches up.
    nats.restart(leader);
    wait_for_more(50, "after the restart");
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().expect("writer");
    }
    let acked = acked.lock().expect("acked").clone();
    let last_seq = |status: &Value| status["shards"][shard as usize]["stream"]["lastSeq"].as_u64();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = cluster_status(&client, &n1, None);
        let stream = &status["shards"][shard as usize]["stream"];
        let caught_up = stream["replicas"].as_array().is_some_and(|r| {
            r.len() == 2 && r.iter().all(|r| r["current"] == true && r["lag"] == 0)
        });
        if caught_up && last_seq(&status).is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted server never caught up: {stream}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Make the restarted server part of every quorum: stop another one, so what the
    // cluster answers now needs its copy.
    let other = (1..=3).find(|i| *i != leader).expect("another server");
    nats.kill9(other);
    let deadline = Instant::now() + Duration::from_secs(60);
    let ids = loop {
        let resp = client
            .get(format!("{}/v1/timeline", n2.base))
            .bearer_auth(&key)
            .query(&[("limit", "1")])
            .send();
        if resp.is_ok_and(|r| r.status().is_success()) {
            break timeline_ids(&client, &n2, &key);
        }
        assert!(Instant::now() < deadline, "no answer with n{other} down");
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in &ids {
        *counts.entry(id.as_str()).or_default() += 1;
    }
    for id in &acked {
        assert_eq!(
            counts.get(id.as_str()),
            Some(&1),
            "{id} present exactly once"
        );
    }
    assert_eq!(
        ids.len(),
        acked.len(),
        "nothing unacknowledged appeared twice"
    );
    eprintln!("{} acknowledged writes, all present once", acked.len());
    let recall: Value = client
        .post(format!("{}/v1/recall", n1.base))
        .bearer_auth(&key)
        .json(&json!({"query": "Writer 1 logged shipment 3", "limit": 5, "includeStale": true}))
        .send()
        .expect("recall")
        .json()
        .expect("json");
    // The same words in another order make another writer's event as good a match.
    assert!(
        recall["results"]
            .as_array()
            .expect("results")
            .iter()
            .any(|r| r["event"]["eventId"] == "evt-1-3"),
        "{recall}"
    );
}

#[test]
fn a_shard_moves_to_another_node_on_request() {
    let _serial = serial();
    let root = tempfile::tempdir().expect("tmp");
    let (client, mut n1, mut n2) = two_nodes(root.path(), "BINMOVE");
    let tenant = tenant_owned_by(&client, &n1, "n1", "move");
    let key = make_key(&client, &n1, &tenant, &["writer", "reader"]);
    known_at_once(&client, &n2, &key);
    for i in 0..5 {
        let body = event(
            "user:dana",
            &format!("Moved note {i}"),
            "2026-06-11T09:00:00Z",
        );
        assert_eq!(write_until_acked(&client, &n1, &key, &body), 201);
    }
    let before = timeline_ids(&client, &n1, &key);
    let shard = cluster_status(&client, &n1, Some(&tenant))["tenant"]["shard"]
        .as_u64()
        .expect("shard");
    // Asked of the node that does not own it: passed on to the owner.
    let resp = client
        .post(format!("{}/v1/admin/cluster/shards/{shard}/move", n2.base))
        .bearer_auth(ADMIN)
        .json(&json!({"to": "n2"}))
        .send()
        .expect("move");
    let status = resp.status().as_u16();
    let body: Value = resp.json().expect("json");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["from"], "n1");
    assert_eq!(body["taken"], true);
    eprintln!("shard {shard} moved in {} ms", body["tookMs"]);
    assert_eq!(
        cluster_status(&client, &n1, Some(&tenant))["tenant"]["owner"],
        "n2"
    );
    // Served by n2 now, through either node, with everything it held; writes go on.
    assert_eq!(
        write_until_acked(
            &client,
            &n1,
            &key,
            &event("user:dana", "After the move", "2026-06-12T09:00:00Z")
        ),
        201
    );
    let after = timeline_ids(&client, &n1, &key);
    assert_eq!(after.len(), before.len() + 1);
    assert!(before.iter().all(|id| after.contains(id)));
    assert_eq!(after, timeline_ids(&client, &n2, &key));
    // The moved shard stays where it was put: n2 keeps it although it holds more than
    // its share now.
    std::thread::sleep(Duration::from_millis(TTL_MS));
    assert_eq!(
        cluster_status(&client, &n1, Some(&tenant))["tenant"]["owner"],
        "n2"
    );
    // Bad requests are named.
    let resp = client
        .post(format!("{}/v1/admin/cluster/shards/{shard}/move", n2.base))
        .bearer_auth(ADMIN)
        .json(&json!({"to": "nobody"}))
        .send()
        .expect("move");
    assert_eq!(resp.status().as_u16(), 422);
    // The tenant pinned to a shard of its own, asked of the node that does not own it:
    // everything it held moves, and it is served from the new shard through either node.
    let resp = client
        .post(format!("{}/v1/admin/cluster/tenants/{tenant}/pin", n1.base))
        .bearer_auth(ADMIN)
        .send()
        .expect("pin");
    let status = resp.status().as_u16();
    let report: Value = resp.json().expect("json");
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["fromShard"], shard);
    assert_eq!(report["sourcePurged"], true);
    let pinned = report["shard"].as_u64().expect("pinned shard");
    eprintln!("tenant pinned to shard {pinned}: {report}");
    let served = |node: &EpisodicNode| {
        client
            .get(format!("{}/v1/timeline", node.base))
            .bearer_auth(&key)
            .send()
            .is_ok_and(|r| r.status().is_success())
    };
    let started = std::time::Instant::now();
    while !(served(&n1) && served(&n2)) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the pinned shard is not served"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(timeline_ids(&client, &n1, &key), after);
    assert_eq!(timeline_ids(&client, &n2, &key), after);
    let status = cluster_status(&client, &n2, Some(&tenant));
    assert_eq!(status["tenant"]["shard"], pinned);
    assert!(status["pins"]
        .as_array()
        .expect("pins")
        .iter()
        .any(|p| p["tenant"] == tenant.as_str() && p["state"] == "active"));
    assert_eq!(
        write_until_acked(
            &client,
            &n2,
            &key,
            &event("user:dana", "After the pin", "2026-06-13T09:00:00Z")
        ),
        201
    );
    let resp = client
        .post(format!("{}/v1/admin/cluster/tenants/{tenant}/pin", n2.base))
        .bearer_auth(ADMIN)
        .send()
        .expect("pin again");
    assert_eq!(resp.status().as_u16(), 409, "a tenant is pinned once");
    // Both stop cleanly on SIGTERM.
    n1.terminate();
    n2.terminate();
}
