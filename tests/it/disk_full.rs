//! Disk full: the real binary on a small tmpfs. Writes fail with 503 `storage_unavailable`
//! (never a 5xx of another kind), reads keep working, nothing acknowledged is lost, and writes
//! succeed again once space returns.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{json, Value};

use crate::common::{all_pages, event, model_dir};

const ADMIN_KEY: &str = "disk-full-admin-Rt3Nc6Hd1Jy7Vb2Lq9Xz4Pw8Km";

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_tmpfs(dir: &Path, size: &str) -> Option<Mount> {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| Mount(dir.to_path_buf()))
}

fn resize(dir: &Path, size: &str) {
    let status = Command::new("mount")
        .args(["-o", &format!("remount,size={size}")])
        .arg(dir)
        .status()
        .expect("remount");
    assert!(status.success());
}

fn start(dir: &Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_episodic"))
        .arg("serve")
        .env("EPISODIC_DATA_DIR", dir)
        .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env("EPISODIC_ADMIN_KEY", ADMIN_KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn")
}

fn wait_ready(http: &Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if http
            .get(format!("{base}/readyz"))
            .send()
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("not ready");
}

#[test]
fn a_full_disk_refuses_writes_cleanly_and_recovers() {
    let tmp = tempfile::tempdir().expect("tmp");
    let Some(_mount) = mount_tmpfs(tmp.path(), "3m") else {
        eprintln!("disk_full: mounting tmpfs is not permitted here; skipping");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = start(tmp.path(), port);
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    wait_ready(&http, &base);
    let created: Value = http
        .post(format!("{base}/v1/admin/keys"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({"tenantId": "acme", "roles": ["writer", "reader"]}))
        .send()
        .expect("key")
        .json()
        .expect("json");
    let key = created["key"].as_str().expect("key").to_string();
    let filler = "x".repeat(3000);
    let mut acked = Vec::new();
    let mut refused = 0;
    for i in 0..3000 {
        let body = event("u", &format!("Note {i} {filler}"), "2026-06-17T09:20:00Z");
        let resp = http
            .post(format!("{base}/v1/events"))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .expect("write");
        let status = resp.status().as_u16();
        let body: Value = resp.json().unwrap_or(Value::Null);
        match status {
            201 => acked.push(body["eventId"].as_str().expect("id").to_string()),
            503 => {
                assert_eq!(body["code"], "storage_unavailable", "{body}");
                refused += 1;
                if refused >= 3 {
                    break;
                }
            }
            other => panic!("write {i}: unexpected {other}: {body}"),
        }
    }
    assert!(
        refused >= 3,
        "the disk never filled ({} acknowledged)",
        acked.len()
    );
    for id in acked.iter().take(5) {
        let r = http
            .get(format!("{base}/v1/events/{id}"))
            .bearer_auth(&key)
            .send()
            .expect("get");
        assert_eq!(
            r.status().as_u16(),
            200,
            "reads keep working on a full disk"
        );
    }
    let r = http
        .post(format!("{base}/v1/recall"))
        .bearer_auth(&key)
        .json(&json!({"query": "note"}))
        .send()
        .expect("recall");
    assert_eq!(r.status().as_u16(), 200);
    resize(tmp.path(), "64m");
    let body = event("u", "After space returned", "2026-06-17T09:20:00Z");
    let r = http
        .post(format!("{base}/v1/events"))
        .bearer_auth(&key)
        .json(&body)
        .send()
        .expect("write");
    assert_eq!(r.status().as_u16(), 201, "writes resume once space returns");
    let after: Value = r.json().expect("json");
    acked.push(after["eventId"].as_str().expect("id").to_string());
    // Every acknowledged event is in the timeline, also those whose index commit failed
    // on the full disk (they are answered from memory until the index is repaired).
    assert_eq!(timeline_all(&http, &base, &key), sorted(&acked));
    wait_index_ok(&http, &base);
    assert_eq!(timeline_all(&http, &base, &key), sorted(&acked));
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let mut child = start(tmp.path(), port);
    wait_ready(&http, &base);
    for id in &acked {
        let r = http
            .get(format!("{base}/v1/events/{id}"))
            .bearer_auth(&key)
            .send()
            .expect("get");
        assert_eq!(r.status().as_u16(), 200, "acknowledged {id} lost");
    }
    assert_eq!(
        timeline_all(&http, &base, &key),
        sorted(&acked),
        "after a restart the timeline holds every acknowledged event"
    );
    eprintln!(
        "disk full: {} acknowledged before the disk filled, {refused} refused with 503, 0 lost",
        acked.len()
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn sorted(ids: &[String]) -> Vec<String> {
    let mut v = ids.to_vec();
    v.sort();
    v
}

/// Every event id of the key's timeline, sorted.
fn timeline_all(http: &Client, base: &str, key: &str) -> Vec<String> {
    let events = all_pages(http, &format!("{base}/v1/timeline"), key, "events", 500);
    let ids: Vec<String> = events
        .iter()
        .map(|e| e["eventId"].as_str().expect("id").to_string())
        .collect();
    sorted(&ids)
}

/// Waits until `/readyz` reports the scope index in step with the log.
fn wait_index_ok(http: &Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready: Value = http
            .get(format!("{base}/readyz"))
            .send()
            .expect("readyz")
            .json()
            .expect("json");
        if ready["indexes"]["scope"] == "ok" {
            return;
        }
        assert!(Instant::now() < deadline, "index not repaired: {ready}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
