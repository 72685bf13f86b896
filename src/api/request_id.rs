//! The request id: one value per request, taken from the client's `X-Request-ID` only when
//! it is safe to log and echo, otherwise generated.
//!
//! Invariants: after [`sanitize`] runs (outermost in the router), the request's
//! `X-Request-ID` header is exactly one value of 1 to [`MAX_LEN`] characters from
//! `A-Z a-z 0-9 . _ : -`; a client value that breaks the rule (too long, empty, any other
//! character, several headers) is dropped and replaced by a fresh UUID, never truncated or
//! escaped into something the client chose. That one value is what the trace span logs,
//! what the response's `X-Request-ID` echoes and what problem bodies carry as `requestId`,
//! so no raw client text reaches a log line through the id.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};

/// The header carrying the id.
pub const HEADER: HeaderName = HeaderName::from_static("x-request-id");
/// Longest client id kept.
pub const MAX_LEN: usize = 128;

/// Whether a client-supplied id is kept as is.
pub fn is_acceptable(id: &[u8]) -> bool {
    (1..=MAX_LEN).contains(&id.len())
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// A fresh id.
fn generate() -> HeaderValue {
    let id = uuid::Uuid::new_v4().to_string();
    HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("-"))
}

/// Middleware (`map_request`): keeps an acceptable client id, otherwise sets a new one.
pub async fn sanitize(mut req: Request) -> Request {
    let mut values = req.headers().get_all(&HEADER).iter();
    let keep = match (values.next(), values.next()) {
        (Some(one), None) => is_acceptable(one.as_bytes()),
        _ => false,
    };
    if !keep {
        req.headers_mut().insert(HEADER, generate());
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_safe_ids_are_kept() {
        assert!(is_acceptable(b"0b4f6a3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"));
        assert!(is_acceptable(b"trace:abc.DEF_1-2"));
        assert!(is_acceptable(&[b'a'; MAX_LEN]));
        assert!(!is_acceptable(&[b'a'; MAX_LEN + 1]));
        assert!(!is_acceptable(b""));
        assert!(!is_acceptable(b"x status=200"));
        assert!(!is_acceptable(b"a\"b"));
        assert!(!is_acceptable(b"a=b"));
        assert!(!is_acceptable("caf\u{e9}".as_bytes()));
    }

    #[tokio::test]
    async fn unsafe_or_repeated_ids_are_replaced_by_a_uuid() {
        let cases: [&[&str]; 4] = [&[], &["x status=200"], &["ok-1", "ok-2"], &["ok-1"]];
        for ids in cases {
            let mut req = Request::new(axum::body::Body::empty());
            for id in ids {
                req.headers_mut()
                    .append(HEADER, HeaderValue::from_str(id).expect("header"));
            }
            let req = sanitize(req).await;
            let got: Vec<_> = req.headers().get_all(&HEADER).iter().collect();
            assert_eq!(got.len(), 1);
            let got = got[0].to_str().expect("ascii");
            if ids == ["ok-1"] {
                assert_eq!(got, "ok-1");
            } else {
                assert!(uuid::Uuid::parse_str(got).is_ok(), "{got}");
            }
        }
    }
}
