//! Import and export while serving (`GET /v1/export`, `POST /v1/import`), with the real
//! model: an export holds exactly what the key reads, importing it again into the same
//! store reports every line unchanged (over HTTP and with the `episodic` commands), the
//! answer never claims success when lines failed, and lines of another tenant are refused.

use std::path::Path;
use std::process::Command;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common::{event, model_dir, with, App, ADMIN};

/// A raw request with an optional NDJSON body: status, export-count header, body bytes.
async fn raw(
    app: &App,
    method: &str,
    path: &str,
    key: &str,
    body: Option<String>,
) -> (StatusCode, Option<u64>, Vec<u8>) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {key}"));
    if body.is_some() {
        req = req.header("content-type", "application/x-ndjson");
    }
    let req = req
        .body(body.map_or_else(Body::empty, Body::from))
        .expect("request");
    let resp = app.router.clone().oneshot(req).await.expect("response");
    let status = resp.status();
    let count = resp
        .headers()
        .get("episodic-export-events")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, count, bytes.to_vec())
}

/// `GET /v1/export` as `key`: the lines, checked against the count header.
pub(crate) async fn export(app: &App, key: &str, query: &str) -> (String, Vec<Value>) {
    let (status, count, bytes) = raw(app, "GET", &format!("/v1/export{query}"), key, None).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let text = String::from_utf8(bytes).expect("utf8");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        count,
        Some(lines.len() as u64),
        "the header counts the lines"
    );
    (text, lines)
}

/// `POST /v1/import` as `key`: the status and the summary.
pub(crate) async fn import(app: &App, key: &str, body: String) -> (StatusCode, Value) {
    let (status, _, bytes) = raw(app, "POST", "/v1/import", key, Some(body)).await;
    (
        status,
        serde_json::from_slice(&bytes).expect("summary is JSON"),
    )
}

fn ids(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["eventId"].as_str().expect("id").to_string())
        .collect()
}

fn soon(ms: i64) -> String {
    episodic::model::Timestamp::now()
        .plus_millis(ms)
        .to_rfc3339()
}

