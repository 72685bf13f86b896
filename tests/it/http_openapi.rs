//! The OpenAPI document covers every route, every operation in it is routed, every `$ref`
//! resolves; the docs page and `/metrics` are served; problem bodies carry the request id.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common::{event, App, ADMIN};

/// Every route the server answers, as `METHOD path-template`. Adding a route means adding
/// it here and to the spec (the test fails until both agree).
const ROUTES: [&str; 38] = [
    "GET /healthz",
    "GET /readyz",
    "GET /metrics",
    "GET /openapi.json",
    "GET /docs",
    "GET /docs/{asset}",
    "GET /ui",
    "GET /ui/{file}",
    "POST /mcp",
    "POST /v1/events",
    "POST /v1/events/{eventId}/correct",
    "POST /v1/events:batch",
    "POST /v1/observe",
    "GET /v1/events/{eventId}",
    "DELETE /v1/events/{eventId}",
    "GET /v1/events/{eventId}/history",
    "POST /v1/erasure",
    "GET /v1/reviews",
    "POST /v1/reviews/{eventId}/approve",
    "POST /v1/reviews/{eventId}/reject",
    "GET /v1/audit",
    "POST /v1/admin/compact",
    "GET /v1/admin/reembed",
    "POST /v1/admin/backup",
    "GET /v1/export",
    "POST /v1/import",
    "POST /v1/recall",
    "GET /v1/timeline",
    "POST /v1/retrievers/langchain",
    "POST /v1/admin/keys",
    "GET /v1/admin/keys",
    "DELETE /v1/admin/keys/{keyId}",
    "POST /v1/admin/keys/admin/rotate",
    "GET /v1/admin/policy",
    "POST /v1/admin/policy/replay",
    "GET /v1/admin/cluster",
    "POST /v1/admin/cluster/shards/{shard}/move",
    "POST /v1/admin/cluster/tenants/{tenant}/pin",
];

async fn raw(app: &App, req: Request<Body>) -> (StatusCode, String, String, Vec<u8>) {
    let resp = app.router.clone().oneshot(req).await.expect("response");
    let status = resp.status();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (ct, rid) = (header("content-type"), header("x-request-id"));
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, ct, rid, bytes.to_vec())
}

async fn spec(app: &App) -> Value {
    let req = Request::get("/openapi.json")
        .body(Body::empty())
        .expect("req");
    let (status, ct, _, bytes) = raw(app, req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ct, "application/json");
    serde_json::from_slice(&bytes).expect("spec is JSON")
}

