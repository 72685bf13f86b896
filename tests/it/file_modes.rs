//! Nothing in the data directory is readable by other local users: the real binary creates
//! every file 0600 and every directory 0700, tightens a tree left open by an older build,
//! and refuses a weak `EPISODIC_ADMIN_KEY`; the engine's own files are 0600 even in a
//! process whose umask lets group and other read.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::json;

use crate::common::{event, model_dir, App};
use crate::server_binary::{free_port, stop, wait_ready};

/// An `EPISODIC_ADMIN_KEY` that passes the strength rule.
const ADMIN_KEY: &str = "modes-admin-Lq2Xz9Pw4Km8Rt3Nc6Hd1Jy7Vb";

fn spawn_with_key(data_dir: &Path, port: u16, admin_key: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_episodic"))
        .arg("serve")
        .env("EPISODIC_DATA_DIR", data_dir)
        .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env("EPISODIC_ADMIN_KEY", admin_key)
        .env("EPISODIC_APPROXIMATE_RECALL", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn episodic")
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o7777
}

/// Every entry under `root` (and `root`) with its permission bits.
fn walk(root: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).expect("metadata");
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).expect("read_dir") {
                stack.push(e.expect("entry").path());
            }
        }
        out.push((p, meta.is_dir(), meta.permissions().mode() & 0o7777));
    }
    out
}

fn assert_owner_only(root: &Path) {
    let entries = walk(root);
    assert!(entries.iter().any(|(p, _, _)| p.ends_with("events.log")));
    assert!(entries.iter().any(|(p, _, _)| p.ends_with("audit.log")));
    for (path, is_dir, m) in entries {
        assert_eq!(m & 0o077, 0, "{} grants group/other {m:o}", path.display());
        if is_dir {
            assert_eq!(m, 0o700, "{}", path.display());
        }
    }
}

/// Starts the binary over `dir`, writes one event, stops it.
fn serve_and_write(dir: &Path) {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = spawn_with_key(dir, port, ADMIN_KEY);
    let client = reqwest::blocking::Client::new();
    wait_ready(&client, &base);
    let created: serde_json::Value = client
        .post(format!("{base}/v1/admin/keys"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({"tenantId": "acme", "roles": ["writer"]}))
        .send()
        .expect("create key")
        .json()
        .expect("json");
    let key = created["key"].as_str().expect("key");
    let resp = client
        .post(format!("{base}/v1/events"))
        .bearer_auth(key)
        .json(&event(
            "u",
            "The customer wants invoices by email",
            "2026-06-17T09:20:00Z",
        ))
        .send()
        .expect("write");
    assert_eq!(resp.status().as_u16(), 201);
    stop(child);
}

#[test]
fn the_binary_creates_an_owner_only_data_directory() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("data");
    serve_and_write(&dir);
    assert!(dir.join("index").join("hnsw").exists());
    assert_owner_only(&dir);
}

#[test]
fn the_binary_tightens_a_tree_an_older_build_left_open() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("data");
    serve_and_write(&dir);
    // What an older build left: world-readable files and directories.
    for (path, is_dir, _) in walk(&dir) {
        let m = if is_dir { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).expect("chmod");
    }
    std::fs::write(dir.join("notes.txt"), b"left by an operator").expect("write");
    std::fs::set_permissions(
        dir.join("notes.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    assert_eq!(mode(&dir.join("log").join("events.log")), 0o644);
    serve_and_write(&dir);
    assert_owner_only(&dir);
    assert_eq!(mode(&dir.join("notes.txt")), 0o600);
}

#[test]
fn a_weak_admin_key_fails_start_up_naming_the_rule() {
    let tmp = tempfile::tempdir().expect("tmp");
    for weak in [
        "a",
        "test-admin-key",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ] {
        let mut child = spawn_with_key(&tmp.path().join("data"), free_port(), weak);
        let status = child.wait().expect("wait");
        assert!(!status.success());
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("read");
        assert!(
            stderr.contains("EPISODIC_ADMIN_KEY is too weak"),
            "{stderr}"
        );
        assert!(
            stderr.contains("at least 32 printable ASCII characters"),
            "{stderr}"
        );
        assert!(
            weak.len() < 2 || !stderr.contains(weak),
            "never echoes the key: {stderr}"
        );
    }
}

/// Sets the umask for the life of the guard (the test process's is shared: restore it).
struct Umask(rustix::fs::Mode);

impl Umask {
    fn set(raw: u32) -> Umask {
        Umask(rustix::process::umask(rustix::fs::Mode::from_raw_mode(raw)))
    }
}

impl Drop for Umask {
    fn drop(&mut self) {
        rustix::process::umask(self.0);
    }
}

fn approximate(dir: &Path) -> episodic::engine::EngineConfig {
    let mut c = episodic::engine::EngineConfig::new(dir.to_path_buf());
    c.recall.approximate = true;
    c
}

#[tokio::test]
async fn the_engine_creates_its_files_owner_only_under_a_permissive_umask() {
    let _umask = Umask::set(0o022);
    let app = App::open_in(tempfile::tempdir().expect("tmp"), approximate);
    let key = app.key("acme").await;
    app.write_ok(&key, event("u", "prefers email", "2026-06-17T09:20:00Z"))
        .await;
    app.engine.shutdown().await;
    let root = app.dir.path();
    for file in [
        "LOCK",
        "log/events.log",
        "audit/audit.log",
        "keys.json",
        "index/hnsw/CURRENT",
    ] {
        let m = mode(&root.join(file));
        assert_eq!(m, 0o600, "{file}: {m:o}");
    }
    let hnsw = walk(&root.join("index").join("hnsw"));
    assert!(
        hnsw.iter().filter(|(_, d, _)| !d).count() > 2,
        "a snapshot was saved"
    );
    for (path, is_dir, m) in hnsw
        .into_iter()
        .chain(walk(root).into_iter().filter(|e| e.1))
    {
        let want = if is_dir { 0o700 } else { 0o600 };
        assert_eq!(m, want, "{}: {m:o}", path.display());
    }
}
