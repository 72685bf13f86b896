//! Operational routes and the request middleware: the OpenAPI document, the API docs page,
//! `/metrics`, per-request metrics, request-id stamping of problem bodies, and the level
//! each response is logged at.
//!
//! Invariants: the docs page and its script are compiled into the binary (no CDN, works
//! offline) and render the served `/openapi.json`; every problem+json body leaving the
//! server carries the request's `requestId` (the same value as the `X-Request-ID` header);
//! metrics label requests by matched route template, never by raw path; each response is
//! logged once, at INFO, or at ERROR for a server failure (a 5xx other than the expected
//! `not_ready` of a loading or moving engine, which `/readyz` answers until it is ready).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::Value;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::{DefaultOnResponse, OnFailure, OnResponse};
use tracing::{Level, Span};

use super::extract::Auth;
use super::problem::is_problem;
use super::AppState;
use crate::auth::roles;
use crate::error::ErrorCode;
use crate::wire::Problem;

const DOCS_HTML: &str = include_str!("assets/docs.html");
const DOCS_JS: &str = include_str!("assets/docs.js");
const DOCS_CSS: &str = include_str!("assets/docs.css");
/// Problem bodies larger than this are passed through unstamped (they never are).
const MAX_PROBLEM_BYTES: usize = 1 << 20;

/// The serialized OpenAPI document, shared by every request.
#[derive(Clone)]
pub struct SpecJson(Arc<Bytes>);

impl SpecJson {
    /// Serializes the document once.
    pub fn new(spec: &utoipa::openapi::OpenApi) -> SpecJson {
        let json = spec.to_pretty_json().unwrap_or_else(|_| "{}".to_string());
        SpecJson(Arc::new(Bytes::from(json)))
    }
}

/// `GET /openapi.json`.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "ops",
    summary = "This document (OpenAPI 3.1)",
    security(()),
    responses((status = 200, description = "the OpenAPI document", content_type = "application/json", body = Object))
)]
pub async fn openapi_json(Extension(spec): Extension<SpecJson>) -> Response {
    with_type("application/json", Body::from((*spec.0).clone()))
}

/// `GET /docs`: the API reference page.
#[utoipa::path(
    get,
    path = "/docs",
    tag = "ops",
    summary = "API reference page (rendered from /openapi.json, works offline)",
    security(()),
    responses((status = 200, description = "HTML page", content_type = "text/html", body = String))
)]
pub async fn docs_page() -> Response {
    with_type("text/html; charset=utf-8", Body::from(DOCS_HTML))
}

/// `GET /docs/{asset}`: the page's script and style sheet.
#[utoipa::path(
    get,
    path = "/docs/{asset}",
    tag = "ops",
    summary = "Static assets of the API reference page",
    security(()),
    params(("asset" = String, Path, description = "`docs.js` or `docs.css`")),
    responses(
        (status = 200, description = "the asset", content_type = "text/javascript", body = String),
        (status = 404, description = "no such asset", body = super::openapi::ProblemDoc, content_type = "application/problem+json")
    )
)]
pub async fn docs_asset(Path(asset): Path<String>) -> Response {
    match asset.as_str() {
        "docs.js" => with_type("text/javascript; charset=utf-8", Body::from(DOCS_JS)),
        "docs.css" => with_type("text/css; charset=utf-8", Body::from(DOCS_CSS)),
        _ => Problem::new(ErrorCode::RouteNotFound, "no such asset").into_response(),
    }
}

/// `GET /metrics`: Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "ops",
    summary = "Metrics in the Prometheus text format (admin key or EPISODIC_METRICS_TOKEN)",
    responses(
        (status = 200, description = "metrics", content_type = "text/plain", body = String),
        super::openapi::AuthErrors
    )
)]
pub async fn metrics(State(state): State<AppState>, Auth(principal): Auth) -> Response {
    // Counts and sizes of the whole store: for the admin or the metrics token only.
    if !principal.has_role(roles::ADMIN) && !principal.has_role(roles::METRICS) {
        return Problem::new(
            ErrorCode::Forbidden,
            "metrics need the admin key or EPISODIC_METRICS_TOKEN",
        )
        .with_extra("missingRole", Value::String(roles::METRICS.to_string()))
        .into_response();
    }
    let engine = match &state.engines {
        crate::serving::Engines::Single(_) => state.engines.local().ok().and_then(|mut e| e.pop()),
        crate::serving::Engines::Cluster(_) => None,
    };
    let text = tokio::task::spawn_blocking(move || {
        crate::telemetry::render(engine.map(|e| e.gauges()).as_ref())
    })
    .await
    .unwrap_or_default();
    with_type("text/plain; version=0.0.4; charset=utf-8", Body::from(text))
}

