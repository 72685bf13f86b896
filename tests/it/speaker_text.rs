//! Speaker-aware passage text (`--embed-speaker on`): every path that stores a vector (a
//! write, a draft the classifier types, a batch, an observation, an import line without a
//! vector) stores the vector of `"<actor label>: <summary>"`, an opaque actor id stores the
//! summary's, and the classifier still reads the summary's vector, so it types a write as it
//! does with the setting off. Checked against the real model through `GET /v1/export`'s
//! vectors.

use std::path::Path;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use serde_json::{json, Value};

use episodic::embed::{Embedder, PassageText};
use episodic::engine::EngineConfig;

use crate::common::{real_model, App};
use crate::http_transfer::{export, import};

const T: &str = "2026-06-17T09:20:00Z";
const PREFERENCE: &str = "Please send my renewal notices by email from now on";

fn speaker_config(dir: &Path) -> EngineConfig {
    let mut c = EngineConfig::new(dir.to_path_buf());
    c.passage = PassageText::Speaker;
    c
}

fn speaker_app() -> App {
    App::open_in(tempfile::tempdir().expect("tmp"), speaker_config)
}

/// The real model's vector of `text`.
fn vector_of(text: &str) -> Vec<f32> {
    real_model().embed(&[text]).expect("embeds").remove(0)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Each exported event's summary, actor and stored vector.
async fn stored(app: &App, key: &str) -> Vec<(String, String, Vec<f32>)> {
    let (_, lines) = export(app, key, "?withVectors=true").await;
    lines
        .iter()
        .map(|l| {
            let vector: Vec<f32> = l["vector"]
                .as_array()
                .expect("vector")
                .iter()
                .map(|x| x.as_f64().expect("number") as f32)
                .collect();
            (
                l["summary"].as_str().expect("summary").to_string(),
                l["actorId"].as_str().expect("actor").to_string(),
                vector,
            )
        })
        .collect()
}

/// Asserts that each stored vector is the vector of the passage `expected` gives for its
/// summary and actor, and not the other rule's (when the two texts differ).
fn assert_passages(found: &[(String, String, Vec<f32>)], expected: PassageText) {
    assert!(!found.is_empty());
    for (summary, actor, v) in found {
        let want = expected.text(actor, summary);
        let other = expected.other().text(actor, summary);
        let cos = cosine(v, &vector_of(&want));
        assert!(
            cos > 0.9999,
            "{actor} / {summary:?}: cosine {cos} to {want:?}"
        );
        if other != want {
            let cos = cosine(v, &vector_of(&other));
            assert!(cos < 0.99, "{actor}: also close to {other:?} ({cos})");
        }
    }
}

fn event(actor: &str, summary: &str, typed: bool) -> Value {
    let mut e = json!({
        "summary": summary,
        "actorId": actor,
        "occurredAt": T,
        "sourceRefs": ["chat-1"],
        "sourceTrust": "user_provided",
    });
    if typed {
        e["eventType"] = json!("user_preference_stated");
    }
    e
}

#[tokio::test]
async fn writes_store_the_speaker_passage_and_opaque_actors_the_summary() {
    let app = speaker_app();
    let key = app.key_full("acme").await;
    app.write_ok(&key, event("user:dana", PREFERENCE, true))
        .await;
    app.write_ok(
        &key,
        event("user-1", "The customer asked for a call back", true),
    )
    .await;
    // A correction is a write too.
    let first = app
        .write_ok(&key, event("Caroline", "I painted a lake at sunrise", true))
        .await;
    let mut fix = event("Caroline", "I painted a lake at sunset, not sunrise", true);
    fix["supersedesEventIds"] = json!([first]);
    app.write_ok(&key, fix).await;
    let found = stored(&app, &key).await;
    assert_eq!(found.len(), 4);
    assert_passages(&found, PassageText::Speaker);
}

#[tokio::test]
async fn the_default_stores_the_summary_alone() {
    let app = App::new();
    let key = app.key_full("acme").await;
    app.write_ok(&key, event("user:dana", PREFERENCE, true))
        .await;
    assert_passages(&stored(&app, &key).await, PassageText::Summary);
}

#[tokio::test]
async fn a_classified_write_is_typed_from_its_summary_and_stores_its_passage() {
    let plain = App::new();
    let speaker = speaker_app();
    let mut derived = Vec::new();
    for app in [&plain, &speaker] {
        let key = app.key_full("acme").await;
        let before = app.embedder.texts.load(Ordering::SeqCst);
        let (status, body) = app.write(&key, event("user:dana", PREFERENCE, false)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let texts = app.embedder.texts.load(Ordering::SeqCst) - before;
        derived.push((body["derived"].clone(), texts));
    }
    // The same derived type and reason with the setting on as off: the classifier read the
    // same (summary) vector; with the setting on, the passage rode in the same model call.
    assert_eq!(derived[0].0, derived[1].0);
    assert!(
        derived[0].0.to_string().contains("user_preference_stated"),
        "{:?}",
        derived[0]
    );
    assert_eq!((derived[0].1, derived[1].1), (1, 2));
    let key = speaker.key_full("acme").await;
    assert_passages(&stored(&speaker, &key).await, PassageText::Speaker);
}

#[tokio::test]
async fn batch_items_observations_and_imports_store_their_passages() {
    let app = speaker_app();
    let key = app.key_full("acme").await;
    let batch = json!({"events": [
        event("user:dana", PREFERENCE, false),
        event("user:dana", "The invoice for March was paid late", true),
        event("user-7", "Please call me on Fridays only", false),
    ]});
    let (status, body) = app
        .call("POST", "/v1/events:batch", Some(&key), Some(batch))
        .await;
    assert!(status.is_success(), "{body}");
    let (status, body) = app
        .call(
            "POST",
            "/v1/observe",
            Some(&key),
            Some(json!({
                "text": "From now on I want the weekly report as a PDF",
                "role": "user",
                "actorId": "user:melanie",
                "occurredAt": T,
                "sourceRefs": ["chat-2"],
                "sourceTrust": "user_provided",
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["candidate"]["eventType"], "user_preference_stated");
    // An import line without a vector (a store moved over HTTP) is embedded here.
    let plain = App::new();
    let plain_key = plain.key_full("acme").await;
    let mut milestone = event(
        "agent:release-bot",
        "The billing migration finished without downtime",
        true,
    );
    milestone["eventType"] = json!("task_milestone");
    plain.write_ok(&plain_key, milestone).await;
    let (line, _) = export(&plain, &plain_key, "").await;
    let (status, summary) = import(&app, &key, line).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    let found = stored(&app, &key).await;
    assert_eq!(found.len(), 5, "{found:?}");
    assert_passages(&found, PassageText::Speaker);
}
