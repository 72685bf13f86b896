//! Cross-origin requests from browsers: the origins allowed to call the API
//! (`--cors-origins`), checked once at start-up, and the layer that answers for them.
//!
//! Invariants: off by default — without configured origins no response carries a CORS
//! header (and `OPTIONS` on a route is answered `204` with `Allow` by the router's
//! method fallback, never `405`); with them, every `OPTIONS` request is a preflight answered
//! here, before authentication, with the allowed methods, and with
//! `Access-Control-Allow-Origin` only for an allowed origin; other responses to an allowed
//! origin carry `Access-Control-Allow-Origin` and expose the request id, `Retry-After` and
//! the MCP session id. Credentials (cookies) are never allowed: keys travel in the
//! `Authorization` header, which a preflight may ask for.

use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::request_id;

/// How long a browser may cache a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The methods the API's routes take.
const METHODS: [Method; 3] = [Method::GET, Method::POST, Method::DELETE];

/// The browser origins allowed to call the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigins {
    /// `*`: any origin.
    Any,
    /// Exactly these origins (`scheme://host[:port]`, lowercase).
    List(Vec<HeaderValue>),
}

impl CorsOrigins {
    /// Parses a comma-separated list of origins (`https://app.example.com,http://localhost:3000`)
    /// or `*`; `Ok(None)` for an empty list (CORS off).
    pub fn parse(list: &str) -> Result<Option<CorsOrigins>, String> {
        let items: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if items.is_empty() {
            return Ok(None);
        }
        if items.contains(&"*") {
            if items.len() > 1 {
                return Err("`*` allows every origin: give it alone".to_string());
            }
            return Ok(Some(CorsOrigins::Any));
        }
        items
            .into_iter()
            .map(origin)
            .collect::<Result<Vec<_>, _>>()
            .map(|origins| Some(CorsOrigins::List(origins)))
    }

    /// The layer answering preflights and marking responses for these origins.
    pub fn layer(&self) -> CorsLayer {
        let allow = match self {
            CorsOrigins::Any => AllowOrigin::any(),
            CorsOrigins::List(origins) => AllowOrigin::list(origins.iter().cloned()),
        };
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods(METHODS)
            // Whatever the preflight asks for (`Authorization`, `Content-Type`, the MCP
            // transport's headers): the origin is what is checked.
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers([
                request_id::HEADER,
                header::RETRY_AFTER,
                header::WWW_AUTHENTICATE,
                HeaderName::from_static("mcp-session-id"),
            ])
            .max_age(PREFLIGHT_MAX_AGE)
    }
}

/// One origin as browsers send it: `http` or `https`, a host, an optional port, nothing
/// after; compared in lowercase.
fn origin(raw: &str) -> Result<HeaderValue, String> {
    let lower = raw.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .ok_or_else(|| {
            format!("{raw:?} is not an origin: it must start with http:// or https://")
        })?;
    let authority_only = !rest.is_empty()
        && !rest.contains(['/', '?', '#', '@'])
        && rest.parse::<axum::http::uri::Authority>().is_ok();
    if !authority_only {
        return Err(format!(
            "{raw:?} is not an origin: scheme://host[:port], without a path"
        ));
    }
    HeaderValue::from_str(&lower).map_err(|_| format!("{raw:?} is not an origin"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_and_bad_ones_are_refused() {
        assert_eq!(CorsOrigins::parse("").expect("empty"), None);
        assert_eq!(CorsOrigins::parse(" , ").expect("blank"), None);
        assert_eq!(
            CorsOrigins::parse("*").expect("any"),
            Some(CorsOrigins::Any)
        );
        assert_eq!(
            CorsOrigins::parse("https://App.example.com, http://localhost:3000").expect("list"),
            Some(CorsOrigins::List(vec![
                HeaderValue::from_static("https://app.example.com"),
                HeaderValue::from_static("http://localhost:3000"),
            ]))
        );
        for bad in [
            "app.example.com",
            "ftp://app.example.com",
            "https://app.example.com/",
            "https://app.example.com/path",
            "https://",
            "https://user@app.example.com",
            "*,https://app.example.com",
        ] {
            assert!(CorsOrigins::parse(bad).is_err(), "{bad}");
        }
    }
}
