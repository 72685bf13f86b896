//! The HTTP API: the only module that knows axum and HTTP.
//!
//! Invariants: every `/v1` route authenticates first and obtains a tenant grant from the key
//! (never from the body); handlers are extract → authorize → call the engine → map the
//! result; all errors leave as problem+json; `/healthz` answers while the engine loads and
//! `/readyz` only once it is ready. `/mcp` (the MCP streamable HTTP transport, served by
//! `crate::mcp`) admits only requests whose bearer key authenticates, and passes the
//! principal on in the request's extensions.

mod extract;
mod lifecycle;
mod observe;
pub mod problem;
mod reviews;
mod routes;

pub(crate) use observe::observe_interaction;
pub(crate) use routes::write_body;

use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::http::HeaderName;
use axum::middleware::{from_fn_with_state, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::Router;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::auth::KeyStore;
use crate::engine::Engine;
use crate::error::{ErrorCode, Problem};
use extract::Auth;

/// Default request body limit in bytes.
pub const DEFAULT_BODY_LIMIT: usize = 256 * 1024;

/// Shared handler state.
#[derive(Clone)]
pub struct AppState {
    /// Set once the engine has loaded.
    pub engine: Arc<OnceLock<Engine>>,
    /// API keys.
    pub keys: Arc<KeyStore>,
    /// Maximum request body size.
    pub body_limit: usize,
}

impl AppState {
    /// The engine, or 503 `not_ready` while it loads.
    pub fn engine(&self) -> Result<&Engine, Problem> {
        self.engine
            .get()
            .ok_or_else(|| Problem::new(ErrorCode::NotReady, "the engine is still loading"))
    }
}

/// The complete router.
pub fn router(state: AppState) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let mcp = Router::new()
        .route_service("/mcp", crate::mcp::http_service(state.clone()))
        .route_layer(from_fn_with_state(state.clone(), authenticate_mcp));
    Router::new()
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route("/v1/events", post(routes::write_event))
        .route("/v1/observe", post(observe::observe))
        .route("/v1/events/{event_id}", get(routes::get_event).delete(lifecycle::delete_event))
        .route("/v1/events/{event_id}/history", get(lifecycle::history))
        .route("/v1/erasure", post(lifecycle::erasure))
        .route("/v1/reviews", get(reviews::list))
        .route("/v1/reviews/{event_id}/approve", post(reviews::approve))
        .route("/v1/reviews/{event_id}/reject", post(reviews::reject))
        .route("/v1/audit", get(lifecycle::audit))
        .route("/v1/admin/compact", post(lifecycle::compact))
        .route("/v1/recall", post(routes::recall))
        .route("/v1/timeline", get(routes::timeline))
        .route("/v1/admin/keys", post(routes::create_key).get(routes::list_keys))
        .route("/v1/admin/keys/{key_id}", delete(routes::revoke_key))
        .route("/v1/admin/policy", get(routes::get_policy))
        .route("/v1/admin/policy/replay", post(routes::replay_policy))
        .merge(mcp)
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .with_state(state)
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            let rid = req
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-");
            tracing::info_span!("http", method = %req.method(), path = %req.uri().path(), request_id = %rid)
        }))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}

/// `/mcp` only for an authenticated key: a missing or unknown key is 401 problem+json before
/// MCP sees the request; the principal rides along for the tools to take grants from.
async fn authenticate_mcp(Auth(principal): Auth, mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(principal);
    next.run(req).await
}
