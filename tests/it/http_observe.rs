//! `POST /v1/observe`: chatter is ignored and events go through the ordinary write path (the
//! labelled sets' precision and recall floors are `episodic-eval`'s tests).

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::common::App;

const T: &str = "2026-06-17T09:20:00Z";

fn interaction(text: &str) -> Value {
    json!({
        "text": text,
        "role": "user",
        "actorId": "user-1",
        "occurredAt": T,
        "sourceRefs": ["chat-77"],
        "sourceTrust": "user_provided",
        "projectId": "billing"
    })
}

async fn observe(app: &App, key: &str, body: Value) -> (StatusCode, Value) {
    app.call("POST", "/v1/observe", Some(key), Some(body)).await
}

#[tokio::test]
async fn chatter_is_ignored_and_nothing_is_stored() {
    let app = App::new();
    let key = app.key("acme").await;
    for (text, reason) in [
        ("Thanks so much, have a lovely weekend!", "routine_chatter"),
        ("Hi there, how are you?", "routine_chatter"),
        ("👍", "content_free"),
    ] {
        let (status, body) = observe(&app, &key, interaction(text)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["outcome"], "ignored");
        assert_eq!(body["reason"], reason, "{text}: {body}");
    }
    assert_eq!(app.engine.stats().events, 0);
    let (_, tl) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert_eq!(tl["events"], json!([]));
}

#[tokio::test]
async fn a_polite_preference_is_stored_through_the_write_path() {
    let app = App::new();
    let key = app.key("acme").await;
    let text = "thanks, and please switch my invoices to email from now on";
    let (status, body) = observe(&app, &key, interaction(text)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["outcome"], "candidate");
    assert_eq!(body["candidate"]["eventType"], "user_preference_stated");
    assert_eq!(
        body["classification"]["eventType"],
        "user_preference_stated"
    );
    assert_eq!(body["candidate"]["privacyClass"], "internal");
    assert!(body["candidate"]["retention"].get("expiresAt").is_none());
    let result = &body["result"];
    assert_eq!(result["status"], "active");
    assert_eq!(result["decision"]["decision"], "allow");
    assert_eq!(result["event"]["summary"], text);
    assert_eq!(result["event"]["projectId"], "billing");
    let id = result["eventId"].as_str().expect("id");
    let (status, got) = app
        .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["eventType"], "user_preference_stated");
}

