//! `POST /v1/admin/cluster/tenants/{tenant}/pin`: pins a large tenant to a shard of its own
//! (cluster mode), moving its records there.
//!
//! Invariants: admin only; any node accepts it and passes it to the owner of the tenant's
//! hashed shard, which runs the move on a blocking thread ([`crate::cluster::Node::pin_tenant`]);
//! the tenant's requests get a retryable 503 while it moves, and nothing acknowledged is
//! lost.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::extract::Auth;
use super::openapi::{AuthErrors, Unavailable};
use super::AppState;
use crate::cluster::node::PinError;
use crate::cluster::shard_of;
use crate::error::{ErrorCode, FieldError};
use crate::wire::Problem;

/// Longest tenant id accepted here (the same bound as a key's tenant).
const MAX_TENANT_BYTES: usize = 256;

/// `POST /v1/admin/cluster/tenants/{tenant}/pin` (admin): moves the tenant to a shard of its
/// own. Answers once its records are on the new shard (and, normally, purged from the old).
#[utoipa::path(
    post,
    path = "/v1/admin/cluster/tenants/{tenant}/pin",
    tag = "admin",
    summary = "Pin a tenant to a shard of its own",
    params(("tenant" = String, Path, description = "the tenant")),
    responses(
        (status = 200, description = "pinned: records and audit entries copied, counts and timings", body = Object),
        (status = 409, description = "already pinned, being moved, or not in cluster mode", body = super::openapi::ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn pin_tenant(
    State(state): State<AppState>,
    Auth(principal): Auth,
    axum::extract::Path(tenant): axum::extract::Path<String>,
    request: axum::extract::Request,
) -> Result<Response, Problem> {
    principal.require_admin()?;
    let Some(node) = state.engines.node().cloned() else {
        return Err(Problem::new(
            ErrorCode::Conflict,
            "tenants are pinned to shards only in cluster mode",
        ));
    };
    if tenant.is_empty() || tenant.len() > MAX_TENANT_BYTES {
        return Err(Problem::validation(vec![FieldError::new(
            "tenant",
            format!("1 to {MAX_TENANT_BYTES} bytes"),
        )]));
    }
    let (parts, body) = request.into_parts();
    let bytes = super::extract::read_limited(body, state.body_limit).await?;
    let from = shard_of(&tenant, node.config().shards);
    if !node.held_shards().iter().any(|h| h.shard == from) {
        let owner = node.view().owner_url(from).map(|(_, url)| url.to_string());
        return super::cluster::to_owner(&state, owner, parts, bytes).await;
    }
    let key_id = principal.key_id().to_string();
    let report = tokio::task::spawn_blocking(move || node.pin_tenant(&tenant, &key_id))
        .await
        .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?
        .map_err(problem)?;
    Ok(Json(report).into_response())
}

fn problem(e: PinError) -> Problem {
    match e {
        PinError::AlreadyPinned { .. } | PinError::InProgress(_) => {
            Problem::new(ErrorCode::Conflict, e.to_string())
        }
        PinError::NotHere(_) => Problem::new(ErrorCode::NotReady, e.to_string())
            .with_retry_after(crate::serving::SHARD_RETRY_AFTER_SECS),
        PinError::Engine(e) => e.into(),
        PinError::Cluster(_) | PinError::Log(_) | PinError::Audit { .. } => {
            Problem::new(ErrorCode::StorageUnavailable, e.to_string())
        }
    }
}
