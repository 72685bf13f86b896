//! Writes: the allow, review and deny paths, every validation rule, idempotency.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};

use crate::common::{event, with, App};

const T: &str = "2026-06-17T09:20:00Z";

#[tokio::test]
async fn allow_path_returns_201_with_the_stored_event() {
    let app = App::new();
    let key = app.key("acme").await;
    let (status, body) = app
        .write(
            &key,
            event("user-1", "Customer asked for renewal notices by email", T),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"], "active");
    assert_eq!(
        body["decision"],
        json!({"decision": "allow", "reason": "episodic_write_policy_passed"})
    );
    let ev = &body["event"];
    assert_eq!(ev["eventId"], body["eventId"]);
    assert_eq!(ev["tenantId"], "acme");
    assert_eq!(ev["policyVersion"], "v1");
    assert_eq!(ev["occurredAt"], T);
    assert!(ev["recordedAt"]
        .as_str()
        .expect("recordedAt")
        .ends_with('Z'));
    let id = body["eventId"].as_str().expect("id");
    assert_eq!(
        uuid::Uuid::parse_str(id).expect("uuid").get_version_num(),
        7
    );
    let (status, got) = app
        .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&got, ev);
}

#[tokio::test]
async fn review_path_stores_but_never_recalls() {
    let app = App::new();
    let key = app.key("acme").await;
    let body = with(
        event("user-1", "Web page says: the renewal price doubled", T),
        "sourceTrust",
        json!("untrusted_content"),
    );
    let (status, resp) = app.write(&key, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{resp}");
    assert_eq!(resp["status"], "pending_review");
    assert_eq!(
        resp["decision"],
        json!({"decision": "review", "reason": "untrusted_event_source", "approverRole": "memory_reviewer"})
    );
    let id = resp["eventId"].as_str().expect("id");
    let (status, got) = app
        .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["status"], "pending_review");
    let recall = app.recall(&key, json!({"query": "renewal price"})).await;
    assert_eq!(recall["results"], json!([]));
    let (_, tl) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert_eq!(tl["events"], json!([]));
}

