//! Lifecycle: correction chains, stale suppression, deletion, erasure, expiry, compaction
//! with a canary scan, audit completeness, history and as-of queries.

use std::path::Path;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use episodic::embed::Embedder;

use crate::common::{config, event, result_ids, summaries, with, App, ADMIN};

const T: &str = "2026-06-17T09:20:00Z";

fn correction(actor: &str, summary: &str, at: &str, supersedes: &[&str]) -> Value {
    with(
        with(
            event(actor, summary, at),
            "supersedesEventIds",
            json!(supersedes),
        ),
        "eventType",
        json!("correction_received"),
    )
}

#[tokio::test]
async fn correction_chains_supersede_atomically() {
    let app = App::new();
    let key = app.key("acme").await;
    let a = app
        .write_ok(&key, event("u", "Deployment target is staging", T))
        .await;
    let b = app
        .write_ok(
            &key,
            correction("u", "Deployment target is production", T, &[&a]),
        )
        .await;
    let c = app
        .write_ok(
            &key,
            correction("u", "Deployment target is production-eu", T, &[&b]),
        )
        .await;
    let (_, got_a) = app
        .call("GET", &format!("/v1/events/{a}"), Some(&key), None)
        .await;
    assert_eq!(got_a["status"], "superseded");
    assert_eq!(got_a["supersededBy"], b.as_str());
    let recall = app
        .recall(&key, json!({"query": "deployment target", "limit": 10}))
        .await;
    assert_eq!(
        result_ids(&recall),
        vec![c.clone()],
        "one active event per correction chain"
    );
    let all = app
        .recall(
            &key,
            json!({"query": "deployment target", "includeSuperseded": true, "limit": 10}),
        )
        .await;
    assert_eq!(all["results"].as_array().map(Vec::len), Some(3));
    let (status, body) = app.write(&key, correction("u", "again", T, &[&a])).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("conflict"))
    );
    let (status, _) = app
        .write(&key, correction("u", "ghost", T, &["no-such-id"]))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let cyc = with(
        correction("u", "self", T, &["self-id"]),
        "eventId",
        json!("self-id"),
    );
    assert_eq!(app.write(&key, cyc).await.0, StatusCode::CONFLICT);
    let other = app.key("globex").await;
    let (status, _) = app
        .write(&other, correction("u", "foreign", T, &[&c]))
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's id is not found"
    );
    let (_, tl) = app.call("GET", "/v1/timeline", Some(&other), None).await;
    assert_eq!(
        tl["events"],
        json!([]),
        "nothing stored for the failed correction"
    );
    let (_, still) = app
        .call("GET", &format!("/v1/events/{c}"), Some(&key), None)
        .await;
    assert_eq!(still["status"], "active");
}

#[tokio::test]
async fn stale_events_are_hidden_even_when_recorded_late() {
    let app = App::new();
    let key = app.key("acme").await;
    let august = app
        .write_ok(
            &key,
            event(
                "u",
                "Prefers SMS for renewal notices",
                "2026-08-01T10:00:00Z",
            ),
        )
        .await;
    let june = app
        .write_ok(
            &key,
            event(
                "u",
                "Prefers email for renewal notices",
                "2026-06-01T10:00:00Z",
            ),
        )
        .await;
    let recall = app
        .recall(&key, json!({"query": "renewal notice preference"}))
        .await;
    assert_eq!(result_ids(&recall), vec![august.clone()]);
    let with_stale = app
        .recall(
            &key,
            json!({"query": "email renewal notices", "includeStale": true}),
        )
        .await;
    let hit = with_stale["results"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|h| h["event"]["eventId"] == june.as_str())
                .cloned()
        })
        .expect("june returned with includeStale");
    assert_eq!(
        (hit["stale"].clone(), hit["staleBy"].clone()),
        (json!(true), json!(august))
    );
    let other_resource = with(
        event("u", "Prefers email for invoices", "2026-05-01T10:00:00Z"),
        "resourceRefs",
        json!(["invoices"]),
    );
    app.write_ok(&key, other_resource).await;
    let recall = app
        .recall(&key, json!({"query": "prefers email", "limit": 10}))
        .await;
    assert_eq!(
        recall["results"].as_array().map(Vec::len),
        Some(2),
        "another subject is not stale"
    );
}