#[tokio::test]
async fn a_health_detail_is_sensitive_with_an_expiry() {
    let app = App::new();
    let key = app.key("acme").await;
    let text = "I was diagnosed with asthma, so from now on please book me non-smoking rooms only";
    let (status, body) = observe(&app, &key, interaction(text)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let ev = &body["result"]["event"];
    assert_eq!(ev["privacyClass"], "sensitive");
    let expires = ev["retention"]["expiresAt"].as_str().expect("expiresAt");
    assert!(expires > "2026-07-01", "{expires}");
    assert_eq!(ev["retention"]["deleteOnRequest"], true);
    assert_eq!(body["classification"]["privacySignals"], json!(["health"]));
}

#[tokio::test]
async fn untrusted_content_goes_to_review_and_denials_keep_the_write_code() {
    let app = App::new();
    let key = app.key("acme").await;
    let mut body =
        interaction("The vendor page says their API had an outage and failed all requests");
    body["sourceTrust"] = json!("untrusted_content");
    let (status, resp) = observe(&app, &key, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{resp}");
    assert_eq!(resp["result"]["status"], "pending_review");
    assert_eq!(
        resp["result"]["decision"]["reason"],
        "untrusted_event_source"
    );

    // An approval with no resource is denied by the policy, exactly as a direct write.
    let (status, resp) = observe(&app, &key, interaction("Approved, go ahead and ship it")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{resp}");
    assert_eq!(resp["code"], "policy_denied");
    assert_eq!(
        resp["decision"]["reason"],
        "approval_event_missing_resource"
    );
    assert_eq!(resp["candidate"]["eventType"], "human_approval");
    let mut with_resource = interaction("Approved, go ahead and ship it");
    with_resource["resourceRefs"] = json!(["release-4.3"]);
    let (status, resp) = observe(&app, &key, with_resource).await;
    assert_eq!(status, StatusCode::CREATED, "{resp}");
}

#[tokio::test]
async fn a_credential_is_ignored_and_never_echoed_or_stored() {
    let app = App::new();
    let key = app.key("acme").await;
    let secret = "sk_test_51Hq8xLkT0kenABCDEF1234567890xyz";
    let text = format!(
        "Here is the staging Stripe key so you can run the tests: {secret}, please remember it for next time."
    );
    let (status, body) = observe(&app, &key, interaction(&text)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "ignored");
    assert_eq!(body["reason"], "contains_credential");
    assert_eq!(body["classification"]["credentials"], json!(["stripe_key"]));
    assert!(!body.to_string().contains(secret), "{body}");

    let mut tool = interaction("Deploy step printed GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a while pushing tags.");
    tool["role"] = json!("tool");
    let (status, body) = observe(&app, &key, tool).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["reason"], "contains_credential");
    assert_eq!(app.engine.stats().events, 0);
}

#[tokio::test]
async fn tool_chatter_is_ignored_but_tool_observations_are_stored() {
    let app = App::new();
    let key = app.key("acme").await;
    for text in ["ping", "ack"] {
        let mut body = interaction(text);
        body["role"] = json!("tool");
        let (status, resp) = observe(&app, &key, body).await;
        assert_eq!(status, StatusCode::OK, "{resp}");
        assert_eq!(resp["outcome"], "ignored", "{text}: {resp}");
        assert_eq!(resp["reason"], "routine_chatter");
    }
    assert_eq!(app.engine.stats().events, 0);
    let mut body = interaction("deploy of build 4812 failed: migration 0042 timed out");
    body["role"] = json!("tool");
    body["sourceTrust"] = json!("tool_result");
    let (status, resp) = observe(&app, &key, body).await;
    assert_eq!(status, StatusCode::CREATED, "{resp}");
    assert_eq!(resp["outcome"], "candidate");
    assert_eq!(app.engine.stats().events, 1);
}

#[tokio::test]
async fn validation_errors_are_reported_at_once_and_roles_enforced() {
    let app = App::new();
    let key = app.key("acme").await;
    let bad = json!({"text": 1, "role": "bot", "occurredAt": "soon", "sourceRefs": [], "sourceTrust": "x", "extra": true});
    let (status, body) = observe(&app, &key, bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["code"], "validation_failed");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    for f in [
        "extra",
        "text",
        "role",
        "actorId",
        "occurredAt",
        "sourceRefs",
        "sourceTrust",
    ] {
        assert!(fields.contains(&f), "{f} missing from {fields:?}");
    }
    let reader = app.key_with("acme", &["reader"]).await;
    let (status, body) = observe(&app, &reader, interaction("hi")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}

#[tokio::test]
async fn an_interaction_that_names_no_trust_gets_what_a_write_would() {
    let app = App::new();
    let key = app.key("acme").await;
    let mut body = interaction("Please send my invoices by email from now on");
    body.as_object_mut().expect("object").remove("sourceTrust");
    let (status, answer) = observe(&app, &key, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["outcome"], "candidate");
    assert_eq!(
        answer["candidate"]["sourceTrust"], "agent_inferred",
        "{answer}"
    );
    assert_eq!(answer["result"]["event"]["sourceTrust"], "agent_inferred");

    let (status, made) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(crate::common::ADMIN),
            Some(json!({"tenantId": "acme", "roles": ["writer"], "defaultSourceTrust": "tool_result"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let tool_key = made["key"].as_str().expect("key");
    body["sourceRefs"] = json!(["chat-78"]);
    let (status, answer) = observe(&app, tool_key, body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(
        answer["candidate"]["sourceTrust"], "tool_result",
        "the key's default"
    );
}