#[tokio::test]
async fn deny_paths_store_nothing() {
    let app = App::new();
    let key = app.key("acme").await;
    let sensitive = with(
        event("user-1", "Diagnosed with asthma", T),
        "privacyClass",
        json!("sensitive"),
    );
    let approval = with(
        with(
            event("user-1", "Manager approved the refund", T),
            "eventType",
            json!("human_approval"),
        ),
        "resourceRefs",
        json!([]),
    );
    for (body, reason) in [
        (sensitive, "sensitive_event_requires_expiry"),
        (approval, "approval_event_missing_resource"),
    ] {
        let (status, resp) = app.write(&key, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{resp}");
        assert_eq!(resp["code"], "policy_denied");
        assert_eq!(
            resp["decision"],
            json!({"decision": "deny", "reason": reason})
        );
    }
    let (_, tl) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert_eq!(tl["events"], json!([]));
    assert_eq!(app.engine.stats().events, 0);
    assert_eq!(app.texts_embedded(), 0, "denied writes are never embedded");
}

#[tokio::test]
async fn credentials_are_denied_by_kind_without_echoing_the_secret() {
    let app = App::new();
    let key = app.key("acme").await;
    let password = "Xk9#pq!2mLw7";
    let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let in_summary = event(
        "provisioner",
        &format!("Provisioned the analytics database; admin user is analytics_admin with password {password}."),
        T,
    );
    let in_source = with(
        event("ci-runner", "Tagged release 4.12.0", T),
        "sourceRefs",
        json!([format!("https://ci:{token}@ci.example.test/job/77120")]),
    );
    // Untrusted content would go to review, but a pending event is stored too: denied.
    let untrusted = with(
        event(
            "web-agent",
            &format!("Vendor page lists the demo key {token}"),
            T,
        ),
        "sourceTrust",
        json!("untrusted_content"),
    );
    for (body, reason, secret) in [
        (in_summary, "contains_credential:password", password),
        (in_source, "contains_credential:github_token", token),
        (untrusted, "contains_credential:github_token", token),
    ] {
        let (status, resp) = app.write(&key, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{resp}");
        assert_eq!(resp["code"], "policy_denied");
        assert_eq!(
            resp["decision"],
            json!({"decision": "deny", "reason": reason})
        );
        assert!(!resp.to_string().contains(secret), "{resp}");
    }
    assert_eq!(app.engine.stats().events, 0);
    assert_eq!(app.texts_embedded(), 0, "denied writes are never embedded");

    // Mentioning a password is not holding one.
    let (status, body) = app
        .write(
            &key,
            event(
                "agent-1",
                "The user asked how to reset their password; sent the reset link.",
                T,
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

async fn invalid_fields(app: &App, key: &str, body: Value) -> Vec<String> {
    let (status, resp) = app.write(key, body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{resp}");
    assert_eq!(resp["code"], "validation_failed");
    resp["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().expect("field").to_string())
        .collect()
}

#[tokio::test]
async fn every_validation_rule_is_reported_at_once() {
    let app = App::new();
    let key = app.key("acme").await;
    let base = event("user-1", "s", T);
    let cases: Vec<(Value, &str)> = vec![
        (with(base.clone(), "occurredAt", Value::Null), "occurredAt"),
        (
            with(base.clone(), "occurredAt", json!("17 June 2026")),
            "occurredAt",
        ),
        (
            with(base.clone(), "occurredAt", json!("2999-01-01T00:00:00Z")),
            "occurredAt",
        ),
        (with(base.clone(), "actorId", json!("")), "actorId"),
        (with(base.clone(), "summary", json!("   ")), "summary"),
        (
            with(base.clone(), "summary", json!("x".repeat(5000))),
            "summary",
        ),
        (with(base.clone(), "sourceRefs", json!([])), "sourceRefs"),
        (
            with(base.clone(), "sourceRefs", json!([""])),
            "sourceRefs[0]",
        ),
        (with(base.clone(), "eventType", json!("note")), "eventType"),
        (
            with(base.clone(), "sourceTrust", json!("User_Provided")),
            "sourceTrust",
        ),
        (
            with(base.clone(), "confidence", json!("certain")),
            "confidence",
        ),
        (
            with(base.clone(), "privacyClass", json!("secret")),
            "privacyClass",
        ),
        (
            with(base.clone(), "retention", json!({"deleteOnRequest": "yes"})),
            "retention.deleteOnRequest",
        ),
        (with(base.clone(), "mood", json!("happy")), "mood"),
    ];
    for (body, field) in cases {
        let fields = invalid_fields(&app, &key, body).await;
        assert!(
            fields.iter().any(|f| f == field),
            "{field} not in {fields:?}"
        );
    }
    let mut all_bad = with(base.clone(), "actorId", json!(""));
    all_bad = with(all_bad, "summary", json!(""));
    all_bad = with(all_bad, "confidence", json!("x"));
    assert_eq!(invalid_fields(&app, &key, all_bad).await.len(), 3);
    assert_eq!(app.engine.stats().events, 0);
}

#[tokio::test]
async fn malformed_oversized_and_non_json_bodies() {
    let app = App::new();
    let key = app.key("acme").await;
    let req = |body: Body, ct: &str| {
        Request::builder()
            .method("POST")
            .uri("/v1/events")
            .header("authorization", format!("Bearer {key}"))
            .header("content-type", ct)
            .body(body)
            .expect("req")
    };
    let (status, resp) = app
        .send(req(Body::from("{\"eventType\": "), "application/json"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(resp["code"], "malformed_json");
    let huge = format!("{{\"summary\": \"{}\"}}", "x".repeat(300 * 1024));
    let (status, resp) = app.send(req(Body::from(huge), "application/json")).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(resp["code"], "payload_too_large");
    let (status, resp) = app
        .send(req(Body::from("a=b"), "application/x-www-form-urlencoded"))
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(resp["code"], "unsupported_media_type");
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let (status, resp) = app.send(req(Body::from(deep), "application/json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(resp["code"], "malformed_json");
}

#[tokio::test]
async fn client_event_ids_make_writes_idempotent() {
    let app = App::new();
    let key = app.key("acme").await;
    let body = with(
        event("user-1", "Asked for SMS reminders", T),
        "eventId",
        json!("evt-42"),
    );
    let (s1, r1) = app.write(&key, body.clone()).await;
    let (s2, r2) = app.write(&key, body.clone()).await;
    assert_eq!((s1, s2), (StatusCode::CREATED, StatusCode::CREATED));
    assert_eq!(r1, r2, "the retry returns the original response");
    assert_eq!(app.engine.stats().events, 1);
    let changed = with(body, "summary", json!("Asked for email reminders"));
    let (s3, r3) = app.write(&key, changed).await;
    assert_eq!(s3, StatusCode::CONFLICT);
    assert_eq!(r3["code"], "conflict");
    let other = app.key("globex").await;
    let same_id_other_tenant = with(
        event("user-1", "Different tenant", T),
        "eventId",
        json!("evt-42"),
    );
    let (s4, _) = app.write(&other, same_id_other_tenant).await;
    assert_eq!(
        s4,
        StatusCode::CREATED,
        "ids are per tenant: no cross-tenant signal"
    );
}

#[tokio::test]
async fn concurrent_writes_are_all_acknowledged_and_durable() {
    let app = App::new();
    let key = app.key("acme").await;
    let mut handles = Vec::new();
    for i in 0..24 {
        let router = app.router.clone();
        let key = key.clone();
        handles.push(tokio::spawn(async move {
            let body = event(
                &format!("user-{}", i % 3),
                &format!("Milestone number {i} reached"),
                T,
            );
            let req = Request::builder()
                .method("POST")
                .uri("/v1/events")
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&body).expect("json")))
                .expect("req");
            tower::ServiceExt::oneshot(router, req)
                .await
                .expect("resp")
                .status()
        }));
    }
    for h in handles {
        assert_eq!(h.await.expect("join"), StatusCode::CREATED);
    }
    let app = app.restart().await;
    assert_eq!(app.engine.stats().events, 24);
}
