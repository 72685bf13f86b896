//! The HTTP API: the only module that knows axum and HTTP.
//!
//! Invariants: every `/v1` route authenticates first and obtains a tenant grant from the key
//! (never from the body); handlers are extract → authorize → call the engine → map the
//! result; all errors leave as problem+json; `/healthz` answers while the engine loads and
//! `/readyz` only once it is ready. `/mcp` (the MCP streamable HTTP transport, served by
//! `crate::mcp`) admits only requests whose bearer key authenticates, and passes the
//! principal on in the request's extensions. Every error response of the router, whoever
//! produced it, is problem+json carrying the request id (`problem::errors_as_problems`,
//! `ops::observe_request`); the request id is sanitized before anything logs or echoes it
//! (`request_id`); `listener` serves the router on TCP (optionally TLS) with timeouts and a
//! connection cap. `OPTIONS` on a route is never `405`: without CORS origins it is `204`
//! with `Allow` and no CORS header; with them (`cors`) it is a preflight answered before
//! authentication.

pub mod auth_limit;
mod cluster;
pub mod cors;
mod extract;
pub mod forward;
mod langchain;
mod lifecycle;
pub mod listener;
mod observe;
pub mod openapi;
mod ops;
mod pin;
pub mod problem;
pub mod request_id;
mod reviews;
mod routes;
mod transfer;

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::{from_fn_with_state, map_request, Next};
use axum::response::Response;
use axum::Router;
use tower_http::request_id::PropagateRequestIdLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{KeyStore, TenantGrant};
use crate::engine::Engine;
use crate::serving::Engines;
use crate::wire::Problem;
use auth_limit::AuthLimiter;
use extract::Auth;

/// Default request body limit in bytes.
pub const DEFAULT_BODY_LIMIT: usize = 256 * 1024;
/// Default body limit of `POST /v1/import`, in bytes.
pub const DEFAULT_IMPORT_LIMIT: usize = 64 * 1024 * 1024;

/// Shared handler state.
#[derive(Clone)]
pub struct AppState {
    /// The engines, set once loaded (one, or a cluster node's per shard).
    pub engines: Engines,
    /// In cluster mode, how requests for another node's tenants reach it.
    pub forward: Option<Arc<forward::Forwarder>>,
    /// API keys.
    pub keys: Arc<KeyStore>,
    /// Maximum request body size.
    pub body_limit: usize,
    /// Maximum body of one `POST /v1/import`.
    pub import_limit: usize,
    /// Failed authentications per client address.
    pub auth_limit: Arc<AuthLimiter>,
}

impl AppState {
    /// What the MCP server at `/mcp` serves from.
    pub fn mcp(&self) -> crate::mcp::McpState {
        crate::mcp::McpState {
            engines: self.engines.clone(),
            keys: Arc::clone(&self.keys),
            body_limit: self.body_limit,
        }
    }

    /// The engine serving `grant`'s tenant here, or 503 `not_ready` while it loads (or,
    /// in cluster mode, while the tenant's shard moves).
    pub fn engine(&self, grant: &TenantGrant) -> Result<Engine, Problem> {
        self.engines.for_tenant(grant.tenant())
    }
}

/// The complete router and the OpenAPI document describing it; with `cors`, browsers of
/// those origins may call it.
pub fn router_and_spec(
    state: AppState,
    cors: Option<&cors::CorsOrigins>,
) -> (Router, utoipa::openapi::OpenApi) {
    crate::telemetry::init();
    let (api, spec) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(routes::healthz))
        .routes(routes!(routes::readyz))
        .routes(routes!(routes::write_event))
        .routes(routes!(routes::correct_event))
        .routes(routes!(routes::write_events_batch))
        .routes(routes!(observe::observe))
        .routes(routes!(routes::get_event, lifecycle::delete_event))
        .routes(routes!(lifecycle::history))
        .routes(routes!(lifecycle::erasure))
        .routes(routes!(reviews::list))
        .routes(routes!(reviews::approve))
        .routes(routes!(reviews::reject))
        .routes(routes!(lifecycle::audit))
        .routes(routes!(lifecycle::compact))
        .routes(routes!(lifecycle::reembed_status))
        .routes(routes!(transfer::export))
        .routes(routes!(transfer::import))
        .routes(routes!(transfer::backup))
        .routes(routes!(routes::recall))
        .routes(routes!(routes::timeline))
        .routes(routes!(langchain::retrieve))
        .routes(routes!(routes::create_key, routes::list_keys))
        .routes(routes!(routes::revoke_key))
        .routes(routes!(routes::rotate_admin_key))
        .routes(routes!(routes::get_policy))
        .routes(routes!(cluster::cluster_status))
        .routes(routes!(cluster::move_shard))
        .routes(routes!(pin::pin_tenant))
        .routes(routes!(routes::replay_policy))
        .routes(routes!(ops::openapi_json))
        .routes(routes!(ops::docs_page))
        .routes(routes!(ops::docs_asset))
        .routes(routes!(ops::metrics))
        .split_for_parts();
    let spec = openapi::finish(spec);
    let spec_json = ops::SpecJson::new(&spec);
    let mcp = Router::new()
        .route_service("/mcp", crate::mcp::http_service(state.mcp()))
        .route_layer(from_fn_with_state(state.clone(), authenticate_mcp));
    let router = api
        .layer(axum::Extension(spec_json))
        .merge(crate::ui::routes())
        .merge(mcp)
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .with_state(state.clone())
        .layer(from_fn_with_state(state, forward::route))
        .layer(axum::middleware::from_fn(problem::errors_as_problems))
        .layer(axum::middleware::from_fn(ops::observe_request));
    let router = match cors {
        Some(origins) => router.layer(origins.layer()),
        None => router,
    };
    let router = router
        .layer(PropagateRequestIdLayer::new(request_id::HEADER))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            let rid = req
                .headers()
                .get(request_id::HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-");
            tracing::info_span!("http", method = %req.method(), path = %req.uri().path(), request_id = %rid)
        }).on_response(ops::LogResponse).on_failure(ops::LogFailure))
        .layer(map_request(request_id::sanitize));
    (router, spec)
}

/// The complete router, without CORS.
pub fn router(state: AppState) -> Router {
    router_and_spec(state, None).0
}

/// The complete router; with `cors`, browsers of those origins may call it.
pub fn router_with_cors(state: AppState, cors: Option<&cors::CorsOrigins>) -> Router {
    router_and_spec(state, cors).0
}

/// `/mcp` only for an authenticated key: a missing or unknown key is 401 problem+json before
/// MCP sees the request; the principal rides along for the tools to take grants from.
async fn authenticate_mcp(Auth(principal): Auth, mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(principal);
    next.run(req).await
}
