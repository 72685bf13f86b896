//! Problems: what a client is told when a request fails, before the HTTP edge frames it as
//! `application/problem+json` (`api::problem`) or MCP makes a tool error of it.
//!
//! Invariants: every engine, authorization and validation failure becomes a problem here
//! and nowhere else, with the code its type names and the detail its `Display` gives; a
//! problem's body is built by [`problem_body`] alone, so it reads the same on every edge.

use serde_json::{json, Value};

use crate::auth::AuthError;
use crate::engine::Error;
use crate::error::{ErrorCode, FieldError, Invalid};

/// A client-visible failure: a code, a detail message and optional extras.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The stable code.
    pub code: ErrorCode,
    /// Human-readable detail.
    pub detail: String,
    /// Field errors (validation only).
    pub errors: Vec<FieldError>,
    /// Extra members merged into the problem body (e.g. the policy `decision`).
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
    /// Seconds the client should wait before retrying (sent as `Retry-After`).
    pub retry_after_secs: Option<u64>,
}

impl Problem {
    /// A problem with a code and detail.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Problem {
            code,
            detail: detail.into(),
            errors: Vec::new(),
            extra: None,
            retry_after_secs: None,
        }
    }

    /// A `validation_failed` problem listing every field error; the detail spells out the
    /// first [`DETAIL_FIELD_ERRORS`] of them, so a client that shows only the detail still
    /// learns what to fix.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = validation_detail(&errors);
        Problem {
            code: ErrorCode::ValidationFailed,
            detail,
            errors,
            extra: None,
            retry_after_secs: None,
        }
    }

    /// A `not_found` problem for an event id (same text whether foreign or absent).
    pub fn event_not_found(event_id: &str) -> Self {
        Problem::from(Error::NotFound(event_id.to_string()))
    }

    /// Asks the client to wait `secs` seconds before retrying (`Retry-After`).
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// Adds one extra member to the body.
    pub fn with_extra(mut self, key: &str, value: serde_json::Value) -> Self {
        self.extra
            .get_or_insert_with(serde_json::Map::new)
            .insert(key.to_string(), value);
        self
    }
}

/// Most field errors a validation problem's detail spells out; `errors` lists them all.
pub const DETAIL_FIELD_ERRORS: usize = 8;

/// `N field error(s): field: message; ...`, the first [`DETAIL_FIELD_ERRORS`] of them.
fn validation_detail(errors: &[FieldError]) -> String {
    let shown: Vec<String> = errors
        .iter()
        .take(DETAIL_FIELD_ERRORS)
        .map(|e| match e.field.as_str() {
            "" => e.message.clone(),
            field => format!("{field}: {}", e.message),
        })
        .collect();
    let mut detail = format!("{} field error(s)", errors.len());
    if !shown.is_empty() {
        detail.push_str(": ");
        detail.push_str(&shown.join("; "));
    }
    if errors.len() > DETAIL_FIELD_ERRORS {
        detail.push_str(&format!(
            "; {} more in errors",
            errors.len() - DETAIL_FIELD_ERRORS
        ));
    }
    detail
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.detail)
    }
}

impl std::error::Error for Problem {}

impl From<Invalid> for Problem {
    fn from(invalid: Invalid) -> Self {
        Problem::validation(invalid.0)
    }
}

/// Seconds a client is told to wait before retrying a request for a tenant being moved.
const MOVING_RETRY_AFTER_SECS: u64 = 1;

impl From<Error> for Problem {
    fn from(e: Error) -> Self {
        let code = e.code();
        match e {
            Error::Invalid(invalid) => invalid.into(),
            Error::Denied { ref decision, .. } => {
                let decision = serde_json::to_value(decision).unwrap_or(Value::Null);
                Problem::new(code, e.to_string()).with_extra("decision", decision)
            }
            Error::MissingRole(ref role) => missing_role(role),
            Error::ErasureNeedsSensitive => Problem::new(code, e.to_string())
                .with_extra("missingGrant", json!({"maxPrivacyClass": "sensitive"})),
            Error::Moving(_) => {
                Problem::new(code, e.to_string()).with_retry_after(MOVING_RETRY_AFTER_SECS)
            }
            other => Problem::new(code, other.to_string()),
        }
    }
}

impl From<AuthError> for Problem {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::MissingRole(ref role) => missing_role(role),
            other => Problem::new(other.code(), other.to_string()),
        }
    }
}

/// 403 naming the role the key lacks (`missingRole`), from authorization or a review, and
/// what to do about it: a key's roles are fixed when it is made.
fn missing_role(role: &str) -> Problem {
    Problem::new(
        ErrorCode::Forbidden,
        format!(
            "missing role: {role}; this key does not hold it, so use a key made with the {role} \
             role (roles are given when a key is created)"
        ),
    )
    .with_extra("missingRole", Value::String(role.to_string()))
}

