//! Batch writes (`POST /v1/events:batch`): each item its own result in input order, with the
//! real model; the status code says whether every item was stored.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::common::{config, App};

const T: &str = "2026-06-17T09:20:00Z";

fn minimal(summary: &str) -> Value {
    json!({"summary": summary, "actorId": "user:dana", "occurredAt": T, "sourceRefs": ["chat-17"]})
}

fn statuses(body: &Value) -> Vec<u64> {
    body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["status"].as_u64().expect("status"))
        .collect()
}

#[tokio::test]
async fn each_item_gets_its_own_result_in_input_order() {
    let app = App::new();
    let key = app.key("acme").await;
    let mut sensitive = minimal("Dana shared her insurance claim number");
    sensitive["privacyClass"] = json!("sensitive");
    sensitive["retention"] = json!({"deleteOnRequest": true});
    let mut untrusted = minimal("A web page says Dana quit");
    untrusted["sourceTrust"] = json!("untrusted_content");
    let mut chosen = minimal("Dana renewed the annual plan");
    chosen["eventId"] = json!("renewal-1");
    let batch = json!({"events": [
        minimal("Dana asked for renewal notices by email"),
        {"summary": "no actor", "occurredAt": T, "sourceRefs": ["x"]},
        sensitive,
        untrusted,
        chosen,
    ]});
    let (status, body) = app
        .call("POST", "/v1/events:batch", Some(&key), Some(batch.clone()))
        .await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{body}");
    assert_eq!(statuses(&body), vec![201, 422, 422, 202, 201], "{body}");
    let results = body["results"].as_array().expect("results");
    assert_eq!(results[1]["error"]["errors"][0]["field"], "actorId");
    assert_eq!(results[2]["error"]["code"], "policy_denied");
    assert_eq!(results[3]["eventStatus"], "pending_review");
    assert_eq!(results[4]["eventId"], "renewal-1");
    assert!(results[0]["derived"].is_array());
    for r in [&results[0], &results[4]] {
        let id = r["eventId"].as_str().expect("id");
        let (status, _) = app
            .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert!(results[1].get("eventId").is_none() && results[2].get("eventId").is_none());

    // The chosen id again: the same content is an idempotent retry, other content a conflict.
    let mut changed = minimal("Dana cancelled the annual plan");
    changed["eventId"] = json!("renewal-1");
    let mut same = minimal("Dana renewed the annual plan");
    same["eventId"] = json!("renewal-1");
    let (status, body) = app
        .call(
            "POST",
            "/v1/events:batch",
            Some(&key),
            Some(json!({"events": [same, changed]})),
        )
        .await;
    assert_eq!(status, StatusCode::MULTI_STATUS, "{body}");
    assert_eq!(statuses(&body), vec![201, 409]);

    // Every item stored: 201.
    let batch = json!({"events": (0..20).map(|i| minimal(&format!("Dana noted item {i} of the move"))).collect::<Vec<_>>()});
    let (status, body) = app
        .call(
            "POST",
            "/v1/events:batch?refresh=wait_for",
            Some(&key),
            Some(batch),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(statuses(&body), vec![201; 20]);
    let (_, page) = app
        .call("GET", "/v1/timeline?limit=100", Some(&key), None)
        .await;
    // Two active from the first batch (the pending one is not on the timeline), none new
    // from the retry, twenty now.
    assert_eq!(page["events"].as_array().expect("events").len(), 2 + 20);
}

#[tokio::test]
async fn a_batch_is_bounded_and_must_be_a_batch() {
    fn small(dir: &std::path::Path) -> episodic::engine::EngineConfig {
        let mut c = config(dir);
        c.limits.max_batch_events = 3;
        c
    }
    let app = App::open_in(tempfile::tempdir().expect("tmp"), small);
    let key = app.key("acme").await;
    let four = json!({"events": (0..4).map(|i| minimal(&format!("item {i}"))).collect::<Vec<_>>()});
    for (body, field) in [
        (four, "events"),
        (json!({"items": []}), "events"),
        (json!({"events": [], "extra": 1}), "extra"),
    ] {
        let (status, answer) = app
            .call("POST", "/v1/events:batch", Some(&key), Some(body))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(answer["errors"][0]["field"], field, "{answer}");
    }
    let (status, answer) = app
        .call(
            "POST",
            "/v1/events:batch",
            Some(&key),
            Some(json!({"events": []})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["results"], json!([]));
    let reader = app.key_with("acme", &["reader"]).await;
    let (status, _) = app
        .call(
            "POST",
            "/v1/events:batch",
            Some(&reader),
            Some(json!({"events": []})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
