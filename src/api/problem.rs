//! RFC 9457 `application/problem+json` responses for every failure.
//!
//! Invariants: every error response the router sends has this shape, with `code` from the
//! error-code table and the request id when one is known. [`errors_as_problems`] wraps the
//! whole router, so an error produced outside our handlers (an extractor rejection such as
//! a path that is not UTF-8 once decoded, or the MCP transport's own 406 and 415) is
//! rewritten into a problem with the same status; a request whose body missed the body
//! timeout is answered `request_timeout` (408) and its connection closed, whatever the
//! handler made of the failed read. The body `status` always equals the HTTP status.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::listener::BodyDeadline;
use crate::error::ErrorCode;
use crate::wire::Problem;

/// The problem media type.
pub const PROBLEM_JSON: &str = "application/problem+json";
/// Error bodies longer than this are not read for a detail when rewritten.
const MAX_FOREIGN_BODY: usize = 16 * 1024;
/// A detail taken from a foreign error body is cut to this many characters.
const MAX_FOREIGN_DETAIL: usize = 200;
/// Response headers kept when a foreign error response is rewritten.
const KEPT_HEADERS: [header::HeaderName; 4] = [
    header::ALLOW,
    header::RETRY_AFTER,
    header::WWW_AUTHENTICATE,
    header::CONNECTION,
];

pub use crate::wire::problem_body as body;

/// The response for `p` with an explicit HTTP status (the body's `status` follows it).
pub fn response_with_status(p: &Problem, status: StatusCode) -> Response {
    let mut value = body(p, None);
    if let Some(obj) = value.as_object_mut() {
        obj.insert("status".into(), json!(status.as_u16()));
    }
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    let mut resp = (status, bytes).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    if p.code == ErrorCode::Unauthenticated {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if let Some(secs) = p.retry_after_secs {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    // For the log line of the response (`ops::LogResponse`).
    resp.extensions_mut().insert(p.code);
    resp
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        response_with_status(&self, status)
    }
}

/// Whether a response already is a problem.
pub(crate) fn is_problem(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == PROBLEM_JSON.as_bytes())
}

/// Middleware around the whole router: error responses that are not problem+json become
/// problems with the same status, and a request whose body missed its deadline is answered
/// 408 `request_timeout` with `Connection: close`.
pub async fn errors_as_problems(req: Request, next: Next) -> Response {
    let deadline = req.extensions().get::<BodyDeadline>().cloned();
    let resp = next.run(req).await;
    if let Some(deadline) = deadline.filter(BodyDeadline::missed) {
        return body_timeout_response(&deadline);
    }
    if resp.status().as_u16() < 400 || is_problem(&resp) {
        return resp;
    }
    rewrite(resp).await
}

fn body_timeout_response(deadline: &BodyDeadline) -> Response {
    let problem = Problem::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body did not arrive within {} ms",
            deadline.timeout().as_millis()
        ),
    );
    let mut resp = problem.into_response();
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// The code a foreign error status maps to; statuses without a code of their own keep their
/// status under `bad_request` (4xx) or `internal` (5xx).
fn code_for(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        401 => ErrorCode::Unauthenticated,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::RouteNotFound,
        405 => ErrorCode::MethodNotAllowed,
        406 => ErrorCode::NotAcceptable,
        408 => ErrorCode::RequestTimeout,
        409 => ErrorCode::Conflict,
        413 => ErrorCode::PayloadTooLarge,
        415 => ErrorCode::UnsupportedMediaType,
        422 => ErrorCode::ValidationFailed,
        429 => ErrorCode::TooManyRequests,
        s if s < 500 => ErrorCode::BadRequest,
        _ => ErrorCode::Internal,
    }
}

async fn rewrite(resp: Response) -> Response {
    let status = resp.status();
    let code = code_for(status);
    let (parts, body) = resp.into_parts();
    let detail = axum::body::to_bytes(body, MAX_FOREIGN_BODY)
        .await
        .ok()
        .and_then(|bytes| foreign_detail(&bytes))
        .unwrap_or_else(|| code.title().to_string());
    let mut out = response_with_status(&Problem::new(code, detail), status);
    for name in KEPT_HEADERS {
        if let Some(value) = parts.headers.get(&name) {
            out.headers_mut().insert(name, value.clone());
        }
    }
    out
}

/// The first line of a short text error body, cut to [`MAX_FOREIGN_DETAIL`] characters.
fn foreign_detail(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(MAX_FOREIGN_DETAIL).collect())
}

/// A problem response built outside the router (the listener's own answers), with its
/// request id in the body.
pub(crate) fn standalone(p: &Problem, request_id: &str) -> (StatusCode, Vec<u8>) {
    let status = StatusCode::from_u16(p.code.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let bytes = serde_json::to_vec(&body(p, Some(request_id))).unwrap_or_default();
    (status, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_statuses_map_to_codes_with_their_status() {
        assert_eq!(
            code_for(StatusCode::NOT_ACCEPTABLE),
            ErrorCode::NotAcceptable
        );
        assert_eq!(
            code_for(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            ErrorCode::UnsupportedMediaType
        );
        assert_eq!(code_for(StatusCode::BAD_REQUEST), ErrorCode::BadRequest);
        assert_eq!(code_for(StatusCode::IM_A_TEAPOT), ErrorCode::BadRequest);
        assert_eq!(code_for(StatusCode::BAD_GATEWAY), ErrorCode::Internal);
        let resp = response_with_status(
            &Problem::new(ErrorCode::BadRequest, "x"),
            StatusCode::IM_A_TEAPOT,
        );
        assert_eq!(resp.status(), StatusCode::IM_A_TEAPOT);
        assert!(is_problem(&resp));
    }

    #[test]
    fn foreign_details_are_one_short_line() {
        assert_eq!(
            foreign_detail(b"\n  Not Acceptable: use json \nmore").as_deref(),
            Some("Not Acceptable: use json")
        );
        assert_eq!(foreign_detail(&[0xff, 0xfe]), None);
        assert_eq!(foreign_detail(b"  \n"), None);
        let long = "x".repeat(1000);
        assert_eq!(
            foreign_detail(long.as_bytes()).map(|d| d.len()),
            Some(MAX_FOREIGN_DETAIL)
        );
    }
}