/// The JSON body of a problem.
pub fn problem_body(p: &Problem, request_id: Option<&str>) -> Value {
    let mut v = json!({
        "type": format!("urn:episodic:problem:{}", p.code.as_str()),
        "title": p.code.title(),
        "status": p.code.status(),
        "detail": p.detail,
        "code": p.code.as_str(),
    });
    if let Some(obj) = v.as_object_mut() {
        if !p.errors.is_empty() {
            obj.insert("errors".into(), json!(p.errors));
        }
        if let Some(rid) = request_id {
            obj.insert("requestId".into(), Value::String(rid.to_string()));
        }
        if let Some(extra) = &p.extra {
            for (k, val) in extra {
                obj.insert(k.clone(), val.clone());
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Conflict;
    use crate::model::Decision;

    #[test]
    fn engine_errors_keep_their_codes_details_and_members() {
        let denied = Error::Denied {
            policy_version: "v3".into(),
            decision: Decision::Deny {
                reason: "sensitive_without_expiry".into(),
            },
        };
        let p = Problem::from(denied);
        assert_eq!(p.code, ErrorCode::PolicyDenied);
        assert_eq!(
            p.detail,
            "write policy v3 denied the event: sensitive_without_expiry"
        );
        let extra = p.extra.expect("decision");
        assert_eq!(extra["decision"]["decision"], "deny");

        let p = Problem::from(Error::MissingRole("memory_reviewer".into()));
        assert_eq!(p.code, ErrorCode::Forbidden);
        assert!(
            p.detail.starts_with("missing role: memory_reviewer; ")
                && p.detail
                    .contains("use a key made with the memory_reviewer role"),
            "{}",
            p.detail
        );
        assert_eq!(p.extra.expect("role")["missingRole"], "memory_reviewer");

        let p = Problem::from(Error::ErasureNeedsSensitive);
        assert_eq!(p.code, ErrorCode::Forbidden);
        assert_eq!(
            p.extra.expect("grant")["missingGrant"]["maxPrivacyClass"],
            "sensitive"
        );

        let invalid = Invalid(vec![FieldError::new("summary", "must not be empty")]);
        let p = Problem::from(Error::from(invalid));
        assert_eq!(
            (p.code, p.detail.as_str()),
            (
                ErrorCode::ValidationFailed,
                "1 field error(s): summary: must not be empty"
            )
        );
        assert_eq!(p.errors.len(), 1);

        let cases = [
            (
                Error::NotFound("e1".into()),
                ErrorCode::NotFound,
                "event e1 not found: no event with this id is visible to this key (recall and \
                 the timeline give the ids it can see)",
            ),
            (
                Error::Conflict(Conflict::TargetInactive(None)),
                ErrorCode::Conflict,
                "an event it corrects is no longer active; the correction cannot be approved",
            ),
            (
                Error::Conflict(Conflict::Exists("e2".into())),
                ErrorCode::Conflict,
                "event e2 already exists with different content; give the new event another \
                 eventId, or omit eventId and the server makes one",
            ),
            (
                Error::SelfApproval,
                ErrorCode::SelfApprovalForbidden,
                "the key that wrote an event cannot approve or reject it",
            ),
            (
                Error::WriterStopped,
                ErrorCode::StorageUnavailable,
                "the writer has stopped",
            ),
            (
                Error::BadVector { dim: 384 },
                ErrorCode::ValidationFailed,
                "a precomputed vector must have 384 finite components, not all zero",
            ),
        ];
        for (e, code, detail) in cases {
            let p = Problem::from(e);
            assert_eq!((p.code, p.detail.as_str()), (code, detail));
            assert!(p.errors.is_empty() && p.extra.is_none());
        }
    }

    #[test]
    fn a_validation_detail_spells_out_the_first_field_errors() {
        let p = Problem::validation(vec![
            FieldError::new("", "body must be a JSON object"),
            FieldError::unknown("colour", &["summary"]),
        ]);
        assert_eq!(
            p.detail,
            "2 field error(s): body must be a JSON object; colour: unknown field (known \
             fields: summary)"
        );
        let many: Vec<FieldError> = (0..DETAIL_FIELD_ERRORS + 3)
            .map(|i| FieldError::new(format!("f{i}"), "is required"))
            .collect();
        let p = Problem::validation(many);
        assert!(p.detail.ends_with("; 3 more in errors"), "{}", p.detail);
        assert_eq!(p.errors.len(), DETAIL_FIELD_ERRORS + 3);
        let body = problem_body(&p, None);
        assert_eq!(body["detail"], p.detail.as_str());
    }

    #[test]
    fn authorization_errors_keep_their_codes_and_members() {
        let p = Problem::from(AuthError::Unauthenticated);
        assert_eq!(p.code, ErrorCode::Unauthenticated);
        assert!(
            p.detail.starts_with("unknown or revoked API key; ")
                && p.detail.contains("episodic keys create"),
            "{}",
            p.detail
        );
        let p = Problem::from(AuthError::MissingRole("admin".into()));
        assert_eq!(p.extra.expect("role")["missingRole"], "admin");
        assert_eq!(
            Problem::from(AuthError::NotTenantBound).code,
            ErrorCode::Forbidden
        );
    }
}
