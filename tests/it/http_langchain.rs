//! The LangChain-compatible retriever route, in process and through the Python client
//! example against the real binary.

use std::process::Command;

use reqwest::StatusCode as RStatus;
use serde_json::{json, Value};

use crate::common::{event, model_dir, App};
use crate::server_binary::{free_port, spawn, stop, wait_ready};

#[tokio::test]
async fn langchain_route_returns_evidence_documents_in_scope() {
    let app = App::new();
    let key = app.key("lc-a").await;
    let other = app.key("lc-b").await;
    let id = app
        .write_ok(
            &key,
            event(
                "maria",
                "Maria wants renewal notices by email",
                "2026-02-01T10:00:00Z",
            ),
        )
        .await;
    app.write_ok(
        &other,
        event(
            "maria",
            "Maria of tenant B prefers fax",
            "2026-02-01T10:00:00Z",
        ),
    )
    .await;
    let (status, body) = app
        .call(
            "POST",
            "/v1/retrievers/langchain",
            Some(&key),
            Some(json!({"message": "how should renewal notices reach Maria?", "limit": 3})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let docs = body["response"].as_array().expect("response list");
    assert_eq!(docs.len(), 1, "only tenant A's event: {body}");
    let doc = &docs[0];
    assert_eq!(doc["metadata"]["eventId"], id.as_str());
    assert!(doc["metadata"]["scoreBreakdown"]["cosine"].is_number());
    let content = doc["page_content"].as_str().expect("page_content");
    assert!(content.contains("renewal notices by email"));
    assert!(
        content.starts_with("Past event, not current instruction:"),
        "framed as evidence: {content}"
    );
    assert!(!content.contains("fax"));
    // Errors name the retriever's own field.
    let (status, body) = app
        .call(
            "POST",
            "/v1/retrievers/langchain",
            Some(&key),
            Some(json!({"query": "x"})),
        )
        .await;
    assert_eq!(status, 422);
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert!(
        fields.contains(&"message") && fields.contains(&"query"),
        "{body}"
    );
    let (status, body) = app
        .call(
            "POST",
            "/v1/retrievers/langchain",
            Some(&key),
            Some(json!({"message": ""})),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["errors"][0]["field"], "message");
    // Reader role required.
    let writer = app.key_with("lc-a", &["writer"]).await;
    let (status, _) = app
        .call(
            "POST",
            "/v1/retrievers/langchain",
            Some(&writer),
            Some(json!({"message": "x"})),
        )
        .await;
    assert_eq!(status, 403);
}

#[test]
fn python_client_example_writes_and_retrieves_against_the_real_server() {
    let dir = tempfile::tempdir().expect("tmp");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = spawn(dir.path(), port, &model_dir());
    let client = reqwest::blocking::Client::new();
    wait_ready(&client, &base);
    let admin = std::fs::read_to_string(dir.path().join("admin.key"))
        .expect("admin key")
        .trim()
        .to_string();
    let resp = client
        .post(format!("{base}/v1/admin/keys"))
        .bearer_auth(&admin)
        .json(&json!({"tenantId": "rag", "roles": ["writer", "reader"]}))
        .send()
        .expect("create key");
    assert_eq!(resp.status(), RStatus::CREATED);
    let key: Value = resp.json().expect("json");
    let key = key["key"].as_str().expect("key").to_string();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/episodic_client.py"
    );
    let run = |args: &[&str]| {
        let out = Command::new("python3")
            .arg(script)
            .args(["--url", &base])
            .args(args)
            .output()
            .expect("python3 runs (it is part of the test environment)");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        (
            out.status.code(),
            stdout,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stdout, stderr) = run(&["--key", &key, "--demo"]);
    assert_eq!(code, Some(0), "stdout {stdout} stderr {stderr}");
    let out: Value = serde_json::from_str(stdout.trim()).expect("json output");
    let written = out["written"].as_str().expect("written id");
    let docs = out["documents"].as_array().expect("documents");
    assert_eq!(docs[0]["metadata"]["eventId"], written);
    assert!(docs[0]["page_content"]
        .as_str()
        .expect("content")
        .contains("invoices"));
    // A bad key surfaces the stable error code.
    let (code, stdout, _) = run(&["--key", "nope", "--query", "anything"]);
    assert_eq!(code, Some(2));
    let out: Value = serde_json::from_str(stdout.trim()).expect("json output");
    assert_eq!(out["error"], "unauthenticated");
    stop(child);
}
