//! `GET /v1/admin/cluster`: what an operator needs to see of a cluster from any node.
//!
//! Invariants: admin only; read from the coordination bucket and the streams' leaders at
//! the time of the request (nothing cached beyond the node's view of who is live), on a
//! blocking thread; on a single node the answer says so (`mode: "single"`) and nothing else.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::Json;
use serde_json::{json, Value};

use super::extract::Auth;
use super::openapi::{AuthErrors, Unavailable};
use super::AppState;
use crate::cluster::stream_name;
use crate::error::{ErrorCode, FieldError};
use crate::wire::Problem;

/// `GET /v1/admin/cluster?tenant=` (admin): nodes, shard owners, generations and stream
/// health; with `tenant`, where that tenant's shard is served.
#[utoipa::path(
    get,
    path = "/v1/admin/cluster",
    tag = "admin",
    summary = "Cluster status: nodes, shard owners, streams and their replicas",
    params(("tenant" = Option<String>, Query, description = "also say which shard and node serve this tenant")),
    responses(
        (status = 200, description = "the cluster as the coordination bucket and the streams report it now", body = Object),
        AuthErrors,
        Unavailable
    )
)]
pub async fn cluster_status(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, Problem> {
    principal.require_admin()?;
    let unknown: Vec<FieldError> = params
        .keys()
        .filter(|k| k.as_str() != "tenant")
        .map(|k| FieldError::unknown_parameter(k.clone(), &["tenant"]))
        .collect();
    if !unknown.is_empty() {
        return Err(Problem::validation(unknown));
    }
    let Some(node) = state.engines.node().cloned() else {
        if matches!(state.engines, crate::serving::Engines::Cluster(_)) {
            return Err(Problem::new(
                ErrorCode::NotReady,
                "the node is still starting",
            ));
        }
        return Ok(Json(json!({"mode": "single"})));
    };
    let tenant = params.get("tenant").cloned();
    let report = tokio::task::spawn_blocking(move || -> Result<Value, Problem> {
        let unavailable = |e: &dyn std::fmt::Display| {
            Problem::new(ErrorCode::StorageUnavailable, e.to_string())
        };
        node.refresh_view().map_err(|e| unavailable(&e))?;
        let view = node.view();
        let config = node.config();
        let held: HashMap<u32, bool> = node
            .held_shards()
            .into_iter()
            .map(|h| (h.shard, h.serving))
            .collect();
        let generations = node.catalog().all().map_err(|e| unavailable(&e))?;
        let standbys: HashMap<u32, u64> = node.standbys().into_iter().collect();
        let pins = node.pins();
        let mut shards = Vec::with_capacity(config.shards as usize);
        for shard in node.shard_ids() {
            let generation = generations.get(&shard).copied().unwrap_or(1);
            let stream = stream_name(&config.cluster, shard, generation);
            let health = node
                .connection()
                .stream_health(&stream)
                .map_err(|e| unavailable(&e))?;
            let owner = view.shards.get(&shard);
            // This node's standby of the shard: what it applied, and how far the stream is
            // ahead of it (in records; exact in a shard's first generation).
            let standby = standbys.get(&shard).map(|applied| {
                let last = health.as_ref().map_or(0, |h| h.last_seq);
                json!({
                    "node": config.node_id,
                    "appliedThrough": applied,
                    "lag": last.saturating_sub(*applied),
                })
            });
            let pinned = pins.iter().find(|p| p.shard == shard).map(|p| &p.tenant);
            shards.push(json!({
                "standby": standby,
                "shard": shard,
                "pinnedTenant": pinned,
                "owner": owner.map(|(n, _)| n),
                "epoch": owner.map(|(_, rev)| rev),
                "generation": generation,
                "servingHere": held.get(&shard).copied(),
                "stream": health.map_or_else(|| json!({"name": stream, "exists": false}), |h| json!(h)),
            }));
        }
        let nodes: Vec<Value> = view
            .nodes
            .iter()
            .map(|(id, url)| {
                json!({
                    "id": id,
                    "url": url,
                    "shards": view.shards.values().filter(|(n, _)| n == id).count(),
                })
            })
            .collect();
        let mut report = json!({
            "mode": "cluster",
            "cluster": config.cluster,
            "node": config.node_id,
            "ready": node.ready(),
            "shardCount": config.shards,
            "replicas": config.replicas,
            "leaseTtlMs": config.lease_ttl.as_millis() as u64,
            "nodes": nodes,
            "shards": shards,
            "pins": pins,
        });
        if let Some(tenant) = tenant {
            let shard = node.shard_of(&tenant);
            report["tenant"] = json!({
                "id": tenant,
                "shard": shard,
                "owner": view.shards.get(&shard).map(|(n, _)| n),
            });
        }
        Ok(report)
    })
    .await
    .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))??;
    Ok(Json(report))
}

