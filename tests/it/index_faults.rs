//! A scope-index commit that fails never hides acknowledged events.
//!
//! - The field report's scenario: the real binary under `ulimit -n 256` with 320 idle
//!   connections. The connection cap now fits the descriptor limit, so the connections can
//!   no longer starve the index; every acknowledged write stays in timeline and recall at
//!   every step and after a restart (the build of the report lost them for good).
//! - The failure itself, forced in process: commits fail while the index directory is gone;
//!   the index is reported degraded, answers stay complete from memory, and once the
//!   directory is back the index is repaired and every event is still there after a restart.
//! - Start-up finds an index that lost or kept events and rebuilds it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{event, model_dir};
use crate::server_binary::{free_port, stop, wait_ready};

/// One HTTP/1.1 keep-alive connection, driven by hand so that it stays open (and needs no
/// new descriptor in the server) while the server has none to spare.
pub(crate) struct Conn {
    reader: BufReader<TcpStream>,
    port: u16,
}

impl Conn {
    pub(crate) fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        Conn {
            reader: BufReader::new(stream),
            port,
        }
    }

    /// Sends one request and reads its response: `(status, JSON body or Null)`.
    pub(crate) fn call(
        &mut self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let body = body.map(|b| serde_json::to_vec(b).expect("json"));
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nconnection: keep-alive\r\n",
            self.port
        );
        if let Some(k) = key {
            head.push_str(&format!("authorization: Bearer {k}\r\n"));
        }
        if let Some(b) = &body {
            head.push_str(&format!(
                "content-type: application/json\r\ncontent-length: {}\r\n",
                b.len()
            ));
        }
        head.push_str("\r\n");
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes()).expect("send head");
        if let Some(b) = &body {
            stream.write_all(b).expect("send body");
        }
        self.read_response()
    }

    fn read_response(&mut self) -> (u16, Value) {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut length = 0usize;
        let mut chunked = false;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header");
            let h = line.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').expect("header line");
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().expect("length"),
                "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
        let bytes = if chunked {
            self.read_chunked()
        } else {
            let mut b = vec![0u8; length];
            self.reader.read_exact(&mut b).expect("body");
            b
        };
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    fn read_chunked(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let mut size = String::new();
            self.reader.read_line(&mut size).expect("chunk size");
            let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
            let mut chunk = vec![0u8; n + 2];
            self.reader.read_exact(&mut chunk).expect("chunk");
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The server child; killed if the test fails before stopping it.
struct Server(Option<Child>);

impl Server {
    fn stop(mut self) {
        if let Some(child) = self.0.take() {
            stop(child);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `episodic serve` with at most `nofile` open descriptors.
fn spawn_limited(dir: &Path, port: u16, nofile: u32, log: &Path) -> Server {
    let log = std::fs::File::create(log).expect("log file");
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" serve"))
        .arg(env!("CARGO_BIN_EXE_episodic"))
        .env("EPISODIC_DATA_DIR", dir)
        .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env("EPISODIC_REFRESH_MS", "100")
        // Connections must be able to use up the descriptors for this test.
        .env("EPISODIC_MAX_CONNECTIONS", "4096")
        .env_remove("EPISODIC_ADMIN_KEY")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map(|c| Server(Some(c)))
        .expect("spawn episodic")
}

fn timeline_ids(conn: &mut Conn, key: &str) -> Vec<String> {
    let (status, page) = conn.call("GET", "/v1/timeline?limit=500", Some(key), None);
    assert_eq!(status, 200, "{page}");
    page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["eventId"].as_str().expect("id").to_string())
        .collect()
}

fn recall_count(conn: &mut Conn, key: &str) -> usize {
    let body = json!({"query": "renewal notices by email", "limit": 100});
    let (status, r) = conn.call("POST", "/v1/recall", Some(key), Some(&body));
    assert_eq!(status, 200, "{r}");
    r["results"].as_array().expect("results").len()
}

fn write_n(conn: &mut Conn, key: &str, from: usize, n: usize) -> Vec<String> {
    (from..from + n)
        .map(|i| {
            let e = event(
                "user-1",
                &format!("The customer asked for renewal notices by email, note {i}"),
                "2026-06-17T09:20:00Z",
            );
            let (status, body) = conn.call("POST", "/v1/events", Some(key), Some(&e));
            assert_eq!(status, 201, "{body}");
            body["eventId"].as_str().expect("id").to_string()
        })
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn descriptor_exhaustion_never_hides_acknowledged_writes() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("server.log");
    let data = dir.path().join("data");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = spawn_limited(&data, port, 256, &log);
    let http = reqwest::blocking::Client::new();
    wait_ready(&http, &base);
    drop(http);
    let admin = std::fs::read_to_string(data.join("admin.key"))
        .expect("admin.key")
        .trim()
        .to_string();
    let mut conn = Conn::open(port);
    let (status, created) = conn.call(
        "POST",
        "/v1/admin/keys",
        Some(&admin),
        Some(&json!({"tenantId": "acme", "roles": ["writer", "reader", "operator"]})),
    );
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().expect("key").to_string();
    let mut acked = write_n(&mut conn, &key, 0, 3);

    // Hold idle connections until the server has no descriptor left.
    let idle: Vec<TcpStream> = (0..320)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    acked.extend(write_n(&mut conn, &key, 3, 12));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        sorted(timeline_ids(&mut conn, &key)),
        sorted(acked.clone()),
        "while the index cannot commit, the timeline holds every acknowledged write"
    );
    assert_eq!(recall_count(&mut conn, &key), acked.len());
    let (status, ready) = conn.call("GET", "/readyz", None, None);
    assert_eq!(status, 200, "{ready}");

    drop(idle);
    std::thread::sleep(Duration::from_secs(2));
    acked.extend(write_n(&mut conn, &key, 15, 2));
    // Any repair commits within a few refresh intervals once descriptors are back.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, ready) = conn.call("GET", "/readyz", None, None);
        if ready["indexes"]["scope"] == "ok" {
            break;
        }
        if Instant::now() > deadline {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("index not repaired: {ready}\nserver log:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(sorted(timeline_ids(&mut conn, &key)), sorted(acked.clone()));
    assert_eq!(recall_count(&mut conn, &key), acked.len());
    drop(conn);
    child.stop();

    let child = spawn_limited(&data, port, 4096, &log);
    let http = reqwest::blocking::Client::new();
    wait_ready(&http, &base);
    let mut conn = Conn::open(port);
    assert_eq!(sorted(timeline_ids(&mut conn, &key)), sorted(acked.clone()));
    assert_eq!(recall_count(&mut conn, &key), acked.len());
    drop(conn);
    child.stop();
}

/// Start-up proves the scope index right: an index that lost committed events (and still
/// records the log's last sequence, so no catch-up would re-add them) or kept a deleted
/// one is found by its fingerprint and rebuilt from the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_rebuilds_an_index_that_lost_or_kept_events() {
    use episodic::index::scope::ScopeIndex;

    use crate::common::App;

    let app = App::new();
    let key = app.key("acme").await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let e = event(
            "user-1",
            &format!("renewal notices by email, note {i}"),
            "2026-06-17T09:20:00Z",
        );
        ids.push(app.write_ok(&key, e).await);
    }
    let (status, _) = app
        .call(
            "DELETE",
            &format!("/v1/events/{}", ids[5]),
            Some(&key),
            None,
        )
        .await;
    assert_eq!(status, 200);
    app.engine.shutdown().await;
    let App { dir, .. } = app;
    let scope_dir = dir.path().join("index").join("scope");
    tokio::task::spawn_blocking(move || {
        let (index, _) = ScopeIndex::open(&scope_dir).expect("open index");
        let mark = index.commit_mark().expect("mark").expect("committed");
        // Lose two committed events, and bring the deleted one back, under the same mark.
        index.delete(0).expect("delete");
        index.delete(3).expect("delete");
        index.reopen_writer().expect("writer");
        let docs = index.fingerprint().docs;
        assert_eq!(docs, 5);
        index.delete(0).expect("delete");
        index.delete(3).expect("delete");
        index.commit_marked(mark).expect("commit");
        assert_eq!(index.fingerprint().docs, 3);
    })
    .await
    .expect("edit index");
    let app = tokio::task::spawn_blocking(move || App::open_in(dir, crate::common::config))
        .await
        .expect("reopen");
    let (status, page) = app
        .call("GET", "/v1/timeline?limit=50", Some(&key), None)
        .await;
    assert_eq!(status, 200, "{page}");
    let mut got: Vec<String> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["eventId"].as_str().expect("id").to_string())
        .collect();
    got.sort();
    let mut want = ids[..5].to_vec();
    want.sort();
    assert_eq!(got, want, "every live event, and not the deleted one");
    assert_eq!(app.engine.stats().scope_docs, 5);
}

