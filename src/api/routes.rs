//! Route handlers: extract → authorize → call the engine → map the result.
//!
//! Invariants: each handler obtains its grant from the authenticated key before touching
//! the engine; write responses are 201 (allow) or 202 (review) only after durability.

use std::collections::{BTreeSet, HashMap};

use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::extract::{Auth, JsonBody};
use super::openapi::{
    AuthErrors, BatchRequest, BatchResponse, BodyErrors, Health, KeyList, KeyRecordDoc, NewKeyBody,
    ProblemDoc, ReplayBody, Revoked, RotatedAdminKey, Unavailable, WriteResponse,
};
use super::AppState;
use crate::auth::{roles, Revocation};
use crate::engine::{Engine, WriteOutcome};
use crate::error::{ErrorCode, FieldError};
use crate::retrieve::{RecallRequest, TimelineQuery};
use crate::serving::Engines;
use crate::wire::new_key::{asks_for_other_roles, new_key_body, parse_new_key};
use crate::wire::{correction_draft, event_draft, write_body, Problem};

/// `GET /healthz`: the process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "ops",
    summary = "Liveness: the process is up",
    security(()),
    responses(
        (status = 200, description = "up", body = Health)
    )
)]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: model loaded and indexes open.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "ops",
    summary = "Readiness: model loaded and indexes open",
    security(()),
    responses(
        (status = 200, description = "ready", body = Health),
        (status = 503, description = "still loading", body = ProblemDoc, content_type = "application/problem+json")
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, Problem> {
    if !state.engines.ready() {
        let detail = match state.engines.node() {
            Some(_) => "the node's shards are still catching up",
            None => "the engine is still loading",
        };
        return Err(Problem::new(ErrorCode::NotReady, detail));
    }
    // Readiness says nothing about what is stored (no counts, no sizes): it is unauthenticated.
    let engines = state.engines.local()?;
    let degraded = engines
        .iter()
        .any(|e| e.scope_health().degraded().is_some());
    let (status, scope) = if degraded {
        ("degraded", "degraded")
    } else {
        ("ready", "ok")
    };
    Ok(Json(json!({"status": status, "indexes": {"scope": scope}})))
}

fn refresh_param(params: &HashMap<String, String>) -> Result<bool, Problem> {
    let unknown: Vec<FieldError> = params
        .keys()
        .filter(|k| k.as_str() != "refresh")
        .map(|k| FieldError::unknown_parameter(k.clone(), &["refresh"]))
        .collect();
    if !unknown.is_empty() {
        return Err(Problem::validation(unknown));
    }
    match params.get("refresh").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("wait_for") => Ok(true),
        Some(_) => Err(Problem::validation(vec![FieldError::new(
            "refresh",
            "must be wait_for or false",
        )])),
    }
}

