//! A log or audit trail that lost acknowledged records refuses to start, naming the file,
//! the sequence it holds and the one that was expected; `episodic recover --accept-loss` is
//! the explicit way on, and even then an event known to be deleted never comes back. A
//! torn tail that no record proves acknowledged is still dropped silently.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use episodic::engine::{DataLoss, Engine};

use crate::common::{config, event, real_model, App};

/// Writes `n` events, then deletes every other one: (live ids, deleted ids). As in the
/// field report, the deletions come last, so a log cut in half has lost all of them.
async fn fill(app: &App, key: &str, n: usize) -> (Vec<String>, Vec<String>) {
    let mut ids = Vec::new();
    for i in 0..n {
        let e = event(
            "user-1",
            &format!("The customer asked for renewal notices by email, note {i}"),
            "2026-06-17T09:20:00Z",
        );
        ids.push(app.write_ok(key, e).await);
    }
    let (mut live, mut deleted) = (Vec::new(), Vec::new());
    for (i, id) in ids.into_iter().enumerate() {
        if i % 2 == 1 {
            let (status, body) = app
                .call("DELETE", &format!("/v1/events/{id}"), Some(key), None)
                .await;
            assert_eq!(status, 200, "{body}");
            deleted.push(id);
        } else {
            live.push(id);
        }
    }
    (live, deleted)
}

fn truncate_to(path: &Path, len: u64) {
    let f = OpenOptions::new().write(true).open(path).expect("open");
    f.set_len(len).expect("truncate");
}

fn half(path: &Path) {
    let len = std::fs::metadata(path).expect("meta").len();
    truncate_to(path, len / 2);
}

fn open_err(dir: &Path) -> anyhow::Error {
    match Engine::open(config(dir), real_model()) {
        Ok(_) => panic!("the engine started over a log that lost acknowledged records"),
        Err(e) => e,
    }
}

fn loss(e: &anyhow::Error) -> &DataLoss {
    e.downcast_ref::<DataLoss>()
        .unwrap_or_else(|| panic!("not a data-loss refusal: {e:#}"))
}

async fn stopped(app: App) -> tempfile::TempDir {
    app.engine.shutdown().await;
    let App { dir, .. } = app;
    dir
}

async fn reopen(dir: tempfile::TempDir) -> App {
    tokio::task::spawn_blocking(move || App::open_in(dir, config))
        .await
        .expect("reopen")
}

async fn status_of(app: &App, key: &str, id: &str) -> u16 {
    let (status, _) = app
        .call("GET", &format!("/v1/events/{id}"), Some(key), None)
        .await;
    status.as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_log_refuses_to_start_and_recovery_keeps_deletions() {
    let app = App::new();
    let key = app.key_full("acme").await;
    let (live, deleted) = fill(&app, &key, 60).await;
    let dir = stopped(app).await;
    let log = dir.path().join("log").join("events.log");
    half(&log);

    let err = open_err(dir.path());
    let l = loss(&err);
    assert!(l.file.ends_with("events.log"), "{err}");
    assert!(l.held < l.expected, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("ends at sequence {}", l.held))
            && text.contains(&format!("sequence {} was acknowledged", l.expected))
            && text.contains("recover --accept-loss"),
        "{text}"
    );
    // Refusing again changes nothing: still refused, nothing served.
    assert_eq!(loss(&open_err(dir.path())).expected, l.expected);

    let cfg = config(dir.path());
    let dry = episodic::engine::recover(&cfg, false).expect("dry run");
    assert!(!dry.nothing_lost && !dry.applied);
    let _ = open_err(dir.path());
    let report = episodic::engine::recover(&cfg, true).expect("recover");
    assert!(report.applied);
    let acme = &report.tenants["acme"];
    assert!(!acme.redeleted_event_ids.is_empty(), "{report:?}");
    assert!(!acme.reserved_event_ids.is_empty(), "{report:?}");

    let app = reopen(dir).await;
    for id in &deleted {
        assert_eq!(status_of(&app, &key, id).await, 404, "deleted {id} is back");
        let reuse = crate::common::with(
            event("user-1", "reuse", "2026-06-17T09:20:00Z"),
            "eventId",
            serde_json::json!(id),
        );
        let (status, _) = app.write(&key, reuse).await;
        assert_eq!(
            status.as_u16(),
            409,
            "deleted id {id} reusable after recovery"
        );
    }
    let mut kept = 0;
    for id in &live {
        match status_of(&app, &key, id).await {
            200 => kept += 1,
            404 => assert!(
                acme.lost_event_ids.contains(id),
                "{id} lost but not reported"
            ),
            other => panic!("{id}: {other}"),
        }
    }
    assert!(
        kept > 0 && kept < live.len(),
        "half the log survived: {kept}"
    );
    let (status, page) = app
        .call("GET", "/v1/audit?action=recovered", Some(&key), None)
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page["entries"].as_array().expect("entries").len(),
        1,
        "{page}"
    );
    // Recovery is done: the next start needs nothing.
    let dir = stopped(app).await;
    let again = episodic::engine::recover(&config(dir.path()), false).expect("check");
    assert!(again.nothing_lost, "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_audit_trail_refuses_to_start() {
    let app = App::new();
    let key = app.key("acme").await;
    let _ = fill(&app, &key, 10).await;
    let dir = stopped(app).await;
    let audit = dir.path().join("audit").join("audit.log");
    half(&audit);
    let err = open_err(dir.path());
    let l = loss(&err);
    assert!(l.file.ends_with("audit.log"), "{err}");
    let report = episodic::engine::recover(&config(dir.path()), true).expect("recover");
    assert!(report.applied && report.audit_held < report.audit_expected);
    let app = reopen(dir).await;
    let (status, _) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert_eq!(status, 200);
}

