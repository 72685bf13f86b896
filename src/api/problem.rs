//! RFC 9457 `application/problem+json` responses for every failure.
//!
//! Invariants: every error response the server sends has this shape, with `code` from the
//! error-code table and the request id when one is known.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::error::Problem;

/// The problem media type.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The JSON body of a problem.
pub fn body(p: &Problem, request_id: Option<&str>) -> Value {
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

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let bytes = serde_json::to_vec(&body(&self, None)).unwrap_or_default();
        let mut resp = (status, bytes).into_response();
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if self.code == crate::error::ErrorCode::Unauthenticated {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}
