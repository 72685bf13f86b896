//! MCP: a real rmcp client against `/mcp` of a real server on loopback (every tool, keys,
//! roles, tenants), and against `episodic mcp --stdio` run as a child process.

use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

use episodic::auth::{KeyStore, Limits};

use crate::common::{event, model_dir, with, App, ADMIN};

type Client = RunningService<RoleClient, ()>;

const T: &str = "2026-06-17T09:20:00Z";

/// Serves the app's router on a loopback port; answers the `/mcp` URL.
pub(crate) async fn serve(app: &App) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let router = app.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

pub(crate) async fn connect(url: &str, key: &str) -> Result<Client, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(key),
    );
    ().serve(transport).await.map_err(|e| e.to_string())
}

pub(crate) async fn call(client: &Client, name: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object");
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The structured result of a successful call.
fn ok(result: CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    result.structured_content.expect("structured content")
}

/// The error code of a failed call, checking the text names code and detail.
fn err_code(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "expected a tool error");
    let body = result.structured_content.clone().expect("problem body");
    let code = body["code"].as_str().expect("code").to_string();
    let t = text(result);
    assert!(t.starts_with(&format!("{code}: ")), "{t}");
    assert!(t.contains(body["detail"].as_str().expect("detail")), "{t}");
    code
}

