//! Recall and timeline: scope filters, ranking, evidence shape, ordering, pagination.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::common::{assert_parts_sum_to_score, event, result_ids, summaries, with, App};

#[tokio::test]
async fn real_model_ranks_the_relevant_event_first() {
    let app = App::new();
    let key = app.key("acme").await;
    let t = "2026-06-17T09:20:00Z";
    app.write_ok(
        &key,
        event("u1", "The customer asked for renewal notices by email", t),
    )
    .await;
    app.write_ok(
        &key,
        event("u1", "Deployment to production failed with a timeout", t),
    )
    .await;
    app.write_ok(&key, event("u1", "The team lunch moved to Friday", t))
        .await;
    let recall = app
        .recall(
            &key,
            json!({"query": "How does the user want renewal reminders?", "limit": 3}),
        )
        .await;
    assert_eq!(
        summaries(&recall)[0],
        "The customer asked for renewal notices by email"
    );
    assert_parts_sum_to_score(&recall["results"][0]);
    let b = &recall["results"][0]["scoreBreakdown"];
    assert!(b["cosine"].as_f64().expect("cosine") > 0.4, "{b}");
    assert_eq!(recall["stats"]["path"], "exact");
}

async fn seed_scoped(app: &App, key: &str) {
    let rows = [
        (
            "alice",
            "proj-a",
            "task_milestone",
            "db",
            "2026-01-10T00:00:00Z",
            "Alice migrated the database",
        ),
        (
            "alice",
            "proj-b",
            "incident_or_failure",
            "db",
            "2026-02-10T00:00:00Z",
            "Alice saw the database crash",
        ),
        (
            "bob",
            "proj-a",
            "task_milestone",
            "api",
            "2026-03-10T00:00:00Z",
            "Bob shipped the database API",
        ),
        (
            "bob",
            "proj-b",
            "tool_observed_event",
            "cache",
            "2026-04-10T00:00:00Z",
            "Bob saw database cache misses",
        ),
    ];
    for (actor, project, ty, res, at, summary) in rows {
        let mut e = event(actor, summary, at);
        e = with(e, "projectId", json!(project));
        e = with(e, "eventType", json!(ty));
        e = with(e, "resourceRefs", json!([res]));
        app.write_ok(key, e).await;
    }
}

#[tokio::test]
async fn scope_filters_narrow_before_ranking() {
    let app = App::new();
    let key = app.key("acme").await;
    seed_scoped(&app, &key).await;
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"actorIds": ["alice"]}),
            vec![
                "Alice migrated the database",
                "Alice saw the database crash",
            ],
        ),
        (
            json!({"projectIds": ["proj-a"]}),
            vec![
                "Alice migrated the database",
                "Bob shipped the database API",
            ],
        ),
        (
            json!({"eventTypes": ["tool_observed_event", "incident_or_failure"]}),
            vec![
                "Alice saw the database crash",
                "Bob saw database cache misses",
            ],
        ),
        (
            json!({"resourceRefs": ["api", "cache"]}),
            vec![
                "Bob shipped the database API",
                "Bob saw database cache misses",
            ],
        ),
        (
            json!({"occurredAfter": "2026-02-10T00:00:00Z", "occurredBefore": "2026-04-10T00:00:00Z"}),
            vec![
                "Alice saw the database crash",
                "Bob shipped the database API",
            ],
        ),
        (
            json!({"actorIds": ["bob"], "projectIds": ["proj-b"]}),
            vec!["Bob saw database cache misses"],
        ),
        (json!({"actorIds": ["carol"]}), vec![]),
    ];
    for (scope, expected) in cases {
        let recall = app
            .recall(
                &key,
                json!({"query": "database", "scope": scope, "limit": 10}),
            )
            .await;
        let mut got = summaries(&recall);
        got.sort();
        let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "scope {scope}");
        assert_eq!(
            recall["stats"]["candidates"].as_u64(),
            Some(want.len() as u64)
        );
    }
}

#[tokio::test]
async fn recency_and_trust_break_relevance_ties() {
    let app = App::new();
    let key = app.key("acme").await;
    let s = "User prefers invoices by email";
    let old = app
        .write_ok(
            &key,
            with(
                event("u", s, "2025-01-01T00:00:00Z"),
                "sourceRefs",
                json!(["old"]),
            ),
        )
        .await;
    let new = app
        .write_ok(
            &key,
            with(
                event("u", s, "2026-06-01T00:00:00Z"),
                "sourceRefs",
                json!(["new"]),
            ),
        )
        .await;
    let recall = app
        .recall(
            &key,
            json!({"query": "invoice preference", "includeStale": true}),
        )
        .await;
    assert_eq!(result_ids(&recall), vec![new.clone(), old.clone()]);
    assert_eq!(
        recall["results"][1]["stale"], true,
        "same subject: the older event is stale"
    );
    assert_eq!(recall["results"][1]["staleBy"], new.as_str());

    let trust_key = app.key("trust").await;
    let t = "2026-06-01T00:00:00Z";
    let tool = app
        .write_ok(
            &trust_key,
            with(event("u", s, t), "sourceTrust", json!("tool_result")),
        )
        .await;
    let op = app
        .write_ok(
            &trust_key,
            with(event("u", s, t), "sourceTrust", json!("operator_entered")),
        )
        .await;
    let user = app.write_ok(&trust_key, event("u", s, t)).await;
    let recall = app
        .recall(
            &trust_key,
            json!({"query": "invoice preference", "includeStale": true}),
        )
        .await;
    assert_eq!(result_ids(&recall), vec![op, tool, user]);
    let r = &recall["results"];
    assert_eq!(
        r[0]["scoreBreakdown"]["relevance"],
        r[2]["scoreBreakdown"]["relevance"]
    );
}

