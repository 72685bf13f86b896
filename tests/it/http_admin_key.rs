//! The admin key cannot be revoked without a replacement, the generated one can be rotated,
//! and neither locks the admin out across restarts.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use episodic::api::{router, AppState};
use episodic::auth::KeyStore;

use crate::common::{App, ADMIN};

/// The router over a key store that generated its own admin key (no `EPISODIC_ADMIN_KEY`);
/// key routes need no engine. Returns the router and the generated key.
fn generated_admin_app(dir: &Path) -> (Router, Option<String>) {
    let (keys, written) = KeyStore::open(dir, None).expect("keys");
    let admin = written.map(|p| {
        std::fs::read_to_string(p)
            .expect("admin.key")
            .trim()
            .to_string()
    });
    let state = AppState {
        engines: episodic::serving::Engines::single(),
        forward: None,
        keys: Arc::new(keys),
        body_limit: episodic::api::DEFAULT_BODY_LIMIT,
        import_limit: episodic::api::DEFAULT_IMPORT_LIMIT,
        auth_limit: Arc::new(episodic::api::auth_limit::AuthLimiter::new(
            episodic::api::auth_limit::AuthFailureLimit::default(),
        )),
    };
    (router(state), admin)
}

async fn call(router: &Router, method: &str, path: &str, key: &str) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {key}"))
        .body(Body::empty())
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    let status = resp.status();
    if status.as_u16() >= 400 {
        assert_eq!(resp.headers()["content-type"], "application/problem+json");
    }
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_generated_admin_key_cannot_be_revoked_and_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let (app, admin) = generated_admin_app(dir.path());
    let admin = admin.expect("generated");
    let (status, resp) = call(&app, "DELETE", "/v1/admin/keys/admin", &admin).await;
    assert_eq!(status, StatusCode::CONFLICT, "{resp}");
    assert_eq!(resp["code"], "conflict");
    let detail = resp["detail"].as_str().expect("detail");
    assert!(
        detail.contains("cannot be revoked without a replacement"),
        "{detail}"
    );
    assert!(detail.contains("/v1/admin/keys/admin/rotate"), "{detail}");
    drop(app);
    let (app, written) = generated_admin_app(dir.path());
    assert!(written.is_none());
    let (status, _) = call(&app, "GET", "/v1/admin/keys", &admin).await;
    assert_eq!(status, StatusCode::OK, "still the admin after a restart");
}

#[tokio::test]
async fn rotation_returns_a_new_admin_key_once_and_retires_the_old_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let (app, admin) = generated_admin_app(dir.path());
    let old = admin.expect("generated");
    let (status, resp) = call(&app, "POST", "/v1/admin/keys/admin/rotate", &old).await;
    assert_eq!(status, StatusCode::OK, "{resp}");
    assert_eq!(resp["keyId"], "admin");
    let new = resp["key"].as_str().expect("key").to_string();
    assert!(new.starts_with("epi_admin_") && new != old);
    assert_eq!(
        call(&app, "GET", "/v1/admin/keys", &old).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        call(&app, "GET", "/v1/admin/keys", &new).await.0,
        StatusCode::OK
    );
    assert!(
        !dir.path().join("admin.key").exists(),
        "no stale plaintext left"
    );
    let keys_json = std::fs::read_to_string(dir.path().join("keys.json")).expect("keys");
    assert!(!keys_json.contains(&new));
    drop(app);
    let (app, written) = generated_admin_app(dir.path());
    assert!(written.is_none(), "a rotated admin is not regenerated");
    assert_eq!(
        call(&app, "GET", "/v1/admin/keys", &new).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, "GET", "/v1/admin/keys", &old).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn the_environment_admin_key_cannot_be_revoked_or_rotated() {
    let app = App::new();
    let (status, resp) = app
        .call("DELETE", "/v1/admin/keys/admin-env", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{resp}");
    assert!(resp["detail"]
        .as_str()
        .is_some_and(|d| d.contains("EPISODIC_ADMIN_KEY")));
    let (status, resp) = app
        .call("POST", "/v1/admin/keys/admin/rotate", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{resp}");
    let (status, _) = app.call("GET", "/v1/admin/keys", Some(ADMIN), None).await;
    assert_eq!(status, StatusCode::OK);
    let tenant = app.key("acme").await;
    let (status, _) = app
        .call("POST", "/v1/admin/keys/admin/rotate", Some(&tenant), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "admins only");
}

/// While the engine loads, keys with built-in roles are made as ever; a role that only an
/// approver role in use could make known waits for the engine (503, retryable), rather than
/// being refused or let in unchecked.
#[tokio::test]
async fn a_role_beyond_the_built_in_ones_waits_for_the_engine() {
    let dir = tempfile::tempdir().expect("tmp");
    let (app, admin) = generated_admin_app(dir.path());
    let admin = admin.expect("generated");
    let create = |roles: Value| {
        let body = serde_json::json!({"tenantId": "acme", "roles": roles, "label": "ci"});
        let req = Request::builder()
            .method("POST")
            .uri("/v1/admin/keys")
            .header("authorization", format!("Bearer {admin}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request");
        let app = app.clone();
        async move {
            let resp = app.oneshot(req).await.expect("response");
            let status = resp.status();
            let bytes = resp.into_body().collect().await.expect("body").to_bytes();
            (
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
    let (status, made) = create(serde_json::json!(["writer", "reader", "memory_reviewer"])).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["label"], "ci");
    let (status, waiting) = create(serde_json::json!(["reader", "privacy_officer"])).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{waiting}");
    assert_eq!(waiting["code"], "not_ready");
    let (status, refused) = create(serde_json::json!(["admin"])).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
}
