//! Online backup (`POST /v1/admin/backup`) and `episodic restore`, with the real model and
//! real fsync: a backup taken while writes go on holds every write acknowledged before it
//! was asked for; a restored data directory serves them with the same recall answers, and
//! neither the restore nor the first start on it embeds anything.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::StatusCode;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::common::{config, event, model_dir, App, ADMIN};

fn restore_cmd(from: &str, to: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_episodic"))
        .args(["restore", "--from", from, "--data-dir"])
        .arg(to)
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env_remove("EPISODIC_CONFIG")
        .output()
        .expect("run episodic restore")
}

async fn backup(app: &App) -> Value {
    let (status, report) = app
        .call("POST", "/v1/admin/backup", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{report}");
    report
}

/// Restores `report`'s backup with the real binary into a new directory and opens an app on
/// it; the binary runs without the model (nothing to embed) and the app's embedder counts.
async fn restored(report: &Value) -> App {
    let root = tempfile::tempdir().expect("tmp");
    let from = report["path"].as_str().expect("path").to_string();
    let to = root.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || restore_cmd(&from, &to))
        .await
        .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("restore report");
    assert_eq!(summary["events"], report["events"]);
    assert_eq!(summary["logSequence"], report["logSequence"]);
    tokio::task::spawn_blocking(move || App::open_in(root, config))
        .await
        .expect("open restored")
}

#[tokio::test]
async fn a_backup_taken_under_writes_restores_every_acknowledged_event() {
    let app = Arc::new(App::new());
    let key = app.key("acme").await;
    let mut before = Vec::new();
    for (i, summary) in [
        "Ana prefers aisle seats on long flights",
        "Ana asked for renewal notices by email",
        "Ana's laptop was replaced after the battery failed",
        "Ana approved the Lisbon office lease",
    ]
    .iter()
    .enumerate()
    {
        let at = format!("2026-01-0{}T08:00:00Z", i + 1);
        before.push(app.write_ok(&key, event("ana", summary, &at)).await);
    }

    // Writes go on while the backup is taken: Bo's events, acknowledged one after another.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (app, key, acked, stop) = (app.clone(), key.clone(), acked.clone(), stop.clone());
        tokio::spawn(async move {
            for i in 0..200 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let summary = format!("Bo logged shipment {i} to the Porto warehouse");
                let id = app
                    .write_ok(&key, event("bo", &summary, "2026-02-01T08:00:00Z"))
                    .await;
                acked.lock().push(id);
            }
        })
    };
    while acked.lock().len() < 5 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let acked_before: Vec<String> = acked.lock().clone();
    let report = backup(&app).await;
    let acked_after_answer = acked.lock().len();
    // Let a few more land after the answer, then stop.
    while acked.lock().len() < acked_after_answer + 3 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::SeqCst);
    writer.await.expect("writer");

    let path = PathBuf::from(report["path"].as_str().expect("path"));
    assert!(path.starts_with(app.dir.path().join("backups")), "{report}");
    assert!(
        report["logSequence"].as_u64().expect("seq") >= 9,
        "{report}"
    );
    let files: Vec<&str> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path"))
        .collect();
    assert_eq!(
        files,
        vec![
            "log/events.log",
            "audit/audit.log",
            "audit/hash.key",
            "keys.json"
        ]
    );
    assert!(path.join("manifest.json").exists());
    for f in ["log/events.log", "manifest.json", "keys.json"] {
        let mode = std::fs::metadata(path.join(f))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{f} is owner-only");
    }
    assert!(
        !path.join("admin.key").exists(),
        "no plaintext key in a backup"
    );
    let events = report["events"].as_u64().expect("events") as usize;
    assert!(events >= before.len() + acked_before.len(), "{report}");
    assert!(
        events < before.len() + acked.lock().len(),
        "writes after it are not in it"
    );

    let copy = restored(&report).await;
    assert_eq!(
        copy.texts_embedded(),
        0,
        "the first start re-embeds nothing"
    );
    assert_eq!(copy.engine.stats().events, events);
    // The same key works (keys.json came along), and every event acknowledged before the
    // backup was asked for is there.
    for id in before.iter().chain(&acked_before) {
        let (status, body) = copy
            .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{id}: {body}");
    }
    let hits = copy
        .recall(
            &key,
            json!({"query": "aisle seats on long flights", "scope": {"actorIds": ["ana"]},
                   "includeStale": true}),
        )
        .await;
    assert_eq!(
        crate::common::result_ids(&hits).len(),
        before.len(),
        "recall finds Ana's events: {hits}"
    );
    assert_eq!(
        hits["results"][0]["event"]["eventId"],
        before[0].as_str(),
        "{hits}"
    );
    assert_eq!(copy.texts_embedded(), 1, "only the query was embedded");
}

