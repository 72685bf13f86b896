//! The crate's error-code table: every failure a client can see maps to one stable
//! snake_case code and one HTTP status. Field errors ([`FieldError`], [`Invalid`]) live here
//! too, for every layer that validates input; the engine's own failures are typed in
//! `engine::Error`, and only the edges (`wire`, `api`, `mcp`) make problems of them.
//!
//! Invariants: codes are never renamed (clients match on them); every variant is listed
//! in each match (no wildcard arm), so adding a code forces a decision on its status.

use serde::Serialize;

/// A stable, client-visible error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Missing, malformed or unknown API key.
    Unauthenticated,
    /// The key lacks a role the route needs.
    Forbidden,
    /// A request body named a tenant other than the key's.
    TenantMismatch,
    /// A key tried to approve or reject an event it wrote itself.
    SelfApprovalForbidden,
    /// No such resource in the caller's tenant (identical for foreign ids).
    NotFound,
    /// The request conflicts with stored state (idempotency, supersession).
    Conflict,
    /// Field-level validation failed; `errors` lists every problem.
    ValidationFailed,
    /// The body is not well-formed JSON.
    MalformedJson,
    /// The body exceeds the configured limit.
    PayloadTooLarge,
    /// The body is not declared as JSON.
    UnsupportedMediaType,
    /// The write policy refused the event; nothing was stored.
    PolicyDenied,
    /// Durable storage cannot accept writes right now (disk full, sync failure).
    StorageUnavailable,
    /// The server is still loading its model or indexes.
    NotReady,
    /// The route does not exist.
    RouteNotFound,
    /// The HTTP method is not allowed on this route.
    MethodNotAllowed,
    /// An unexpected internal failure.
    Internal,
    /// The request is malformed at the HTTP level (e.g. a path that is not UTF-8 once
    /// percent-decoded).
    BadRequest,
    /// The response cannot be given in a media type the `Accept` header allows.
    NotAcceptable,
    /// The request body did not arrive within the body timeout; the connection is closed.
    RequestTimeout,
    /// Too many failed authentications from the client's address; retry after
    /// `Retry-After` seconds.
    TooManyRequests,
    /// The server holds as many connections as it is configured to; retry after
    /// `Retry-After` seconds.
    TooManyConnections,
}

impl ErrorCode {
    /// HTTP status for this code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden | ErrorCode::TenantMismatch | ErrorCode::SelfApprovalForbidden => {
                403
            }
            ErrorCode::NotFound | ErrorCode::RouteNotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::ValidationFailed | ErrorCode::PolicyDenied => 422,
            ErrorCode::MalformedJson | ErrorCode::BadRequest => 400,
            ErrorCode::NotAcceptable => 406,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::StorageUnavailable | ErrorCode::NotReady | ErrorCode::TooManyConnections => {
                503
            }
            ErrorCode::Internal => 500,
        }
    }

    /// The snake_case wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TenantMismatch => "tenant_mismatch",
            ErrorCode::SelfApprovalForbidden => "self_approval_forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::ValidationFailed => "validation_failed",
            ErrorCode::MalformedJson => "malformed_json",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::PolicyDenied => "policy_denied",
            ErrorCode::StorageUnavailable => "storage_unavailable",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::RouteNotFound => "route_not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Internal => "internal",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::NotAcceptable => "not_acceptable",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::TooManyRequests => "too_many_requests",
            ErrorCode::TooManyConnections => "too_many_connections",
        }
    }

    /// Short human title for problem+json.
    pub fn title(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "authentication required",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TenantMismatch => "tenant does not match the key",
            ErrorCode::SelfApprovalForbidden => "self approval forbidden",
            ErrorCode::NotFound => "not found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::ValidationFailed => "validation failed",
            ErrorCode::MalformedJson => "malformed json",
            ErrorCode::PayloadTooLarge => "payload too large",
            ErrorCode::UnsupportedMediaType => "unsupported media type",
            ErrorCode::PolicyDenied => "denied by write policy",
            ErrorCode::StorageUnavailable => "storage unavailable",
            ErrorCode::NotReady => "not ready",
            ErrorCode::RouteNotFound => "route not found",
            ErrorCode::MethodNotAllowed => "method not allowed",
            ErrorCode::Internal => "internal error",
            ErrorCode::BadRequest => "bad request",
            ErrorCode::NotAcceptable => "not acceptable",
            ErrorCode::RequestTimeout => "request timeout",
            ErrorCode::TooManyRequests => "too many requests",
            ErrorCode::TooManyConnections => "too many connections",
        }
    }
}

/// One field-level validation problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// JSON path of the field, e.g. `retention.expiresAt` or `sourceRefs[2]`.
    pub field: String,
    /// What is wrong, lowercase, no trailing period.
    pub message: String,
}

impl FieldError {
    /// Builds a field error.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A field the input does not have: the message names the ones it has, so the caller
    /// can see what was meant.
    pub fn unknown<S: AsRef<str>>(field: impl Into<String>, known: &[S]) -> Self {
        FieldError::new(field, unknown_message("field", known))
    }

    /// [`FieldError::unknown`] for a query parameter.
    pub fn unknown_parameter<S: AsRef<str>>(name: impl Into<String>, known: &[S]) -> Self {
        FieldError::new(name, unknown_message("parameter", known))
    }
}

fn unknown_message<S: AsRef<str>>(what: &str, known: &[S]) -> String {
    if known.is_empty() {
        return format!("unknown {what} (this takes none)");
    }
    let names: Vec<&str> = known.iter().map(AsRef::as_ref).collect();
    format!("unknown {what} (known {what}s: {})", names.join(", "))
}

/// Input that failed validation, with every field error found (not only the first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} field error(s)", .0.len())]
pub struct Invalid(pub Vec<FieldError>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_statuses_are_http_errors() {
        let all = [
            ErrorCode::Unauthenticated,
            ErrorCode::Forbidden,
            ErrorCode::TenantMismatch,
            ErrorCode::SelfApprovalForbidden,
            ErrorCode::NotFound,
            ErrorCode::Conflict,
            ErrorCode::ValidationFailed,
            ErrorCode::MalformedJson,
            ErrorCode::PayloadTooLarge,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::PolicyDenied,
            ErrorCode::StorageUnavailable,
            ErrorCode::NotReady,
            ErrorCode::RouteNotFound,
            ErrorCode::MethodNotAllowed,
            ErrorCode::Internal,
            ErrorCode::BadRequest,
            ErrorCode::NotAcceptable,
            ErrorCode::RequestTimeout,
            ErrorCode::TooManyRequests,
            ErrorCode::TooManyConnections,
        ];
        for code in all {
            let s = code.as_str();
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            let json = serde_json::to_value(code).expect("serialize");
            assert_eq!(json, serde_json::Value::String(s.to_string()));
            assert!((400..600).contains(&code.status()));
        }
    }

    #[test]
    fn an_unknown_field_names_the_known_ones() {
        let e = FieldError::unknown("colour", &["summary", "actorId"]);
        assert_eq!(e.field, "colour");
        assert_eq!(e.message, "unknown field (known fields: summary, actorId)");
        let none: [&str; 0] = [];
        assert_eq!(
            FieldError::unknown("x", &none).message,
            "unknown field (this takes none)"
        );
        assert_eq!(
            FieldError::unknown_parameter("p", &["limit"]).message,
            "unknown parameter (known parameters: limit)"
        );
    }
}
