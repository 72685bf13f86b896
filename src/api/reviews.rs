//! Review routes: the queue of pending events and approve/reject decisions.
//!
//! Invariants: a key sees only pending events it could decide (its roles include the event's
//! approver role, and the event is inside its grant); the decision checks (role, not the
//! writing key) happen in the engine's writer, serially with every other mutation.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Value};

use super::extract::{Auth, OptionalJsonBody};
use super::openapi::{AuthErrors, BodyErrors, ProblemDoc, ReviewList, ReviewNote, Unavailable};
use super::AppState;
use crate::error::FieldError;
use crate::wire::Problem;

/// `GET /v1/reviews?status=pending&limit=`.
#[utoipa::path(
    get,
    path = "/v1/reviews",
    operation_id = "list_pending_reviews",
    tag = "governance",
    summary = "Pending reviews of the tenant",
    params(
        ("status" = Option<String>, Query, pattern = "^pending$", description = "Only `pending` is supported"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "1-1000 (default 100)"),
    ),
    responses(
        (status = 200, description = "pending events", body = ReviewList),
        (status = 422, description = "bad parameter", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, Problem> {
    let grant = principal.tenant_grant()?;
    let limit = parse_list_params(&params)?;
    let items: Vec<Value> = state
        .engine(&grant)?
        .pending_reviews(&grant, limit)
        .into_iter()
        .map(|(event, decision)| json!({"event": event, "decision": decision}))
        .collect();
    Ok(Json(json!({"reviews": items})))
}

fn parse_list_params(params: &HashMap<String, String>) -> Result<usize, Problem> {
    let mut errors: Vec<FieldError> = params
        .keys()
        .filter(|k| !["status", "limit"].contains(&k.as_str()))
        .map(|k| FieldError::unknown_parameter(k.clone(), &["status", "limit"]))
        .collect();
    if params.get("status").is_some_and(|s| s != "pending") {
        errors.push(FieldError::new("status", "only pending is supported"));
    }
    let limit = match params.get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(n)) if (1..=1000).contains(&n) => n,
        Some(_) => {
            errors.push(FieldError::new(
                "limit",
                "must be an integer from 1 to 1000",
            ));
            100
        }
    };
    if errors.is_empty() {
        Ok(limit)
    } else {
        Err(Problem::validation(errors))
    }
}

fn parse_note(body: Option<Value>) -> Result<Option<String>, Problem> {
    let Some(body) = body else {
        return Ok(None);
    };
    let Value::Object(obj) = body else {
        return Err(Problem::validation(vec![FieldError::new(
            "",
            "body must be a JSON object",
        )]));
    };
    let mut errors: Vec<FieldError> = obj
        .keys()
        .filter(|k| k.as_str() != "note")
        .map(|k| FieldError::unknown(k.clone(), &["note"]))
        .collect();
    let note = match obj.get("note") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) if n.len() <= 4096 => Some(n.clone()),
        Some(_) => {
            errors.push(FieldError::new(
                "note",
                "must be a string of at most 4096 bytes",
            ));
            None
        }
    };
    if errors.is_empty() {
        Ok(note)
    } else {
        Err(Problem::validation(errors))
    }
}

async fn decide(
    state: AppState,
    principal: crate::auth::Principal,
    id: &str,
    approve: bool,
    body: Option<Value>,
) -> Result<Json<Value>, Problem> {
    let grant = principal.tenant_grant()?;
    let note = parse_note(body)?;
    let outcome = state
        .engine(&grant)?
        .review(&grant, id, approve, note)
        .await?;
    Ok(Json(json!(outcome)))
}

/// `POST /v1/reviews/{eventId}/approve`.
#[utoipa::path(
    post,
    path = "/v1/reviews/{eventId}/approve",
    tag = "governance",
    summary = "Approve a pending event (approver role; never your own write)",
    params(("eventId" = String, Path, description = "Event id")),
    request_body(content = ReviewNote, description = "Optional: omit the body or send a note"),
    responses(
        (status = 200, description = "decided", body = crate::engine::ReviewOutcome),
        (status = 422, description = "validation failed; `errors` lists every field", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "no such pending event", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 409, description = "not pending", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn approve(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Path(event_id): Path<String>,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, Problem> {
    decide(state, principal, &event_id, true, body).await
}

/// `POST /v1/reviews/{eventId}/reject`.
#[utoipa::path(
    post,
    path = "/v1/reviews/{eventId}/reject",
    tag = "governance",
    summary = "Reject a pending event (approver role; never your own write)",
    params(("eventId" = String, Path, description = "Event id")),
    request_body(content = ReviewNote, description = "Optional: omit the body or send a note"),
    responses(
        (status = 200, description = "decided", body = crate::engine::ReviewOutcome),
        (status = 422, description = "validation failed; `errors` lists every field", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "no such pending event", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 409, description = "not pending", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn reject(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Path(event_id): Path<String>,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, Problem> {
    decide(state, principal, &event_id, false, body).await
}