#[tokio::test]
async fn a_subjects_own_statement_outdates_other_actors_notes_about_it() {
    let app = App::new();
    let key = app.key("acme").await;
    let about = |actor: &str, summary: &str, at: &str| {
        with(
            event(actor, summary, at),
            "resourceRefs",
            json!(["cust-7710"]),
        )
    };
    let note = app
        .write_ok(
            &key,
            about(
                "agent-paula",
                "Customer 7710 wants deliveries on Saturday mornings",
                "2026-09-01T12:00:00Z",
            ),
        )
        .await;
    let other_note = app
        .write_ok(
            &key,
            about(
                "agent-omar",
                "Customer 7710 wants deliveries left at the back door",
                "2026-09-15T12:00:00Z",
            ),
        )
        .await;
    // One agent's later note does not outdate another agent's ...
    let notes = app
        .recall(
            &key,
            json!({"query": "customer 7710 deliveries", "limit": 10}),
        )
        .await;
    let mut ids = result_ids(&notes);
    ids.sort();
    let mut want = vec![note.clone(), other_note.clone()];
    want.sort();
    assert_eq!(ids, want);
    let own = app
        .write_ok(
            &key,
            about(
                "cust-7710",
                "Please deliver on Thursday evenings from now on",
                "2026-10-10T18:00:00Z",
            ),
        )
        .await;
    let recall = app
        .recall(
            &key,
            json!({"query": "customer 7710 deliveries", "limit": 10, "includeStale": true}),
        )
        .await;
    let stale_by = |id: &str| {
        recall["results"]
            .as_array()
            .and_then(|r| r.iter().find(|h| h["event"]["eventId"] == id))
            .map(|h| (h["stale"].clone(), h["staleBy"].clone()))
    };
    // ... but the customer's own request outdates both agents' notes about the customer.
    assert_eq!(stale_by(&note), Some((json!(true), json!(own.clone()))));
    assert_eq!(
        stale_by(&other_note),
        Some((json!(true), json!(own.clone())))
    );
    assert_eq!(stale_by(&own).map(|s| s.0), Some(json!(false)));
}