/// `POST /v1/admin/cluster/shards/{shard}/move` (admin), body `{"to": "<node id>"}`: hands
/// the shard to another live node (lease hand-off, then the target replays the stream from
/// its own last state). Any node accepts it and passes it to the shard's owner; the answer
/// comes once the target serves the shard.
#[utoipa::path(
    post,
    path = "/v1/admin/cluster/shards/{shard}/move",
    tag = "admin",
    summary = "Move a shard to another node",
    params(("shard" = u32, Path, description = "the shard")),
    request_body(content = Object, description = "`to`: the id of the live node to move the shard to", example = json!({"to": "node-b"})),
    responses(
        (status = 200, description = "the target serves the shard now", body = Object),
        (status = 202, description = "handed off; the target has not taken it yet", body = Object),
        (status = 422, description = "unknown shard or target node", body = super::openapi::ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn move_shard(
    State(state): State<AppState>,
    Auth(principal): Auth,
    axum::extract::Path(shard): axum::extract::Path<u32>,
    request: axum::extract::Request,
) -> Result<axum::response::Response, Problem> {
    use axum::response::IntoResponse;
    principal.require_admin()?;
    let Some(node) = state.engines.node().cloned() else {
        return Err(Problem::new(
            ErrorCode::Conflict,
            "shards exist only in cluster mode",
        ));
    };
    let (parts, body) = request.into_parts();
    let bytes = super::extract::read_limited(body, state.body_limit).await?;
    let body: Value = serde_json::from_slice(&bytes).map_err(|e| {
        Problem::new(
            ErrorCode::MalformedJson,
            format!("body is not valid JSON: {e}"),
        )
    })?;
    let to = body.get("to").and_then(Value::as_str).map(str::to_string);
    let mut errors = Vec::new();
    if !node.shard_ids().contains(&shard) {
        errors.push(FieldError::new(
            "shard",
            format!(
                "the cluster has shards 0 to {} and those of pinned tenants",
                node.config().shards - 1
            ),
        ));
    }
    let view = node.view();
    match &to {
        None => errors.push(FieldError::new("to", "required: the id of a live node")),
        Some(t) if !view.nodes.contains_key(t) => {
            errors.push(FieldError::new("to", format!("no live node {t:?}")))
        }
        Some(_) => {}
    }
    if !errors.is_empty() {
        return Err(Problem::validation(errors));
    }
    let to = to.expect("checked");
    let held_here = node.held_shards().iter().any(|h| h.shard == shard);
    if !held_here {
        let owner = view.owner_url(shard).map(|(_, url)| url.to_string());
        return to_owner(&state, owner, parts, bytes).await;
    }
    let from = node.config().node_id.clone();
    let started = std::time::Instant::now();
    // The answer must reach a node that forwarded the request before that node gives up;
    // a move not done by then is reported as handed off (202) and goes on.
    let wait = (node.config().lease_ttl * 2 + std::time::Duration::from_secs(30))
        .min(super::forward::ANSWER_WITHIN);
    let target = to.clone();
    let taken = tokio::task::spawn_blocking(move || node.move_shard(shard, &target, wait))
        .await
        .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?
        .map_err(|e| Problem::new(ErrorCode::StorageUnavailable, e.to_string()))?;
    let status = if taken {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::ACCEPTED
    };
    let body = json!({
        "shard": shard,
        "from": from,
        "to": to,
        "taken": taken,
        "tookMs": started.elapsed().as_millis() as u64,
    });
    Ok((status, Json(body)).into_response())
}

/// Sends an admin request that only the owner of a shard can carry out to that owner
/// (`owner_url`, as this node's view has it); a request that was forwarded here already is
/// never forwarded again.
pub(super) async fn to_owner(
    state: &AppState,
    owner_url: Option<String>,
    parts: axum::http::request::Parts,
    bytes: axum::body::Bytes,
) -> Result<axum::response::Response, Problem> {
    let (Some(forward), Some(url)) = (state.forward.clone(), owner_url) else {
        return Err(Problem::new(
            ErrorCode::NotReady,
            "nobody holds the shard now; retry shortly",
        )
        .with_retry_after(crate::serving::SHARD_RETRY_AFTER_SECS));
    };
    if parts.headers.contains_key(super::forward::FORWARDED_BY) {
        return Err(
            Problem::new(ErrorCode::NotReady, "the shard moved meanwhile; retry")
                .with_retry_after(crate::serving::SHARD_RETRY_AFTER_SECS),
        );
    }
    forward
        .send(&url, &parts.method, &parts.uri, &parts.headers, bytes)
        .await
        .map_err(|e| {
            Problem::new(
                ErrorCode::NotReady,
                format!("the owner cannot be reached: {e}"),
            )
        })
}