fn operations(spec: &Value) -> Vec<String> {
    let mut ops = Vec::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("item").keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                ops.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    ops.sort();
    ops
}

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                out.push(r.clone());
            }
            o.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn spec_lists_exactly_the_routes_and_every_ref_resolves() {
    let app = App::new();
    let spec = spec(&app).await;
    assert!(spec["openapi"]
        .as_str()
        .expect("version")
        .starts_with("3.1"));
    let mut expected: Vec<String> = ROUTES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(operations(&spec), expected);
    // Operation ids are unique and say what they do (a generated client's method names).
    let mut ids: Vec<String> = Vec::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let id = op.get("operationId").and_then(Value::as_str);
            assert!(id.is_some(), "{method} {path} has no operation id");
            if let Some(id) = id {
                assert!(
                    !["list", "retrieve", "get", "audit", "history"].contains(&id),
                    "bare operation id {id}"
                );
                ids.push(id.to_string());
            }
        }
    }
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), count, "operation ids repeat: {ids:?}");

    let mut all = Vec::new();
    refs(&spec, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").expect("schema ref");
        assert!(
            spec["components"]["schemas"].get(name).is_some(),
            "dangling {r}"
        );
    }
    // Every declared error response is problem+json.
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            for (status, resp) in op["responses"].as_object().expect("responses") {
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        resp["content"].get("application/problem+json").is_some(),
                        "{method} {path} {status} is not problem+json"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn every_operation_in_the_spec_is_routed() {
    let app = App::new();
    let spec = spec(&app).await;
    for op in operations(&spec) {
        let (method, template) = op.split_once(' ').expect("op");
        let path = template
            .replace("{asset}", "docs.js")
            .replace("{file}", "app.js")
            .replace('{', "x")
            .replace('}', "");
        let req = Request::builder()
            .method(method)
            .uri(&path)
            .body(Body::empty())
            .expect("req");
        let (status, ct, _, bytes) = raw(&app, req).await;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{op}");
        assert_ne!(body["code"], "route_not_found", "{op} is not routed");
        if status.as_u16() >= 400 {
            assert_eq!(ct, "application/problem+json", "{op}");
        }
    }
}

#[tokio::test]
async fn docs_page_and_assets_are_served_offline() {
    let app = App::new();
    let req = Request::get("/docs").body(Body::empty()).expect("req");
    let (status, ct, _, bytes) = raw(&app, req).await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/html"));
    let html = String::from_utf8(bytes).expect("utf8");
    assert!(html.contains("/docs/docs.js") && html.contains("/docs/docs.css"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no external resources"
    );
    for (asset, kind) in [("docs.js", "text/javascript"), ("docs.css", "text/css")] {
        let req = Request::get(format!("/docs/{asset}"))
            .body(Body::empty())
            .expect("req");
        let (status, ct, _, bytes) = raw(&app, req).await;
        assert_eq!(status, StatusCode::OK, "{asset}");
        assert!(ct.starts_with(kind), "{asset}: {ct}");
        assert!(!String::from_utf8_lossy(&bytes).contains("https://"));
    }
    let (status, body) = app.call("GET", "/docs/evil.js", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "route_not_found");
}

#[tokio::test]
async fn problem_bodies_echo_the_request_id() {
    let app = App::new();
    // A client-chosen id is kept.
    let req = Request::post("/v1/recall")
        .header("x-request-id", "client-chosen-42")
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .expect("req");
    let (status, _, rid, bytes) = raw(&app, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(rid, "client-chosen-42");
    let body: Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(body["requestId"], "client-chosen-42");
    // A generated id matches the header.
    let req = Request::get("/nowhere").body(Body::empty()).expect("req");
    let (status, _, rid, bytes) = raw(&app, req).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let body: Value = serde_json::from_slice(&bytes).expect("json");
    assert!(!rid.is_empty());
    assert_eq!(body["requestId"], rid.as_str());
    assert_eq!(body["code"], "route_not_found");
}

#[tokio::test]
async fn metrics_report_requests_stages_decisions_and_sizes() {
    let app = App::new();
    let key = app.key("metrics-t").await;
    app.write_ok(
        &key,
        event("ana", "Ana prefers window seats", "2026-01-02T03:04:05Z"),
    )
    .await;
    app.recall(&key, json!({"query": "seat preference"})).await;
    // Store-wide counts and sizes: not for anyone without the admin key or the token.
    let (status, _) = app.call("GET", "/metrics", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app.call("GET", "/metrics", Some(&key), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let req = Request::get("/metrics")
        .header("authorization", format!("Bearer {ADMIN}"))
        .body(Body::empty())
        .expect("req");
    let (status, ct, _, bytes) = raw(&app, req).await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/plain"));
    let text = String::from_utf8(bytes).expect("utf8");
    for needle in [
        "episodic_http_requests_total{route=\"/v1/recall\",method=\"POST\",status=\"200\"}",
        "episodic_http_request_duration_seconds_bucket{route=\"/v1/events\",method=\"POST\"",
        "episodic_recall_stage_seconds_count{stage=\"scope\"}",
        "episodic_recall_stage_seconds_count{stage=\"vector\"}",
        "episodic_recall_stage_seconds_count{stage=\"evidence\"}",
        "episodic_recall_path_total{path=\"exact\"}",
        "episodic_policy_decisions_total{outcome=\"allow\"}",
        "episodic_embed_texts_total",
        "episodic_write_queue_depth",
        "episodic_storage_bytes{store=\"log\"}",
        "episodic_events ",
        "episodic_tenant_graphs_unsearched 0",
    ] {
        assert!(text.contains(needle), "missing {needle}");
    }
    let log_bytes: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("episodic_storage_bytes{store=\"log\"} "))
        .expect("log size")
        .parse()
        .expect("number");
    assert!(log_bytes > 0.0);
    // Labels never carry raw paths or ids.
    assert!(!text.contains("metrics-t"));
}

/// The example a request body shows: on its media type, or on its schema (followed through a
/// `$ref`).
fn body_example<'a>(spec: &'a Value, media: &'a Value) -> Option<&'a Value> {
    if let Some(e) = media.get("example").or_else(|| media.get("examples")) {
        return Some(e);
    }
    let schema = &media["schema"];
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.strip_prefix("#/components/schemas/")?;
            &spec["components"]["schemas"][name]
        }
        None => schema,
    };
    schema.get("example").or_else(|| schema.get("examples"))
}

#[tokio::test]
async fn every_request_body_has_an_example() {
    let app = App::new();
    let spec = spec(&app).await;
    let mut missing = Vec::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let Some(content) = op["requestBody"]["content"].as_object() else {
                continue;
            };
            for (media_type, media) in content {
                if body_example(&spec, media).is_none() {
                    missing.push(format!("{method} {path} ({media_type})"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "request bodies without an example: {missing:#?}"
    );
}
