//! Cluster mode: a request for a tenant whose shard another node owns is forwarded to that
//! node, and its answer returned as it came.
//!
//! Invariants:
//! - only requests whose bearer key authenticates to a tenant are forwarded (tenant routes
//!   under `/v1` and `/mcp`); admin routes, failed authentications and everything else are
//!   answered here, so the answer to a bad key is the same on every node;
//! - a forwarded request carries this node's id, a timestamp and an HMAC-SHA256 of both and
//!   of its method and path under a secret derived from the cluster's shared admin key; a
//!   node serves a request marked as forwarded only if the mark verifies and is fresh, and
//!   never forwards it again (no loops): if it does not own the shard any more, it answers a
//!   retryable 503 (`crate::serving`);
//! - the client's key travels with the request and is checked again by the owner; the
//!   client sees the owner's status, headers and body;
//! - when the owner cannot be reached, the view of the cluster is read again and the request
//!   sent once more if the owner changed; otherwise the answer is a retryable 503.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use sha2::{Digest, Sha256};

use super::AppState;
use crate::cluster::node::Route;
use crate::cluster::Node;
use crate::error::ErrorCode;
use crate::wire::Problem;

/// The forwarding node's id.
pub const FORWARDED_BY: &str = "x-episodic-forwarded-by";
/// Unix seconds when the request was forwarded.
const FORWARDED_AT: &str = "x-episodic-forwarded-at";
/// The HMAC of the above, the method and the path.
const FORWARD_SIGNATURE: &str = "x-episodic-forward-signature";
/// How far a forward's timestamp may be from this node's clock.
const FRESHNESS: Duration = Duration::from_secs(60);
/// How long a forwarded request may take, end to end.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a handler that waits on the cluster (a shard move) may wait before it answers
/// that the work goes on: short enough that the answer reaches a forwarding node before
/// that node gives up on it.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(FORWARD_TIMEOUT.as_secs() - 15);

/// Hop-by-hop headers, never passed on.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// How this node forwards requests to the owners of other shards.
pub struct Forwarder {
    node_id: String,
    secret: [u8; 32],
    client: Client<HttpConnector, Body>,
}

/// Marks a request that another node forwarded here (verified).
#[derive(Debug, Clone)]
pub struct Forwarded {
    /// The node it came from.
    pub from: String,
}

