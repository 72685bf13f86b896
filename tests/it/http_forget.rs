//! A key may forget what it wrote: `DELETE /v1/events/{id}` (and MCP `forget_event`) with the
//! writer role deletes the key's own writes, including one stored above what the key may read,
//! and reveals nothing doing it; another key's event is refused for want of the operator role
//! when the key may read it, and unknown otherwise; an operator still deletes what it sees.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::common::{App, ADMIN};

const T: &str = "2026-06-17T09:20:00Z";

fn minimal(summary: &str) -> Value {
    json!({"summary": summary, "actorId": "user:dana", "occurredAt": T, "sourceRefs": ["chat-17"]})
}

async fn writer_key(app: &App, label: &str) -> String {
    let (status, made) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(ADMIN),
            Some(json!({"tenantId": "acme", "roles": ["writer", "reader"], "label": label})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["key"].as_str().expect("key").to_string()
}

#[tokio::test]
async fn a_writer_forgets_its_own_writes_even_unseen_and_nothing_else() {
    let app = App::new();
    let writer = writer_key(&app, "agent").await; // maxPrivacyClass internal
    let other = writer_key(&app, "other agent").await;
    let operator = app.key_full("acme").await;

    // Stored above what the writer may read: it cannot see it, but it may forget it.
    let (status, body) = app
        .write(&writer, minimal("Dana's direct line is +1 415 555 0134"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["visibleToWriter"], false, "{body}");
    let hidden = body["eventId"].as_str().expect("id").to_string();
    let path = format!("/v1/events/{hidden}");
    assert_eq!(
        app.call("GET", &path, Some(&writer), None).await.0,
        StatusCode::NOT_FOUND
    );
    let (status, receipt) = app.call("DELETE", &path, Some(&writer), None).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    let mut fields: Vec<&str> = receipt
        .as_object()
        .expect("receipt")
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        vec!["deletedAt", "eventId", "purged"],
        "a receipt, nothing of the content: {receipt}"
    );
    // The id is random and may hold the digits by chance; the rest must not.
    let id = receipt["eventId"].as_str().expect("id");
    assert!(
        !receipt.to_string().replace(id, "").contains("415"),
        "{receipt}"
    );
    // Idempotent: the same receipt again, also after a restart.
    let (status, again) = app.call("DELETE", &path, Some(&writer), None).await;
    assert_eq!((status, &again), (StatusCode::OK, &receipt));
    // Gone for everyone.
    assert_eq!(
        app.call("GET", &path, Some(&operator), None).await.0,
        StatusCode::NOT_FOUND
    );

    // Another key's event: a key that may read it is told it lacks the operator role; to a
    // key that may not read it (here, one without the reader role) it is unknown.
    let theirs = app
        .write_ok(&other, {
            let mut b = minimal("Dana renewed the annual plan");
            b["eventType"] = json!("task_milestone");
            b
        })
        .await;
    let (status, problem) = app
        .call(
            "DELETE",
            &format!("/v1/events/{theirs}"),
            Some(&writer),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{problem}");
    assert_eq!(problem["missingRole"], "operator", "{problem}");
    let write_only = app.key_with("acme", &["writer"]).await;
    let (status, problem) = app
        .call(
            "DELETE",
            &format!("/v1/events/{theirs}"),
            Some(&write_only),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{problem}");
    assert_eq!(
        app.call("GET", &format!("/v1/events/{theirs}"), Some(&writer), None)
            .await
            .0,
        StatusCode::OK,
        "still there"
    );
    // An operator deletes what it sees, whoever wrote it.
    assert_eq!(
        app.call(
            "DELETE",
            &format!("/v1/events/{theirs}"),
            Some(&operator),
            None
        )
        .await
        .0,
        StatusCode::OK
    );
    // A reader-only key may delete nothing, and is told which role it lacks.
    let reader = app.key_with("acme", &["reader"]).await;
    let (status, problem) = app.call("DELETE", &path, Some(&reader), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("operator"),
        "{problem}"
    );

    // The tombstone remembers its writer across a restart (and compaction).
    let (status, _) = app
        .call("POST", "/v1/admin/compact", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let app = app.restart().await;
    let (status, again) = app.call("DELETE", &path, Some(&writer), None).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["eventId"], receipt["eventId"]);
    assert_eq!(again["purged"], true, "{again}");
    // The other writer learns nothing of it.
    assert_eq!(
        app.call("DELETE", &path, Some(&other), None).await.0,
        StatusCode::NOT_FOUND
    );
}
