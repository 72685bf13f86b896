//! Free-form `metadata` on events: stored and returned as written (strings in NFC), refused at
//! its path when malformed, read by the privacy and credential detectors, carried over by
//! partial corrections, exported, and filtered by equality scope-first, in the index and in
//! the fresh tail alike, never across tenants.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::common::{result_ids, App};
use crate::mcp::{call, connect, serve};

const T: &str = "2026-06-17T09:20:00Z";

fn note(actor: &str, summary: &str, metadata: Value) -> Value {
    let mut body = json!({
        "summary": summary, "actorId": actor, "occurredAt": T, "sourceRefs": ["chat-17"],
        "eventType": "task_milestone",
    });
    body["metadata"] = metadata;
    body
}

async fn recall_ids(app: &App, key: &str, metadata: Value) -> Vec<String> {
    let body = json!({"query": "renewal notice", "scope": {"metadata": metadata}, "limit": 50});
    let mut ids = result_ids(&app.recall(key, body).await);
    ids.sort();
    ids
}

async fn timeline_ids(app: &App, key: &str, metadata: &str) -> (StatusCode, Value) {
    let q = url_encode(metadata);
    app.call(
        "GET",
        &format!("/v1/timeline?metadata={q}"),
        Some(key),
        None,
    )
    .await
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn ids_of(page: &Value) -> Vec<String> {
    let mut ids: Vec<String> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["eventId"].as_str().expect("id").to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn metadata_is_stored_returned_and_filters_by_equality_before_and_after_commit() {
    let app = App::new();
    let key = app.key("acme").await;
    let other = app.key("globex").await;
    let email = app
        .write_ok(
            &key,
            note(
                "user:dana",
                "Sent the renewal notice by email",
                json!({"channel": "email", "ticket": {"priority": 2, "open": true}, "city": "cafe\u{301}"}),
            ),
        )
        .await;
    let sms = app
        .write_ok(
            &key,
            note(
                "user:erin",
                "Sent the renewal notice by text message",
                json!({"channel": "sms", "ticket": {"priority": "2"}}),
            ),
        )
        .await;
    let plain = app
        .write_ok(
            &key,
            note("user:erin", "Renewal notice drafted", Value::Null),
        )
        .await;
    // Another tenant's event with the same metadata is never in acme's scope.
    app.write_ok(
        &other,
        note(
            "user:dana",
            "Sent the renewal notice by email",
            json!({"channel": "email"}),
        ),
    )
    .await;

    let (status, got) = app
        .call("GET", &format!("/v1/events/{email}"), Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(
        got["metadata"],
        json!({"channel": "email", "city": "caf\u{e9}", "ticket": {"open": true, "priority": 2}})
    );
    let (_, got) = app
        .call("GET", &format!("/v1/events/{plain}"), Some(&key), None)
        .await;
    assert!(
        got.get("metadata").is_none(),
        "no metadata, no field: {got}"
    );

    // The same answers from the fresh tail (matched in memory) and after the index commit.
    for round in ["fresh", "committed"] {
        if round == "committed" {
            app.engine.refresh().await.expect("refresh");
        }
        assert_eq!(
            recall_ids(&app, &key, json!({"channel": "email"})).await,
            vec![email.clone()],
            "{round}"
        );
        let mut both = vec![email.clone(), sms.clone()];
        both.sort();
        assert_eq!(
            recall_ids(&app, &key, json!({"channel": ["sms", "email"]})).await,
            both,
            "{round}"
        );
        assert_eq!(
            recall_ids(&app, &key, json!({"ticket.priority": 2.0})).await,
            vec![email.clone()],
            "{round}: a number matches numbers only"
        );
        assert_eq!(
            recall_ids(&app, &key, json!({"ticket.priority": "2"})).await,
            vec![sms.clone()],
            "{round}: a string matches strings only"
        );
        assert_eq!(
            recall_ids(&app, &key, json!({"channel": "email", "ticket.open": true})).await,
            vec![email.clone()],
            "{round}"
        );
        assert_eq!(
            recall_ids(
                &app,
                &key,
                json!({"channel": "email", "ticket.open": false})
            )
            .await,
            Vec::<String>::new(),
            "{round}: every path must hold"
        );
        assert_eq!(
            recall_ids(&app, &key, json!({"city": "cafe\u{301}"})).await,
            vec![email.clone()],
            "{round}: strings compare in NFC"
        );
        let (status, page) = timeline_ids(&app, &key, r#"{"channel":"sms"}"#).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(ids_of(&page), vec![sms.clone()], "{round}");
    }

    // Bad filters are named at their path.
    let (status, problem) = app
        .call(
            "POST",
            "/v1/recall",
            Some(&key),
            Some(json!({"query": "x", "scope": {"metadata": {"channel": null, "a b": 1}}})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    assert_eq!(
        fields,
        vec!["scope.metadata.a b", "scope.metadata.channel"],
        "{problem}"
    );
    let (status, problem) = timeline_ids(&app, &key, "not json").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "metadata");
}

#[tokio::test]
async fn malformed_metadata_is_refused_at_its_path() {
    let app = App::new();
    let key = app.key("acme").await;
    let bad = note(
        "user:dana",
        "Renewal notice sent",
        json!({"list": [1, 2], "nul": null, "dotted.key": 1, "a": {"b": {"c": {"d": 1}}}}),
    );
    let (status, problem) = app.write(&key, bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    let mut fields: Vec<&str> = problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        vec![
            "metadata.a.b.c",
            "metadata.dotted.key",
            "metadata.list",
            "metadata.nul"
        ],
        "{problem}"
    );
    let big = note(
        "user:dana",
        "Renewal notice sent",
        json!({"blob": "x".repeat(5000)}),
    );
    let (status, problem) = app.write(&key, big).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "metadata", "{problem}");
    assert_eq!(app.engine.stats().events, 0);
}

#[tokio::test]
async fn detectors_read_metadata_and_corrections_carry_it_over() {
    let app = App::new();
    let key = app.key("acme").await;
    // Personal data in the metadata raises the derived class, and says where it was found.
    let (status, body) = app
        .write(
            &key,
            json!({
                "summary": "Dana asked to be contacted about the renewal",
                "actorId": "user:dana", "occurredAt": T, "sourceRefs": ["chat-17"],
                "metadata": {"contact": "dana.reyes@example.com"},
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["event"]["privacyClass"], "private", "{body}");
    let why = body["derived"]
        .as_array()
        .expect("derived")
        .iter()
        .find(|d| d["field"] == "privacyClass")
        .expect("privacyClass derived")["reason"]
        .as_str()
        .expect("reason")
        .to_string();
    assert!(
        why.starts_with("detected in the metadata: metadata.contact: email"),
        "{why}"
    );

    // A credential in the metadata is denied like one in the summary, and not echoed.
    let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let (status, problem) = app
        .write(
            &key,
            note("ci-runner", "Tagged release 4.12.0", json!({"auth": token})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(
        problem["decision"]["reason"],
        "contains_credential:github_token"
    );
    assert!(!problem.to_string().contains(token), "{problem}");

    // A partial correction keeps the metadata unless it gives new metadata (which replaces it).
    let first = app
        .write_ok(
            &key,
            note(
                "user:erin",
                "Erin wants weekly digests",
                json!({"channel": "email"}),
            ),
        )
        .await;
    let (status, fixed) = app
        .call(
            "POST",
            &format!("/v1/events/{first}/correct"),
            Some(&key),
            Some(json!({"summary": "Erin wants monthly digests", "sourceTrust": "user_provided"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{fixed}");
    assert_eq!(fixed["event"]["metadata"], json!({"channel": "email"}));
    let second = fixed["eventId"].as_str().expect("id").to_string();
    let (status, fixed) = app
        .call(
            "POST",
            &format!("/v1/events/{second}/correct"),
            Some(&key),
            Some(json!({"metadata": {"channel": "sms"}, "sourceTrust": "user_provided"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{fixed}");
    assert_eq!(fixed["event"]["metadata"], json!({"channel": "sms"}));

    // Export carries it, and importing the export again changes nothing.
    let (text, lines) = crate::http_transfer::export(&app, &key, "").await;
    let last = lines.last().expect("exported");
    assert_eq!(last["metadata"], json!({"channel": "sms"}), "{last}");
    let (status, summary) = crate::http_transfer::import(&app, &key, text).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["unchanged"], lines.len(), "{summary}");
    // A line whose metadata differs is not the same event.
    let mut changed = last.clone();
    changed["metadata"] = json!({"channel": "post"});
    let (status, summary) = crate::http_transfer::import(&app, &key, format!("{changed}\n")).await;
    assert_ne!(status, StatusCode::OK, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_written_and_filtered_over_mcp() {
    let app = App::new();
    let key = app.key("acme").await;
    let client = connect(&serve(&app).await, &key).await.expect("initialize");
    let mut ids = Vec::new();
    for (summary, channel) in [
        ("Sent the renewal notice by email", "email"),
        ("Sent the renewal notice by text message", "sms"),
    ] {
        let written = call(
            &client,
            "record_event",
            json!({"summary": summary, "actorId": "user:dana", "occurredAt": T,
                   "sourceRefs": ["chat-17"], "metadata": {"channel": channel}}),
        )
        .await;
        let body = written.structured_content.expect("structured");
        assert_eq!(body["event"]["metadata"]["channel"], channel, "{body}");
        ids.push(body["eventId"].as_str().expect("id").to_string());
    }
    let recall = call(
        &client,
        "recall",
        json!({"query": "renewal notice", "scope": {"metadata": {"channel": "sms"}}}),
    )
    .await;
    let body = recall.structured_content.expect("structured");
    let got: Vec<&str> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|h| h["eventId"].as_str().expect("id"))
        .collect();
    assert_eq!(got, vec![ids[1].as_str()], "{body}");
}