/// Commits fail while the index directory is missing: the index is degraded, not silent;
/// timeline and recall still hold every acknowledged event; once the directory is back the
/// index is repaired, and a restart finds every event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_commits_degrade_the_index_and_it_is_repaired() {
    use crate::common::App;

    async fn ready(app: &App) -> Value {
        let (status, body) = app.call("GET", "/readyz", None, None).await;
        assert_eq!(status, 200, "{body}");
        body
    }
    async fn timeline(app: &App, key: &str) -> Vec<String> {
        let (_, page) = app
            .call("GET", "/v1/timeline?limit=500", Some(key), None)
            .await;
        sorted(
            page["events"]
                .as_array()
                .expect("events")
                .iter()
                .map(|e| e["eventId"].as_str().expect("id").to_string())
                .collect(),
        )
    }
    async fn write(app: &App, key: &str, i: usize) -> String {
        let e = event(
            "user-1",
            &format!("The customer asked for renewal notices by email, note {i}"),
            "2026-06-17T09:20:00Z",
        );
        let (status, body) = app
            .call("POST", "/v1/events?refresh=wait_for", Some(key), Some(e))
            .await;
        assert_eq!(status, 201, "{body}");
        body["eventId"].as_str().expect("id").to_string()
    }

    let app = App::new();
    let key = app.key("acme").await;
    let mut acked = Vec::new();
    for i in 0..3 {
        acked.push(write(&app, &key, i).await);
    }
    let scope = app.dir.path().join("index").join("scope");
    let moved = app.dir.path().join("index").join("scope.moved");
    std::fs::rename(&scope, &moved).expect("move the index away");
    for i in 3..9 {
        acked.push(write(&app, &key, i).await);
    }
    assert_eq!(ready(&app).await["indexes"]["scope"], "degraded");
    assert!(app.engine.scope_health().degraded().is_some());
    assert_eq!(timeline(&app, &key).await, sorted(acked.clone()));
    let r = app
        .recall(
            &key,
            json!({"query": "renewal notices by email", "limit": 50}),
        )
        .await;
    assert_eq!(r["results"].as_array().expect("results").len(), acked.len());

    std::fs::rename(&moved, &scope).expect("bring the index back");
    acked.push(write(&app, &key, 9).await);
    let deadline = Instant::now() + Duration::from_secs(30);
    while ready(&app).await["indexes"]["scope"] != "ok" {
        assert!(Instant::now() < deadline, "the index was not repaired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(timeline(&app, &key).await, sorted(acked.clone()));
    assert_eq!(app.engine.stats().scope_docs, acked.len() as u64);
    let app = app.restart().await;
    assert_eq!(timeline(&app, &key).await, sorted(acked.clone()));
    assert_eq!(app.engine.stats().scope_docs, acked.len() as u64);
}
