//! `episodic import` / `export` round trip through the real binary, the import summary's
//! line accounting, the data-directory lock, and `print-config` with a config file.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::common::{event, model_dir, with};

fn episodic(args: &[&str], data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_episodic"))
        .args(args)
        .env("EPISODIC_DATA_DIR", data_dir)
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env_remove("EPISODIC_CONFIG")
        .env_remove("EPISODIC_ADMIN_KEY")
        .output()
        .expect("run episodic")
}

fn jsonl(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

fn exported(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .expect("export file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

#[test]
fn import_accounts_for_every_line_and_export_round_trips() {
    let src = tempfile::tempdir().expect("tmp");
    let a = with(
        event(
            "ana",
            "Ana prefers aisle seats on long flights",
            "2026-01-05T08:00:00Z",
        ),
        "eventId",
        json!("ev-a"),
    );
    let b = with(
        event(
            "ana",
            "Ana now prefers window seats",
            "2026-02-05T08:00:00Z",
        ),
        "supersedesEventIds",
        json!(["ev-a"]),
    );
    let b = with(b, "eventId", json!("ev-b"));
    let secret = with(
        event("bo", "Bo was diagnosed with asthma", "2026-01-06T08:00:00Z"),
        "privacyClass",
        json!("sensitive"),
    );
    let lines = vec![
        a.to_string(),
        "{not json".to_string(),
        b.to_string(),
        json!({"eventType": "user_preference_stated"}).to_string(),
        with(a.clone(), "tenantId", json!("someone-else")).to_string(),
        secret.to_string(),
        a.to_string(),
        String::new(),
    ];
    let file = src.path().join("in.jsonl");
    std::fs::write(&file, jsonl(&lines)).expect("write");
    let data = src.path().join("data");
    let out = episodic(
        &[
            "import",
            "--tenant",
            "acme",
            "--batch",
            "2",
            "--file",
            file.to_str().expect("utf8"),
        ],
        &data,
    );
    // Lines were left out: the exit status says so (2), and so does the summary.
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("4 lines NOT imported"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("summary json");
    assert_eq!(summary["notImported"], 4, "{summary}");
    assert_eq!(summary["lines"], 7, "{summary}");
    assert_eq!(summary["allowed"], 2, "{summary}");
    assert_eq!(summary["unchanged"], 1, "{summary}");
    let lines_of = |k: &str| -> Vec<u64> {
        summary[k]
            .as_array()
            .expect(k)
            .iter()
            .map(|i| i["line"].as_u64().expect("line"))
            .collect()
    };
    assert_eq!(lines_of("invalid"), vec![2, 4, 5], "{summary}");
    assert_eq!(lines_of("denied"), vec![6], "{summary}");
    assert_eq!(summary["invalid"][0]["code"], "malformed_json");
    assert_eq!(summary["invalid"][2]["code"], "tenant_mismatch");
    assert_eq!(summary["denied"][0]["code"], "policy_denied");
    assert!(
        summary["invalid"][1]["errors"]
            .as_array()
            .expect("errors")
            .len()
            > 1
    );

    // Export with vectors, import into a fresh directory, export again: same events.
    let first = src.path().join("first.jsonl");
    let out = episodic(
        &[
            "export",
            "--tenant",
            "acme",
            "--with-vectors",
            "--out",
            first.to_str().expect("utf8"),
        ],
        &data,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = exported(&first);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["eventId"], "ev-a");
    assert_eq!(events[0]["status"], "superseded");
    assert_eq!(events[1]["eventId"], "ev-b");
    assert_eq!(events[0]["vector"].as_array().expect("vector").len(), 384);

    // The export imported again into the same directory: every line unchanged, exit 0,
    // nothing embedded (a correction and the event it superseded included).
    let out = episodic(
        &[
            "import",
            "--tenant",
            "acme",
            "--file",
            first.to_str().expect("utf8"),
        ],
        &data,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Value = serde_json::from_slice(&out.stdout).expect("summary");
    assert_eq!(again["unchanged"], 2, "{again}");
    assert_eq!(again["notImported"], 0, "{again}");
    assert_eq!(again["embedded"], 0, "{again}");
    let copy = src.path().join("copy");
    let out = episodic(
        &[
            "import",
            "--tenant",
            "acme",
            "--file",
            first.to_str().expect("utf8"),
        ],
        &copy,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("summary");
    assert_eq!(summary["allowed"], 2, "{summary}");
    assert_eq!(
        summary["vectorsReused"], 2,
        "vectors reused, not re-embedded: {summary}"
    );
    assert_eq!(summary["embedded"], 0);
    let second = src.path().join("second.jsonl");
    let out = episodic(
        &[
            "export",
            "--tenant",
            "acme",
            "--with-vectors",
            "--out",
            second.to_str().expect("utf8"),
        ],
        &copy,
    );
    assert!(out.status.success());
    let again = exported(&second);
    assert_eq!(events.len(), again.len());
    for (before, after) in events.iter().zip(&again) {
        let strip = |v: &Value| {
            let mut v = v.clone();
            for k in ["recordedAt", "supersededAt", "vector"] {
                v.as_object_mut().expect("obj").remove(k);
            }
            v
        };
        assert_eq!(strip(before), strip(after));
        let cosine: f64 = before["vector"]
            .as_array()
            .expect("vector")
            .iter()
            .zip(after["vector"].as_array().expect("vector"))
            .map(|(x, y)| x.as_f64().expect("f") * y.as_f64().expect("f"))
            .sum();
        assert!(cosine > 0.99999, "vector survives the round trip: {cosine}");
    }
    // Another tenant exports nothing.
    let out = episodic(&["export", "--tenant", "other"], &copy);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

#[test]
fn print_config_layers_file_env_and_flags_and_redacts_secrets() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("episodic.toml");
    std::fs::write(
        &cfg,
        "refresh_ms = 250\nrank_weights = \"0.6,0.2,0.1,0.1\"\nlisten = \"127.0.0.1:9999\"\nadmin_key = \"file-secret\"\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_episodic"))
        .args([
            "print-config",
            "--config",
            cfg.to_str().expect("utf8"),
            "--listen",
            "127.0.0.1:7000",
        ])
        .env("EPISODIC_RANK_WEIGHTS", "0.5,0.3,0.1,0.1")
        .env_remove("EPISODIC_ADMIN_KEY")
        .env_remove("EPISODIC_REFRESH_MS")
        .env_remove("EPISODIC_LISTEN")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf8");
    assert!(text.contains("refresh_ms = 250"), "file applies: {text}");
    assert!(
        text.contains("rank_weights = \"0.5,0.3,0.1,0.1\""),
        "env beats file: {text}"
    );
    assert!(
        text.contains("listen = \"127.0.0.1:7000\""),
        "flag beats all: {text}"
    );
    assert!(text.contains("admin_key = \"<redacted>\""), "{text}");
    assert!(!text.contains("file-secret"));
    // Unknown keys fail with the file name.
    std::fs::write(&cfg, "refresh_msec = 1\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_episodic"))
        .args(["print-config", "--config", cfg.to_str().expect("utf8")])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refresh_msec") && err.contains("episodic.toml"),
        "{err}"
    );
}

#[tokio::test]
async fn a_second_process_cannot_open_a_data_directory_in_use() {
    let app = crate::common::App::new();
    let out = episodic(&["export", "--tenant", "t"], app.dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another episodic process"), "{err}");
    // Released at shutdown: the offline command now runs.
    app.engine.shutdown().await;
    let dir = app.dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || episodic(&["export", "--tenant", "t"], &dir))
        .await
        .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
