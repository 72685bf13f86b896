//! The operator page at `/ui`: its assets and headers in-process, then the real `episodic
//! serve` binary driven by Debian's headless chromium over WebDriver (chromedriver): the
//! login page (no store counts), the timeline picture (lanes, marks by type, the supersession
//! link, stale, pending, deleted, erased and expired markers, zoom and pan, clusters, a click
//! to the event's history), delete and erasure confirmed in a dialog with their receipts,
//! recall's bars scaled to the best hit with idle signals folded, approving a pending review,
//! the audit trail; and the timeline of 10,000 events. Screenshots of the timeline at 10 and
//! at 10,000 events are saved to `docs/images/` with `EPISODIC_UPDATE_SCREENSHOTS=1` (else
//! under the target directory).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common::{event, model_dir, with, App, BREAKDOWN_PARTS};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(60);

async fn get_raw(app: &App, path: &str) -> (u16, axum::http::HeaderMap, Vec<u8>) {
    let req = Request::builder()
        .uri(path)
        .body(Body::empty())
        .expect("request");
    let resp = app.router.clone().oneshot(req).await.expect("response");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, headers, bytes.to_vec())
}

#[tokio::test]
async fn ui_assets_have_their_types_a_strict_csp_and_no_inline_script() {
    let app = App::new();
    let cases = [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/index.html", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ];
    for (path, ct) in cases {
        let (status, headers, body) = get_raw(&app, path).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(headers["content-type"], ct, "{path}");
        let csp = headers["content-security-policy"].to_str().expect("csp");
        assert!(csp.starts_with("default-src 'self'"), "{path}: {csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(!body.is_empty());
    }
    let (_, _, html) = get_raw(&app, "/ui").await;
    let html = String::from_utf8(html).expect("utf-8");
    for (i, _) in html.match_indices("<script") {
        let tag = &html[i..i + html[i..].find('>').expect("tag end")];
        assert!(tag.contains(" src=\"/ui/"), "inline script: {tag}");
    }
    assert!(!html.contains("<style"), "inline style element");
    assert!(!html.contains(" style="), "inline style attribute");
    assert!(
        !regex::Regex::new(r"\son[a-z]+=")
            .expect("re")
            .is_match(&html),
        "inline event handler"
    );
    assert!(!html.contains("http://") && !html.contains("https://"));
    let (_, _, js) = get_raw(&app, "/ui/app.js").await;
    let js = String::from_utf8(js).expect("utf-8");
    for banned in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "eval(",
        "localStorage",
    ] {
        assert!(!js.contains(banned), "app.js uses {banned}");
    }
    assert!(js.contains("sessionStorage"));

    let (status, headers, body) = get_raw(&app, "/ui/../Cargo.toml").await;
    assert_eq!(status, 404);
    assert_eq!(headers["content-type"], "application/problem+json");
    let problem: Value = serde_json::from_slice(&body).expect("problem json");
    assert_eq!(problem["code"], "route_not_found");
    let (status, headers, _) = get_raw(&app, "/ui/secrets.json").await;
    assert_eq!(status, 404);
    assert_eq!(headers["content-type"], "application/problem+json");
    // The page needs no key; the API behind it still does.
    let (status, _, _) = get_raw(&app, "/v1/timeline").await;
    assert_eq!(status, 401);
}

// ---------- real server ----------

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A child process killed (by its own pid) when dropped, also on a failed assertion.
struct Proc(Option<Child>);

impl Proc {
    fn stop_gracefully(mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(status.success(), "graceful exit: {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        panic!("server did not stop on SIGTERM");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_http_ok(client: &reqwest::blocking::Client, url: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(url).send() {
            if r.status().is_success() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} not ready in time at {url}");
}

struct Server {
    base: String,
    admin: String,
    client: reqwest::blocking::Client,
    proc: Proc,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let port = free_port();
        // Expired events are swept (and audited) every second, so the page can mark them.
        let log = File::create(dir.join("server.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_episodic"))
            .arg("serve")
            .env("EPISODIC_DATA_DIR", dir.join("data"))
            .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
            .env("EPISODIC_MODEL_DIR", model_dir())
            .env("EPISODIC_SWEEP_INTERVAL_SECS", "1")
            .env_remove("EPISODIC_ADMIN_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn episodic");
        let proc = Proc(Some(child));
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        wait_http_ok(&client, &format!("{base}/readyz"), "episodic");
        let admin = std::fs::read_to_string(dir.join("data").join("admin.key"))
            .expect("admin.key written by serve")
            .trim()
            .to_string();
        Server {
            base,
            admin,
            client,
            proc,
        }
    }

    fn call(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn key(&self, roles: &[&str]) -> String {
        self.key_body(json!({"tenantId": "acme", "roles": roles}))
    }

    /// A key that sees every privacy class (erasure needs one).
    fn key_sensitive(&self, roles: &[&str]) -> String {
        self.key_body(json!({"tenantId": "acme", "roles": roles, "maxPrivacyClass": "sensitive"}))
    }

    fn key_body(&self, body: Value) -> String {
        let (status, body) = self.call("POST", "/v1/admin/keys", &self.admin, Some(body));
        assert_eq!(status, 201, "{body}");
        body["key"].as_str().expect("key").to_string()
    }

    fn write(&self, key: &str, ev: Value) -> (u16, String) {
        let (status, body) = self.call("POST", "/v1/events?refresh=wait_for", key, Some(ev));
        assert!(status == 201 || status == 202, "{status} {body}");
        (status, body["eventId"].as_str().expect("id").to_string())
    }
}

// ---------- a minimal W3C WebDriver client over reqwest ----------

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Browser {
    http: reqwest::blocking::Client,
    url: String,
    _profile: tempfile::TempDir,
    driver: Proc,
}

impl Browser {
    fn start() -> Browser {
        for (path, what) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromedriver")] {
            assert!(
                Path::new(path).exists(),
                "{what} is missing at {path}: the operator page test needs Debian's headless \
                 chromium; install it with `apt-get install -y chromium chromium-driver` \
                 (.ci/run does this)"
            );
        }
        let port = free_port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let driver = Proc(Some(child));
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client");
        let base = format!("http://127.0.0.1:{port}");
        wait_http_ok(&http, &format!("{base}/status"), "chromedriver");
        let profile = tempfile::tempdir().expect("profile dir");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1366,1400",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let resp: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .expect("new session")
            .json()
            .expect("session json");
        let session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromium did not start: {resp}"))
            .to_string();
        Browser {
            http,
            url: format!("{base}/session/{session}"),
            _profile: profile,
            driver,
        }
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.url);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let resp: Value = req.send().expect("webdriver").json().expect("json");
        if resp["value"].get("error").is_some() {
            panic!("webdriver {method} {path}: {}", resp["value"]);
        }
        resp["value"].clone()
    }

    /// Performs W3C input actions (wheel, pointer) and releases them.
    fn actions(&self, actions: &Value) {
        self.cmd("POST", "/actions", Some(json!({ "actions": actions })));
        self.cmd("DELETE", "/actions", None);
    }

    fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    fn js(&self, script: &str, args: &Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Polls `script` (a function body returning a value) until it returns something truthy.
    fn wait(&self, what: &str, script: &str, args: &Value) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let v = self.js(script, args);
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                let body = self.js("return document.body.innerText", &json!([]));
                panic!("timed out waiting for {what}; page text:\n{body}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let resp: Value = self
                .http
                .post(format!("{}/element", self.url))
                .json(&json!({"using": "css selector", "value": css}))
                .send()
                .expect("find")
                .json()
                .expect("json");
            if let Some(id) = resp["value"][ELEMENT].as_str() {
                return id.to_string();
            }
            if Instant::now() > deadline {
                panic!("no element {css}: {}", resp["value"]);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn click(&self, css: &str) {
        let el = self.find(css);
        self.cmd("POST", &format!("/element/{el}/click"), None);
    }

    fn type_into(&self, css: &str, text: &str) {
        let el = self.find(css);
        self.cmd("POST", &format!("/element/{el}/clear"), None);
        self.cmd(
            "POST",
            &format!("/element/{el}/value"),
            Some(json!({ "text": text })),
        );
    }

    fn text(&self, css: &str) -> String {
        let el = self.find(css);
        self.cmd("GET", &format!("/element/{el}/text"), None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until the detail panel shows `id` with at least `min` history entries, and
    /// returns their texts.
    fn history(&self, id: &str, min: usize) -> Vec<String> {
        self.wait(
            "the event history",
            "return document.getElementById('detail-id').textContent === arguments[0]
                && document.getElementById('detail-note').textContent !== 'loading…'
                && document.querySelectorAll('#detail-history li.h').length >= arguments[1]",
            &json!([id, min]),
        );
        self.js(
            "return [...document.querySelectorAll('#detail-history li.h')].map(h => h.textContent)",
            &json!([]),
        )
        .as_array()
        .expect("history")
        .iter()
        .map(|h| h.as_str().expect("text").to_string())
        .collect()
    }

    fn screenshot(&self, path: &Path) -> Vec<u8> {
        self.save_png(&self.cmd("GET", "/screenshot", None), path)
    }

    /// A screenshot of one element (scrolled into view).
    fn element_screenshot(&self, css: &str, path: &Path) -> Vec<u8> {
        let el = self.find(css);
        self.save_png(
            &self.cmd("GET", &format!("/element/{el}/screenshot"), None),
            path,
        )
    }

    fn save_png(&self, b64: &Value, path: &Path) -> Vec<u8> {
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64"))
            .expect("decode");
        std::fs::write(path, &png).expect("write screenshot");
        png
    }

    /// Browser console entries (CSP violations and script errors land here).
    fn console(&self) -> Vec<Value> {
        self.cmd("POST", "/se/log", Some(json!({"type": "browser"})))
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.http.delete(&self.url).send();
        let _ = self.driver.0.take().map(|mut c| {
            let _ = c.kill();
            c.wait()
        });
    }
}

fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "screenshot is not a PNG"
    );
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

fn screenshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// Whether the removals lane marks event `arguments[1]` as removed by `arguments[0]`
/// (`deleted`, `erased`, `expired`): as a single mark, or within a cluster of removals (those
/// removed within a few pixels of each other, such as an erasure's).
const REMOVED_HAS: &str = "const [kind, id] = arguments;
    return !![...document.querySelectorAll(`#tl-svg g.mark.removed.${kind}`)].find(g => g.dataset.eventId === id)
        || !![...document.querySelectorAll(`#tl-svg g.cluster.removals.${kind}`)].find(g => g.dataset.eventIds.split(' ').includes(id))";

/// Where the timeline's screenshots go: `docs/images/` (the README's pictures) when
/// `EPISODIC_UPDATE_SCREENSHOTS=1`, else the target directory, so that a test run leaves the
/// tracked pictures alone.
fn docs_images() -> PathBuf {
    let dir = if std::env::var_os("EPISODIC_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join("images")
    } else {
        screenshot_dir().join("timeline")
    };
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir
}

/// `days` before now, to the second, as RFC 3339.
fn ago(days: f64) -> String {
    let now = episodic::model::Timestamp::now().unix_millis() / 1000 * 1000;
    let ms = now - (days * 86_400_000.0) as i64;
    episodic::model::Timestamp::from_unix_millis(ms)
        .expect("time")
        .to_rfc3339()
}

fn unix_ms(ts: &str) -> i64 {
    episodic::model::Timestamp::parse(ts)
        .expect("timestamp")
        .unix_millis()
}

/// An event of `actor` in `project` about `resource`.
fn ev(actor: &str, summary: &str, at: &str, project: &str, resource: &str) -> Value {
    let e = with(event(actor, summary, at), "projectId", json!(project));
    with(e, "resourceRefs", json!([resource]))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

impl Browser {
    /// The timeline's view span in milliseconds, once it has been drawn.
    fn span_ms(&self) -> f64 {
        self.js(
            "return Number(document.getElementById('tl-svg').dataset.spanMs)",
            &json!([]),
        )
        .as_f64()
        .expect("span")
    }

    fn view_t0(&self) -> i64 {
        unix_ms(
            self.js(
                "return document.getElementById('tl-svg').dataset.t0",
                &json!([]),
            )
            .as_str()
            .expect("t0"),
        )
    }

    /// Waits until the timeline's span differs from `before`, and returns it.
    fn span_changed_from(&self, before: f64) -> f64 {
        self.wait(
            "the timeline to redraw",
            "return Number(document.getElementById('tl-svg').dataset.spanMs) !== arguments[0]",
            &json!([before]),
        );
        self.span_ms()
    }

    /// The ids of the marks drawn for single events (not removals) in the timeline.
    fn event_marks(&self) -> Vec<String> {
        let v = self.js(
            "return [...document.querySelectorAll('#tl-svg g.mark:not(.removed)')].map(g => g.dataset.eventId)",
            &json!([]),
        );
        let mut ids = strs(&v);
        ids.sort();
        ids
    }

    fn detail_hidden(&self) -> bool {
        self.js(
            "return document.getElementById('detail').hidden",
            &json!([]),
        ) == json!(true)
    }

    fn detail_actions_hidden(&self) -> bool {
        self.js(
            "return document.getElementById('detail-actions').hidden",
            &json!([]),
        ) == json!(true)
    }

    fn has(&self, css: &str) -> bool {
        self.js(
            "return !!document.querySelector(arguments[0])",
            &json!([css]),
        ) == json!(true)
    }

    /// Waits for the dialog to show text containing `what`, and returns its text.
    fn dialog_text(&self, what: &str) -> String {
        self.wait(
            "the dialog",
            "const d = document.getElementById('confirm-dialog');
             return d.open && d.textContent.includes(arguments[0])",
            &json!([what]),
        );
        self.text("#confirm-dialog")
    }
}

#[test]
fn ui_drives_the_real_server_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = Server::start(dir.path());
    let writer = server.key(&["writer", "reader"]);
    let operator = server.key_sensitive(&["reader", "memory_reviewer", "operator"]);

    // The unauthenticated readiness route says nothing about what is stored.
    let ready: Value = server
        .client
        .get(format!("{}/readyz", server.base))
        .send()
        .expect("readyz")
        .json()
        .expect("json");
    let mut fields: Vec<&String> = ready.as_object().expect("object").keys().collect();
    fields.sort();
    assert_eq!(fields, ["indexes", "status"], "{ready}");

    // Ten events over two months in three actor lanes and two projects, and one pending.
    let (_, email) = server.write(
        &writer,
        ev(
            "customer-42",
            "The customer asked for renewal notices by email, not by phone",
            &ago(60.0),
            "billing",
            "renewal-notices",
        ),
    );
    let (_, invoice) = server.write(
        &writer,
        ev(
            "customer-42",
            "Invoices must be sent as PDF to the finance mailbox",
            &ago(45.0),
            "billing",
            "invoices",
        ),
    );
    let (_, calls_old) = server.write(
        &writer,
        ev(
            "customer-7",
            "Prefers phone calls in the morning",
            &ago(40.0),
            "support",
            "phone-calls",
        ),
    );
    let (_, tz) = server.write(
        &writer,
        ev(
            "customer-7",
            "Prefers meetings after 2pm <b>Berlin</b> time",
            &ago(30.0),
            "support",
            "meetings",
        ),
    );
    let erasable = |kind: &str, summary: &str, days: f64, deletable: bool| {
        let mut e = ev("customer-99", summary, &ago(days), "support", kind);
        e["eventType"] = json!(kind);
        e["retention"] = json!({ "deleteOnRequest": deletable });
        server.write(&writer, e).1
    };
    let login_failed = erasable(
        "incident_or_failure",
        "Login failed three times",
        25.0,
        true,
    );
    let reset = erasable(
        "tool_observed_event",
        "Password reset link sent",
        24.0,
        true,
    );
    let refund = erasable(
        "human_approval",
        "Refund approved by a manager",
        15.0,
        false,
    );
    let (status, pending) = server.write(
        &writer,
        with(
            ev(
                "customer-42",
                "Vendor PDF says payment terms are net-30 <script>alert(1)</script>",
                &ago(20.0),
                "billing",
                "payment-terms",
            ),
            "sourceTrust",
            json!("untrusted_content"),
        ),
    );
    assert_eq!(status, 202, "untrusted content goes to review");
    let mut fix = ev(
        "customer-42",
        "Invoices go to the new finance portal, not the mailbox",
        &ago(10.0),
        "billing",
        "invoices",
    );
    fix["eventType"] = json!("correction_received");
    fix["supersedesEventIds"] = json!([invoice]);
    let (status, fix) = server.write(&writer, fix);
    assert_eq!(status, 201);
    let (_, calls_new) = server.write(
        &writer,
        ev(
            "customer-7",
            "Now prefers phone calls after lunch",
            &ago(5.0),
            "support",
            "phone-calls",
        ),
    );
    let mut done = ev(
        "customer-7",
        "Onboarding call completed",
        &ago(2.0),
        "support",
        "onboarding",
    );
    done["eventType"] = json!("task_milestone");
    let (_, onboarding) = server.write(&writer, done);
    // One event that expires in a few seconds; the sweep deletes and audits it.
    let expires_at = episodic::model::Timestamp::now()
        .plus_millis(4000)
        .to_rfc3339();
    let (_, expiring) = server.write(
        &writer,
        with(
            ev(
                "customer-42",
                "Temporary access granted for the audit",
                &ago(3.0),
                "billing",
                "access",
            ),
            "retention",
            json!({"deleteOnRequest": true, "expiresAt": expires_at}),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, page) = server.call("GET", "/v1/audit?action=expired", &operator, None);
        let ids: Vec<Value> = page["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .flat_map(|e| e["eventIds"].as_array().cloned().unwrap_or_default())
            .collect();
        if ids.contains(&json!(expiring)) {
            break;
        }
        assert!(Instant::now() < deadline, "the expired event was not swept");
        std::thread::sleep(Duration::from_millis(200));
    }
    let listed = |key: &str| -> Vec<String> {
        let page = crate::common::all_pages(
            &server.client,
            &format!("{}/v1/timeline?includeSuperseded=true", server.base),
            key,
            "events",
            500,
        );
        let mut ids: Vec<String> = page
            .iter()
            .map(|e| e["eventId"].as_str().expect("id").to_string())
            .collect();
        ids.sort();
        ids
    };
    let timeline_ids = listed(&operator);
    assert_eq!(timeline_ids.len(), 10);

    let browser = Browser::start();
    let ui = format!("{}/ui", server.base);
    browser.goto(&ui);
    browser.find("#login-form");
    assert_eq!(
        browser.js("return document.title", &json!([])),
        "Episodic operator"
    );
    // The login page shows whether the server is ready, never how much it stores.
    browser.wait(
        "the server status",
        "return document.getElementById('server-status').textContent === 'server ready'",
        &json!([]),
    );
    let page_text = browser
        .js("return document.body.innerText", &json!([]))
        .as_str()
        .expect("text")
        .to_string();
    assert!(
        !regex::Regex::new(r"\d+\s*events?\b")
            .expect("re")
            .is_match(&page_text)
            && !page_text.contains("undefined"),
        "{page_text}"
    );

    // A wrong key: the problem+json is shown (code, detail and request id), not logged in.
    browser.type_into("#api-key", "not-a-real-key");
    browser.click("#login-form button[type=submit]");
    browser.wait(
        "the login problem",
        "return !document.getElementById('login-problem').hidden",
        &json!([]),
    );
    let problem = browser.text("#login-problem");
    assert!(problem.contains("unauthenticated"), "{problem}");
    assert!(problem.contains("request id"), "{problem}");
    assert_eq!(
        browser.js(
            "return sessionStorage.getItem('episodic.apiKey')",
            &json!([])
        ),
        Value::Null
    );

    // Log in: the timeline is drawn, one lane per actor and a lane of removals.
    browser.type_into("#api-key", &operator);
    browser.click("#login-form button[type=submit]");
    browser.wait(
        "the timeline marks",
        "return document.querySelectorAll('#tl-svg g.mark').length === 12",
        &json!([]),
    );
    assert_eq!(
        browser.js(
            "return sessionStorage.getItem('episodic.apiKey')",
            &json!([])
        ),
        json!(operator)
    );
    let lanes = browser.js(
        "return [...document.querySelectorAll('#tl-svg g.lane')].map(l => [l.dataset.lane, Number(l.dataset.count)])",
        &json!([]),
    );
    assert_eq!(
        lanes,
        json!([
            ["customer-42", 4],
            ["customer-7", 4],
            ["customer-99", 3],
            ["", 1]
        ]),
        "actor lanes (the pending event in its actor's), then the removals"
    );
    let mut with_pending = timeline_ids.clone();
    with_pending.push(pending.clone());
    with_pending.sort();
    assert_eq!(browser.event_marks(), with_pending, "one mark per event");
    assert!(browser
        .text("#timeline-info")
        .contains("11 event(s) in 3 actor lane(s)"));
    // Marks are coloured by type, and ordered by occurredAt along their lane.
    let fills = browser.js(
        "const f = id => document.querySelector(`#tl-svg g.mark[data-event-id='${id}'] .glyph`).getAttribute('fill');
         return [f(arguments[0]), f(arguments[1]), f(arguments[2])]",
        &json!([email, invoice, fix]),
    );
    assert_eq!(fills[0], fills[1], "same type, same colour");
    assert_ne!(fills[0], fills[2], "a correction has its own colour");
    let xs = browser.js(
        "return arguments[0].map(id => {
            const b = document.querySelector(`#tl-svg g.mark[data-event-id='${id}']`).getBoundingClientRect();
            return b.left + b.width / 2; })",
        &json!([[email, invoice, pending, fix]]),
    );
    let xs: Vec<f64> = xs
        .as_array()
        .expect("xs")
        .iter()
        .map(|x| x.as_f64().expect("x"))
        .collect();
    assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
    let legend = browser.text("#tl-types");
    for t in [
        "user_preference_stated",
        "correction_received",
        "task_milestone",
        "incident_or_failure",
    ] {
        assert!(legend.contains(t), "{legend}");
    }
    // The correction links to what it superseded, which is drawn hollow; the older phone
    // preference is stale; the pending event is a review marker; the expired one a removal.
    assert!(browser.has(&format!(
        "#tl-svg path.link[data-from='{fix}'][data-to='{invoice}']"
    )));
    assert_eq!(
        browser.js(
            "return document.querySelectorAll('#tl-svg path.link').length",
            &json!([])
        ),
        1
    );
    assert!(browser.has(&format!(
        "#tl-svg g.mark.status-superseded[data-event-id='{invoice}']"
    )));
    assert!(browser.has(&format!(
        "#tl-svg g.mark.stale[data-event-id='{calls_old}']"
    )));
    assert_eq!(
        browser.js(
            "return [...document.querySelectorAll('#tl-svg g.mark.stale')].map(g => g.dataset.eventId)",
            &json!([])
        ),
        json!([calls_old]),
        "only the older phone preference is stale"
    );
    assert!(browser.has(&format!(
        "#tl-svg g.mark.pending[data-event-id='{pending}']"
    )));
    assert_eq!(
        browser.js(REMOVED_HAS, &json!(["expired", expiring])),
        json!(true)
    );
    let title = browser.js(
        "return document.querySelector(`#tl-svg g.mark[data-event-id='${arguments[0]}'] title`).textContent",
        &json!([calls_old]),
    );
    assert!(
        title
            .as_str()
            .expect("title")
            .contains(&format!("stale: newer {calls_new}")),
        "{title}"
    );
    assert_eq!(
        browser.js(
            "return document.querySelectorAll('#tl-svg b, #tl-svg script').length",
            &json!([])
        ),
        0,
        "summaries are text, never markup"
    );
    browser.js(
        "document.getElementById('detail').hidden = true; window.scrollTo(0, 0)",
        &json!([]),
    );
    let shot =
        browser.element_screenshot("#panel-timeline", &docs_images().join("timeline-10.png"));
    let (w, h) = png_size(&shot);
    assert!(w >= 1000 && h >= 300, "screenshot is {w}x{h}");

    // One lane per project instead.
    browser.js(
        "const s = document.querySelector('#timeline-form select[name=lanes]');
         s.value = 'project'; s.dispatchEvent(new Event('change'))",
        &json!([]),
    );
    browser.wait(
        "project lanes",
        "return [...document.querySelectorAll('#tl-svg g.lane')].map(l => l.dataset.lane).join() === 'billing,support,'",
        &json!([]),
    );
    browser.js(
        "const s = document.querySelector('#timeline-form select[name=lanes]');
         s.value = 'actor'; s.dispatchEvent(new Event('change'))",
        &json!([]),
    );
    browser.wait(
        "actor lanes again",
        "return document.querySelector('#tl-svg g.lane').dataset.lane === 'customer-42'",
        &json!([]),
    );

    // Zoom and pan: the buttons, the wheel around the pointer, and dragging.
    let fit = browser.span_ms();
    assert!(
        fit > 55.0 * 86_400_000.0 && fit < 120.0 * 86_400_000.0,
        "{fit}"
    );
    browser.click("#tl-zoom-in");
    let span = browser.span_changed_from(fit);
    assert!((span / fit - 0.5).abs() < 1e-6, "{span} / {fit}");
    let t0 = browser.view_t0();
    browser.click("#tl-pan-right");
    browser.wait(
        "the pan",
        "return document.getElementById('tl-svg').dataset.t0 !== arguments[0]",
        &json!([episodic::model::Timestamp::from_unix_millis(t0)
            .expect("t0")
            .to_rfc3339()]),
    );
    let moved = browser.view_t0() - t0;
    assert!(
        (moved as f64 - span * 0.25).abs() < 2.0,
        "pan right by a quarter: {moved}"
    );
    browser.click("#tl-fit");
    assert_eq!(browser.span_changed_from(span), fit);
    let svg = browser.find("#tl-svg");
    browser.actions(&json!([{"type": "wheel", "id": "wheel", "actions": [
        {"type": "scroll", "x": 100, "y": 0, "deltaX": 0, "deltaY": -120, "duration": 0,
         "origin": {ELEMENT: svg}}
    ]}]));
    let wheeled = browser.span_changed_from(fit);
    assert!(wheeled < fit, "the wheel zooms in: {wheeled} < {fit}");
    let t0 = browser.view_t0();
    browser.actions(
        &json!([{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
        "actions": [
            {"type": "pointerMove", "duration": 0, "origin": {ELEMENT: svg}, "x": 0, "y": 0},
            {"type": "pointerDown", "button": 0},
            {"type": "pointerMove", "duration": 150, "origin": "pointer", "x": 240, "y": 0},
            {"type": "pointerUp", "button": 0}
        ]}]),
    );
    browser.wait(
        "the drag",
        "return document.getElementById('tl-svg').dataset.t0 !== arguments[0]",
        &json!([episodic::model::Timestamp::from_unix_millis(t0)
            .expect("t0")
            .to_rfc3339()]),
    );
    assert!(
        browser.view_t0() < t0,
        "dragging to the right shows earlier times"
    );
    assert!(browser.detail_hidden(), "a drag is not a click on a mark");
    // Zoomed out to the widest view (50 years), each actor lane's events lie within a few
    // pixels: each lane's are drawn as one cluster showing its count; a click on a cluster
    // zooms into it.
    const MAX_SPAN: f64 = 50.0 * 365.0 * 86_400_000.0;
    let mut span = browser.span_ms();
    for _ in 0..12 {
        if span >= MAX_SPAN - 1.0 {
            break;
        }
        browser.click("#tl-zoom-out");
        span = browser.span_changed_from(span);
    }
    assert!(span >= MAX_SPAN - 1.0, "{span}");
    let drawn = browser.js(
        "const c = [...document.querySelectorAll('#tl-svg g.cluster')];
         return { clusters: c.length,
                  counted: c.reduce((s, x) => s + Number(x.dataset.count), 0)
                     + document.querySelectorAll('#tl-svg g.mark').length,
                  labelled: c.every(x => x.querySelector('text.count').textContent === x.dataset.count) }",
        &json!([]),
    );
    assert_eq!(drawn["clusters"], 3, "one per actor lane: {drawn}");
    assert_eq!(drawn["counted"], 12, "{drawn}");
    assert_eq!(drawn["labelled"], true, "{drawn}");
    browser.click("#tl-svg g.cluster");
    let zoomed = browser.span_changed_from(span);
    assert!(zoomed < span / 100.0, "{zoomed} after {span}");
    browser.click("#tl-fit");
    browser.span_changed_from(zoomed);
    assert_eq!(browser.event_marks(), with_pending);
    // Zoomed in to minutes around one event, the axis labels hours and minutes.
    for _ in 0..16 {
        let before = browser.span_ms();
        browser.click("#tl-zoom-in");
        if browser.span_changed_from(before) <= 4.0 * 60_000.0 {
            break;
        }
    }
    assert!(browser.span_ms() <= 4.0 * 60_000.0, "zoomed to minutes");
    let tick = browser.text("#tl-svg text.tick");
    assert!(
        regex::Regex::new(r"\d\d:\d\d").expect("re").is_match(&tick),
        "{tick}"
    );
    browser.click("#tl-fit");
    browser.wait(
        "the fitted view",
        "return document.querySelectorAll('#tl-svg g.mark').length === 12",
        &json!([]),
    );

    // A click on a mark opens the event and its history: the superseded invoice names its
    // correction.
    browser.click(&format!("#tl-svg g.mark[data-event-id='{invoice}']"));
    let history = browser.history(&invoice, 2);
    assert!(
        history
            .iter()
            .any(|h| h.starts_with("correct") && h.contains(&format!("superseded by {fix}"))),
        "{history:?}"
    );
    let fields = browser.text("#detail-fields");
    assert!(
        fields.contains("superseded") && fields.contains(&fix),
        "{fields}"
    );

    // Recall: ten compact hits on one screen, bars to the scale of the best, idle signals
    // folded away.
    browser.click("#tab-recall");
    let query = "how does the customer want to be contacted";
    browser.type_into("#recall-form input[name=query]", query);
    browser.click("#recall-form input[name=includeStale]");
    browser.click("#recall-form input[name=includeSuperseded]");
    browser.click("#recall-form button[type=submit]");
    browser.wait(
        "recall hits",
        "return document.querySelectorAll('#recall-results li.hit').length === 10",
        &json!([]),
    );
    let (status, api_recall) = server.call(
        "POST",
        "/v1/recall",
        &operator,
        Some(json!({"query": query, "scope": {}, "limit": 10,
            "includeStale": true, "includeSuperseded": true})),
    );
    assert_eq!(status, 200);
    let api_hits = api_recall["results"].as_array().expect("results");
    assert_eq!(api_hits.len(), 10);
    let page_hits = browser.js(
        "return [...document.querySelectorAll('#recall-results li.hit')].map(h => {
            const bar = h.querySelector('.bar').getBoundingClientRect().width - 2;
            const segs = [...h.querySelectorAll('.bar .seg')];
            return {
              id: h.dataset.eventId,
              score: h.querySelector('.score').textContent,
              filled: segs.reduce((s, g) => s + g.getBoundingClientRect().width, 0) / bar,
              segs: segs.map(g => g.dataset.component),
              rows: [...h.querySelectorAll('table.breakdown tbody tr[data-component]')].map(r => [r.dataset.component, r.cells[1].textContent]),
              total: h.querySelector('table.breakdown tr.total').cells[1].textContent,
              zero: h.querySelector('.zero-signals') ? h.querySelector('.zero-signals').dataset.components : '',
              why: h.querySelector('.why').textContent };
          })",
        &json!([]),
    );
    let page_hits = page_hits.as_array().expect("hits");
    let f = |v: &Value| format!("{:.3}", v.as_f64().expect("number"));
    let positive = |a: &Value| -> f64 {
        BREAKDOWN_PARTS
            .iter()
            .map(|c| a["scoreBreakdown"][*c].as_f64().expect("part").max(0.0))
            .sum()
    };
    let scale = api_hits.iter().map(positive).fold(0.0, f64::max);
    let best = api_hits
        .iter()
        .map(|a| a["score"].as_f64().expect("score"))
        .fold(0.0, f64::max);
    let scale_text = browser.text("#recall-scale");
    assert!(
        scale_text.contains(&format!("full width = {scale:.3}")),
        "{scale_text}"
    );
    if (scale - best).abs() < 5e-4 {
        assert!(
            scale_text.contains("the highest score shown"),
            "{scale_text}"
        );
    }
    assert!(!browser.text("#panel-recall").contains("full width = 1)"));
    let mut widest: f64 = 0.0;
    let mut folded = 0;
    for (p, a) in page_hits.iter().zip(api_hits) {
        assert_eq!(p["id"], a["event"]["eventId"]);
        assert_eq!(p["score"], json!(format!("score {}", f(&a["score"]))));
        let filled = p["filled"].as_f64().expect("filled");
        assert!(
            (filled - positive(a) / scale).abs() < 0.01,
            "bar of {} filled {filled}, expected {}",
            p["id"],
            positive(a) / scale
        );
        widest = widest.max(filled);
        let b = &a["scoreBreakdown"];
        let (used, idle): (Vec<&str>, Vec<&str>) = BREAKDOWN_PARTS
            .iter()
            .copied()
            .partition(|c| b[*c].as_f64().expect("part") != 0.0);
        let rows: Vec<Value> = used.iter().map(|c| json!([c, f(&b[*c])])).collect();
        assert_eq!(p["rows"], json!(rows), "only signals that contributed");
        assert_eq!(p["total"], json!(f(&a["score"])));
        assert_eq!(p["zero"], json!(idle.join(" ")), "idle signals folded");
        folded += idle.len();
        let drawn: Vec<&str> = used
            .iter()
            .copied()
            .filter(|c| b[*c].as_f64().expect("part") > 0.0)
            .collect();
        assert_eq!(p["segs"], json!(drawn));
        let why = p["why"].as_str().expect("why");
        assert!(
            why.contains(&format!("cosine similarity {}", f(&b["cosine"]))),
            "{why}"
        );
    }
    assert!(
        (widest - 1.0).abs() < 0.01,
        "the best bar fills its width: {widest}"
    );
    assert!(folded > 0, "some signals contributed nothing here");
    let height = browser
        .js(
            "const l = document.querySelectorAll('#recall-results li.hit');
             return l[l.length - 1].getBoundingClientRect().bottom - l[0].getBoundingClientRect().top",
            &json!([]),
        )
        .as_f64()
        .expect("height");
    assert!(height <= 720.0, "ten hits take {height}px");
    browser.screenshot(&screenshot_dir().join("ui-recall.png"));
    // The breakdown of a hit unfolds on demand.
    browser.click("#recall-results li.hit details.why > summary");
    assert!(browser.has("#recall-results li.hit details.why[open] table.breakdown"));

    // Delete from the page: the dialog shows the event and deletes nothing until confirmed.
    browser.click("#tab-timeline");
    browser.click(&format!("#tl-svg g.mark[data-event-id='{tz}']"));
    browser.history(&tz, 1);
    browser.click("#detail-delete");
    let text = browser.dialog_text("Delete this event?");
    assert!(
        text.contains("Prefers meetings after 2pm <b>Berlin</b> time") && text.contains(&tz),
        "{text}"
    );
    browser.click("#confirm-cancel");
    assert_eq!(
        server
            .call("GET", &format!("/v1/events/{tz}"), &operator, None)
            .0,
        200,
        "cancelled: nothing deleted"
    );
    browser.click("#detail-delete");
    browser.dialog_text("Delete this event?");
    browser.click("#confirm-ok");
    let receipt_text = browser.dialog_text("deletedAt");
    let receipt: Value =
        serde_json::from_str(&browser.text("#confirm-receipt pre")).expect("receipt");
    assert_eq!(receipt["eventId"], json!(tz));
    assert_eq!(receipt["purged"], false);
    assert!(receipt_text.contains(receipt["deletedAt"].as_str().expect("at")));
    assert_eq!(
        server
            .call("GET", &format!("/v1/events/{tz}"), &operator, None)
            .0,
        404,
        "deleted through the page"
    );
    browser.click("#confirm-cancel");
    browser.wait("the deletion marker", REMOVED_HAS, &json!(["deleted", tz]));
    assert!(!browser.has(&format!(
        "#tl-svg g.mark:not(.removed)[data-event-id='{tz}']"
    )));
    let history = browser.history(&tz, 2);
    assert!(
        history.iter().any(|h| h.starts_with("deleted")),
        "{history:?}"
    );
    assert!(browser.detail_actions_hidden(), "nothing left to delete");

    // Erase an actor from the page: the dialog counts what will be erased and kept.
    browser.click(&format!("#tl-svg g.mark[data-event-id='{reset}']"));
    browser.history(&reset, 1);
    assert_eq!(browser.text("#detail-erase-actor"), "customer-99");
    browser.click("#detail-erase");
    let text = browser.dialog_text("will be deleted");
    assert!(
        text.contains("2 event(s) of actor customer-99 will be deleted (2 active, 0 superseded, 0 pending review); 1 kept because retention.deleteOnRequest is false"),
        "{text}"
    );
    assert!(text.contains("Login failed three times") && !text.contains("Refund approved"));
    assert_eq!(browser.text("#confirm-ok"), "Erase 2 event(s)");
    browser.click("#confirm-ok");
    browser.dialog_text("erasedAt");
    let receipt: Value =
        serde_json::from_str(&browser.text("#confirm-receipt pre")).expect("receipt");
    let mut erased = strs(&receipt["erased"]);
    erased.sort();
    let mut want = vec![login_failed.clone(), reset.clone()];
    want.sort();
    assert_eq!(erased, want);
    assert_eq!(receipt["kept"][0]["eventId"], json!(refund));
    assert!(browser.text("#confirm-receipt").contains("2 event(s)"));
    browser.click("#confirm-cancel");
    for id in [&login_failed, &reset] {
        browser.wait("the erasure markers", REMOVED_HAS, &json!(["erased", id]));
    }
    assert_eq!(
        browser.js(
            "return document.querySelector(`#tl-svg g.lane[data-lane='customer-99']`).dataset.count",
            &json!([])
        ),
        "1",
        "only the kept event is left in the actor's lane"
    );
    for id in [&login_failed, &reset] {
        assert_eq!(
            server
                .call("GET", &format!("/v1/events/{id}"), &operator, None)
                .0,
            404
        );
    }
    browser.js(
        "document.getElementById('detail').hidden = true; window.scrollTo(0, 0)",
        &json!([]),
    );
    browser.screenshot(&screenshot_dir().join("ui-timeline-after.png"));

    // Reviews: the pending event is listed and approved from the page; it then becomes an
    // ordinary mark.
    browser.click("#tab-reviews");
    let item = format!("li.review[data-event-id='{pending}']");
    browser.find(&item);
    let review_text = browser.text(&item);
    assert!(
        review_text.contains("<script>alert(1)</script>"),
        "{review_text}"
    );
    browser.type_into(&format!("{item} input.note"), "checked the vendor PDF");
    browser.click(&format!("{item} button.approve"));
    browser.wait(
        "the approval",
        "return document.querySelector(arguments[0] + ' .decided-msg')?.textContent",
        &json!([item]),
    );
    assert!(browser
        .text(&format!("{item} .decided-msg"))
        .contains("active"));
    let (status, got) = server.call("GET", &format!("/v1/events/{pending}"), &operator, None);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["status"], "active", "approved through the page");
    browser.click(&format!("{item} button.open-event"));
    let history = browser.history(&pending, 2);
    assert!(
        history[0].starts_with("write") && history[0].contains("policy decision: review"),
        "{history:?}"
    );
    assert!(
        history[1].starts_with("approve") && history[1].contains("with a note"),
        "{history:?}"
    );
    browser.click("#tab-timeline");
    browser.click("#timeline-form button[type=submit]");
    browser.wait(
        "the approved event as a mark",
        "return !!document.querySelector(`#tl-svg g.mark.status-active[data-event-id='${arguments[0]}']`)
            && !document.querySelector('#tl-svg g.mark.pending')",
        &json!([pending]),
    );

    // Audit trail: paginated, filtered by action.
    browser.click("#tab-audit");
    browser.type_into("#audit-form input[name=limit]", "3");
    browser.click("#audit-form button[type=submit]");
    browser.wait(
        "an audit page",
        "return document.querySelectorAll('#audit-rows tr.action-write').length === 3",
        &json!([]),
    );
    browser.click("#audit-next");
    browser.wait(
        "the next audit page",
        "return document.getElementById('audit-info').textContent.includes('after #')",
        &json!([]),
    );
    browser.js(
        "document.querySelector('#audit-form select[name=action]').value = 'approve'",
        &json!([]),
    );
    browser.click("#audit-form button[type=submit]");
    browser.wait(
        "the approve entry",
        "return document.querySelectorAll('#audit-rows tr.action-approve').length === 1",
        &json!([]),
    );
    assert!(browser.text("#audit-rows").contains(&pending));
    let _ = (email, onboarding);

    // Log out: the key leaves session storage.
    browser.click("#logout");
    assert_eq!(
        browser.js(
            "return sessionStorage.getItem('episodic.apiKey')",
            &json!([])
        ),
        Value::Null
    );
    let removed = [&tz, &login_failed, &reset, &expiring];
    let console = browser.console();
    let bad: Vec<&Value> = console
        .iter()
        .filter(|e| e["level"] == "SEVERE")
        .filter(|e| {
            let m = e["message"].as_str().unwrap_or_default();
            // Expected: the wrong-key login's 401 and the 404 for a removed event's content.
            // CSP violations and script errors would land here too, and fail.
            let expected = e["source"] == "network"
                && ((m.contains("/v1/timeline") && m.contains("401"))
                    || (removed
                        .iter()
                        .any(|id| m.contains(&format!("/v1/events/{id} ")))
                        && m.contains("404")));
            !expected
        })
        .collect();
    assert!(bad.is_empty(), "browser console errors: {bad:?}");
    drop(browser);
    server.proc.stop_gracefully();
}

