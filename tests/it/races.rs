//! Races: concurrent corrections of one event, delete during recall, approve during delete,
//! writes during compaction. The final state must be one a serial order could produce, and no
//! acknowledged write may be lost.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::{event, result_ids, with, App, ADMIN};

const T: &str = "2026-06-17T09:20:00Z";

#[tokio::test]
async fn concurrent_corrections_of_one_event_leave_exactly_one_winner() {
    let app = std::sync::Arc::new(App::new());
    let key = app.key("acme").await;
    let target = app
        .write_ok(&key, event("u", "Ships from Rotterdam", T))
        .await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (app, key, target) = (app.clone(), key.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let fix = with(
                event("u", &format!("Ships from port {i}"), T),
                "supersedesEventIds",
                json!([target]),
            );
            app.write(&key, fix).await
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        let (status, body) = t.await.expect("join");
        match status {
            StatusCode::CREATED => winners.push(body["eventId"].as_str().expect("id").to_string()),
            StatusCode::CONFLICT => {}
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one correction wins");
    let (_, old) = app
        .call("GET", &format!("/v1/events/{target}"), Some(&key), None)
        .await;
    assert_eq!(old["supersededBy"], winners[0].as_str());
    let recall = app
        .recall(&key, json!({"query": "ships from", "limit": 20}))
        .await;
    assert_eq!(result_ids(&recall), winners, "one active event");
}

#[tokio::test]
async fn a_deleted_event_never_reappears_in_recalls_started_after_the_receipt() {
    let app = std::sync::Arc::new(App::new());
    let key = app.key("acme").await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(
            app.write_ok(
                &key,
                with(
                    event("u", &format!("Parcel {i} delivered"), T),
                    "resourceRefs",
                    json!([format!("p{i}")]),
                ),
            )
            .await,
        );
    }
    let reader = {
        let (app, key) = (app.clone(), key.clone());
        tokio::spawn(async move {
            for _ in 0..30 {
                app.recall(&key, json!({"query": "parcel delivered", "limit": 20}))
                    .await;
            }
        })
    };
    for id in ids.iter().take(6) {
        let (status, _) = app
            .call("DELETE", &format!("/v1/events/{id}"), Some(&key), None)
            .await;
        assert_eq!(status, StatusCode::OK);
        let recall = app
            .recall(&key, json!({"query": "parcel delivered", "limit": 20}))
            .await;
        assert!(
            !result_ids(&recall).contains(id),
            "deleted {id} recalled after its receipt"
        );
    }
    reader.await.expect("reader");
    let recall = app
        .recall(&key, json!({"query": "parcel delivered", "limit": 20}))
        .await;
    assert_eq!(result_ids(&recall).len(), 6);
}

#[tokio::test]
async fn approve_racing_delete_ends_deleted() {
    let app = std::sync::Arc::new(App::new());
    let writer = app.key("acme").await;
    let reviewer = app
        .key_with("acme", &["memory_reviewer", "operator", "reader"])
        .await;
    for round in 0..5 {
        let body = with(
            event("u", &format!("Untrusted note {round}"), T),
            "sourceTrust",
            json!("untrusted_content"),
        );
        let (status, resp) = app.write(&writer, body).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let id = resp["eventId"].as_str().expect("id").to_string();
        let approve = {
            let (app, key, id) = (app.clone(), reviewer.clone(), id.clone());
            tokio::spawn(async move {
                app.call(
                    "POST",
                    &format!("/v1/reviews/{id}/approve"),
                    Some(&key),
                    None,
                )
                .await
                .0
            })
        };
        let delete = {
            let (app, key, id) = (app.clone(), reviewer.clone(), id.clone());
            tokio::spawn(async move {
                app.call("DELETE", &format!("/v1/events/{id}"), Some(&key), None)
                    .await
                    .0
            })
        };
        let (a, d) = (approve.await.expect("join"), delete.await.expect("join"));
        assert_eq!(d, StatusCode::OK);
        assert!(
            a == StatusCode::OK || a == StatusCode::NOT_FOUND,
            "approve: {a}"
        );
        assert_eq!(
            app.call("GET", &format!("/v1/events/{id}"), Some(&reviewer), None)
                .await
                .0,
            StatusCode::NOT_FOUND
        );
    }
}

#[tokio::test]
async fn writes_during_compaction_are_all_kept() {
    let app = std::sync::Arc::new(App::new());
    let key = app.key("acme").await;
    for i in 0..10 {
        let id = app
            .write_ok(
                &key,
                with(
                    event("u", &format!("Old note {i}"), T),
                    "resourceRefs",
                    json!([format!("o{i}")]),
                ),
            )
            .await;
        app.call("DELETE", &format!("/v1/events/{id}"), Some(&key), None)
            .await;
    }
    let writers: Vec<_> = (0..20)
        .map(|i| {
            let (app, key) = (app.clone(), key.clone());
            tokio::spawn(async move {
                let body = with(
                    event("u", &format!("Fresh note {i}"), T),
                    "resourceRefs",
                    json!([format!("f{i}")]),
                );
                app.write_ok(&key, body).await
            })
        })
        .collect();
    let (status, report) = app
        .call("POST", "/v1/admin/compact", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let mut acked = Vec::new();
    for w in writers {
        acked.push(w.await.expect("join"));
    }
    let app = std::sync::Arc::into_inner(app)
        .expect("sole owner")
        .restart()
        .await;
    for id in &acked {
        assert_eq!(
            app.call("GET", &format!("/v1/events/{id}"), Some(&key), None)
                .await
                .0,
            StatusCode::OK,
            "{id} lost"
        );
    }
    assert_eq!(app.engine.stats().events, 20);
}