/// A torn final frame (a write that never completed, so was never acknowledged) is dropped
/// silently, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_unacknowledged_tail_is_dropped_silently() {
    let app = App::new();
    let key = app.key("acme").await;
    let (live, _) = fill(&app, &key, 6).await;
    let dir = stopped(app).await;
    for file in [
        dir.path().join("log").join("events.log"),
        dir.path().join("audit").join("audit.log"),
    ] {
        let mut f = OpenOptions::new().append(true).open(&file).expect("open");
        // A frame header announcing 4 KiB of which only a few bytes arrived.
        f.write_all(&4096u32.to_le_bytes()).expect("len");
        f.write_all(&[7u8; 9]).expect("partial");
    }
    let app = reopen(dir).await;
    for id in &live {
        assert_eq!(status_of(&app, &key, id).await, 200);
    }
}

/// The binary: a refused start exits non-zero with the reason; `recover` without
/// `--accept-loss` changes nothing and says what is missing; with it, `serve` starts.
#[test]
fn the_binary_refuses_and_recover_lets_it_start() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = rt.block_on(async {
        let app = App::new();
        let key = app.key("acme").await;
        let _ = fill(&app, &key, 8).await;
        stopped(app).await
    });
    half(&dir.path().join("log").join("events.log"));
    let bin = env!("CARGO_BIN_EXE_episodic");
    let port = crate::server_binary::free_port();
    let serve = Command::new(bin)
        .arg("serve")
        .env("EPISODIC_DATA_DIR", dir.path())
        .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
        .env("EPISODIC_MODEL_DIR", crate::common::model_dir())
        .env_remove("EPISODIC_ADMIN_KEY")
        .output()
        .expect("serve");
    assert!(
        !serve.status.success(),
        "serve started over a truncated log"
    );
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert!(
        stderr.contains("events.log ends at sequence") && stderr.contains("recover --accept-loss"),
        "{stderr}"
    );
    let dry = Command::new(bin)
        .args(["recover", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("recover");
    assert!(!dry.status.success());
    let report: Value = serde_json::from_slice(&dry.stdout).expect("report");
    assert_eq!(report["applied"], false);
    assert!(report["logHeld"].as_u64() < report["logExpected"].as_u64());
    let done = Command::new(bin)
        .args(["recover", "--accept-loss", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("recover");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let child = crate::server_binary::spawn(dir.path(), port, &crate::common::model_dir());
    let http = reqwest::blocking::Client::new();
    crate::server_binary::wait_ready(&http, &format!("http://127.0.0.1:{port}"));
    crate::server_binary::stop(child);
}