/// `POST /v1/events`.
#[utoipa::path(
    post,
    path = "/v1/events",
    tag = "events",
    summary = "Write an event through validation and the write policy",
    request_body = crate::model::draft::EventWrite,
    params(("refresh" = Option<String>, Query, pattern = "^(wait_for|false)$", description = "`wait_for`: answer once the event is in the committed scope index")),
    responses(
        (status = 201, description = "allowed and durable", body = WriteResponse),
        (status = 202, description = "durable, held for review", body = WriteResponse),
        (status = 409, description = "idempotency or supersession conflict", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "validation failed or denied by policy (`policy_denied`)", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn write_event(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let grant = principal.grant(roles::WRITER)?;
    let wait_for = refresh_param(&params)?;
    let engine = state.engine(&grant)?;
    let draft = event_draft(&engine, &grant, &body)?;
    let outcome = engine.write_draft(&grant, draft, wait_for).await?;
    Ok(write_response(outcome))
}

/// `POST /v1/events:batch`: `{"events": [...]}`, each item a write body; answers
/// `{"results": [...]}` in input order, each with its own HTTP-like `status` (201, 202, 409,
/// 422 (invalid or denied), 403 (another tenant) or 503) and, where stored, its `eventId`.
/// 201 when every item was stored, 207 otherwise.
#[utoipa::path(
    post,
    path = "/v1/events:batch",
    tag = "events",
    operation_id = "write_events_batch",
    summary = "Write many events in one request, each with its own result",
    params(("refresh" = Option<String>, Query, pattern = "^(wait_for|false)$", description = "`wait_for`: answer once the stored events are in the committed scope index")),
    request_body(content = BatchRequest, example = json!({"events": [
        {"summary": "Dana asked for renewal notices by email", "actorId": "user:dana", "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["chat-17"]},
        {"summary": "The March invoice was paid", "actorId": "user:dana", "occurredAt": "2026-06-17T09:25:00Z", "sourceRefs": ["billing-8812"]}
    ]})),
    responses(
        (status = 201, description = "every item stored (each 201 or 202)", body = BatchResponse),
        (status = 207, description = "some items were not stored: see each result's status", body = BatchResponse),
        (status = 422, description = "the body is not a batch (no `events` array, or more than `--max-batch-events`)", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn write_events_batch(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
    request: axum::extract::Request,
) -> Result<Response, Problem> {
    let grant = principal.grant(roles::WRITER)?;
    let wait_for = refresh_param(&params)?;
    let engine = state.engine(&grant)?;
    let limit = engine.config().limits.max_batch_events;
    // A batch may be as large as its events: up to 16 single-write bodies' worth.
    let bytes =
        super::extract::read_limited(request.into_body(), state.body_limit.saturating_mul(16))
            .await?;
    let body = super::extract::parse_json(&bytes)?;
    let items = match body.get("events") {
        Some(Value::Array(items)) if items.len() <= limit => items,
        Some(Value::Array(items)) => {
            return Err(Problem::validation(vec![FieldError::new(
                "events",
                format!("at most {limit} events per batch ({} given)", items.len()),
            )]))
        }
        _ => {
            return Err(Problem::validation(vec![FieldError::new(
                "events",
                "is required: an array of write bodies",
            )]))
        }
    };
    if let Some(extra) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| k.as_str() != "events"))
    {
        return Err(Problem::validation(vec![FieldError::unknown(
            extra.clone(),
            &["events"],
        )]));
    }
    let mut results: Vec<Option<Value>> = vec![None; items.len()];
    let mut drafts = Vec::new();
    let mut positions = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match event_draft(&engine, &grant, item) {
            Ok(draft) => {
                drafts.push(draft);
                positions.push(i);
            }
            Err(problem) => results[i] = Some(item_problem(&problem)),
        }
    }
    let written = engine.write_drafts(&grant, drafts, wait_for).await?;
    for (i, outcome) in positions.into_iter().zip(written) {
        results[i] = Some(match outcome {
            Ok(outcome) => {
                let (status, mut body) = write_body(outcome);
                if let Value::Object(m) = &mut body {
                    if let Some(event_status) = m.remove("status") {
                        m.insert("eventStatus".into(), event_status);
                    }
                    m.insert("status".into(), json!(status.as_u16()));
                }
                body
            }
            Err(e) => item_problem(&Problem::from(e)),
        });
    }
    let results: Vec<Value> = results.into_iter().flatten().collect();
    let all = results
        .iter()
        .all(|r| matches!(r["status"].as_u64(), Some(201 | 202)));
    let status = if all {
        StatusCode::CREATED
    } else {
        StatusCode::MULTI_STATUS
    };
    Ok((status, Json(json!({"results": results}))).into_response())
}

/// One batch item's failure: its status and the problem a single write would have answered.
fn item_problem(problem: &Problem) -> Value {
    json!({"status": problem.code.status(), "error": crate::wire::problem_body(problem, None)})
}

/// `POST /v1/events/{eventId}/correct`.
#[utoipa::path(
    post,
    path = "/v1/events/{eventId}/correct",
    tag = "events",
    operation_id = "correct_event",
    summary = "Correct an event with only the fields that change",
    description = "The body names only what changes (any write field but `supersedesEventIds`; \
                   optionally the new event's `eventId`); every other field is carried over from \
                   the event corrected, except `sourceTrust`, which follows the write's rule \
                   (`agent_inferred` when omitted). The result is a new event that supersedes \
                   the one in the path.",
    params(
        ("eventId" = String, Path, description = "The event to correct"),
        ("refresh" = Option<String>, Query, pattern = "^(wait_for|false)$", description = "`wait_for`: answer once the event is in the committed scope index")
    ),
    request_body(content = Object, example = json!({"summary": "Dana now wants renewal notices by text message", "sourceTrust": "user_provided"})),
    responses(
        (status = 201, description = "the correction is active; the event corrected is superseded", body = WriteResponse),
        (status = 202, description = "the correction is held for review", body = WriteResponse),
        (status = 404, description = "no such event in the key's tenant and grant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 409, description = "the event is already superseded, or the id is taken", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "validation failed (nothing changes, or an invalid field) or denied by policy", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn correct_event(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Path(event_id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let grant = principal.grant(roles::WRITER)?;
    let wait_for = refresh_param(&params)?;
    let engine = state.engine(&grant)?;
    let draft = correction_draft(&engine, &grant, &event_id, &body)?;
    let outcome = engine.write_draft(&grant, draft, wait_for).await?;
    Ok(write_response(outcome))
}

fn write_response(outcome: WriteOutcome) -> Response {
    let (status, body) = write_body(outcome);
    (status, Json(body)).into_response()
}

/// `GET /v1/events/{eventId}`.
#[utoipa::path(
    get,
    path = "/v1/events/{eventId}",
    tag = "events",
    summary = "Read one event",
    params(("eventId" = String, Path, description = "Event id")),
    responses(
        (status = 200, description = "the event", body = crate::model::StoredEvent),
        (status = 404, description = "no such event in the key's tenant and grant", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn get_event(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Path(event_id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let grant = principal.grant(roles::READER)?;
    let event = state.engine(&grant)?.get(&grant, &event_id)?;
    Ok(Json(json!(event)))
}

/// `POST /v1/recall`.
#[utoipa::path(
    post,
    path = "/v1/recall",
    tag = "recall",
    summary = "Scope-first hybrid recall; hits with score breakdowns and evidence blocks",
    request_body = crate::retrieve::RecallRequest,
    responses(
        (status = 200, description = "ranked hits and evidence", body = crate::retrieve::RecallResponse),
        (status = 422, description = "validation failed; `errors` lists every field", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn recall(
    State(state): State<AppState>,
    Auth(principal): Auth,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, Problem> {
    let grant = principal.grant(roles::READER)?;
    let req = RecallRequest::parse(&body)?;
    let resp = state.engine(&grant)?.recall(&grant, req).await?;
    Ok(Json(json!(resp)))
}

/// `GET /v1/timeline`.
#[utoipa::path(
    get,
    path = "/v1/timeline",
    tag = "recall",
    summary = "Events in scope ordered by occurredAt",
    params(
        ("actorId" = Option<String>, Query, description = "Only this actor"),
        ("projectId" = Option<String>, Query, description = "Only this project"),
        ("eventType" = Option<String>, Query, description = "Only this type"),
        ("from" = Option<String>, Query, format = DateTime, description = "Inclusive lower bound on occurredAt (RFC 3339)"),
        ("to" = Option<String>, Query, format = DateTime, description = "Exclusive upper bound on occurredAt (RFC 3339)"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 500, description = "Page size, 1-500 (default 50)"),
        ("cursor" = Option<String>, Query, description = "`nextCursor` of the previous page"),
        ("includeSuperseded" = Option<bool>, Query, description = "Also list superseded events"),
        ("asOf" = Option<String>, Query, format = DateTime, description = "As memory stood at this recorded time"),
        ("metadata" = Option<String>, Query, description = "Metadata equality as a JSON object, as a recall scope's `metadata` (e.g. `{\"channel\":\"email\"}`)", example = "{\"channel\":\"email\"}"),
        ("markStale" = Option<bool>, Query, description = "Also name, in `staleBy`, the newer event that makes each stale event of the page stale (as recall decides staleness)"),
    ),
    responses(
        (status = 200, description = "a page", body = crate::retrieve::TimelinePage),
        (status = 422, description = "bad parameter", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn timeline(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, Problem> {
    let grant = principal.grant(roles::READER)?;
    let query = TimelineQuery::parse(&params)?;
    let page = state.engine(&grant)?.timeline(&grant, query).await?;
    Ok(Json(json!(page)))
}

/// The approver roles in use on this node: the policy's, and those events awaiting review
/// name (503 `not_ready` while the engines load).
async fn approver_roles(state: &AppState) -> Result<BTreeSet<String>, Problem> {
    let mut approvers = BTreeSet::from([state.engines.config()?.policy.approver_role]);
    for engine in state.engines.local()? {
        approvers.extend(engine.approver_roles().await?);
    }
    Ok(approvers)
}

/// `POST /v1/admin/keys` (admin).
#[utoipa::path(
    post,
    path = "/v1/admin/keys",
    tag = "admin",
    summary = "Create a tenant key (the secret is shown once)",
    request_body = NewKeyBody,
    responses(
        (status = 201, description = "created", body = KeyRecordDoc),
        (status = 422, description = "validation failed; `errors` lists every field", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn create_key(
    State(state): State<AppState>,
    Auth(principal): Auth,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    principal.require_admin()?;
    let approvers = if asks_for_other_roles(&body) {
        approver_roles(&state).await?
    } else {
        BTreeSet::new()
    };
    let input = parse_new_key(&body, &approvers)?;
    let keys = state.keys.clone();
    let new = tokio::task::spawn_blocking(move || input.create(&keys))
        .await
        .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?
        .map_err(|e| Problem::new(ErrorCode::StorageUnavailable, e.to_string()))?;
    let body = new_key_body(&new);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /v1/admin/keys` (admin): records without secrets.
#[utoipa::path(
    get,
    path = "/v1/admin/keys",
    tag = "admin",
    summary = "List keys without secrets",
    responses(
        (status = 200, description = "every key", body = KeyList),
        AuthErrors
    )
)]
pub async fn list_keys(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> Result<Json<Value>, Problem> {
    principal.require_admin()?;
    let keys: Vec<Value> = state
        .keys
        .list()
        .into_iter()
        .map(|r| json!({"keyId": r.key_id, "tenantId": r.tenant_id, "roles": r.roles, "actorIds": r.actor_ids, "maxPrivacyClass": r.max_privacy_class, "label": r.label, "defaultSourceTrust": r.default_source_trust, "createdAt": r.created_at, "revokedAt": r.revoked_at}))
        .collect();
    Ok(Json(json!({"keys": keys})))
}

/// `DELETE /v1/admin/keys/{keyId}` (admin): revoke.
#[utoipa::path(
    delete,
    path = "/v1/admin/keys/{keyId}",
    tag = "admin",
    summary = "Revoke a key",
    params(("keyId" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "revoked", body = Revoked),
        (status = 404, description = "no such key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 409, description = "the last usable admin key (rotate it instead), or the EPISODIC_ADMIN_KEY key", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn revoke_key(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Path(key_id): Path<String>,
) -> Result<Json<Value>, Problem> {
    principal.require_admin()?;
    let keys = state.keys.clone();
    let id = key_id.clone();
    let outcome = tokio::task::spawn_blocking(move || keys.revoke(&id))
        .await
        .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?
        .map_err(|e| Problem::new(ErrorCode::StorageUnavailable, e.to_string()))?;
    match outcome {
        Revocation::Revoked => Ok(Json(json!({"keyId": key_id, "revoked": true}))),
        Revocation::NotFound => Err(Problem::new(
            ErrorCode::NotFound,
            format!("key {key_id} not found"),
        )),
        Revocation::LastAdmin => Err(Problem::new(
            ErrorCode::Conflict,
            "an admin key cannot be revoked without a replacement: rotate it with \
             POST /v1/admin/keys/admin/rotate, or set EPISODIC_ADMIN_KEY and restart first",
        )),
        Revocation::EnvironmentKey => Err(Problem::new(
            ErrorCode::Conflict,
            "the admin key from EPISODIC_ADMIN_KEY has no record to revoke: set a new \
             EPISODIC_ADMIN_KEY and restart to replace it",
        )),
    }
}

/// `POST /v1/admin/keys/admin/rotate` (admin): a new secret for the generated admin key.
#[utoipa::path(
    post,
    path = "/v1/admin/keys/admin/rotate",
    tag = "admin",
    summary = "Replace the generated admin key (the new key is shown once; the old one stops working)",
    responses(
        (status = 200, description = "rotated", body = RotatedAdminKey),
        (status = 409, description = "no generated admin key (the admin key comes from EPISODIC_ADMIN_KEY)", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn rotate_admin_key(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> Result<Json<Value>, Problem> {
    principal.require_admin()?;
    let keys = state.keys.clone();
    let rotated = tokio::task::spawn_blocking(move || keys.rotate_admin())
        .await
        .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?
        .map_err(|e| Problem::new(ErrorCode::StorageUnavailable, e.to_string()))?;
    let Some(new) = rotated else {
        return Err(Problem::new(
            ErrorCode::Conflict,
            "there is no generated admin key to rotate: the admin key comes from \
             EPISODIC_ADMIN_KEY; set a new value and restart to replace it",
        ));
    };
    Ok(Json(json!({
        "key": new.key,
        "keyId": new.record.key_id,
        "roles": new.record.roles,
        "createdAt": new.record.created_at,
    })))
}

/// Unknown routes.
pub async fn not_found() -> Problem {
    Problem::new(ErrorCode::RouteNotFound, "no such route")
}

/// Known route, wrong method; `OPTIONS` is answered `204` (the router adds `Allow` to
/// both). With CORS origins configured, `OPTIONS` never reaches here: the CORS layer
/// answers it as a preflight.
pub async fn method_not_allowed(method: Method) -> Response {
    if method == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    Problem::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this route",
    )
    .into_response()
}

/// `GET /v1/admin/policy` (admin): the write policy in force.
#[utoipa::path(
    get,
    path = "/v1/admin/policy",
    tag = "admin",
    summary = "The write policy in force",
    responses(
        (status = 200, description = "the versioned policy", body = Object),
        AuthErrors,
        Unavailable
    )
)]
pub async fn get_policy(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> Result<Json<Value>, Problem> {
    principal.require_admin()?;
    Ok(Json(json!(state.engines.config()?.policy)))
}

/// `POST /v1/admin/policy/replay` (admin), body `{policy, dryRun}`: re-decide stored events.
#[utoipa::path(
    post,
    path = "/v1/admin/policy/replay",
    tag = "admin",
    summary = "Re-decide stored events under a candidate policy (dry run or apply)",
    request_body = ReplayBody,
    responses(
        (status = 200, description = "what changed or would change", body = crate::engine::ReevaluationReport),
        (status = 422, description = "validation failed; `errors` lists every field", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn replay_policy(
    State(state): State<AppState>,
    Auth(principal): Auth,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, Problem> {
    principal.require_admin()?;
    let (policy, dry_run) = parse_replay(&body)?;
    let engine = single_engine(&state, "policy replay")?;
    let report = engine
        .reevaluate_policy(policy, dry_run, principal.key_id())
        .await?;
    Ok(Json(json!(report)))
}

/// The one engine of a single node, for the admin operations that rewrite every tenant's
/// state at once; a cluster node answers 409 `conflict` for them (see the cluster docs).
pub(super) fn single_engine(state: &AppState, what: &str) -> Result<Engine, Problem> {
    match &state.engines {
        Engines::Single(_) => Ok(state.engines.local()?.remove(0)),
        Engines::Cluster(_) => Err(Problem::new(
            ErrorCode::Conflict,
            format!("{what} is not available in cluster mode"),
        )),
    }
}

fn parse_replay(body: &Value) -> Result<(crate::policy::WritePolicy, bool), Problem> {
    let mut errors: Vec<FieldError> = body
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| !["policy", "dryRun"].contains(&k.as_str()))
                .map(|k| FieldError::unknown(k.clone(), &["policy", "dryRun"]))
                .collect()
        })
        .unwrap_or_default();
    let dry_run = match body.get("dryRun") {
        Some(Value::Bool(b)) => *b,
        _ => {
            errors.push(FieldError::new(
                "dryRun",
                "is required: true to report, false to apply",
            ));
            true
        }
    };
    let policy = match body.get("policy") {
        Some(p) => match crate::policy::WritePolicy::from_json(p.to_string().as_bytes()) {
            Ok(p) => Some(p),
            Err(e) => {
                errors.push(FieldError::new("policy", e));
                None
            }
        },
        None => {
            errors.push(FieldError::new("policy", "is required"));
            None
        }
    };
    match policy {
        Some(p) if errors.is_empty() => Ok((p, dry_run)),
        _ => Err(Problem::validation(errors)),
    }
}