#[tokio::test]
async fn export_is_the_keys_view_and_importing_it_again_changes_nothing() {
    let app = App::new();
    let full = app.key_full("acme").await;
    let plain = app.key("acme").await; // maxPrivacyClass internal
    let (status, created) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(ADMIN),
            Some(json!({"tenantId": "acme", "roles": ["writer", "reader"], "actorIds": ["bo"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let bo_only = created["key"].as_str().expect("key").to_string();

    let a = with(
        event("ana", "Ana prefers aisle seats", "2026-01-05T08:00:00Z"),
        "eventId",
        json!("ev-a"),
    );
    app.write_ok(&full, a).await;
    let b = with(
        event(
            "ana",
            "Ana now prefers window seats",
            "2026-02-05T08:00:00Z",
        ),
        "supersedesEventIds",
        json!(["ev-a"]),
    );
    let b_id = app.write_ok(&full, b).await;
    // A write that leaves fields to the server (the id generated, type and class derived).
    let (status, minimal) = app
        .write(
            &full,
            json!({"summary": "Bo asked for invoices by post", "actorId": "bo",
                   "occurredAt": "2026-01-06T08:00:00Z", "sourceRefs": ["chat-9"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{minimal}");
    let minimal_id = minimal["eventId"].as_str().expect("id").to_string();
    // Bo's own key writes one: its id is namespaced by that key (it sees only Bo).
    let bo_id = app
        .write_ok(
            &bo_only,
            with(
                event(
                    "bo",
                    "Bo moved to the Lisbon office",
                    "2026-01-07T08:00:00Z",
                ),
                "eventId",
                json!("bo-1"),
            ),
        )
        .await;
    assert!(bo_id.starts_with("bo-1~"), "{bo_id}");
    let private = with(
        event(
            "ana",
            "Ana's home address is 4 Elm Road",
            "2026-01-08T08:00:00Z",
        ),
        "privacyClass",
        json!("private"),
    );
    let private_id = app.write_ok(&full, private).await;
    let gone = app
        .write_ok(
            &full,
            event(
                "ana",
                "Ana mentioned a dentist visit",
                "2026-01-09T08:00:00Z",
            ),
        )
        .await;
    let (status, _) = app
        .call("DELETE", &format!("/v1/events/{gone}"), Some(&full), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let expiring = with(
        event(
            "ana",
            "Ana is at the airport lounge",
            "2026-01-10T08:00:00Z",
        ),
        "retention",
        json!({"deleteOnRequest": true, "expiresAt": soon(1500)}),
    );
    app.write_ok(&full, expiring).await;
    tokio::time::sleep(std::time::Duration::from_millis(1700)).await;

    // The full key: every live, unexpired event, in log order, the correction after what
    // it corrects; nothing deleted or expired.
    let (full_text, lines) = export(&app, &full, "").await;
    assert_eq!(
        ids(&lines),
        vec![
            "ev-a".to_string(),
            b_id.clone(),
            minimal_id.clone(),
            bo_id.clone(),
            private_id.clone()
        ]
    );
    assert_eq!(lines[0]["status"], "superseded");
    assert_eq!(lines[1]["supersedesEventIds"], json!(["ev-a"]));
    assert!(lines.iter().all(|l| l.get("vector").is_none()));
    // The plain key (ceiling internal) never sees the private event; Bo's key only Bo.
    let (plain_text, plain_lines) = export(&app, &plain, "").await;
    assert!(!ids(&plain_lines).contains(&private_id));
    assert_eq!(plain_lines.len(), 4);
    let (_, bo_lines) = export(&app, &bo_only, "").await;
    assert_eq!(ids(&bo_lines), vec![minimal_id.clone(), bo_id.clone()]);
    // With vectors: each line carries its embedding and the model.
    let (_, with_vectors) = export(&app, &full, "?withVectors=true").await;
    assert_eq!(
        with_vectors[0]["vector"].as_array().expect("vector").len(),
        384
    );
    assert!(with_vectors[0]["embeddingModel"].is_string());

    // Importing each export again with the key that took it: every line unchanged, 200,
    // and nothing embedded.
    let before = app.texts_embedded();
    for (key, text, n) in [(&full, &full_text, 5), (&plain, &plain_text, 4)] {
        let (status, summary) = import(&app, key, text.clone()).await;
        assert_eq!(status, StatusCode::OK, "{summary}");
        assert_eq!(summary["unchanged"], n, "{summary}");
        assert_eq!(summary["notImported"], 0, "{summary}");
        assert_eq!(summary["allowed"], 0, "{summary}");
    }
    assert_eq!(
        app.texts_embedded(),
        before,
        "an unchanged line is never embedded"
    );
    // The export with vectors too (its vectors ignored).
    let text: String = with_vectors.iter().map(|l| format!("{l}\n")).collect();
    let (status, summary) = import(&app, &full, text).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["unchanged"], 5, "{summary}");

    // Changed content under an existing id, another tenant's line, a malformed line, a
    // deleted event's id: 207, each listed with its line and code; the good line is stored.
    let changed = with(
        lines[0].clone(),
        "summary",
        json!("Ana prefers middle seats"),
    );
    let other = with(lines[2].clone(), "tenantId", json!("globex"));
    let mut deleted = lines[2].clone();
    deleted["eventId"] = json!(gone);
    let new = with(
        with(
            event("ana", "Ana booked a train to Porto", "2026-03-01T08:00:00Z"),
            "eventId",
            json!("ev-new"),
        ),
        "supersedesEventIds",
        json!([]),
    );
    let new = with(new, "correctionPath", json!(""));
    let body = format!("{changed}\n{other}\n{{not json\n\n{deleted}\n{new}\n");
    let (status, summary) = import(&app, &full, body).await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{summary}");
    assert_eq!(summary["lines"], 5, "{summary}");
    assert_eq!(summary["allowed"], 1, "{summary}");
    assert_eq!(summary["notImported"], 4, "{summary}");
    let issues = |k: &str| -> Vec<(u64, String)> {
        summary[k]
            .as_array()
            .expect(k)
            .iter()
            .map(|i| {
                (
                    i["line"].as_u64().expect("line"),
                    i["code"].as_str().expect("code").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(
        issues("invalid"),
        vec![
            (2, "tenant_mismatch".to_string()),
            (3, "malformed_json".to_string())
        ]
    );
    assert_eq!(
        issues("failed"),
        vec![(1, "conflict".to_string()), (5, "conflict".to_string())]
    );
    let (status, _) = app
        .call("GET", "/v1/events/ev-new", Some(&full), None)
        .await;
    assert_eq!(status, StatusCode::OK);

    // Roles: export needs reader, import writer.
    let writer_only = app.key_with("acme", &["writer"]).await;
    let (status, _, _) = raw(&app, "GET", "/v1/export", &writer_only, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let reader_only = app.key_with("acme", &["reader"]).await;
    let (status, _, _) = raw(
        &app,
        "POST",
        "/v1/import",
        &reader_only,
        Some(String::new()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Another tenant's key exports nothing of acme's.
    let globex = app.key("globex").await;
    let (_, globex_lines) = export(&app, &globex, "").await;
    assert!(globex_lines.is_empty());
}

#[tokio::test]
async fn an_export_moves_to_a_fresh_store_over_http_and_back_unchanged() {
    let src = App::new();
    let key = src.key_full("acme").await;
    let a = src
        .write_ok(
            &key,
            event("ana", "Ana prefers aisle seats", "2026-01-05T08:00:00Z"),
        )
        .await;
    let private = with(
        with(
            event(
                "ana",
                "Ana's phone number ends in 42",
                "2026-01-06T08:00:00Z",
            ),
            "privacyClass",
            json!("private"),
        ),
        "eventId",
        json!("phone"),
    );
    let private_id = src.write_ok(&key, private).await;
    assert!(private_id.starts_with("phone~"), "{private_id}");
    let fix = with(
        event(
            "ana",
            "Ana's phone number ends in 43",
            "2026-01-07T08:00:00Z",
        ),
        "supersedesEventIds",
        json!([private_id]),
    );
    let fix = with(
        with(fix, "privacyClass", json!("private")),
        "eventId",
        json!("phone-2"),
    );
    src.write_ok(&key, fix).await;
    let (text, lines) = export(&src, &key, "").await;
    assert_eq!(lines.len(), 3);

    // Another store, another key: the ids its namespace allows, the correction still
    // pointing at what it corrects.
    let dst = App::new();
    let dst_key = dst.key_full("acme").await;
    let (status, summary) = import(&dst, &dst_key, text).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["allowed"], 3, "{summary}");
    let (again, moved) = export(&dst, &dst_key, "").await;
    assert_eq!(moved[0]["eventId"], a.as_str());
    assert!(moved[1]["eventId"]
        .as_str()
        .expect("id")
        .starts_with("phone~"));
    assert_eq!(moved[1]["status"], "superseded");
    assert_eq!(moved[2]["supersedesEventIds"], json!([moved[1]["eventId"]]));
    for (before, after) in lines.iter().zip(&moved) {
        assert_eq!(before["summary"], after["summary"]);
    }
    // And the moved store's own export, imported there again: unchanged.
    let (status, summary) = import(&dst, &dst_key, again).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["unchanged"], 3, "{summary}");
}

fn episodic(args: &[&str], data_dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_episodic"))
        .args(args)
        .env("EPISODIC_DATA_DIR", data_dir)
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env_remove("EPISODIC_CONFIG")
        .env_remove("EPISODIC_ADMIN_KEY")
        .output()
        .expect("run episodic")
}

#[tokio::test]
async fn the_commands_import_a_served_stores_export_unchanged() {
    let app = App::new();
    let key = app.key_full("acme").await;
    let bo = {
        let (_, created) = app
            .call(
                "POST",
                "/v1/admin/keys",
                Some(ADMIN),
                Some(json!({"tenantId": "acme", "roles": ["writer"], "actorIds": ["bo"]})),
            )
            .await;
        created["key"].as_str().expect("key").to_string()
    };
    app.write_ok(
        &key,
        json!({"summary": "Ana asked for invoices by email", "actorId": "ana",
               "occurredAt": "2026-01-06T08:00:00Z", "sourceRefs": ["chat-9"]}),
    )
    .await;
    let first = app
        .write_ok(
            &key,
            event("ana", "Ana prefers aisle seats", "2026-01-05T08:00:00Z"),
        )
        .await;
    app.write_ok(
        &key,
        with(
            event(
                "ana",
                "Ana now prefers window seats",
                "2026-02-05T08:00:00Z",
            ),
            "supersedesEventIds",
            json!([first]),
        ),
    )
    .await;
    app.write_ok(
        &bo,
        event(
            "bo",
            "Bo moved to the Lisbon office",
            "2026-01-07T08:00:00Z",
        ),
    )
    .await;
    // A deleted event and an expired one: in neither export.
    let gone = app
        .write_ok(
            &key,
            event(
                "ana",
                "Ana mentioned a dentist visit",
                "2026-01-09T08:00:00Z",
            ),
        )
        .await;
    let (status, _) = app
        .call("DELETE", &format!("/v1/events/{gone}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let expiring = with(
        event(
            "ana",
            "Ana is at the airport lounge",
            "2026-01-10T08:00:00Z",
        ),
        "retention",
        json!({"deleteOnRequest": true, "expiresAt": soon(1000)}),
    );
    let expired = app.write_ok(&key, expiring).await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let (http_text, lines) = export(&app, &key, "").await;
    assert_eq!(lines.len(), 4);
    assert!(!http_text.contains(&gone) && !http_text.contains(&expired));
    app.engine.shutdown().await;
    let dir = app.dir.path().to_path_buf();
    let out_file = dir.join("cli-export.jsonl");
    let http_file = dir.join("http-export.jsonl");
    std::fs::write(&http_file, &http_text).expect("write");
    let (out_file, http_file, data) = (out_file.clone(), http_file.clone(), dir.clone());
    let outputs = tokio::task::spawn_blocking(move || {
        let export = episodic(
            &[
                "export",
                "--tenant",
                "acme",
                "--out",
                out_file.to_str().expect("utf8"),
            ],
            &data,
        );
        let cli = episodic(
            &[
                "import",
                "--tenant",
                "acme",
                "--file",
                out_file.to_str().expect("utf8"),
            ],
            &data,
        );
        let http = episodic(
            &[
                "import",
                "--tenant",
                "acme",
                "--file",
                http_file.to_str().expect("utf8"),
            ],
            &data,
        );
        (export, cli, http, std::fs::read_to_string(&out_file))
    })
    .await
    .expect("join");
    let (exported, cli, http, cli_text) = outputs;
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    assert_eq!(
        cli_text.expect("export file"),
        http_text,
        "both edges write the same lines"
    );
    for out in [cli, http] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: Value = serde_json::from_slice(&out.stdout).expect("summary");
        assert_eq!(summary["unchanged"], 4, "{summary}");
        assert_eq!(summary["notImported"], 0, "{summary}");
        assert_eq!(summary["embedded"], 0, "{summary}");
    }
}

#[tokio::test]
async fn import_bodies_are_bounded_and_must_be_ndjson() {
    let dir = tempfile::tempdir().expect("tmp");
    let app = App::open_in(dir, crate::common::config);
    let key = app.key("acme").await;
    let req = Request::post("/v1/import")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "text/csv")
        .body(Body::from("a,b\n"))
        .expect("req");
    let (status, body) = app.send(req).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    let (status, body) = app
        .call("POST", "/v1/import?dryRun=true", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // An empty body imports nothing, successfully.
    let (status, summary) = import(&app, &key, String::new()).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["lines"], 0);
    // Over the limit: 413 before anything is written.
    let big = "x".repeat(episodic::api::DEFAULT_IMPORT_LIMIT + 1);
    let req = Request::post("/v1/import")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/x-ndjson")
        .body(Body::from(big))
        .expect("req");
    let (status, body) = app.send(req).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (status, body) = app
        .call("GET", "/v1/export?withVectors=yes", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}

#[tokio::test]
async fn the_spec_describes_ndjson_bodies_with_examples() {
    let app = App::new();
    let (status, spec) = app.call("GET", "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let import = &spec["paths"]["/v1/import"]["post"];
    assert_eq!(import["operationId"], "import_events");
    let body = &import["requestBody"]["content"]["application/x-ndjson"];
    let example = body["example"].as_str().expect("an NDJSON example");
    assert!(example.lines().count() >= 2, "{example}");
    for line in example.lines() {
        // Each example line is a valid import line.
        let parsed = episodic::wire::transfer::parse_line(
            line,
            1,
            "acme",
            &episodic::model::validate::Limits::default(),
            episodic::wire::transfer::Vectors::Ignore,
        );
        assert!(parsed.is_ok(), "{line}: {parsed:?}");
    }
    for status in ["200", "207"] {
        assert!(import["responses"][status]["content"]["application/json"]["example"].is_object());
    }
    let export = &spec["paths"]["/v1/export"]["get"];
    assert_eq!(export["operationId"], "export_events");
    assert!(export["responses"]["200"]["content"]["application/x-ndjson"].is_object());
    assert!(export["responses"]["200"]["headers"]["Episodic-Export-Events"].is_object());
    let backup = &spec["paths"]["/v1/admin/backup"]["post"];
    assert_eq!(backup["operationId"], "create_backup");
    assert!(backup["requestBody"]["content"]["application/json"]["example"].is_object());
}
