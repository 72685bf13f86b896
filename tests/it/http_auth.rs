//! Authentication and tenant binding: keys, roles, foreign tenants.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::{event, summaries, with, App, ADMIN};

const T: &str = "2026-06-17T09:20:00Z";

#[tokio::test]
async fn every_v1_route_requires_a_known_key() {
    let app = App::new();
    let routes = [
        ("POST", "/v1/events"),
        ("GET", "/v1/events/x"),
        ("POST", "/v1/recall"),
        ("GET", "/v1/timeline"),
        ("POST", "/v1/admin/keys"),
        ("GET", "/v1/admin/keys"),
    ];
    for (method, path) in routes {
        for key in [None, Some("epi_nope_wrong"), Some("garbage")] {
            let (status, body) = app.call(method, path, key, Some(json!({}))).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path} {key:?}");
            assert_eq!(body["code"], "unauthenticated");
        }
    }
}

#[tokio::test]
async fn admin_creates_keys_and_tenant_keys_cannot() {
    let app = App::new();
    let key = app.key("acme").await;
    let (status, body) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(&key),
            Some(json!({"tenantId": "acme", "roles": ["reader"]})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["code"], "forbidden");
    let (status, body) = app
        .call(
            "POST",
            "/v1/admin/keys",
            Some(ADMIN),
            Some(json!({"tenantId": "", "roles": []})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _) = app
        .call("POST", "/v1/events", Some(ADMIN), Some(event("a", "s", T)))
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "the admin key is not bound to a tenant"
    );
}

#[tokio::test]
async fn keys_hold_only_known_roles_and_may_carry_a_label() {
    let app = App::new();
    let create =
        |body: serde_json::Value| app.call("POST", "/v1/admin/keys", Some(ADMIN), Some(body));
    let (status, body) = create(json!({
        "tenantId": "acme", "roles": ["reader", "superuser", "metrics", "admin"]
    }))
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "validation_failed");
    let errors = body["errors"].as_array().expect("errors");
    let fields: Vec<&str> = errors.iter().filter_map(|e| e["field"].as_str()).collect();
    assert_eq!(fields, ["roles[1]", "roles[2]", "roles[3]"], "{body}");
    let message = errors[0]["message"].as_str().expect("message");
    assert!(message.contains("unknown role superuser"), "{message}");
    assert!(
        message.ends_with("known roles: memory_reviewer, operator, reader, writer"),
        "the known roles are listed: {message}"
    );
    assert!(
        errors[1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("EPISODIC_METRICS_TOKEN")),
        "{body}"
    );

    let (status, made) = create(json!({
        "tenantId": "acme", "roles": ["reader"], "label": "support bot \u{e9}"
    }))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["label"], "support bot \u{e9}");
    let (status, plain) = create(json!({"tenantId": "acme", "roles": ["reader"]})).await;
    assert_eq!(status, StatusCode::CREATED, "{plain}");
    assert_eq!(plain["label"], serde_json::Value::Null);
    let (_, list) = app.call("GET", "/v1/admin/keys", Some(ADMIN), None).await;
    let label_of = |id: &serde_json::Value| {
        list["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .find(|k| &k["keyId"] == id)
            .expect("listed")["label"]
            .clone()
    };
    assert_eq!(label_of(&made["keyId"]), "support bot \u{e9}");
    assert_eq!(label_of(&plain["keyId"]), serde_json::Value::Null);

    let longest = "\u{e9}".repeat(128);
    let (status, _) =
        create(json!({"tenantId": "acme", "roles": ["reader"], "label": longest})).await;
    assert_eq!(status, StatusCode::CREATED, "128 characters are allowed");
    for bad in [
        json!(""),
        json!("x".repeat(129)),
        json!("line\nbreak"),
        json!(7),
    ] {
        let (status, body) =
            create(json!({"tenantId": "acme", "roles": ["reader"], "label": bad})).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert_eq!(body["errors"][0]["field"], "label", "{body}");
    }
}

#[tokio::test]
async fn roles_gate_reads_and_writes() {
    let app = App::new();
    let reader = app.key_with("acme", &["reader"]).await;
    let writer = app.key_with("acme", &["writer"]).await;
    let (status, body) = app.write(&reader, event("a", "s", T)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["missingRole"], "writer");
    let id = app
        .write_ok(&writer, event("a", "Asked for a callback", T))
        .await;
    let (status, body) = app
        .call("GET", &format!("/v1/events/{id}"), Some(&writer), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["missingRole"], "reader");
    let (status, _) = app
        .call("GET", &format!("/v1/events/{id}"), Some(&reader), None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn revoked_keys_stop_at_once() {
    let app = App::new();
    let key = app.key("acme").await;
    let (_, list) = app.call("GET", "/v1/admin/keys", Some(ADMIN), None).await;
    let key_id = list["keys"][0]["keyId"].as_str().expect("id").to_string();
    assert!(
        !list.to_string().contains(&key),
        "listing never shows secrets"
    );
    let (status, _) = app
        .call(
            "DELETE",
            &format!("/v1/admin/keys/{key_id}"),
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.call("GET", "/v1/timeline", Some(&key), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn tenants_with_the_same_actor_names_never_see_each_other() {
    let app = App::new();
    let acme = app.key("acme").await;
    let globex = app.key("globex").await;
    let a_id = app
        .write_ok(
            &acme,
            event("john", "ACME-CANARY John wants invoices by post", T),
        )
        .await;
    let g_id = app
        .write_ok(
            &globex,
            event("john", "GLOBEX-CANARY John wants invoices by fax", T),
        )
        .await;

    let body_tenant = with(event("john", "sneaky", T), "tenantId", json!("globex"));
    let (status, resp) = app.write(&acme, body_tenant).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(resp["code"], "tenant_mismatch");
    let same_tenant = with(
        event("john", "explicit tenant ok", T),
        "tenantId",
        json!("acme"),
    );
    assert_eq!(app.write(&acme, same_tenant).await.0, StatusCode::CREATED);

    for (key, own, foreign, canary) in [
        (&acme, &a_id, &g_id, "GLOBEX"),
        (&globex, &g_id, &a_id, "ACME"),
    ] {
        let (status, resp) = app
            .call("GET", &format!("/v1/events/{foreign}"), Some(key), None)
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (_, missing) = app
            .call("GET", "/v1/events/does-not-exist", Some(key), None)
            .await;
        assert_eq!(
            resp["detail"]
                .as_str()
                .map(|d| d.replace(foreign.as_str(), "ID")),
            missing["detail"]
                .as_str()
                .map(|d| d.replace("does-not-exist", "ID"))
        );
        assert_eq!(
            app.call("GET", &format!("/v1/events/{own}"), Some(key), None)
                .await
                .0,
            StatusCode::OK
        );
        let recall = app
            .recall(
                key,
                json!({"query": "John invoices", "scope": {"actorIds": ["john"]}, "limit": 100}),
            )
            .await;
        assert!(!recall.to_string().contains(canary), "{recall}");
        assert!(!summaries(&recall).is_empty());
        let (_, tl) = app
            .call("GET", "/v1/timeline?actorId=john", Some(key), None)
            .await;
        assert!(!tl.to_string().contains(canary));
    }
}
