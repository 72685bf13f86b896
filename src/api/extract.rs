//! Request extractors: bearer authentication and bounded JSON bodies, each failing with a
//! problem+json response.
//!
//! Invariants: a handler that takes [`Auth`] never runs for a missing or unknown key; a
//! presented key is looked at only if the client's address has failed authentication less
//! often than the limit allows (`super::auth_limit`), otherwise the answer is 429
//! `too_many_requests`; a body is read only up to the configured limit; malformed JSON is
//! `malformed_json` (400), an oversized body `payload_too_large` (413), a body that missed
//! its deadline `request_timeout` (408), a non-JSON content type 415.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRef, FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde_json::Value;

use super::AppState;
use crate::auth::Principal;
use crate::error::ErrorCode;
use crate::wire::Problem;

/// The authenticated caller.
pub struct Auth(pub Principal);

impl<S> FromRequestParts<S> for Auth
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let app = AppState::from_ref(state);
        let header = parts.headers.get(header::AUTHORIZATION).ok_or_else(|| {
            Problem::new(
                ErrorCode::Unauthenticated,
                "missing Authorization: Bearer <key>",
            )
        })?;
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        let attempt = app.auth_limit.attempt(peer).map_err(|limited| {
            crate::telemetry::auth_limited();
            Problem::new(
                ErrorCode::TooManyRequests,
                "too many failed authentications from this address; the key was not checked",
            )
            .with_retry_after(limited.retry_after_secs)
        })?;
        let key = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                Problem::new(
                    ErrorCode::Unauthenticated,
                    "Authorization must be `Bearer <key>`",
                )
            })?;
        let principal = authenticate(&app.keys, key, true).await?;
        attempt.succeeded();
        Ok(Auth(principal))
    }
}

/// Resolves `key`: from this node's records, or in cluster mode with `read_through`, for a
/// key id it does not know yet, from the replicated bucket (read on a blocking thread).
/// Callers allow the read only where failed authentications are rate-limited.
pub async fn authenticate(
    keys: &std::sync::Arc<crate::auth::KeyStore>,
    key: &str,
    read_through: bool,
) -> Result<crate::auth::Principal, crate::auth::AuthError> {
    match keys.authenticate(key) {
        Err(crate::auth::AuthError::Unauthenticated) if read_through && keys.may_learn(key) => {
            let (store, presented) = (std::sync::Arc::clone(keys), key.to_string());
            let learnt = tokio::task::spawn_blocking(move || store.learn(&presented))
                .await
                .unwrap_or(false);
            if learnt {
                keys.authenticate(key)
            } else {
                Err(crate::auth::AuthError::Unauthenticated)
            }
        }
        other => other,
    }
}

/// A JSON body read within the size limit.
pub struct JsonBody(pub Value);

impl<S> FromRequest<S> for JsonBody
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, &AppState::from_ref(state)).await?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// An optional JSON body: `None` when the request has no body at all.
pub struct OptionalJsonBody(pub Option<Value>);

impl<S> FromRequest<S> for OptionalJsonBody
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, &AppState::from_ref(state)).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(None));
        }
        parse_json(&bytes).map(|v| OptionalJsonBody(Some(v)))
    }
}

async fn read_body(req: Request, app: &AppState) -> Result<axum::body::Bytes, Problem> {
    check_content_type(&req)?;
    read_limited(req.into_body(), app.body_limit).await
}

pub(super) fn parse_json(bytes: &[u8]) -> Result<Value, Problem> {
    serde_json::from_slice(bytes).map_err(|e| {
        Problem::new(
            ErrorCode::MalformedJson,
            format!("body is not valid JSON: {e}"),
        )
    })
}

fn check_content_type(req: &Request) -> Result<(), Problem> {
    let Some(ct) = req.headers().get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    if ct.starts_with("application/json") || ct.contains("+json") {
        return Ok(());
    }
    Err(Problem::new(
        ErrorCode::UnsupportedMediaType,
        "send the body as application/json",
    ))
}

pub(super) async fn read_limited(body: Body, limit: usize) -> Result<axum::body::Bytes, Problem> {
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(e) => {
            let inner = e.into_inner();
            if inner
                .downcast_ref::<super::listener::BodyTimeout>()
                .is_some()
            {
                Err(Problem::new(
                    ErrorCode::RequestTimeout,
                    "the request body did not arrive in time",
                ))
            } else if inner
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(Problem::new(
                    ErrorCode::PayloadTooLarge,
                    format!("body exceeds {limit} bytes"),
                ))
            } else {
                Err(Problem::new(
                    ErrorCode::MalformedJson,
                    format!("could not read the body: {inner}"),
                ))
            }
        }
    }
}