impl Forwarder {
    /// A forwarder for node `node_id` of a cluster whose nodes share `admin_key`.
    pub fn new(node_id: &str, admin_key: &str) -> Self {
        let mut digest = Sha256::new();
        digest.update(b"episodic node-to-node v1\n");
        digest.update(admin_key.as_bytes());
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        Forwarder {
            node_id: node_id.to_string(),
            secret: digest.finalize().into(),
            client: Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector),
        }
    }

    fn signature(&self, node: &str, at: u64, method: &Method, uri: &Uri) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length");
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        mac.update(format!("{node}\n{at}\n{method}\n{path}").as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// The forwarding node of `headers`, if they carry a valid, fresh mark; an error if
    /// they carry a mark that does not verify.
    fn verify(
        &self,
        headers: &HeaderMap,
        method: &Method,
        uri: &Uri,
    ) -> Result<Option<String>, Problem> {
        let Some(node) = headers.get(FORWARDED_BY) else {
            return Ok(None);
        };
        let refused = || {
            Problem::new(
                ErrorCode::Forbidden,
                "the node-to-node signature does not verify",
            )
        };
        let node = node.to_str().map_err(|_| refused())?;
        let at: u64 = headers
            .get(FORWARDED_AT)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .ok_or_else(refused)?;
        let signature = headers
            .get(FORWARD_SIGNATURE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| hex::decode(v).ok())
            .ok_or_else(refused)?;
        let now = unix_now();
        if now.abs_diff(at) > FRESHNESS.as_secs() {
            return Err(refused());
        }
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length");
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        mac.update(format!("{node}\n{at}\n{method}\n{path}").as_bytes());
        mac.verify_slice(&signature).map_err(|_| refused())?;
        Ok(Some(node.to_string()))
    }

    /// The headers that mark `method uri` as forwarded by this node now (its id, the time
    /// and their signature), as [`Forwarder::send`] adds them.
    pub fn mark(&self, method: &Method, uri: &Uri) -> [(&'static str, String); 3] {
        let at = unix_now();
        let signature = hex::encode(self.signature(&self.node_id, at, method, uri));
        [
            (FORWARDED_BY, self.node_id.clone()),
            (FORWARDED_AT, at.to_string()),
            (FORWARD_SIGNATURE, signature),
        ]
    }

    /// Sends the request made of `parts` and `body` to the node at `base_url`.
    pub(super) async fn send(
        &self,
        base_url: &str,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: axum::body::Bytes,
    ) -> Result<Response, String> {
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let target: Uri = format!("{}{path}", base_url.trim_end_matches('/'))
            .parse()
            .map_err(|e| format!("owner URL: {e}"))?;
        let mut request = axum::http::Request::builder()
            .method(method.clone())
            .uri(target);
        for (name, value) in headers {
            if !HOP_BY_HOP.contains(&name.as_str()) && name != header::HOST {
                request = request.header(name, value);
            }
        }
        for (name, value) in self.mark(method, uri) {
            request = request.header(name, value);
        }
        let request = request.body(Body::from(body)).map_err(|e| e.to_string())?;
        let response = tokio::time::timeout(FORWARD_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| "the owner did not answer in time".to_string())?
            .map_err(|e| e.to_string())?;
        let (mut parts, incoming) = response.into_parts();
        for name in HOP_BY_HOP {
            parts.headers.remove(HeaderName::from_static(name));
        }
        Ok(Response::from_parts(parts, Body::new(incoming)))
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether `path` names a tenant route (forwardable by the key's tenant).
fn tenant_route(path: &str) -> bool {
    path == "/mcp" || (path.starts_with("/v1/") && !path.starts_with("/v1/admin/"))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// Resolves once this node's view says `tenant`'s shard is no longer owned by the node at
/// `url` (the view is refreshed every coordination round).
async fn owner_moved_from(node: &Node, tenant: &str, url: &str) {
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match node.route(tenant) {
            Route::Remote { url: now, .. } if now == url => {}
            _ => return,
        }
    }
}

/// Middleware: serves a request here, or forwards it to the node owning its tenant's shard.
pub async fn route(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let (Some(forwarder), Some(node)) = (state.forward.clone(), state.engines.node().cloned())
    else {
        return next.run(req).await;
    };
    match forwarder.verify(req.headers(), req.method(), req.uri()) {
        Ok(Some(from)) => {
            req.extensions_mut().insert(Forwarded { from });
            return next.run(req).await;
        }
        Ok(None) => {}
        Err(problem) => return problem.into_response(),
    }
    if !tenant_route(req.uri().path()) {
        return next.run(req).await;
    }
    let presented = bearer(req.headers()).map(str::to_string);
    // A key this node has not learnt yet is read through from the bucket, unless the
    // address is out of failed authentications (the handler then answers 429).
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let read_through = state.auth_limit.allows(peer);
    let principal = match presented {
        Some(key) => Some(super::extract::authenticate(&state.keys, &key, read_through).await),
        None => None,
    };
    let tenant = match principal {
        Some(Ok(principal)) => match principal.tenant() {
            Some(t) => t.to_string(),
            None => return next.run(req).await,
        },
        // The handler answers a missing or bad key, counting the failure.
        _ => return next.run(req).await,
    };
    let Route::Remote { url, .. } = node.route(&tenant) else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let limit = if parts.uri.path() == "/v1/import" {
        state.import_limit
    } else {
        state.body_limit
    };
    let body = match super::extract::read_limited(body, limit).await {
        Ok(bytes) => bytes,
        Err(problem) => return problem.into_response(),
    };
    let mut target = url;
    for attempt in 0..2 {
        let sent = forwarder.send(
            &target,
            &parts.method,
            &parts.uri,
            &parts.headers,
            body.clone(),
        );
        let outcome = tokio::select! {
            outcome = sent => outcome,
            () = owner_moved_from(&node, &tenant, &target) => {
                // The owner lost the shard while the request was with it (paused, or
                // dead without closing its connections): whatever it does now is refused
                // by the stream's fence, so the outcome is unknown and the client retries.
                crate::telemetry::forwarded("failed");
                return Problem::new(
                    ErrorCode::NotReady,
                    "the tenant's shard changed owner while the request was being served; \
                     its outcome is unknown: retry (a write with the same eventId is idempotent)",
                )
                .with_retry_after(crate::serving::SHARD_RETRY_AFTER_SECS)
                .into_response();
            }
        };
        match outcome {
            Ok(response) => {
                crate::telemetry::forwarded("ok");
                return response;
            }
            Err(why) => {
                tracing::warn!(owner = %target, error = %why, "forwarding failed");
                if attempt == 1 {
                    break;
                }
                let again = {
                    let (node, tenant) = (Arc::clone(&node), tenant.clone());
                    tokio::task::spawn_blocking(move || {
                        let _ = node.refresh_view();
                        node.route(&tenant)
                    })
                    .await
                };
                match again {
                    Ok(Route::Remote { url, .. }) if url != target => target = url,
                    // The shard came here meanwhile: answer here.
                    Ok(Route::Local(_)) => {
                        let req = Request::from_parts(parts, Body::from(body));
                        return next.run(req).await;
                    }
                    _ => break,
                }
            }
        }
    }
    crate::telemetry::forwarded("failed");
    Problem::new(
        ErrorCode::NotReady,
        "the node owning the tenant's shard cannot be reached now; retry shortly",
    )
    .with_retry_after(crate::serving::SHARD_RETRY_AFTER_SECS)
    .into_response()
}
