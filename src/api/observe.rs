//! `POST /v1/observe`: the runtime decides whether a raw interaction is worth remembering.
//!
//! Invariants: the caller needs the `writer` role; a stored candidate goes through
//! `Engine::write_embedded` (the `POST /v1/events` path: validation, policy, durability,
//! audit) with the summary's vector, so the answer's status is the write's (201 / 202 /
//! 422 `policy_denied`); an ignored interaction stores nothing and answers 200.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::extract::{Auth, JsonBody};
use super::openapi::{AuthErrors, BodyErrors, ObserveResponse, ProblemDoc, Unavailable};
use super::AppState;
use crate::auth::roles;
use crate::wire::observe_interaction;
use crate::wire::Problem;

/// `POST /v1/observe`.
#[utoipa::path(
    post,
    path = "/v1/observe",
    tag = "events",
    summary = "Classify an interaction; write a candidate event through the policy",
    request_body = crate::observe::Interaction,
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
    let (status, body) = observe_interaction(&state.engine(&grant)?, &grant, &body).await?;
    Ok((status, Json(body)).into_response())
}