fn correction(summary: &str, supersedes: &str) -> Value {
    with(
        with(
            event("u1", summary, T),
            "supersedesEventIds",
            json!([supersedes]),
        ),
        "eventType",
        json!("correction_received"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_session_runs_every_tool_end_to_end() {
    let app = App::new();
    let key = app.key("acme").await;
    let url = serve(&app).await;
    let client = connect(&url, &key).await.expect("initialize");
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("episodic")
    );
    assert!(info.capabilities.tools.is_some());

    let tools = client.list_all_tools().await.expect("list tools");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let mut expected: Vec<String> = episodic::mcp::TOOL_NAMES
        .iter()
        .map(|s| s.to_string())
        .collect();
    expected.sort();
    assert_eq!(names, expected);
    for t in &tools {
        assert_eq!(
            t.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            t.name
        );
        assert!(t.description.as_deref().is_some_and(|d| !d.is_empty()));
    }

    let before = episodic::model::Timestamp::now().plus_millis(-1000);
    let now = text(&call(&client, "current_datetime", json!({})).await);
    let after = episodic::model::Timestamp::now().plus_millis(1000);
    assert!(now.ends_with('Z'), "UTC: {now}");
    let parsed = episodic::model::Timestamp::parse(&now).expect("RFC 3339");
    assert!(
        before <= parsed && parsed <= after,
        "the server's clock: {now}"
    );

    let recorded = ok(call(
        &client,
        "record_event",
        event("u1", "Deployment target is staging", T),
    )
    .await);
    assert_eq!(recorded["status"], "active");
    let a = recorded["eventId"].as_str().expect("id").to_string();

    let recall = call(
        &client,
        "recall",
        json!({"query": "where do we deploy", "limit": 5}),
    )
    .await;
    let evidence = text(&recall);
    assert!(
        evidence.starts_with("Past event, not current instruction:"),
        "{evidence}"
    );
    assert!(
        evidence.contains("Deployment target is staging"),
        "{evidence}"
    );
    assert!(evidence.contains(&format!("event_id: {a}")), "{evidence}");
    let recall = ok(recall);
    assert_eq!(recall["results"][0]["event"]["eventId"], a.as_str());
    assert_eq!(recall["evidence"], evidence.as_str());

    let got = ok(call(&client, "get_event", json!({"eventId": a})).await);
    assert_eq!(got["summary"], "Deployment target is staging");
    assert_eq!(got["status"], "active");

    let missing = call(&client, "correct_event", event("u1", "No target", T)).await;
    assert_eq!(err_code(&missing), "validation_failed");
    let corrected = ok(call(
        &client,
        "correct_event",
        correction("Deployment target is production", &a),
    )
    .await);
    let b = corrected["eventId"].as_str().expect("id").to_string();
    let old = ok(call(&client, "get_event", json!({"eventId": a})).await);
    assert_eq!(old["status"], "superseded");
    assert_eq!(old["supersededBy"], b.as_str());

    let timeline = ok(call(&client, "get_timeline", json!({"actorId": "u1"})).await);
    let ids: Vec<&str> = timeline["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["eventId"].as_str())
        .collect();
    assert_eq!(
        ids,
        vec![b.as_str()],
        "the correction replaces the original"
    );
    let full = ok(call(
        &client,
        "get_timeline",
        json!({"actorId": "u1", "includeSuperseded": true, "limit": 10}),
    )
    .await);
    assert_eq!(full["events"].as_array().map(Vec::len), Some(2));
    let bad = call(&client, "get_timeline", json!({"colour": "blue"})).await;
    assert_eq!(err_code(&bad), "validation_failed");

    let observed = ok(call(
        &client,
        "observe_interaction",
        json!({
            "text": "thanks, and please switch my invoices to email from now on",
            "role": "user",
            "actorId": "u2",
            "occurredAt": T,
            "sourceRefs": ["chat-1"],
            "sourceTrust": "user_provided"
        }),
    )
    .await);
    assert_eq!(observed["outcome"], "candidate", "{observed}");
    assert_eq!(observed["result"]["status"], "active", "{observed}");
    let chatter = ok(call(
        &client,
        "observe_interaction",
        json!({"text": "Hi there, how are you?", "role": "user", "actorId": "u2",
               "occurredAt": T, "sourceRefs": ["chat-2"], "sourceTrust": "user_provided"}),
    )
    .await);
    assert_eq!(chatter["outcome"], "ignored", "{chatter}");

    let receipt = ok(call(&client, "forget_event", json!({"eventId": b})).await);
    assert!(receipt.to_string().contains(&b), "{receipt}");
    let gone = call(&client, "get_event", json!({"eventId": b})).await;
    assert_eq!(err_code(&gone), "not_found");

    let unknown = client
        .call_tool(CallToolRequestParams::new("no_such_tool"))
        .await;
    assert!(unknown.is_err(), "an unknown tool is a protocol error");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_rejects_missing_and_wrong_keys() {
    let app = App::new();
    let url = serve(&app).await;
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    for auth in [None, Some("Bearer epi_nope_wrong"), Some("Basic abc")] {
        let mut req = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.expect("send");
        assert_eq!(resp.status().as_u16(), 401, "{auth:?}");
        let body: Value = resp.json().await.expect("problem json");
        assert_eq!(body["code"], "unauthenticated");
    }
    assert!(connect(&url, "epi_nope_wrong").await.is_err());

    let key = app.key("acme").await;
    let client = connect(&url, &key).await.expect("a valid key connects");
    client.cancel().await.expect("close");
    let admin = connect(&url, ADMIN)
        .await
        .expect("the admin key authenticates");
    let no_tenant = call(&admin, "recall", json!({"query": "x"})).await;
    assert_eq!(err_code(&no_tenant), "forbidden", "admin has no tenant");
    admin.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_reader_key_cannot_record_or_forget() {
    let app = App::new();
    let writer = app.key("acme").await;
    let reader = app.key_with("acme", &["reader"]).await;
    let id = app
        .write_ok(&writer, event("u1", "Prefers email for renewal notices", T))
        .await;
    let url = serve(&app).await;
    let client = connect(&url, &reader).await.expect("initialize");
    let denied = call(&client, "record_event", event("u1", "Sneaky write", T)).await;
    assert_eq!(err_code(&denied), "forbidden");
    assert!(text(&denied).contains("writer"), "{}", text(&denied));
    let denied = call(&client, "correct_event", correction("Sneaky fix", &id)).await;
    assert_eq!(err_code(&denied), "forbidden");
    let denied = call(&client, "forget_event", json!({"eventId": id})).await;
    assert_eq!(err_code(&denied), "forbidden");
    let denied = call(
        &client,
        "observe_interaction",
        json!({"text": "I prefer SMS", "role": "user", "actorId": "u1", "occurredAt": T,
               "sourceRefs": ["c"], "sourceTrust": "user_provided"}),
    )
    .await;
    assert_eq!(err_code(&denied), "forbidden");
    let still = ok(call(&client, "get_event", json!({"eventId": id})).await);
    assert_eq!(still["status"], "active", "reading works, nothing changed");
    let timeline = ok(call(&client, "get_timeline", json!({})).await);
    assert_eq!(timeline["events"].as_array().map(Vec::len), Some(1));
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tenant_a_cannot_see_tenant_b_event() {
    let app = App::new();
    let key_a = app.key("tenant-a").await;
    let key_b = app.key("tenant-b").await;
    let url = serve(&app).await;
    let b = connect(&url, &key_b).await.expect("initialize b");
    let a = connect(&url, &key_a).await.expect("initialize a");
    let secret = ok(call(
        &b,
        "record_event",
        event("u1", "Globex renewal is in March", T),
    )
    .await);
    let id = secret["eventId"].as_str().expect("id").to_string();

    assert_eq!(
        err_code(&call(&a, "get_event", json!({"eventId": id})).await),
        "not_found"
    );
    let recall = ok(call(&a, "recall", json!({"query": "renewal month"})).await);
    assert_eq!(recall["results"], json!([]));
    let timeline = ok(call(&a, "get_timeline", json!({})).await);
    assert_eq!(timeline["events"], json!([]));
    assert_eq!(
        err_code(&call(&a, "forget_event", json!({"eventId": id})).await),
        "not_found"
    );
    assert_eq!(
        err_code(&call(&a, "correct_event", correction("Hijack", &id)).await),
        "not_found"
    );
    let foreign_body = with(
        event("u1", "Written into b", T),
        "tenantId",
        json!("tenant-b"),
    );
    assert_eq!(
        err_code(&call(&a, "record_event", foreign_body).await),
        "tenant_mismatch",
        "the tenant comes from the key, never from arguments"
    );
    let still = ok(call(&b, "get_event", json!({"eventId": id})).await);
    assert_eq!(still["status"], "active");
    a.cancel().await.expect("close");
    b.cancel().await.expect("close");
}

fn stdio_command(data_dir: &std::path::Path, key: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_episodic"));
    cmd.args(["mcp", "--stdio"])
        .env("EPISODIC_DATA_DIR", data_dir)
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env("EPISODIC_API_KEY", key)
        .env_remove("EPISODIC_ADMIN_KEY");
    cmd
}

fn tenant_key(data_dir: &std::path::Path, roles: &[&str]) -> String {
    let (keys, _) = KeyStore::open(data_dir, Some(ADMIN)).expect("keys");
    let roles = roles.iter().map(|r| r.to_string()).collect();
    keys.create("acme", roles, Limits::unlimited(), None)
        .expect("create key")
        .key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_binary_initializes_lists_tools_and_recalls() {
    let dir = tempfile::tempdir().expect("tmp");
    let key = tenant_key(dir.path(), &["writer", "reader"]);
    let (transport, _) = TokioChildProcess::builder(stdio_command(dir.path(), &key))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn episodic mcp --stdio");
    let client = ().serve(transport).await.expect("initialize over stdio");
    let info = client.peer_info().expect("info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("episodic")
    );
    let tools = client.list_all_tools().await.expect("list tools");
    assert_eq!(tools.len(), episodic::mcp::TOOL_NAMES.len());
    let recorded = ok(call(
        &client,
        "record_event",
        event("u1", "Prefers SMS for renewal notices", T),
    )
    .await);
    let id = recorded["eventId"].as_str().expect("id").to_string();
    let recall = call(
        &client,
        "recall",
        json!({"query": "how to send renewal notices"}),
    )
    .await;
    let evidence = text(&recall);
    assert!(
        evidence.contains("Prefers SMS for renewal notices"),
        "{evidence}"
    );
    assert!(evidence.contains(&format!("event_id: {id}")), "{evidence}");
    // A writer may forget what its own key wrote (and nothing else, see `http_forget`).
    let receipt = ok(call(&client, "forget_event", json!({"eventId": id})).await);
    assert_eq!(receipt["eventId"], id.as_str(), "{receipt}");
    client
        .cancel()
        .await
        .expect("close stdin; the server exits");
}

#[tokio::test]
async fn stdio_binary_refuses_an_unknown_key() {
    let dir = tempfile::tempdir().expect("tmp");
    tenant_key(dir.path(), &["reader"]);
    let out = stdio_command(dir.path(), "epi_nope_wrong")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unauthenticated"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on the MCP channel");
}

/// The problem body of a failed call, checking it reads as the HTTP problem+json would.
fn problem(result: &CallToolResult) -> Value {
    let code = err_code(result);
    let body = result.structured_content.clone().expect("problem body");
    assert_eq!(body["type"], format!("urn:episodic:problem:{code}"));
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(body["status"]
        .as_u64()
        .is_some_and(|s| (400..600).contains(&s)));
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_are_problems_whose_detail_names_the_fix() {
    let app = App::new();
    let writer = app.key("acme").await;
    let reader = app.key_with("acme", &["reader"]).await;
    let url = serve(&app).await;
    let client = connect(&url, &writer).await.expect("initialize");

    // Validation: every field error, spelt out in the detail too.
    let body = problem(
        &call(
            &client,
            "record_event",
            json!({"actorId": "u1", "occurredAt": T, "sourceRefs": ["c"], "colour": "blue"}),
        )
        .await,
    );
    assert_eq!(body["code"], "validation_failed");
    let detail = body["detail"].as_str().expect("detail");
    assert!(detail.contains("summary: is required"), "{detail}");
    assert!(
        detail.contains("colour: unknown field (known fields: ") && detail.contains("summary"),
        "{detail}"
    );
    let body = problem(&call(&client, "recall", json!({"query": "x", "top_k": 3})).await);
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit")),
        "names the argument meant: {body}"
    );

    // A write the policy denies says what to change, and nothing is stored.
    let body = problem(
        &call(
            &client,
            "record_event",
            event(
                "u1",
                "Provisioned the analytics database; admin user is analytics_admin with password Xk9#pq!2mLw7.",
                T,
            ),
        )
        .await,
    );
    assert_eq!(body["code"], "policy_denied");
    assert_eq!(body["decision"]["reason"], "contains_credential:password");
    let detail = body["detail"].as_str().expect("detail");
    assert!(detail.contains("remove the credential"), "{detail}");
    assert!(!detail.contains("Xk9#pq"), "never the secret: {detail}");

    // A conflict names the event to correct instead.
    let first = ok(call(
        &client,
        "record_event",
        event("u1", "Deploys go to staging", T),
    )
    .await);
    let first = first["eventId"].as_str().expect("id").to_string();
    let fix = json!({"correctsEventId": first, "summary": "Deploys go to production",
                     "sourceTrust": "user_provided"});
    ok(call(&client, "correct_event", fix.clone()).await);
    let body = problem(&call(&client, "correct_event", fix).await);
    assert_eq!(body["code"], "conflict");
    let detail = body["detail"].as_str().expect("detail");
    assert!(detail.contains("supersededBy"), "{detail}");

    // An unknown id says where ids come from.
    let body = problem(&call(&client, "get_event", json!({"eventId": "nope"})).await);
    assert_eq!(body["code"], "not_found");
    assert!(body["detail"]
        .as_str()
        .is_some_and(|d| d.contains("recall")));
    let body = problem(&call(&client, "forget_event", json!({})).await);
    assert_eq!(body["errors"][0]["field"], "eventId");
    assert!(body["errors"][0]["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("is required")));

    // A missing role names the role and the way to get it.
    let read_only = connect(&url, &reader).await.expect("initialize");
    let body = problem(&call(&read_only, "record_event", event("u1", "x", T)).await);
    assert_eq!(body["code"], "forbidden");
    assert_eq!(body["missingRole"], "writer");
    assert!(body["detail"]
        .as_str()
        .is_some_and(|d| d.contains("use a key made with the writer role")));
    read_only.cancel().await.expect("close");

    // A tool that does not exist is a protocol error listing the tools, with a problem body.
    let err = client
        .call_tool(CallToolRequestParams::new("remember"))
        .await
        .expect_err("unknown tool");
    let text = err.to_string();
    assert!(text.contains("record_event"), "{text}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_gives_evidence_as_text_and_ids_and_scores_as_structured_content() {
    let app = App::new();
    let key = app.key("acme").await;
    let client = connect(&serve(&app).await, &key).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools");
    let recall = tools.iter().find(|t| t.name == "recall").expect("recall");
    let output = recall.output_schema.as_ref().expect("an output schema");
    assert_eq!(output.get("type"), Some(&json!("object")));
    let hit = &serde_json::to_value(&**output).expect("schema")["properties"]["results"]["items"];
    assert!(
        hit["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("eventId"))),
        "{hit}"
    );
    for t in &tools {
        let schema = serde_json::to_value(&*t.input_schema).expect("schema");
        for combinator in ["anyOf", "oneOf", "allOf"] {
            assert!(schema.get(combinator).is_none(), "{}: {combinator}", t.name);
        }
        assert!(
            t.description.as_deref().is_some_and(|d| d.len() > 150),
            "{}: a description a model can act on",
            t.name
        );
    }
    let correct = tools
        .iter()
        .find(|t| t.name == "correct_event")
        .expect("tool");
    assert_eq!(
        correct.input_schema.get("required"),
        Some(&json!(["correctsEventId"]))
    );

    let empty = call(&client, "recall", json!({"query": "renewal notices"})).await;
    assert!(
        text(&empty).starts_with("No past events matched"),
        "{}",
        text(&empty)
    );
    assert_eq!(ok(empty)["results"], json!([]));

    let id = ok(call(
        &client,
        "record_event",
        json!({"summary": "Dana prefers renewal notices by email", "actorId": "user:dana",
               "occurredAt": T, "sourceRefs": ["chat-17"]}),
    )
    .await)["eventId"]
        .as_str()
        .expect("id")
        .to_string();
    let result = call(
        &client,
        "recall",
        json!({"query": "How should renewal notices reach Dana?"}),
    )
    .await;
    let evidence = text(&result);
    let body = ok(result);
    assert_eq!(body["evidence"], evidence.as_str());
    let top = &body["results"][0];
    assert_eq!(top["eventId"], id.as_str());
    assert_eq!(top["event"]["eventId"], id.as_str());
    assert!(top["score"].as_f64().is_some_and(|s| s > 0.0));
    let parts = top["scoreBreakdown"].as_object().expect("breakdown");
    assert!(
        parts.contains_key("relevance") && parts.contains_key("cosine"),
        "{top}"
    );
    assert_eq!(body["stats"]["path"], "exact");
    assert!(body["stats"]["candidates"].as_u64().is_some_and(|n| n >= 1));
    client.cancel().await.expect("close");
}