#[tokio::test]
async fn delete_is_immediate_idempotent_and_operator_only() {
    let app = App::new();
    let key = app.key("acme").await;
    let writer = app.key_with("acme", &["writer", "reader"]).await;
    let id = app
        .write_ok(&key, event("u", "Card ending 4242 was charged twice", T))
        .await;
    let (status, body) = app
        .call("DELETE", &format!("/v1/events/{id}"), Some(&writer), None)
        .await;
    assert_eq!(
        (status, body["missingRole"].clone()),
        (StatusCode::FORBIDDEN, json!("operator"))
    );
    let (status, receipt) = app
        .call("DELETE", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["eventId"], id.as_str());
    assert_eq!(receipt["purged"], false);
    assert!(receipt["deletedAt"].as_str().is_some());
    assert_eq!(
        app.call("GET", &format!("/v1/events/{id}"), Some(&key), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let recall = app
        .recall(&key, json!({"query": "card charged twice"}))
        .await;
    assert_eq!(recall["results"], json!([]));
    let (_, tl) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert_eq!(tl["events"], json!([]));
    let (status, again) = app
        .call("DELETE", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!((status, &again), (StatusCode::OK, &receipt));
    let reuse = with(event("u", "x", T), "eventId", json!(id));
    let other = app.key("globex").await;
    assert_eq!(
        app.call("DELETE", &format!("/v1/events/{id}"), Some(&other), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let _ = reuse;
}

#[tokio::test]
async fn erasure_deletes_what_retention_allows_and_says_what_it_kept() {
    let app = App::new();
    let key = app.key_full("acme").await;
    let a = app
        .write_ok(
            &key,
            with(
                event("eve", "Eve asked for a refund", T),
                "resourceRefs",
                json!(["r1"]),
            ),
        )
        .await;
    let b = app
        .write_ok(
            &key,
            with(
                event("eve", "Eve moved to Lisbon", T),
                "resourceRefs",
                json!(["r2"]),
            ),
        )
        .await;
    let legal = with(
        with(
            event("eve", "Eve signed the contract", T),
            "retention",
            json!({"deleteOnRequest": false}),
        ),
        "resourceRefs",
        json!(["r3"]),
    );
    let kept = app.write_ok(&key, legal).await;
    let other_actor = app
        .write_ok(&key, event("bob", "Bob asked for a refund", T))
        .await;
    let (status, receipt) = app
        .call(
            "POST",
            "/v1/erasure",
            Some(&key),
            Some(json!({"actorId": "eve"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    let mut erased: Vec<String> = serde_json::from_value(receipt["erased"].clone()).expect("ids");
    erased.sort();
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(erased, want);
    assert_eq!(
        receipt["kept"],
        json!([{"eventId": kept, "reason": "retention.deleteOnRequest is false"}])
    );
    let recall = app
        .recall(&key, json!({"query": "refund", "limit": 10}))
        .await;
    let ids = result_ids(&recall);
    assert!(
        ids.contains(&other_actor) && ids.contains(&kept) && ids.len() == 2,
        "{ids:?}"
    );
    let (status, _) = app
        .call(
            "POST",
            "/v1/erasure",
            Some(&key),
            Some(json!({"actor": "eve"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

fn fast_sweep(dir: &Path) -> episodic::engine::EngineConfig {
    let mut c = config(dir);
    c.writer.sweep_interval = Duration::from_millis(200);
    c
}

#[tokio::test]
async fn events_expire_during_the_test_and_the_sweeper_deletes_them() {
    let app = App::open_in(tempfile::tempdir().expect("tmp"), fast_sweep);
    let key = app.key("acme").await;
    let expires = episodic::model::Timestamp::now()
        .plus_millis(4000)
        .to_rfc3339();
    let body = with(
        event("u", "Temporary door code 4711", T),
        "retention",
        json!({"deleteOnRequest": true, "expiresAt": expires}),
    );
    let id = app.write_ok(&key, body).await;
    assert_eq!(
        summaries(&app.recall(&key, json!({"query": "door code"})).await),
        vec!["Temporary door code 4711"]
    );
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(
        app.call("GET", &format!("/v1/events/{id}"), Some(&key), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.recall(&key, json!({"query": "door code"})).await["results"],
        json!([])
    );
    let mut swept = false;
    for _ in 0..100 {
        let (_, audit) = app
            .call(
                "GET",
                &format!("/v1/audit?action=expired&eventId={id}"),
                Some(&key),
                None,
            )
            .await;
        if audit["entries"].as_array().is_some_and(|e| e.len() == 1) {
            swept = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(swept, "the sweeper deleted the expired event");
    let (status, receipt) = app
        .call("DELETE", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a swept event has a deletion receipt: {receipt}"
    );
}

fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    hits.push(path.display().to_string());
                }
            }
        }
    }
    hits
}

#[tokio::test]
async fn compaction_leaves_no_trace_of_deleted_content() {
    let app = App::new();
    let key = app.key_full("acme").await;
    let canary = "qzvcanaryxq";
    let keep = app
        .write_ok(
            &key,
            with(
                event("u", "Renewal quote sent to Contoso", T),
                "resourceRefs",
                json!(["q"]),
            ),
        )
        .await;
    let doomed = app
        .write_ok(
            &key,
            event("u", &format!("Secret {canary} recovery phrase"), T),
        )
        .await;
    let erased = app
        .write_ok(
            &key,
            with(
                with(
                    event("eve", &format!("Eve note {canary}"), T),
                    "resourceRefs",
                    json!(["e"]),
                ),
                // Erasure covers metadata, and its index terms, too.
                "metadata",
                json!({"note": format!("meta {canary}x")}),
            ),
        )
        .await;
    app.engine.refresh().await.expect("refresh");
    let doomed_vector = app
        .embedder
        .inner
        .embed(&[format!("Secret {canary} recovery phrase").as_str()])
        .expect("embed");
    let vector_bytes: Vec<u8> = doomed_vector[0][..8]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert!(
        !files_containing(app.dir.path(), &vector_bytes).is_empty(),
        "the vector is on disk before compaction"
    );
    assert!(
        !files_containing(app.dir.path(), canary.as_bytes()).is_empty(),
        "the canary is on disk before compaction"
    );
    app.call("DELETE", &format!("/v1/events/{doomed}"), Some(&key), None)
        .await;
    app.call(
        "POST",
        "/v1/erasure",
        Some(&key),
        Some(json!({"actorId": "eve"})),
    )
    .await;
    // Compaction rewrites the whole store: a tenant's operator may not run it.
    let (status, refused) = app
        .call("POST", "/v1/admin/compact", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let (status, report) = app
        .call("POST", "/v1/admin/compact", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let mut purged: Vec<String> =
        serde_json::from_value(report["purgedEventIds"].clone()).expect("ids");
    purged.sort();
    let mut want = vec![doomed.clone(), erased];
    want.sort();
    assert_eq!(purged, want);
    // The tenant's trail proves its purge, with its own ids and no store-wide figures.
    let (_, trail) = app
        .call("GET", "/v1/audit?action=compact", Some(&key), None)
        .await;
    let entry = &trail["entries"][0];
    let mut ids: Vec<String> = serde_json::from_value(entry["eventIds"].clone()).expect("ids");
    ids.sort();
    assert_eq!(ids, want, "{trail}");
    assert!(entry["detail"].get("logBytesBefore").is_none(), "{trail}");
    assert_eq!(
        files_containing(app.dir.path(), canary.as_bytes()),
        Vec::<String>::new()
    );
    assert_eq!(
        files_containing(app.dir.path(), &vector_bytes),
        Vec::<String>::new(),
        "no vector data of a deleted event"
    );
    let (_, receipt) = app
        .call("DELETE", &format!("/v1/events/{doomed}"), Some(&key), None)
        .await;
    assert_eq!(receipt["purged"], true);
    let app = app.restart().await;
    assert_eq!(
        files_containing(app.dir.path(), canary.as_bytes()),
        Vec::<String>::new()
    );
    assert_eq!(
        app.call("GET", &format!("/v1/events/{doomed}"), Some(&key), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let reuse = with(event("u", "reuse", T), "eventId", json!(doomed));
    assert_eq!(
        app.write(&key, reuse).await.0,
        StatusCode::CONFLICT,
        "a purged id is never resurrected"
    );
    assert_eq!(
        summaries(&app.recall(&key, json!({"query": "renewal quote"})).await),
        vec!["Renewal quote sent to Contoso"]
    );
    let (status, _) = app
        .call("GET", &format!("/v1/events/{keep}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        app.texts_embedded(),
        1,
        "compaction and restart never re-embed"
    );
}

async fn actions(app: &App, key: &str) -> Vec<String> {
    let (status, audit) = app
        .call("GET", "/v1/audit?limit=1000", Some(key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["action"].as_str().expect("action").to_string())
        .collect()
}

#[tokio::test]
async fn every_call_leaves_exactly_one_audit_record() {
    let app = App::new();
    let key = app.key_full("acme").await;
    let id = app
        .write_ok(&key, event("u", "Invoice 7 approved", T))
        .await;
    app.write(
        &key,
        with(event("u", "s", T), "privacyClass", json!("sensitive")),
    )
    .await;
    app.recall(&key, json!({"query": "invoice"})).await;
    app.call("GET", "/v1/timeline", Some(&key), None).await;
    app.call("GET", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    let fix = app
        .write_ok(
            &key,
            correction("u", "Invoice 7 approved and paid", T, &[&id]),
        )
        .await;
    app.call("DELETE", &format!("/v1/events/{fix}"), Some(&key), None)
        .await;
    app.call(
        "POST",
        "/v1/erasure",
        Some(&key),
        Some(json!({"actorId": "nobody"})),
    )
    .await;
    let got = actions(&app, &key).await;
    assert_eq!(
        got,
        vec!["write", "deny", "recall", "timeline", "get", "correct", "deleted", "erased"]
    );
    let other = app.key("globex").await;
    assert_eq!(
        actions(&app, &other).await,
        Vec::<String>::new(),
        "the trail is tenant-scoped"
    );
    let (_, history) = app
        .call("GET", &format!("/v1/events/{id}/history"), Some(&key), None)
        .await;
    let life: Vec<&str> = history["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|e| e["action"].as_str().expect("a"))
        .collect();
    assert_eq!(life, vec!["write", "recall", "timeline", "get", "correct"]);
    assert_eq!(history["event"]["status"], "superseded");
    assert!(
        !serde_json::to_string(&history)
            .expect("json")
            .contains("Invoice 7 approved and paid"),
        "no content in the trail"
    );
}

#[tokio::test]
async fn as_of_shows_memory_before_and_after_a_correction() {
    let app = App::new();
    let key = app.key("acme").await;
    let old = app
        .write_ok(&key, event("u", "Ships to the Berlin warehouse", T))
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let between = episodic::model::Timestamp::now().to_rfc3339();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = app
        .write_ok(
            &key,
            correction("u", "Ships to the Hamburg warehouse", T, &[&old]),
        )
        .await;
    let before = app
        .recall(&key, json!({"query": "warehouse", "asOf": between}))
        .await;
    assert_eq!(result_ids(&before), vec![old.clone()]);
    let now = app.recall(&key, json!({"query": "warehouse"})).await;
    assert_eq!(result_ids(&now), vec![new.clone()]);
    let (_, tl) = app
        .call(
            "GET",
            &format!("/v1/timeline?asOf={between}"),
            Some(&key),
            None,
        )
        .await;
    let ids: Vec<&str> = tl["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["eventId"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, vec![old.as_str()]);
    app.call("DELETE", &format!("/v1/events/{old}"), Some(&key), None)
        .await;
    let after_delete = app
        .recall(&key, json!({"query": "warehouse", "asOf": between}))
        .await;
    assert_eq!(
        after_delete["results"],
        json!([]),
        "deletion wins over as-of"
    );
}

#[tokio::test]
async fn an_as_of_recall_measures_recency_from_its_time_and_repeats_exactly() {
    const DAY_MS: i64 = 86_400_000;
    let app = App::new();
    let key = app.key("acme").await;
    app.write_ok(&key, event("u", "Ships to the Berlin warehouse", T))
        .await;
    // Both times are after the write was recorded, so both show the event.
    let soon = episodic::model::Timestamp::now().plus_millis(DAY_MS);
    let later = soon.plus_millis(180 * DAY_MS);
    let recall = |at: episodic::model::Timestamp| json!({"query": "warehouse", "asOf": at.to_rfc3339(), "includeStale": true});
    let first = app.recall(&key, recall(soon)).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let again = app.recall(&key, recall(soon)).await;
    assert_eq!(
        first, again,
        "the same as-of recall answers byte for byte alike"
    );
    let recency = |body: &Value| {
        body["results"][0]["scoreBreakdown"]["recency"]
            .as_f64()
            .expect("recency")
    };
    let half = recency(&app.recall(&key, recall(later)).await) / recency(&first);
    assert!(
        (half - 0.5).abs() < 1e-3,
        "one half-life later, recency halves: {half}"
    );
}

fn similarity_gated(dir: &std::path::Path) -> episodic::engine::EngineConfig {
    let mut c = crate::common::config(dir);
    c.recall.stale_min_similarity = 0.6;
    c
}

#[tokio::test]
async fn stale_similarity_gate_keeps_unrelated_events_of_a_subject() {
    let app = App::open_in(tempfile::tempdir().expect("tmp"), similarity_gated);
    let key = app.key("acme").await;
    let older = app
        .write_ok(
            &key,
            event(
                "u",
                "Booked the train from New York to Boston",
                "2026-06-01T10:00:00Z",
            ),
        )
        .await;
    let newer = app
        .write_ok(
            &key,
            event(
                "u",
                "Reserved a hotel room near the harbour for two nights",
                "2026-06-02T10:00:00Z",
            ),
        )
        .await;
    let same = app
        .write_ok(
            &key,
            event(
                "u",
                "Booked the train from New York to Boston, 9am departure",
                "2026-06-03T10:00:00Z",
            ),
        )
        .await;
    let recall = app
        .recall(&key, json!({"query": "travel bookings", "limit": 10}))
        .await;
    let ids = result_ids(&recall);
    // The near-duplicate update hides the first booking; the unrelated hotel stays.
    assert!(ids.contains(&newer) && ids.contains(&same), "{ids:?}");
    assert!(!ids.contains(&older), "{ids:?}");
}

/// A tenant's audit entries are numbered 1, 2, ... whatever other tenants do: the numbers
/// tell nothing of another tenant's activity, and the cursor still pages through them.
#[tokio::test]
async fn audit_numbers_are_per_tenant() {
    let app = App::new();
    let a = app.key("acme").await;
    let b = app.key("globex").await;
    for i in 0..4 {
        app.write_ok(&a, event("u", &format!("acme note {i}"), T))
            .await;
        for j in 0..3 {
            app.write_ok(&b, event("u", &format!("globex note {i}.{j}"), T))
                .await;
        }
    }
    let seqs = |page: &Value| -> Vec<u64> {
        page["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["seq"].as_u64().expect("seq"))
            .collect()
    };
    let (_, first) = app
        .call("GET", "/v1/audit?action=write&limit=2", Some(&a), None)
        .await;
    assert_eq!(seqs(&first), [1, 2]);
    let cursor = first["nextCursor"].as_str().expect("cursor");
    let (_, rest) = app
        .call(
            "GET",
            &format!("/v1/audit?action=write&limit=10&cursor={cursor}"),
            Some(&a),
            None,
        )
        .await;
    assert_eq!(seqs(&rest), [3, 4]);
    let (_, other) = app
        .call("GET", "/v1/audit?action=write&limit=100", Some(&b), None)
        .await;
    assert_eq!(seqs(&other), (1..=12).collect::<Vec<u64>>());
}
