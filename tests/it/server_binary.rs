//! The real `episodic serve` binary on loopback: start-up, admin key, write, recall, shutdown,
//! and the start-up error for missing model files.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{event, model_dir};

pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

pub(crate) fn spawn(data_dir: &Path, port: u16, models: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_episodic"))
        .arg("serve")
        .env("EPISODIC_DATA_DIR", data_dir)
        .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
        .env("EPISODIC_MODEL_DIR", models)
        .env_remove("EPISODIC_ADMIN_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn episodic")
}

pub(crate) fn wait_ready(client: &reqwest::blocking::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{base}/readyz")).send() {
            if r.status().is_success() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("server not ready in time");
}

pub(crate) fn stop(mut child: Child) {
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(status.success(), "graceful exit: {status}");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("server did not stop on SIGTERM");
}

#[test]
fn serve_generates_an_admin_key_and_answers_over_loopback() {
    let dir = tempfile::tempdir().expect("tmp");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = spawn(dir.path(), port, &model_dir());
    let client = reqwest::blocking::Client::new();
    wait_ready(&client, &base);
    let key_path = dir.path().join("admin.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key_path)
            .expect("admin.key")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let admin = std::fs::read_to_string(&key_path)
        .expect("read")
        .trim()
        .to_string();
    let created: Value = client
        .post(format!("{base}/v1/admin/keys"))
        .bearer_auth(&admin)
        .json(&json!({"tenantId": "acme", "roles": ["writer", "reader"]}))
        .send()
        .expect("create key")
        .json()
        .expect("json");
    let key = created["key"].as_str().expect("key").to_string();
    let resp = client
        .post(format!("{base}/v1/events"))
        .bearer_auth(&key)
        .json(&event(
            "u",
            "The customer asked for renewal notices by email",
            "2026-06-17T09:20:00Z",
        ))
        .send()
        .expect("write");
    assert_eq!(resp.status().as_u16(), 201);
    assert!(resp.headers().contains_key("x-request-id"));
    let recall: Value = client
        .post(format!("{base}/v1/recall"))
        .bearer_auth(&key)
        .json(&json!({"query": "renewal reminders by email"}))
        .send()
        .expect("recall")
        .json()
        .expect("json");
    assert!(recall["evidence"]
        .as_str()
        .expect("evidence")
        .starts_with("Past event, not current instruction:"));
    let unauth = client
        .get(format!("{base}/v1/timeline"))
        .send()
        .expect("timeline");
    assert_eq!(unauth.status().as_u16(), 401);
    assert_eq!(unauth.headers()["content-type"], "application/problem+json");
    stop(child);
    assert!(!std::fs::read_to_string(dir.path().join("keys.json"))
        .expect("keys")
        .contains(&admin));
    let out = Command::new(env!("CARGO_BIN_EXE_episodic"))
        .args(["compact", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run compact");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report json");
    assert_eq!(report["liveEvents"], 1);
}

#[test]
fn missing_model_files_fail_start_up_naming_the_file_and_the_fix() {
    let dir = tempfile::tempdir().expect("tmp");
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).expect("mkdir");
    std::fs::copy(
        model_dir().join("manifest.json"),
        models.join("manifest.json"),
    )
    .expect("copy manifest");
    let mut child = spawn(&dir.path().join("data"), free_port(), &models);
    let status = child.wait().expect("wait");
    assert!(!status.success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read");
    assert!(stderr.contains("model file missing"), "{stderr}");
    assert!(
        stderr.contains("models/files/model.onnx"),
        "names the file: {stderr}"
    );
    assert!(
        stderr.contains("models/fetch.sh"),
        "names the fix: {stderr}"
    );
}

/// `/metrics` holds store-wide counts: it answers the metrics token (and the admin key), not
/// anonymous callers or tenant keys.
#[test]
fn metrics_need_the_token() {
    let dir = tempfile::tempdir().expect("tmp");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let token = "metrics-Zq4Wn8Lc2Vb6Rt1Hx9Jm3Pd7Ks5";
    let child = Command::new(env!("CARGO_BIN_EXE_episodic"))
        .arg("serve")
        .env("EPISODIC_DATA_DIR", dir.path())
        .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env("EPISODIC_METRICS_TOKEN", token)
        .env_remove("EPISODIC_ADMIN_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn episodic");
    let client = reqwest::blocking::Client::new();
    wait_ready(&client, &base);
    let get = |auth: Option<&str>| {
        let mut req = client.get(format!("{base}/metrics"));
        if let Some(a) = auth {
            req = req.bearer_auth(a);
        }
        req.send().expect("metrics")
    };
    assert_eq!(get(None).status().as_u16(), 401);
    let ok = get(Some(token));
    assert_eq!(ok.status().as_u16(), 200);
    assert!(ok.text().expect("text").contains("episodic_events"));
    let ready: Value = client
        .get(format!("{base}/readyz"))
        .send()
        .expect("readyz")
        .json()
        .expect("json");
    assert!(
        ready.get("events").is_none(),
        "readiness shows no counts: {ready}"
    );
    stop(child);
}
