//! The operator web page: a static, offline single-page app served at `/ui`.
//!
//! The page lets an operator log in with an API key, see the timeline of a scope as a picture
//! (lanes per actor or project, marks by type, supersession links, stale, pending and removed
//! markers, zoom, pan and clusters), open an event's history, delete an event or erase an
//! actor after a confirmation, run a recall and see why each hit was retrieved, browse the
//! audit trail and decide pending reviews (docs/ui.md). It is plain HTML, CSS and JavaScript embedded in the binary
//! at compile time; there is no build step and nothing is fetched from elsewhere.
//!
//! Invariants:
//! - static assets only: every response here is one of the embedded files (or a
//!   problem+json 404); the server keeps no session, cookie or secret for the page, and
//!   these routes never authenticate or touch the engine;
//! - the page talks only to the public `/v1` API, with the key the operator types, which it
//!   keeps in `sessionStorage` (gone when the tab closes) and sends as `Authorization:
//!   Bearer`; so the page can do exactly what that key can do through the API, no more;
//! - every response carries a strict Content-Security-Policy (`default-src 'self'`, no
//!   inline script or style, no framing), `nosniff` and the asset's exact content type;
//! - the page renders API data (event summaries are untrusted) with `textContent` only.

use axum::extract::Path;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::error::ErrorCode;
use crate::wire::Problem;

/// The Content-Security-Policy of every page response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; font-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// Every file the page is made of; `index.html` is served at `/ui` and `/ui/`.
const ASSETS: [Asset; 4] = [
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("assets/index.html"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/app.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("assets/style.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("assets/favicon.svg"),
    },
];

/// The page's routes: `/ui`, `/ui/` and `/ui/{file}`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/{file}", get(asset))
}

async fn index() -> Response {
    serve("index.html")
}

async fn asset(Path(file): Path<String>) -> Response {
    serve(&file)
}

fn serve(name: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        let mut resp = Problem::new(
            ErrorCode::RouteNotFound,
            "no such file in the operator page",
        )
        .into_response();
        add_security_headers(&mut resp);
        return resp;
    };
    let mut resp = asset.body.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    add_security_headers(&mut resp);
    resp
}

fn add_security_headers(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_served_with_its_type_and_unknown_files_are_404() {
        for a in &ASSETS {
            let resp = serve(a.name);
            assert_eq!(resp.status(), 200, "{}", a.name);
            assert_eq!(resp.headers()[header::CONTENT_TYPE], a.content_type);
            assert_eq!(
                resp.headers()[header::CONTENT_SECURITY_POLICY],
                CONTENT_SECURITY_POLICY
            );
        }
        let missing = serve("../Cargo.toml");
        assert_eq!(missing.status(), 404);
        assert_eq!(
            missing.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
    }
}
