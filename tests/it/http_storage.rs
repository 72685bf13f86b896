//! Durability: restart keeps everything without re-embedding; deleted indexes are rebuilt.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::{event, summaries, with, App};

async fn seed(app: &App, key: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for (i, s) in [
        "Invoice sent to Contoso",
        "Contract renewed for two years",
        "Support ticket escalated",
    ]
    .iter()
    .enumerate()
    {
        let at = format!("2026-0{}-01T00:00:00Z", i + 1);
        let body = with(event("u", s, &at), "resourceRefs", json!([format!("r{i}")]));
        ids.push(app.write_ok(key, body).await);
    }
    ids
}

#[tokio::test]
async fn restart_keeps_every_event_and_never_re_embeds() {
    let app = App::new();
    let key = app.key("acme").await;
    let ids = seed(&app, &key).await;
    let before = app.recall(&key, json!({"query": "contract renewal"})).await;
    let app = app.restart().await;
    assert_eq!(
        app.texts_embedded(),
        0,
        "opening the engine embedded nothing"
    );
    assert_eq!(app.engine.stats().events, 3);
    for id in &ids {
        let (status, _) = app
            .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
            .await;
        assert_eq!(status, StatusCode::OK, "key and event survive restart");
    }
    let after = app.recall(&key, json!({"query": "contract renewal"})).await;
    assert_eq!(summaries(&after), summaries(&before));
    assert_eq!(app.texts_embedded(), 1, "only the query was embedded");
}

#[tokio::test]
async fn deleted_index_directories_are_rebuilt_from_the_log() {
    let app = App::new();
    let key = app.key("acme").await;
    seed(&app, &key).await;
    app.engine.shutdown().await;
    std::fs::remove_dir_all(app.dir.path().join("index")).expect("remove index");
    let app = app.restart().await;
    let stats = app.engine.stats();
    // No HNSW graph without approximate recall (the default), so none is rebuilt or saved.
    assert_eq!((stats.events, stats.hnsw_len, stats.scope_docs), (3, 0, 3));
    assert!(!app.dir.path().join("index").join("hnsw").exists());
    let recall = app
        .recall(&key, json!({"query": "contract renewal", "limit": 1}))
        .await;
    assert_eq!(summaries(&recall), vec!["Contract renewed for two years"]);
    assert_eq!(app.texts_embedded(), 1);
}

#[tokio::test]
async fn corrupt_scope_index_is_rebuilt() {
    let app = App::new();
    let key = app.key("acme").await;
    seed(&app, &key).await;
    app.engine.shutdown().await;
    let meta = app.dir.path().join("index/scope/meta.json");
    std::fs::write(&meta, b"{not json").expect("corrupt");
    let app = app.restart().await;
    assert_eq!(app.engine.stats().scope_docs, 3);
    let (_, tl) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert_eq!(tl["events"].as_array().map(Vec::len), Some(3));
}