/// 10,000 events written through the batch route: the page loads every timeline page and
/// draws clusters with counts where a lane is dense, so what is drawn stays small.
#[test]
fn ui_timeline_stays_readable_at_ten_thousand_events() {
    const N: usize = 10_000;
    const ACTORS: [&str; 12] = [
        "customer-01",
        "customer-02",
        "customer-03",
        "customer-04",
        "customer-05",
        "customer-06",
        "customer-07",
        "customer-08",
        "customer-09",
        "customer-10",
        "agent-billing",
        "agent-support",
    ];
    const PROJECTS: [&str; 3] = ["billing", "support", "onboarding"];
    const TYPES: [&str; 5] = [
        "user_preference_stated",
        "task_milestone",
        "tool_observed_event",
        "incident_or_failure",
        "human_approval",
    ];
    const TOPICS: [&str; 8] = [
        "renewal notices",
        "invoice format",
        "meeting times",
        "password reset",
        "refund request",
        "data export",
        "plan upgrade",
        "support ticket",
    ];
    let dir = tempfile::tempdir().expect("tmp");
    let server = Server::start(dir.path());
    let writer = server.key(&["writer", "reader"]);
    let operator = server.key_sensitive(&["reader", "memory_reviewer", "operator"]);

    // A year of events, denser in recent months; a small LCG keeps it reproducible.
    let mut seed: u64 = 42;
    let mut next = || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        seed >> 33
    };
    let started = Instant::now();
    let mut written = 0;
    for chunk in 0..N.div_ceil(250) {
        let events: Vec<Value> = (0..250.min(N - chunk * 250))
            .map(|_| {
                let r = next();
                let actor = ACTORS[(r % 12) as usize];
                let topic = TOPICS[((r >> 4) % 8) as usize];
                let kind = TYPES[((r >> 8) % 5) as usize];
                let u = ((r >> 12) % 10_000) as f64 / 10_000.0;
                let days = 365.0 * u * u;
                let mut e = ev(
                    actor,
                    &format!("{actor}: {topic} ({kind}, #{})", (r >> 16) % 1000),
                    &ago(days + 0.01),
                    PROJECTS[((r >> 20) % 3) as usize],
                    &topic.replace(' ', "-"),
                );
                e["eventType"] = json!(kind);
                e
            })
            .collect();
        let (status, body) = server.call(
            "POST",
            "/v1/events:batch",
            &writer,
            Some(json!({ "events": events })),
        );
        assert_eq!(status, 201, "{body}");
        written += body["results"].as_array().expect("results").len();
    }
    assert_eq!(written, N);
    eprintln!("wrote {N} events in {:.1?}", started.elapsed());

    let browser = Browser::start();
    browser.goto(&format!("{}/ui", server.base));
    browser.type_into("#api-key", &operator);
    let started = Instant::now();
    browser.click("#login-form button[type=submit]");
    browser.wait(
        "10,000 events on the timeline",
        "return document.getElementById('timeline-info').textContent.startsWith('10,000 event(s) in 12 actor lane(s)')",
        &json!([]),
    );
    let loaded = started.elapsed();
    eprintln!("the page loaded and drew {N} events in {loaded:.1?}");
    assert!(loaded < Duration::from_secs(60), "{loaded:?}");
    let drawn = browser.js(
        "const svg = document.getElementById('tl-svg');
         const clusters = [...svg.querySelectorAll('g.cluster')];
         return {
           glyphs: Number(svg.dataset.glyphs),
           clusters: clusters.length,
           inClusters: clusters.reduce((s, c) => s + Number(c.dataset.count), 0),
           singles: svg.querySelectorAll('g.mark').length,
           labelled: clusters.every(c => c.textContent.trim().length > 0),
           lanes: [...svg.querySelectorAll('g.lane')].reduce((s, l) => s + Number(l.dataset.count), 0),
           nodes: svg.querySelectorAll('*').length };",
        &json!([]),
    );
    let n = |k: &str| drawn[k].as_u64().expect(k) as usize;
    assert_eq!(n("lanes"), N, "{drawn}");
    assert_eq!(
        n("inClusters") + n("singles"),
        N,
        "every event drawn once: {drawn}"
    );
    assert!(n("clusters") > 100, "{drawn}");
    assert_eq!(n("glyphs"), n("clusters") + n("singles"));
    assert!(n("glyphs") < 2000, "dense lanes are clustered: {drawn}");
    assert!(n("nodes") < 8000, "{drawn}");
    assert_eq!(drawn["labelled"], true, "clusters show their counts");
    browser.js(
        "document.getElementById('detail').hidden = true; window.scrollTo(0, 0)",
        &json!([]),
    );
    let shot =
        browser.element_screenshot("#panel-timeline", &docs_images().join("timeline-10000.png"));
    let (w, h) = png_size(&shot);
    assert!(w >= 1000 && h >= 500, "screenshot is {w}x{h}");
    assert!(
        shot.len() > 30_000,
        "screenshot is only {} bytes",
        shot.len()
    );
    // Zoomed in to hours, the clusters open up into single marks.
    let before = browser.span_ms();
    for _ in 0..9 {
        let span = browser.span_ms();
        browser.click("#tl-zoom-in");
        browser.span_changed_from(span);
    }
    assert!(browser.span_ms() < before / 500.0);
    browser.wait(
        "single marks",
        "return document.querySelectorAll('#tl-svg g.mark').length > 0",
        &json!([]),
    );
    browser.click("#tl-svg g.mark");
    browser.wait(
        "an event's history",
        "return document.querySelectorAll('#detail-history li.h').length >= 1",
        &json!([]),
    );
    drop(browser);
    server.proc.stop_gracefully();
}
