//! Minimal writes: only `summary`, `actorId`, `occurredAt` and `sourceRefs`, the rest derived
//! by the server (with the real model's classifier and the privacy detectors) and reported in
//! `derived`, over HTTP and over MCP.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::common::App;
use crate::mcp::{call, connect, serve};

const T: &str = "2026-06-17T09:20:00Z";

fn minimal(summary: &str) -> Value {
    json!({"summary": summary, "actorId": "user:dana", "occurredAt": T, "sourceRefs": ["chat-17"]})
}

fn derived<'a>(body: &'a Value, field: &str) -> &'a Value {
    body["derived"]
        .as_array()
        .expect("derived")
        .iter()
        .find(|d| d["field"] == field)
        .unwrap_or_else(|| panic!("{field} not in {}", body["derived"]))
}

#[tokio::test]
async fn a_write_with_only_what_the_caller_knows_is_stored_with_its_derivations() {
    let app = App::new();
    let key = app.key("acme").await;
    let (status, body) = app
        .write(
            &key,
            minimal("Dana prefers renewal notices by email instead of post"),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let ev = &body["event"];
    assert_eq!(ev["eventType"], "user_preference_stated", "{body}");
    assert_eq!(ev["sourceTrust"], "agent_inferred");
    assert_eq!(ev["confidence"], "medium");
    assert_eq!(ev["privacyClass"], "internal");
    assert_eq!(ev["retention"], json!({"deleteOnRequest": true}));
    assert_eq!(ev["resourceRefs"], json!([]));
    for field in [
        "eventType",
        "sourceTrust",
        "confidence",
        "privacyClass",
        "retention",
        "resourceRefs",
    ] {
        let d = derived(&body, field);
        assert!(!d["reason"].as_str().expect("reason").is_empty());
    }
    assert!(derived(&body, "eventType")["reason"]
        .as_str()
        .expect("reason")
        .starts_with("classified from the summary"));

    // The README's quick tour: its minimal write is a stated preference.
    let (status, body) = app
        .write(&key, {
            let mut b = minimal("The customer asked for renewal notices by email");
            b["actorId"] = json!("user-1");
            b
        })
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["event"]["eventType"], "user_preference_stated",
        "{body}"
    );

    // A complete write derives nothing and says nothing of it.
    let mut full = minimal("Dana renewed the annual plan");
    for (k, v) in [
        ("eventType", json!("task_milestone")),
        ("resourceRefs", json!(["plan"])),
        ("sourceTrust", json!("user_provided")),
        ("confidence", json!("high")),
        ("privacyClass", json!("internal")),
        ("retention", json!({"deleteOnRequest": true})),
    ] {
        full[k] = v;
    }
    let (status, body) = app.write(&key, full).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(body.get("derived").is_none(), "{body}");

    // What only the caller knows is still required, each named.
    let (status, body) = app.write(&key, json!({"summary": "x"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let mut fields: Vec<&str> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    fields.sort_unstable();
    assert_eq!(fields, vec!["actorId", "occurredAt", "sourceRefs"]);
}

#[tokio::test]
async fn the_detectors_raise_a_class_and_a_server_classed_sensitive_event_expires() {
    let app = App::new();
    let key = app.key_full("acme").await;
    let mut body = minimal("Dana's new contact address is dana.lee@example.com");
    body["privacyClass"] = json!("public");
    let (status, answer) = app.write(&key, body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["event"]["privacyClass"], "private");
    let raised = derived(&answer, "privacyClass");
    assert!(raised["reason"]
        .as_str()
        .expect("reason")
        .contains("raised from public"));

    let (status, answer) = app
        .write(
            &key,
            minimal("Dana was diagnosed with diabetes and starts insulin treatment"),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["event"]["privacyClass"], "sensitive");
    assert!(
        answer["event"]["retention"]["expiresAt"].is_string(),
        "{answer}"
    );

    // Stated sensitive with no retention: the class's default retention expires it.
    let mut body = minimal("Dana shared her insurance claim number");
    body["privacyClass"] = json!("sensitive");
    let (status, answer) = app.write(&key, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert!(
        answer["event"]["retention"]["expiresAt"].is_string(),
        "{answer}"
    );
    // Stated sensitive with a retention that does not expire: the seed's rule denies it.
    body["retention"] = json!({"deleteOnRequest": true});
    let (status, answer) = app.write(&key, body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["code"], "policy_denied");
}

#[tokio::test]
async fn an_agent_inference_that_corrects_memory_waits_for_review() {
    let app = App::new();
    let key = app.key("acme").await;
    let first = app
        .write_ok(&key, {
            let mut b = minimal("Dana prefers post for renewal notices");
            b["sourceTrust"] = json!("user_provided");
            b
        })
        .await;
    let mut correction = minimal("Dana now prefers email for renewal notices");
    correction["supersedesEventIds"] = json!([first]);
    let (status, body) = app.write(&key, correction).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        body["decision"]["reason"],
        "agent_inference_corrects_memory"
    );
}

#[tokio::test]
async fn an_mcp_record_event_call_with_only_the_minimal_arguments_succeeds() {
    let app = App::new();
    let key = app.key("acme").await;
    let client = connect(&serve(&app).await, &key).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools");
    let record = tools
        .iter()
        .find(|t| t.name == "record_event")
        .expect("record_event");
    let schema = serde_json::to_value(&*record.input_schema).expect("schema");
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    required.sort_unstable();
    assert_eq!(
        required,
        vec!["actorId", "occurredAt", "sourceRefs", "summary"]
    );
    let result = call(
        &client,
        "record_event",
        minimal("Dana asked for the weekly digest on Mondays"),
    )
    .await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let body = result.structured_content.expect("structured");
    assert_eq!(body["status"], "active");
    assert!(body["derived"].as_array().is_some_and(|d| !d.is_empty()));
}

#[tokio::test]
async fn a_partial_correction_carries_over_what_it_does_not_change() {
    let app = App::new();
    let key = app.key("acme").await;
    let mut first = minimal("Dana prefers renewal notices by post");
    first["sourceTrust"] = json!("user_provided");
    first["resourceRefs"] = json!(["renewal-notices"]);
    first["projectId"] = json!("billing");
    let old = app.write_ok(&key, first).await;
    let (status, body) = app
        .call(
            "POST",
            &format!("/v1/events/{old}/correct"),
            Some(&key),
            Some(json!({"summary": "Dana now prefers renewal notices by email", "sourceTrust": "user_provided"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let new = &body["event"];
    assert_eq!(new["summary"], "Dana now prefers renewal notices by email");
    for field in [
        "actorId",
        "occurredAt",
        "sourceRefs",
        "resourceRefs",
        "projectId",
        "eventType",
        "privacyClass",
    ] {
        assert!(!new[field].is_null(), "{field} carried over: {body}");
    }
    assert_eq!(new["resourceRefs"], json!(["renewal-notices"]));
    assert_eq!(new["projectId"], "billing");
    assert_eq!(new["supersedesEventIds"], json!([old]));
    let (_, got) = app
        .call("GET", &format!("/v1/events/{old}"), Some(&key), None)
        .await;
    assert_eq!(got["status"], "superseded", "{got}");

    // Without a trust of its own, a correction is the agent's inference: it waits.
    let newer = new["eventId"].as_str().expect("id").to_string();
    let (status, body) = app
        .call(
            "POST",
            &format!("/v1/events/{newer}/correct"),
            Some(&key),
            Some(json!({"summary": "Dana probably wants text messages"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // Nothing to change, an implied field, an unknown event: each named.
    for (target, change, field) in [
        (newer.as_str(), json!({}), ""),
        (
            newer.as_str(),
            json!({"supersedesEventIds": ["x"]}),
            "supersedesEventIds",
        ),
        (
            newer.as_str(),
            json!({"confidence": "certain"}),
            "confidence",
        ),
    ] {
        let (status, body) = app
            .call(
                "POST",
                &format!("/v1/events/{target}/correct"),
                Some(&key),
                Some(change),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["errors"][0]["field"], field, "{body}");
    }
    let (status, _) = app
        .call(
            "POST",
            "/v1/events/nope/correct",
            Some(&key),
            Some(json!({"summary": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let other = app.key("other").await;
    let (status, _) = app
        .call(
            "POST",
            &format!("/v1/events/{newer}/correct"),
            Some(&other),
            Some(json!({"summary": "x"})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's event is absent"
    );
}

#[tokio::test]
async fn an_mcp_correction_names_its_target_and_only_what_changes() {
    let app = App::new();
    let key = app.key("acme").await;
    let mut first = minimal("Dana prefers renewal notices by post");
    first["sourceTrust"] = json!("user_provided");
    let old = app.write_ok(&key, first).await;
    let client = connect(&serve(&app).await, &key).await.expect("initialize");
    let result = call(
        &client,
        "correct_event",
        json!({"correctsEventId": old, "summary": "Dana now prefers email", "sourceTrust": "user_provided"}),
    )
    .await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let body = result.structured_content.expect("structured");
    assert_eq!(body["event"]["supersedesEventIds"], json!([old]));
    assert_eq!(body["event"]["actorId"], "user:dana");
    let result = call(&client, "correct_event", json!({"summary": "no target"})).await;
    assert_eq!(result.is_error, Some(true));
    let problem = result.structured_content.expect("problem");
    assert_eq!(
        problem["errors"][0]["field"], "correctsEventId",
        "{problem}"
    );
}

#[tokio::test]
async fn a_write_the_writer_cannot_see_says_so() {
    let app = App::new();
    let key = app.key("acme").await; // maxPrivacyClass internal
    let (status, body) = app
        .write(&key, minimal("Dana's direct line is +1 415 555 0134"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["event"]["privacyClass"], "private");
    assert_eq!(body["visibleToWriter"], false, "{body}");
    let why = body["visibility"].as_str().expect("visibility");
    assert!(why.contains("private") && why.contains("internal"), "{why}");
    let id = body["eventId"].as_str().expect("id");
    let (status, _) = app
        .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "as the answer said");
    // Through observe, the same.
    let (status, body) = app
        .call(
            "POST",
            "/v1/observe",
            Some(&key),
            Some(json!({"role": "user", "text": "Please use my email dana.lee@example.com for invoices from now on", "actorId": "user:dana", "occurredAt": T, "sourceRefs": ["chat-18"], "sourceTrust": "user_provided"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["result"]["visibleToWriter"], false, "{body}");
    // A write the key can see says nothing of it.
    let (_, body) = app.write(&key, minimal("Dana renewed the plan")).await;
    assert!(body.get("visibleToWriter").is_none(), "{body}");
}

#[tokio::test]
async fn a_key_with_a_default_trust_gives_it_to_writes_that_name_none() {
    let app = App::new();
    let (status, made) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(crate::common::ADMIN),
            Some(json!({"tenantId": "acme", "roles": ["writer", "reader"], "defaultSourceTrust": "tool_result"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["defaultSourceTrust"], "tool_result");
    let key = made["key"].as_str().expect("key").to_string();
    let (status, body) = app
        .write(&key, minimal("The CI run for build 412 failed"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["event"]["sourceTrust"], "tool_result");
    assert_eq!(
        derived(&body, "sourceTrust")["reason"],
        "omitted: the key's default"
    );
    // A trust the write names wins.
    let mut given = minimal("Dana said the build matters");
    given["sourceTrust"] = json!("user_provided");
    let (_, body) = app.write(&key, given).await;
    assert_eq!(body["event"]["sourceTrust"], "user_provided");
    let (status, bad) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(crate::common::ADMIN),
            Some(json!({"tenantId": "acme", "roles": ["writer"], "defaultSourceTrust": "trusted"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad["errors"][0]["field"], "defaultSourceTrust");
}
