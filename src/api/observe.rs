//! `POST /v1/observe`: the runtime decides whether a raw interaction is worth remembering.
//!
//! Invariants: the caller needs the `writer` role; a stored candidate goes through
//! `Engine::write_embedded` (the `POST /v1/events` path: validation, policy, durability,
//! audit) with the summary's vector, so the answer's status is the write's (201 / 202 /
//! 422 `policy_denied`); an ignored interaction stores nothing and answers 200.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::extract::{Auth, JsonBody};
use super::openapi::{
    AuthErrors, BodyErrors, ObserveBody, ObserveResponse, ProblemDoc, Unavailable,
};
use super::routes::write_body;
use super::AppState;
use crate::auth::{roles, TenantGrant};
use crate::engine::Engine;
use crate::error::Problem;

/// `POST /v1/observe`.
#[utoipa::path(
    post,
    path = "/v1/observe",
    tag = "events",
    summary = "Classify an interaction; write a candidate event through the policy",
    request_body = ObserveBody,
    responses(
        (status = 200, description = "ignored: nothing stored", body = ObserveResponse),
        (status = 201, description = "candidate written", body = ObserveResponse),
        (status = 202, description = "candidate held for review", body = ObserveResponse),
        (status = 422, description = "validation failed; `errors` lists every field", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn observe(
    State(state): State<AppState>,
    Auth(principal): Auth,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let grant = principal.grant(roles::WRITER)?;
    let (status, body) = observe_interaction(state.engine()?, &grant, &body).await?;
    Ok((status, Json(body)).into_response())
}

/// The body of `POST /v1/observe` for a caller already granted `writer` (shared with the
/// MCP `observe_interaction` tool): the status and JSON the route answers with.
pub(crate) async fn observe_interaction(
    engine: &Engine,
    grant: &TenantGrant,
    body: &Value,
) -> Result<(StatusCode, Value), Problem> {
    let seen = engine.observe(grant, body).await?;
    let classification = seen.classification.to_json();
    let (Some(candidate), Some(written)) = (seen.candidate, seen.written) else {
        let reason = seen.classification.verdict.ignore.map(|r| r.as_str());
        let body =
            json!({"outcome": "ignored", "reason": reason, "classification": classification});
        return Ok((StatusCode::OK, body));
    };
    match written {
        Ok(outcome) => {
            let (status, result) = write_body(outcome);
            let body = json!({
                "outcome": "candidate",
                "candidate": candidate,
                "classification": classification,
                "result": result,
            });
            Ok((status, body))
        }
        Err(p) => Err(with_context(p, candidate, classification)),
    }
}

/// A write problem (e.g. `policy_denied`) keeps its code and gains the candidate and the
/// classification, so the caller can see what was proposed.
fn with_context(p: Problem, candidate: Value, classification: Value) -> Problem {
    p.with_extra("outcome", json!("candidate"))
        .with_extra("candidate", candidate)
        .with_extra("classification", classification)
}