fn with_type(content_type: &'static str, body: Body) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// The level a response is logged at: ERROR for a server failure, INFO for everything
/// else, `not_ready` (503 while loading or while a shard moves) included.
pub(super) fn response_level(status: StatusCode, code: Option<ErrorCode>) -> Level {
    match code {
        _ if !status.is_server_error() => Level::INFO,
        Some(ErrorCode::NotReady) => Level::INFO,
        _ => Level::ERROR,
    }
}

/// Logs each response once, at [`response_level`] (the problem's code rides in the
/// response's extensions).
#[derive(Debug, Clone, Copy)]
pub(super) struct LogResponse;

impl<B> OnResponse<B> for LogResponse {
    fn on_response(self, response: &Response<B>, latency: Duration, span: &Span) {
        let code = response.extensions().get::<ErrorCode>().copied();
        DefaultOnResponse::new()
            .level(response_level(response.status(), code))
            .on_response(response, latency, span);
    }
}

/// Logs a response body that failed mid-stream; a failure status was logged with the
/// response already.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogFailure;

impl OnFailure<ServerErrorsFailureClass> for LogFailure {
    fn on_failure(&mut self, class: ServerErrorsFailureClass, latency: Duration, span: &Span) {
        if let ServerErrorsFailureClass::Error(error) = class {
            tracing::error!(parent: span, %error, latency_ms = latency.as_millis(), "response failed");
        }
    }
}

/// Middleware: records request metrics and stamps problem bodies with the request id.
pub async fn observe_request(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_string();
    let method = req.method().as_str().to_string();
    let request_id = req
        .headers()
        .get(super::request_id::HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let resp = next.run(req).await;
    crate::telemetry::http_request(&route, &method, resp.status().as_u16(), started.elapsed());
    match request_id {
        Some(rid) if is_problem(&resp) => stamp_problem(resp, &rid).await,
        _ => resp,
    }
}

async fn stamp_problem(resp: Response, request_id: &str) -> Response {
    let (mut parts, body) = resp.into_parts();
    let Ok(collected) = axum::body::to_bytes(body, MAX_PROBLEM_BYTES).await else {
        return Problem::new(ErrorCode::Internal, "error body could not be read").into_response();
    };
    let bytes = match serde_json::from_slice::<Value>(&collected) {
        Ok(Value::Object(mut obj)) => {
            obj.insert("requestId".into(), Value::String(request_id.to_string()));
            serde_json::to_vec(&obj).map_or(collected, Bytes::from)
        }
        _ => collected,
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unexpected_server_failures_log_as_errors() {
        let level =
            |status: u16, code| response_level(StatusCode::from_u16(status).expect("status"), code);
        assert_eq!(level(200, None), Level::INFO);
        assert_eq!(level(401, Some(ErrorCode::Unauthenticated)), Level::INFO);
        assert_eq!(
            level(503, Some(ErrorCode::NotReady)),
            Level::INFO,
            "loading"
        );
        assert_eq!(
            level(503, Some(ErrorCode::StorageUnavailable)),
            Level::ERROR
        );
        assert_eq!(level(500, Some(ErrorCode::Internal)), Level::ERROR);
        assert_eq!(level(502, None), Level::ERROR);
        let problem = Problem::new(ErrorCode::NotReady, "loading").into_response();
        assert_eq!(
            problem.extensions().get::<ErrorCode>(),
            Some(&ErrorCode::NotReady),
            "a problem response names its code for the log"
        );
    }
}
