//! Versioned write policy: a policy file's own rules, and replay (dry run and apply).

use std::path::Path;

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::common::{config, event, result_ids, with, App, ADMIN};

const T: &str = "2026-06-17T09:20:00Z";

fn candidate() -> Value {
    json!({
        "version": "v2",
        "approverRole": "privacy_officer",
        "maxRetentionDays": {"private": 30},
        "reviewEventTypes": ["human_approval"],
        "denyEventTypes": [{"eventType": "tool_observed_event", "tenantId": "acme"}],
        "requiredFields": {"incident_or_failure": ["projectId"]}
    })
}

fn with_v2(dir: &Path) -> episodic::engine::EngineConfig {
    let mut c = config(dir);
    c.policy = episodic::policy::WritePolicy::from_json(candidate().to_string().as_bytes())
        .expect("policy");
    c
}

#[tokio::test]
async fn a_policy_file_adds_rules_and_versions_every_event() {
    let app = App::open_in(tempfile::tempdir().expect("tmp"), with_v2);
    let key = app
        .key_with("acme", &["writer", "reader", "privacy_officer"])
        .await;
    let approval = with(
        event("u", "Manager approved refund 77", T),
        "eventType",
        json!("human_approval"),
    );
    let (status, body) = app.write(&key, approval).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["decision"]["approverRole"], "privacy_officer");
    let id = body["eventId"].as_str().expect("id");
    let (_, got) = app
        .call("GET", &format!("/v1/events/{id}"), Some(&key), None)
        .await;
    assert_eq!(got["policyVersion"], "v2");
    let (status, body) = app
        .write(
            &key,
            with(
                event("u", "Disk alarm", T),
                "eventType",
                json!("tool_observed_event"),
            ),
        )
        .await;
    assert_eq!(
        (status, body["decision"]["reason"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("event_type_denied"))
    );
    let (status, body) = app
        .write(
            &key,
            with(
                event("u", "Outage", T),
                "eventType",
                json!("incident_or_failure"),
            ),
        )
        .await;
    assert_eq!(
        (status, body["decision"]["reason"].clone()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!("required_field_missing:projectId")
        )
    );
    let (_, current) = app.call("GET", "/v1/admin/policy", Some(ADMIN), None).await;
    assert_eq!(current["version"], "v2");
}

#[tokio::test]
async fn replay_reports_then_applies_with_receipts_and_audit() {
    let app = App::new();
    let key = app
        .key_with("acme", &["writer", "reader", "operator"])
        .await;
    // No event awaits privacy_officer yet, and the policy in force does not name it.
    let (status, refused) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(ADMIN),
            Some(json!({"tenantId": "acme", "roles": ["privacy_officer"]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["errors"][0]["field"], "roles[0]");
    let reader = {
        let body = json!({"tenantId": "acme", "roles": ["reader"], "maxPrivacyClass": "sensitive"});
        app.call("POST", "/v1/admin/keys", Some(ADMIN), Some(body))
            .await
            .1["key"]
            .as_str()
            .expect("key")
            .to_string()
    };
    let tool = app
        .write_ok(
            &key,
            with(
                with(
                    event("u", "Disk alarm on db-1", T),
                    "eventType",
                    json!("tool_observed_event"),
                ),
                "resourceRefs",
                json!(["db-1"]),
            ),
        )
        .await;
    let private = app
        .write_ok(
            &key,
            with(
                with(
                    event("u", "Lives at 5 Elm Street", T),
                    "privacyClass",
                    json!("private"),
                ),
                "resourceRefs",
                json!(["addr"]),
            ),
        )
        .await;
    let approval = app
        .write_ok(
            &key,
            with(
                with(
                    event("u", "Manager approved refund 77", T),
                    "eventType",
                    json!("human_approval"),
                ),
                "resourceRefs",
                json!(["refund-77"]),
            ),
        )
        .await;
    let fine = app
        .write_ok(&key, event("u", "Prefers email for renewal notices", T))
        .await;
    let other = app.key("globex").await;
    let other_tool = app
        .write_ok(
            &other,
            with(
                event("u", "Disk alarm on web-2", T),
                "eventType",
                json!("tool_observed_event"),
            ),
        )
        .await;

    let body = json!({"policy": candidate(), "dryRun": true});
    let (status, report) = app
        .call(
            "POST",
            "/v1/admin/policy/replay",
            Some(&key),
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "admin only: {report}");
    let (status, report) = app
        .call("POST", "/v1/admin/policy/replay", Some(ADMIN), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let ids = |k: &str| -> Vec<String> {
        let mut v: Vec<String> = report[k]
            .as_array()
            .expect("list")
            .iter()
            .map(|x| x["eventId"].as_str().expect("id").to_string())
            .collect();
        v.sort();
        v
    };
    let mut denied = vec![tool.clone(), private.clone()];
    denied.sort();
    assert_eq!(ids("wouldDeny"), denied);
    assert_eq!(ids("wouldReview"), vec![approval.clone()]);
    assert_eq!(report["evaluated"], 5);
    assert_eq!(
        app.call("GET", &format!("/v1/events/{tool}"), Some(&key), None)
            .await
            .0,
        StatusCode::OK,
        "a dry run changes nothing"
    );

    let (status, applied) = app
        .call(
            "POST",
            "/v1/admin/policy/replay",
            Some(ADMIN),
            Some(json!({"policy": candidate(), "dryRun": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{applied}");
    assert_eq!(applied["receipts"].as_array().map(Vec::len), Some(2));
    for id in [&tool, &private] {
        assert_eq!(
            app.call("GET", &format!("/v1/events/{id}"), Some(&reader), None)
                .await
                .0,
            StatusCode::NOT_FOUND
        );
    }
    let (_, pending) = app
        .call("GET", &format!("/v1/events/{approval}"), Some(&key), None)
        .await;
    assert_eq!(
        (pending["status"].clone(), pending["policyVersion"].clone()),
        (json!("pending_review"), json!("v2"))
    );
    // Now an event awaits privacy_officer: a key may hold that role.
    let officer = app.key_with("acme", &["reader", "privacy_officer"]).await;
    let (_, queue) = app.call("GET", "/v1/reviews", Some(&officer), None).await;
    assert_eq!(
        queue["reviews"][0]["decision"]["approverRole"],
        "privacy_officer"
    );
    let recall = app
        .recall(
            &reader,
            json!({"query": "disk alarm refund email address", "limit": 10}),
        )
        .await;
    assert_eq!(result_ids(&recall), vec![fine]);
    assert_eq!(
        app.call(
            "GET",
            &format!("/v1/events/{other_tool}"),
            Some(&other),
            None
        )
        .await
        .0,
        StatusCode::OK,
        "the deny rule is per tenant"
    );
    let (_, audit) = app
        .call("GET", "/v1/audit?action=requeue", Some(&key), None)
        .await;
    assert_eq!(audit["entries"].as_array().map(Vec::len), Some(1));
    let (_, audit) = app
        .call("GET", "/v1/audit?action=policy_denied", Some(&key), None)
        .await;
    // The replay deleted two events, one of them private: this operator key (ceiling
    // internal) is told only of the one it could see.
    assert_eq!(audit["entries"][0]["eventIds"], json!([tool]));
    let (status, _) = app
        .call(
            "POST",
            "/v1/admin/policy/replay",
            Some(ADMIN),
            Some(json!({"policy": {"version": ""}, "dryRun": true})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let app = app.restart().await;
    let (_, pending) = app
        .call("GET", &format!("/v1/events/{approval}"), Some(&key), None)
        .await;
    assert_eq!(
        pending["status"], "pending_review",
        "the requeue is durable"
    );
}
