//! CORS and `OPTIONS` at the router (no engine needed): without configured origins no
//! response carries a CORS header and `OPTIONS` on a route is `204` with `Allow`, never
//! `405`; with them, a preflight from an allowed origin is answered before authentication
//! and every answer to that origin names it.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::Router;
use tower::ServiceExt;

use episodic::api::cors::CorsOrigins;
use episodic::api::{router_with_cors, AppState};
use episodic::auth::KeyStore;

use crate::common::ADMIN;

const ORIGIN: &str = "https://app.example.com";

/// The router over a fresh key store and an engine that has not loaded.
fn app(origins: Option<&str>) -> (Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tmp");
    let (keys, _) = KeyStore::open(dir.path(), Some(ADMIN)).expect("keys");
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
    let cors = origins.map(|o| CorsOrigins::parse(o).expect("origins").expect("some"));
    (router_with_cors(state, cors.as_ref()), dir)
}

async fn send(
    router: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap) {
    let mut req = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = router
        .clone()
        .oneshot(req.body(Body::empty()).expect("request"))
        .await
        .expect("response");
    (resp.status(), resp.headers().clone())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn cors_headers(headers: &HeaderMap) -> Vec<String> {
    headers
        .keys()
        .map(|k| k.as_str().to_string())
        .filter(|k| k.starts_with("access-control-"))
        .collect()
}

#[tokio::test]
async fn without_origins_options_is_204_with_allow_and_nothing_is_cors() {
    let (app, _dir) = app(None);
    let preflight = [
        ("origin", ORIGIN),
        ("access-control-request-method", "POST"),
    ];
    for (path, method) in [
        ("/v1/recall", "POST"),
        ("/v1/events/e1", "DELETE"),
        ("/v1/admin/keys", "GET"),
        ("/healthz", "GET"),
    ] {
        let (status, headers) = send(&app, "OPTIONS", path, &preflight).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{path}");
        let allow = header(&headers, "allow").expect("Allow");
        assert!(allow.contains(method), "{path}: {allow}");
        assert!(cors_headers(&headers).is_empty(), "{path}: {headers:?}");
    }
    let (status, _) = send(&app, "OPTIONS", "/v1/nope", &preflight).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "an unknown route stays unknown"
    );
    let (status, _) = send(&app, "PUT", "/v1/recall", &[]).await;
    assert_eq!(
        status,
        StatusCode::METHOD_NOT_ALLOWED,
        "other methods still are 405"
    );
    for (method, path) in [("GET", "/healthz"), ("GET", "/v1/timeline")] {
        let (_, headers) = send(&app, method, path, &[("origin", ORIGIN)]).await;
        assert!(cors_headers(&headers).is_empty(), "{path}: {headers:?}");
    }
}

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_is_answered_before_authentication() {
    let (app, _dir) = app(Some(&format!("{ORIGIN},http://localhost:3000")));
    let preflight = |origin: &'static str| {
        [
            ("origin", origin),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "authorization, content-type",
            ),
        ]
    };
    for path in ["/v1/recall", "/v1/admin/keys", "/mcp"] {
        let (status, headers) = send(&app, "OPTIONS", path, &preflight(ORIGIN)).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(
            header(&headers, "access-control-allow-origin"),
            Some(ORIGIN)
        );
        let methods = header(&headers, "access-control-allow-methods").expect("methods");
        assert!(
            methods.contains("POST") && methods.contains("DELETE"),
            "{methods}"
        );
        let allowed = header(&headers, "access-control-allow-headers").expect("headers");
        assert!(allowed.contains("authorization"), "{allowed}");
        assert!(header(&headers, "access-control-allow-credentials").is_none());
    }
    let (_, headers) = send(
        &app,
        "OPTIONS",
        "/v1/recall",
        &preflight("https://evil.example"),
    )
    .await;
    assert_eq!(
        header(&headers, "access-control-allow-origin"),
        None,
        "another origin is not let in"
    );

    let (status, headers) = send(&app, "GET", "/v1/timeline", &[("origin", ORIGIN)]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        header(&headers, "access-control-allow-origin"),
        Some(ORIGIN)
    );
    let exposed = header(&headers, "access-control-expose-headers").expect("exposed");
    assert!(exposed.contains("x-request-id"), "{exposed}");
    let (status, headers) = send(
        &app,
        "GET",
        "/healthz",
        &[("origin", "http://localhost:3000")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, "access-control-allow-origin"),
        Some("http://localhost:3000")
    );
}