#[tokio::test]
async fn evidence_blocks_have_the_seed_shape() {
    let app = App::new();
    let key = app.key("acme").await;
    let body = json!({
        "eventType": "correction_received",
        "occurredAt": "2026-06-17T09:20:00Z",
        "actorId": "user-7",
        "resourceRefs": ["deploy-target"],
        "summary": "User corrected the deployment target from staging to production.",
        "sourceRefs": ["support-ticket-1842", "chat-991"],
        "sourceTrust": "user_provided",
        "confidence": "high",
        "privacyClass": "internal",
        "retention": {"deleteOnRequest": true}
    });
    let (status, resp) = app.write(&key, body).await;
    assert_eq!(status, StatusCode::CREATED);
    let id = resp["eventId"].as_str().expect("id");
    let recorded = resp["event"]["recordedAt"].as_str().expect("recorded");
    let recall = app
        .recall(&key, json!({"query": "deployment target"}))
        .await;
    let expected = format!(
        "Past event, not current instruction:\n\
- occurred_at: 2026-06-17T09:20:00Z\n\
- event_type: correction_received\n\
- summary: User corrected the deployment target from staging to production.\n\
- confidence: high\n\
- source: support-ticket-1842, chat-991\n\
- recorded_at: {recorded}\n\
- source_trust: user_provided\n\
- event_id: {id}"
    );
    assert_eq!(recall["evidence"], expected);
}