#[tokio::test]
async fn a_restored_store_answers_recall_as_the_original_did() {
    let app = App::new();
    let key = app.key("acme").await;
    let summaries = [
        "Dana asked for renewal notices by email",
        "Dana's invoice for March was paid late",
        "Dana now wants renewal notices by text message",
        "The Porto warehouse reported a broken forklift",
        "Dana approved the new support contract",
    ];
    for (i, s) in summaries.iter().enumerate() {
        let at = format!("2026-03-0{}T08:00:00Z", i + 1);
        app.write_ok(&key, event("dana", s, &at)).await;
    }
    let gone = app
        .write_ok(
            &key,
            event("dana", "Dana's old phone number", "2026-03-09T08:00:00Z"),
        )
        .await;
    let (status, _) = app
        .call("DELETE", &format!("/v1/events/{gone}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let report = backup(&app).await;
    assert_eq!(report["events"], 5, "{report}");

    let copy = restored(&report).await;
    let (status, _) = copy
        .call("GET", &format!("/v1/events/{gone}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a deletion is restored too");
    for query in [
        "How does Dana want to hear about renewals?",
        "What broke at the warehouse?",
    ] {
        let body = json!({"query": query, "limit": 5, "includeStale": true});
        let (a, b) = (
            app.recall(&key, body.clone()).await,
            copy.recall(&key, body).await,
        );
        let hits = |v: &Value| -> Vec<(String, f64)> {
            v["results"]
                .as_array()
                .expect("results")
                .iter()
                .map(|h| {
                    (
                        h["event"]["eventId"].as_str().expect("id").to_string(),
                        h["scoreBreakdown"]["cosine"].as_f64().expect("cosine"),
                    )
                })
                .collect()
        };
        assert_eq!(hits(&a), hits(&b), "{query}");
    }
    // The audit trail came along: the original writes are in the restored trail.
    let (status, page) = copy
        .call("GET", "/v1/audit?action=write&limit=100", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["entries"].as_array().expect("entries").len(), 6);
}

#[tokio::test]
async fn backups_are_the_admins_and_name_no_path_and_restore_checks_its_files() {
    let app = App::new();
    let key = app.key("acme").await;
    app.write_ok(
        &key,
        event("ana", "Ana prefers aisle seats", "2026-01-05T08:00:00Z"),
    )
    .await;
    let (status, _) = app.call("POST", "/v1/admin/backup", Some(&key), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = app
        .call(
            "POST",
            "/v1/admin/backup",
            Some(ADMIN),
            Some(json!({"path": "/tmp/elsewhere"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["field"], "path");
    let first = backup(&app).await;
    let second = backup(&app).await;
    assert_ne!(first["backupId"], second["backupId"]);
    assert_eq!(first["logSequence"], second["logSequence"]);

    // A restore refuses a non-empty target and a damaged backup.
    let target = tempfile::tempdir().expect("tmp");
    std::fs::write(target.path().join("x"), b"x").expect("write");
    let from = first["path"].as_str().expect("path").to_string();
    let t = target.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || restore_cmd(&from, &t))
        .await
        .expect("join");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    let path = PathBuf::from(second["path"].as_str().expect("path"));
    let log = path.join("log/events.log");
    let mut bytes = std::fs::read(&log).expect("log");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&log, bytes).expect("damage");
    let fresh = tempfile::tempdir().expect("tmp").path().join("new");
    let from = path.display().to_string();
    let out = tokio::task::spawn_blocking(move || restore_cmd(&from, &fresh))
        .await
        .expect("join");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("manifest says"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