#[tokio::test]
async fn timeline_orders_by_occurred_at_and_paginates() {
    let app = App::new();
    let key = app.key("acme").await;
    let late_recorded_early = app
        .write_ok(&key, event("u", "C happened third", "2026-03-01T00:00:00Z"))
        .await;
    let a = app
        .write_ok(&key, event("u", "A happened first", "2026-01-01T00:00:00Z"))
        .await;
    let d = app
        .write_ok(
            &key,
            event("u", "D happened fourth", "2026-04-01T00:00:00Z"),
        )
        .await;
    let b = app
        .write_ok(
            &key,
            event(
                "u",
                "B happened second (recorded last)",
                "2026-02-01T00:00:00Z",
            ),
        )
        .await;
    let (status, page1) = app
        .call("GET", "/v1/timeline?actorId=u&limit=3", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{page1}");
    let ids = |v: &Value| -> Vec<String> {
        v["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["eventId"].as_str().expect("id").to_string())
            .collect()
    };
    assert_eq!(
        ids(&page1),
        vec![a.clone(), b.clone(), late_recorded_early.clone()]
    );
    let cursor = page1["nextCursor"].as_str().expect("cursor");
    let (_, page2) = app
        .call(
            "GET",
            &format!("/v1/timeline?actorId=u&limit=3&cursor={cursor}"),
            Some(&key),
            None,
        )
        .await;
    assert_eq!(ids(&page2), vec![d]);
    assert_eq!(page2["nextCursor"], Value::Null);
    let (_, ranged) = app
        .call(
            "GET",
            "/v1/timeline?from=2026-02-01T00:00:00Z&to=2026-03-01T00:00:00Z",
            Some(&key),
            None,
        )
        .await;
    assert_eq!(ids(&ranged), vec![b]);
    let (status, bad) = app
        .call("GET", "/v1/timeline?limit=0&cursor=%%%", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad["errors"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn fresh_writes_are_recallable_immediately_and_wait_for_commits() {
    let app = App::new();
    let key = app.key("acme").await;
    app.write_ok(
        &key,
        event("u", "Quarterly report submitted", "2026-06-01T00:00:00Z"),
    )
    .await;
    let recall = app.recall(&key, json!({"query": "quarterly report"})).await;
    assert_eq!(summaries(&recall), vec!["Quarterly report submitted"]);
    let (status, _) = app
        .call(
            "POST",
            "/v1/events?refresh=wait_for",
            Some(&key),
            Some(event("u", "Second report", "2026-06-02T00:00:00Z")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        app.engine.stats().scope_docs,
        2,
        "wait_for returns once the scope index holds it"
    );
    let (status, _) = app
        .call(
            "POST",
            "/v1/events?refresh=soon",
            Some(&key),
            Some(event("u", "x", "2026-06-02T00:00:00Z")),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn recall_rejects_bad_requests() {
    let app = App::new();
    let key = app.key("acme").await;
    for body in [
        json!({}),
        json!({"query": ""}),
        json!({"query": "x", "limit": 1000}),
        json!({"query": "x", "scope": {"tenantIds": ["other"]}}),
        json!({"query": "x", "scope": {"occurredAfter": "yesterday"}}),
        json!({"query": "x", "scope": {"occurredAfter": "2026-02-01T00:00:00Z", "occurredBefore": "2026-01-01T00:00:00Z"}}),
    ] {
        let (status, resp) = app
            .call("POST", "/v1/recall", Some(&key), Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {resp}");
        assert_eq!(resp["code"], "validation_failed");
    }
}

/// Unknown fields are refused with their own name (a nested one with its path), and an
/// audit query for an action no entry can have is refused, listing the actions.
#[tokio::test]
async fn unknown_recall_fields_and_audit_actions_are_named() {
    let app = App::new();
    let key = app.key("acme").await;
    let (status, body) = app
        .call(
            "POST",
            "/v1/recall",
            Some(&key),
            Some(json!({"query": "renewal", "bogusField": true, "scope": {"actor": "u1"}})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert_eq!(fields, ["bogusField", "scope.actor"], "{body}");
    let message = body["errors"][0]["message"].as_str().expect("message");
    assert!(
        message.starts_with("unknown field (known fields: ") && message.contains("query"),
        "names the fields a recall has: {message}"
    );
    assert!(
        body["errors"][1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("actorIds")),
        "{body}"
    );

    let (status, body) = app
        .call("GET", "/v1/audit?action=bogus", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["field"], "action", "{body}");
    let message = body["errors"][0]["message"].as_str().expect("message");
    for action in ["write", "recall", "policy_denied", "recovered"] {
        assert!(message.contains(action), "{message}");
    }
    let (status, body) = app
        .call("GET", "/v1/audit?action=recall", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_recall_says_whether_it_is_exact_and_a_caller_may_insist() {
    let app = App::new();
    let key = app.key("acme").await;
    app.write_ok(
        &key,
        event(
            "u",
            "Renewal notices go out by email",
            "2026-06-17T09:20:00Z",
        ),
    )
    .await;
    let r = app.recall(&key, json!({"query": "renewal notices"})).await;
    assert_eq!(r["stats"]["path"], "exact", "{r}");
    assert_eq!(r["stats"]["exact"], true, "{r}");
    let r = app
        .recall(&key, json!({"query": "renewal notices", "exact": true}))
        .await;
    assert_eq!(r["stats"]["exact"], true, "{r}");
    let (status, problem) = app
        .call(
            "POST",
            "/v1/recall",
            Some(&key),
            Some(json!({"query": "renewal notices", "exact": "yes"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "exact", "{problem}");
}

/// The timeline's `markStale` names the same newer event as recall's `staleBy`, and only for
/// a page that holds the stale event.
#[tokio::test]
async fn the_timeline_marks_stale_events_as_recall_does() {
    let app = App::new();
    let key = app.key("acme").await;
    let s = "User prefers invoices by email";
    let old = app
        .write_ok(&key, event("u", s, "2025-01-01T00:00:00Z"))
        .await;
    let new = app
        .write_ok(&key, event("u", s, "2026-06-01T00:00:00Z"))
        .await;
    app.write_ok(
        &key,
        with(
            event("v", "Another customer's note", "2026-07-01T00:00:00Z"),
            "resourceRefs",
            json!(["meetings"]),
        ),
    )
    .await;
    let recall = app
        .recall(
            &key,
            json!({"query": "invoice preference", "includeStale": true}),
        )
        .await;
    let stale_in_recall: Vec<(String, String)> = recall["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|h| h["stale"] == true)
        .map(|h| {
            let id = h["event"]["eventId"].as_str().expect("id").to_string();
            (id, h["staleBy"].as_str().expect("staleBy").to_string())
        })
        .collect();
    assert_eq!(stale_in_recall, vec![(old.clone(), new.clone())]);

    let (status, page) = app
        .call("GET", "/v1/timeline?markStale=true", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["events"].as_array().expect("events").len(), 3);
    assert_eq!(page["staleBy"], json!({ old.clone(): new.clone() }));
    // A page holding only the newer events has nothing to mark; without the flag, no field.
    let (_, page) = app
        .call(
            "GET",
            "/v1/timeline?markStale=true&from=2026-01-01T00:00:00Z",
            Some(&key),
            None,
        )
        .await;
    assert_eq!(page["events"].as_array().expect("events").len(), 2);
    assert!(page.get("staleBy").is_none(), "{page}");
    let (_, page) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert!(page.get("staleBy").is_none(), "{page}");
    let (status, bad) = app
        .call("GET", "/v1/timeline?markStale=yes", Some(&key), None)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad["errors"][0]["field"], "markStale", "{bad}");
}
